"""Inductive invariants of the admission protocols, as pure functions over flat int tuples.

These are the kernels of the CrossHair obligations in `proofs/`: each obligation takes
the whole state of a fixed number of servers as scalar `int` arguments, assumes the
invariant, takes one step with the functions below and must re-establish the invariant
(OB-ATOMIC-1, OB-FINE-1, OB-WTC-1). The same step functions are replayed against the
exhaustive explorer in `tests/verify/test_ob_one_transition_system.py`, so the proofs are about the
transition system the explorer enumerates.

Three models, all with N servers, a cap M (`cap`) and a largest request weight W (`weight`):

* **atomic** -- a check reads the whole sum in one step (a snapshot); the write of an
  admitted request comes later; finishes at any time.
* **fine** -- check-then-write as vLLM 0.30.0 does it: a check reads the slots one at a time in
  index order, other servers act between any two reads, and the decision writes the own
  slot in the same step (deciding earlier and writing later is the same thing: the
  decision itself changes no shared state, so it commutes with the other servers' steps).
* **reserve** -- write-then-check: add n to the own slot first, read every slot, keep the
  reservation iff the view is `<= cap`, otherwise write it back.

Every condition is written with `&` and `|` on comparison results instead of `and`, `or`
and `if`, so that under CrossHair a whole invariant is one symbolic boolean (one solver
query) instead of an exponential number of paths. On plain ints the functions are ordinary
Python and return `bool`.

**Ghost state.** The fine and reserve invariants need facts about the past that the real
state forgets. They are kept in ghost variables that no step reads to decide anything:

* `G` -- the start-rank counter; each check gets the next rank when it starts, so ranks
  order checks by start time.
* per reader x and slot q: `r` the value x read from q; for fine also `a` a credit (the
  weight of the check q had in progress when x read q, so the most q's slot can grow
  without q starting a later check) and `s` the rank of that check (-1 if q was idle).
* the leader: the admitted check with the latest start (rank `RL`, server `L`), with the
  values it read (`ld`) and its credits (`al`, `sl`). Readers that started before the
  leader are *stale*: they can never become leader again.

The paper proofs these encode are in `specs/overshoot-bound.md` (of OB-BOUND-1 and OB-WTC-1).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from queueref.admission.protocol import accumulate, admits_check_then_write, keeps_reservation

# Values are `int` at run time and CrossHair's symbolic ints under analysis; the conditions
# are `bool` or CrossHair's symbolic bools. `Any` keeps both usable under mypy --strict.
Flag = Any

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

#: Conjuncts of the reserve invariant that `reserve_invariant(..., drop=...)` can leave out.
RESERVE_CONJUNCTS: tuple[str, ...] = ("type", "rank", "view", "lead", "reader")

IDLE_RANK = -1


def _within_bound(servers: int, cap: int, weight: int, total: Any) -> Flag:
    # total <= cap + (servers-1)*min(cap, weight), without a branch on min().
    return (total <= cap + (servers - 1) * cap) & (total <= cap + (servers - 1) * weight)


def _all(flags: Sequence[Flag]) -> Flag:
    result: Flag = True
    for flag in flags:
        result = result & flag
    return result


Invariant = Callable[[int, int, int, Sequence[Any]], Flag]


def pack_state(names: Sequence[str], arguments: Mapping[str, Any]) -> tuple[Any, ...]:
    """The state tuple from an obligation's arguments (its `locals()` on entry), by name."""
    return tuple(arguments[name] for name in names)


def state_condition(
    invariant: Invariant, servers: int, names: Sequence[str]
) -> Callable[..., Flag]:
    """An icontract condition: `invariant` over the parameters M, W and `names`.

    icontract passes a condition exactly the arguments its signature names, so the
    condition carries an explicit signature instead of a 90-parameter lambda.
    """

    def condition(**arguments: Any) -> Flag:
        return invariant(servers, arguments["M"], arguments["W"], pack_state(names, arguments))

    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in ["M", "W", *names]
    ]
    setattr(condition, "__signature__", inspect.Signature(parameters))  # noqa: B010
    condition.__name__ = f"{getattr(invariant, '__name__', 'invariant')}_n{servers}"
    return condition


# --------------------------------------------------------------------------------------
# Atomic-snapshot model.  State: c[0..N-1] (slots), p[0..N-1] (weight of a check that
# passed and is not yet written, 0 when none).
# --------------------------------------------------------------------------------------

ATOMIC_CHECK, ATOMIC_WRITE, ATOMIC_FINISH = 0, 1, 2


def atomic_names(servers: int) -> list[str]:
    """Parameter names of the atomic state, in tuple order."""
    return [f"c{q}" for q in range(servers)] + [f"p{q}" for q in range(servers)]


def atomic_initial(servers: int) -> tuple[int, ...]:
    """Every slot 0, nothing pending."""
    return (0,) * (2 * servers)


def atomic_invariant(servers: int, cap: int, weight: int, values: Sequence[Any]) -> Flag:
    """OB-ATOMIC-1: slots >= 0, each pending weight <= min(W, M), and
    total + pending weights <= M + (N-1)*min(M, W)."""
    c = values[:servers]
    pend = values[servers : 2 * servers]
    flags: list[Flag] = []
    for q in range(servers):
        flags.append((c[q] >= 0) & (pend[q] >= 0) & (pend[q] <= weight) & (pend[q] <= cap))
    flags.append(_within_bound(servers, cap, weight, sum(c) + sum(pend)))
    return _all(flags)


def atomic_bound(servers: int, cap: int, weight: int, values: Sequence[Any]) -> Flag:
    """OB-BOUND-1 in the atomic model: the global count is within the bound."""
    return _within_bound(servers, cap, weight, sum(values[:servers]))


def atomic_step(
    servers: int,
    cap: int,
    weight: int,
    values: Sequence[Any],
    action: Any,
    server: Any,
    n: Any,
) -> tuple[Any, ...]:
    """One step of `server`: a snapshot check of weight n, the write of its passed check,
    or the finish of n of its requests. A step that is not enabled changes nothing."""
    c = list(values[:servers])
    pend = list(values[servers : 2 * servers])
    for q in range(servers):
        if server == q:
            if action == ATOMIC_CHECK:
                # One check at a time per server: a second check waits for the write.
                if pend[q] == 0 and 1 <= n <= weight:
                    if admits_check_then_write(sum(c), n, cap):
                        pend[q] = n
            elif action == ATOMIC_WRITE:
                c[q] = c[q] + pend[q]
                pend[q] = 0
            elif action == ATOMIC_FINISH:
                if 1 <= n <= c[q]:
                    c[q] = c[q] - n
    return tuple(c + pend)


# --------------------------------------------------------------------------------------
# Fine-grained check-then-write with ghost state.
# --------------------------------------------------------------------------------------


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
    return _all(flags)


def fine_bound(servers: int, cap: int, weight: int, values: Sequence[Any]) -> Flag:
    """OB-BOUND-1 in the fine model: the global count is within the bound."""
    return _within_bound(servers, cap, weight, sum(FineState(servers, values).c))


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


# --------------------------------------------------------------------------------------
# Write-then-check (reservation) with ghost state.
# --------------------------------------------------------------------------------------


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
    return _all(flags)


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
