"""Fine-grained check-then-write with ghost state (vLLM 0.30.0's check): the slots are
read one at a time and other servers act between any two reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from queueref.admission.protocol import accumulate, admits_check_then_write
from queueref.verify.inductive.common import IDLE_RANK, Flag, all_of, within_bound

#: Conjuncts of the fine invariant that `fine_invariant(..., drop=...)` can leave out.
FINE_CONJUNCTS: tuple[str, ...] = (
    "type",
    "rank",
    "view",
    "read",
    "own",
    "order",
    "drift",
    "lead",
    "stale",
)


class FineState:
    """The fine model's state, real and ghost, unpacked into lists for readability.

    Real: c (slots), busy (0/1: a check in progress), n (its weight), k (next slot to
    read), v (view so far). Ghost: rank, r/a/s per (reader, slot), and the leader
    record G, RL, L, ld, al, sl (see the module docstring).
    """

    def __init__(self, servers: int, values: Sequence[Any]) -> None:
        self.servers = servers
        it = iter(values)
        self.G: Any = next(it)
        self.RL: Any = next(it)
        self.L: Any = next(it)
        self.ld: list[Any] = [next(it) for _ in range(servers)]
        self.al: list[Any] = [next(it) for _ in range(servers)]
        self.sl: list[Any] = [next(it) for _ in range(servers)]
        self.c: list[Any] = []
        self.busy: list[Any] = []
        self.n: list[Any] = []
        self.k: list[Any] = []
        self.v: list[Any] = []
        self.rank: list[Any] = []
        self.r: list[list[Any]] = []
        self.a: list[list[Any]] = []
        self.s: list[list[Any]] = []
        for _ in range(servers):
            self.c.append(next(it))
            self.busy.append(next(it))
            self.n.append(next(it))
            self.k.append(next(it))
            self.v.append(next(it))
            self.rank.append(next(it))
            self.r.append([next(it) for _ in range(servers)])
            self.a.append([next(it) for _ in range(servers)])
            self.s.append([next(it) for _ in range(servers)])

    @staticmethod
    def names(servers: int) -> list[str]:
        """Parameter names of the state, in tuple order."""
        names = ["G", "RL", "L"]
        for field in ("ld", "al", "sl"):
            names += [f"{field}{q}" for q in range(servers)]
        for x in range(servers):
            names += [f"c{x}", f"b{x}", f"n{x}", f"k{x}", f"v{x}", f"rk{x}"]
            for field in ("r", "a", "s"):
                names += [f"{field}{x}_{q}" for q in range(servers)]
        return names

    def pack(self) -> tuple[Any, ...]:
        out: list[Any] = [self.G, self.RL, self.L, *self.ld, *self.al, *self.sl]
        for x in range(self.servers):
            out += [self.c[x], self.busy[x], self.n[x], self.k[x], self.v[x], self.rank[x]]
            out += self.r[x] + self.a[x] + self.s[x]
        return tuple(out)

    def clear_reader(self, x: int) -> None:
        """Back to idle, canonical zeros (the invariant ignores idle readers' fields)."""
        self.busy[x] = 0
        self.n[x] = 0
        self.k[x] = 0
        self.v[x] = 0
        self.rank[x] = 0
        self.r[x] = [0] * self.servers
        self.a[x] = [0] * self.servers
        self.s[x] = [IDLE_RANK] * self.servers


def fine_names(servers: int) -> list[str]:
    """Parameter names of the fine state, in tuple order."""
    return FineState.names(servers)


def fine_initial(servers: int) -> tuple[int, ...]:
    """No check ever started: every slot 0, no leader (RL = -1, nothing read)."""
    st = FineState(servers, [0] * len(FineState.names(servers)))
    st.RL = IDLE_RANK
    st.sl = [IDLE_RANK] * servers
    for x in range(servers):
        st.clear_reader(x)
    return st.pack()


def fine_invariant(
    servers: int,
    cap: int,
    weight: int,
    values: Sequence[Any],
    drop: Sequence[str] = (),
) -> Flag:
    """OB-FINE-1: the inductive invariant of fine-grained check-then-write.

    Conjuncts (names for `drop`, which leaves them out to show each one is needed,
    OB-FINE-2):

    - type: slots >= 0; a check in progress has 1 <= n <= min(W, M), 0 <= k <= N.
    - rank: G >= 0; ranks of checks in progress are distinct, < G and != RL.
    - view: the view is the sum of the values read; unread slots hold r = 0.
    - read: values read are >= 0; credits are in [0, min(W, M)]; recorded ranks < G.
    - own: a reader that has read its own slot holds its own weight as the credit there.
    - order: if x has read slot q and q's current check is not the one x saw there,
      that check started after x's (its rank is larger).
    - drift: for a reader that started after the leader, every slot it has read is at
      most what it read plus its credit, and at most that minus the weight of the check
      it saw there if that check is still in progress.
    - lead: the same per-slot bound for the leader's record; the leader's reads plus its
      own weight fit the cap; the leader is a server index.
    - stale: a reader that started before the leader is the check the leader saw there.
    """
    st = FineState(servers, values)
    skip = set(drop)
    flags: list[Flag] = [cap >= 0, weight >= 1]
    N = servers
    if "rank" not in skip:
        # Ranks are handed out from 0, so IDLE_RANK (-1) is below G: a check that
        # starts later never has the rank a reader recorded for an idle slot.
        flags.append(st.G >= 0)
    for x in range(N):
        busy = st.busy[x] == 1
        idle = st.busy[x] == 0
        if "type" not in skip:
            flags.append(st.c[x] >= 0)
            flags.append(busy | idle)
            flags.append(
                idle
                | (
                    (st.n[x] >= 1)
                    & (st.n[x] <= weight)
                    & (st.n[x] <= cap)
                    & (st.k[x] >= 0)
                    & (st.k[x] <= N)
                )
            )
        if "rank" not in skip:
            flags.append(idle | ((st.rank[x] < st.G) & (st.rank[x] != st.RL)))
            for y in range(x + 1, N):
                flags.append(idle | (st.busy[y] == 0) | (st.rank[x] != st.rank[y]))
        if "view" not in skip:
            flags.append(idle | (st.v[x] == sum(st.r[x])))
        for q in range(N):
            unread = idle | (st.k[x] <= q)
            if "view" not in skip:
                flags.append(idle | (st.k[x] > q) | (st.r[x][q] == 0))
            if "read" not in skip:
                flags.append(
                    unread
                    | (
                        (st.r[x][q] >= 0)
                        & (st.a[x][q] >= 0)
                        & (st.a[x][q] <= weight)
                        & (st.a[x][q] <= cap)
                        & (st.s[x][q] < st.G)
                    )
                )
            if "own" not in skip and q == x:
                flags.append(unread | ((st.a[x][x] == st.n[x]) & (st.s[x][x] == st.rank[x])))
            if "order" not in skip and q != x:
                flags.append(
                    unread
                    | (st.busy[q] == 0)
                    | (st.rank[q] == st.s[x][q])
                    | (st.rank[q] > st.rank[x])
                )
            if "drift" not in skip:
                room = st.r[x][q] + st.a[x][q]
                flags.append(
                    unread
                    | (st.rank[x] < st.RL)
                    | (
                        (st.c[q] <= room)
                        & (
                            (st.busy[q] == 0)
                            | (st.rank[q] != st.s[x][q])
                            | (st.c[q] + st.n[q] <= room)
                        )
                    )
                )
        if "stale" not in skip:
            flags.append(idle | (st.rank[x] > st.RL) | (st.sl[x] == st.rank[x]))
    if "lead" not in skip:
        flags.append((st.L >= 0) & (st.L < N) & (st.RL < st.G))
        for q in range(N):
            room = st.ld[q] + st.al[q]
            flags.append(
                (st.al[q] >= 0) & (st.al[q] <= weight) & (st.al[q] <= cap) & (st.sl[q] < st.G)
            )
            flags.append(
                (st.c[q] <= room)
                & ((st.busy[q] == 0) | (st.rank[q] != st.sl[q]) | (st.c[q] + st.n[q] <= room))
            )
            flags.append((st.L != q) | (sum(st.ld) + st.al[q] <= cap))
    return all_of(flags)


def fine_bound(servers: int, cap: int, weight: int, values: Sequence[Any]) -> Flag:
    """OB-BOUND-1 in the fine model: the global count is within the bound."""
    return within_bound(servers, cap, weight, sum(FineState(servers, values).c))


def fine_start(servers: int, cap: int, values: Sequence[Any], p: int, n: Any) -> tuple[Any, ...]:
    """Server p (idle) starts a check of weight n; it gets the next rank.

    A request that cannot fit even with an empty view is rejected on the spot (views
    only grow), which is also what the explorer does.
    """
    if not admits_check_then_write(0, n, cap):
        return tuple(values)
    st = FineState(servers, values)
    st.clear_reader(p)
    st.busy[p] = 1
    st.n[p] = n
    st.rank[p] = st.G
    st.G = st.G + 1
    return st.pack()


def fine_read(servers: int, values: Sequence[Any], p: int, j: int) -> tuple[Any, ...]:
    """OB-MODEL-1, OB-ONE-1: server p reads slot j (its next one) and adds it to its view
    (`protocol.accumulate`).

    Ghost: p notes the value, and if server j has a check in progress, that check's weight
    as a credit and its rank.
    """
    st = FineState(servers, values)
    st.v[p] = accumulate(st.v[p], st.c[j])
    st.r[p][j] = st.c[j]
    if st.busy[j] == 1:
        st.a[p][j] = st.n[j]
        st.s[p][j] = st.rank[j]
    else:
        st.a[p][j] = 0
        st.s[p][j] = IDLE_RANK
    st.k[p] = j + 1
    return st.pack()


def fine_decide(servers: int, cap: int, values: Sequence[Any], p: int) -> tuple[Any, ...]:
    """OB-MODEL-1, OB-ONE-1: server p has read every slot: admit iff
    `protocol.admits_check_then_write`, and if so write its slot. An admitted check that
    started after the leader becomes the leader."""
    st = FineState(servers, values)
    if admits_check_then_write(st.v[p], st.n[p], cap):
        st.c[p] = st.c[p] + st.n[p]
        if st.rank[p] > st.RL:
            st.RL = st.rank[p]
            st.L = p
            st.ld = list(st.r[p])
            st.al = list(st.a[p])
            st.sl = list(st.s[p])
    st.clear_reader(p)
    return st.pack()


def fine_finish(servers: int, values: Sequence[Any], q: int) -> tuple[Any, ...]:
    """One of server q's requests finishes (at any time, even during q's own check)."""
    st = FineState(servers, values)
    st.c[q] = st.c[q] - 1
    return st.pack()
