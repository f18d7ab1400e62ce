"""Write-then-check (a reservation) with ghost state: add n to the own slot, read every
slot, keep the reservation iff the view is within the cap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from queueref.admission.protocol import accumulate, keeps_reservation
from queueref.verify.inductive.common import IDLE_RANK, Flag, all_of

#: Conjuncts of the reserve invariant that `reserve_invariant(..., drop=...)` can leave out.
RESERVE_CONJUNCTS: tuple[str, ...] = ("type", "rank", "view", "lead", "reader")


class ReserveState:
    """The reserve model's state.

    Real: c (slots, reservations included), busy, n (the reservation of the check in
    progress; 0 when idle, so a slot's admitted count is always c - n), k, v.
    Ghost: rank, r (values read), G, and the leader's rank RL and reads ld.
    """

    def __init__(self, servers: int, values: Sequence[Any]) -> None:
        self.servers = servers
        it = iter(values)
        self.G: Any = next(it)
        self.RL: Any = next(it)
        self.ld: list[Any] = [next(it) for _ in range(servers)]
        self.c: list[Any] = []
        self.busy: list[Any] = []
        self.n: list[Any] = []
        self.k: list[Any] = []
        self.v: list[Any] = []
        self.rank: list[Any] = []
        self.r: list[list[Any]] = []
        for _ in range(servers):
            self.c.append(next(it))
            self.busy.append(next(it))
            self.n.append(next(it))
            self.k.append(next(it))
            self.v.append(next(it))
            self.rank.append(next(it))
            self.r.append([next(it) for _ in range(servers)])

    @staticmethod
    def names(servers: int) -> list[str]:
        """Parameter names of the state, in tuple order."""
        names = ["G", "RL"] + [f"ld{q}" for q in range(servers)]
        for x in range(servers):
            names += [f"c{x}", f"b{x}", f"n{x}", f"k{x}", f"v{x}", f"rk{x}"]
            names += [f"r{x}_{q}" for q in range(servers)]
        return names

    def pack(self) -> tuple[Any, ...]:
        out: list[Any] = [self.G, self.RL, *self.ld]
        for x in range(self.servers):
            out += [self.c[x], self.busy[x], self.n[x], self.k[x], self.v[x], self.rank[x]]
            out += self.r[x]
        return tuple(out)

    def clear_reader(self, x: int) -> None:
        self.busy[x] = 0
        self.n[x] = 0
        self.k[x] = 0
        self.v[x] = 0
        self.rank[x] = 0
        self.r[x] = [0] * self.servers


def reserve_names(servers: int) -> list[str]:
    """Parameter names of the reserve state, in tuple order."""
    return ReserveState.names(servers)


def reserve_initial(servers: int) -> tuple[int, ...]:
    """Every slot 0, no leader."""
    st = ReserveState(servers, [0] * len(ReserveState.names(servers)))
    st.RL = IDLE_RANK
    return st.pack()


def reserve_admitted(servers: int, values: Sequence[Any]) -> Any:
    """The admitted global count: the slots minus the reservations in progress."""
    st = ReserveState(servers, values)
    return sum(st.c) - sum(st.n)


def reserve_invariant(
    servers: int,
    cap: int,
    weight: int,
    values: Sequence[Any],
    drop: Sequence[str] = (),
) -> Flag:
    """OB-WTC-1: the inductive invariant of write-then-check (its conjuncts: OB-FINE-2).

    - type: a slot holds at least its own reservation; idle servers have n = 0; a check in
      progress has 1 <= n <= W and 0 <= k <= N.
    - rank: ranks of checks in progress are distinct, < G and != RL; RL < G.
    - view: the view is the sum of the values read; unread slots hold r = 0.
    - lead: the leader's reads sum to <= M, and for every slot q, q's admitted count is at
      most what the leader read there -- and so is q's admitted count plus its
      reservation if q's check started before the leader's.
    - reader: the same for every reader that started after the leader, over the slots it
      has read (its own slot included: it read its own reservation).
    """
    st = ReserveState(servers, values)
    skip = set(drop)
    N = servers
    flags: list[Flag] = [cap >= 0, weight >= 1]
    for x in range(N):
        busy = st.busy[x] == 1
        idle = st.busy[x] == 0
        if "type" not in skip:
            flags.append(st.c[x] >= st.n[x])
            flags.append(st.n[x] >= 0)
            flags.append(
                (idle & (st.n[x] == 0))
                | (busy & (st.n[x] >= 1) & (st.n[x] <= weight) & (st.k[x] >= 0) & (st.k[x] <= N))
            )
        if "rank" not in skip:
            flags.append(idle | ((st.rank[x] < st.G) & (st.rank[x] != st.RL)))
            for y in range(x + 1, N):
                flags.append(idle | (st.busy[y] == 0) | (st.rank[x] != st.rank[y]))
        if "view" not in skip:
            flags.append(idle | (st.v[x] == sum(st.r[x])))
        for q in range(N):
            if "view" not in skip:
                flags.append(idle | (st.k[x] > q) | (st.r[x][q] == 0))
            if "reader" not in skip:
                flags.append(
                    idle
                    | (st.k[x] <= q)
                    | (st.rank[x] < st.RL)
                    | (
                        (st.c[q] - st.n[q] <= st.r[x][q])
                        & ((st.busy[q] == 0) | (st.rank[q] > st.rank[x]) | (st.c[q] <= st.r[x][q]))
                    )
                )
    if "lead" not in skip:
        flags.append((st.RL < st.G) & (sum(st.ld) <= cap))
        for q in range(N):
            flags.append(
                (st.c[q] - st.n[q] <= st.ld[q])
                & ((st.busy[q] == 0) | (st.rank[q] > st.RL) | (st.c[q] <= st.ld[q]))
            )
    return all_of(flags)


def reserve_hard_cap(servers: int, cap: int, values: Sequence[Any]) -> Flag:
    """OB-WTC-1: the admitted global count is at most the cap."""
    return reserve_admitted(servers, values) <= cap


def reserve_start(servers: int, values: Sequence[Any], p: int, n: Any) -> tuple[Any, ...]:
    """Server p (idle) reserves n in its own slot, then starts reading."""
    st = ReserveState(servers, values)
    st.clear_reader(p)
    st.c[p] = st.c[p] + n
    st.busy[p] = 1
    st.n[p] = n
    st.rank[p] = st.G
    st.G = st.G + 1
    return st.pack()


def reserve_read(servers: int, values: Sequence[Any], p: int, j: int) -> tuple[Any, ...]:
    """Server p reads slot j (its next one) and adds it to its view."""
    st = ReserveState(servers, values)
    st.v[p] = accumulate(st.v[p], st.c[j])
    st.r[p][j] = st.c[j]
    st.k[p] = j + 1
    return st.pack()


def reserve_decide(servers: int, cap: int, values: Sequence[Any], p: int) -> tuple[Any, ...]:
    """OB-ONE-1: server p has read every slot: keep iff `protocol.keeps_reservation`, else
    roll back. A kept check that started after the leader becomes the leader."""
    st = ReserveState(servers, values)
    if keeps_reservation(st.v[p], cap):
        if st.rank[p] > st.RL:
            st.RL = st.rank[p]
            st.ld = list(st.r[p])
    else:
        st.c[p] = st.c[p] - st.n[p]
    st.clear_reader(p)
    return st.pack()


def reserve_finish(servers: int, values: Sequence[Any], q: int) -> tuple[Any, ...]:
    """One of server q's admitted requests finishes (a reservation cannot finish)."""
    st = ReserveState(servers, values)
    st.c[q] = st.c[q] - 1
    return st.pack()
