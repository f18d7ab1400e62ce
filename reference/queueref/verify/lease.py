"""The check-then-write protocol with leases: exhaustive search of the lease bound (OB-LEASE-1).

The multi-node store (`queueref.runtime.store.redis_store`) ignores the count of a server
whose heartbeat lease expired. A live server that is paused past its lease
(or whose heartbeats are delayed) keeps its requests while the others stop
seeing them, so they may admit into room that is not free. This model is the
fine-grained model of `specs/overshoot-bound.md` (reads one slot at a time,
in index order, decided by `queueref.admission.protocol`) with two more moves:

* `expire(p)`: p's lease lapses, at any moment, even in the middle of p's own
  check; from then on the others read p's slot as 0. The ghost `dropped`
  adds p's real count at that moment.
* p's next write (an admission, a finish or a heartbeat; all absolute) makes
  its slot visible again.

A server's check, finish and heartbeat hold one lock (ADM-STORE-2), so a
server finishes or renews only between its own checks; the own slot is read
as the server's own count.

OB-LEASE-1 (checked here for the stated bounds): in every reachable state
    real total <= M + (N-1)*min(M, W) + dropped,
where `dropped` is the sum of the counts the lapses dropped so far, and the
inequality is reached. Without lapses it is OB-BOUND-1.

Two encodings (`ENCODINGS`). `plain`: the moves above, with `n` chosen at the start and
`dropped` in the state. `compact` (the default), the ideas of `CompactCheckThenWrite`:

* `n` is chosen at the decision (nobody reads it before), so starting a check and
  reading slot 0 are one step, and a check that has read every slot keeps only `room`,
  the largest n that fits; it admits any n <= room or declines n = room + 1 <= W;
* a check stops at the first read after which not even n = 1 fits (views only grow; the
  reads it skips change nothing anyone reads), so the views kept are below M;
* `dropped` leaves the state: it is a ghost that only grows along a run and no move
  depends on it, so the worst `total - dropped` is, over the states without it, the
  total minus the least `dropped` of a run reaching the state (`search.least_costs`).

* a check reads its own slot in the same step as what follows that read (the next read,
  or the decision): its own count does not change during its own check (`_reads` says
  why this keeps every count, OB-LEASE-4).

No server symmetry: a check reads the slots in index order, so swapping two servers
changes what a check reads before what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from queueref.admission import protocol
from queueref.validators import is_int_at_least
from queueref.verify.search import least_costs, reachable

T = TypeVar("T")

#: The encodings searched: `compact` (the default) and `plain`, the reference.
ENCODINGS: tuple[str, ...] = ("compact", "plain")

# A server's check: (n, next slot, view), or None when idle.
_Check = tuple[int, int, int] | None
# (real counts, lease lapsed?, checks, dropped so far, lapses so far)
_State = tuple[tuple[int, ...], tuple[bool, ...], tuple[_Check, ...], int, int]


@dataclass(frozen=True)
class LeaseRow:
    """One exhaustive search: the worst of `real total - dropped`, and the states seen."""

    servers: int
    cap: int
    weight: int
    lapses: int
    worst_excess: int  # max over reachable states of real total - dropped
    worst_total: int  # max real total
    bound: int  # M + (N-1)*min(M, W)
    states: int

    @property
    def holds(self) -> bool:
        return self.worst_excess <= self.bound


def _replace(values: tuple[T, ...], i: int, value: T) -> tuple[T, ...]:
    return values[:i] + (value,) + values[i + 1 :]


def _successors(state: _State, cap: int, weight: int, max_lapses: int) -> list[_State]:
    counts, lapsed, checks, dropped, lapses = state
    num = len(counts)
    out: list[_State] = []
    for p in range(num):
        check = checks[p]
        if check is None:
            for n in range(1, weight + 1):  # start a check of weight n
                out.append((counts, lapsed, _replace(checks, p, (n, 0, 0)), dropped, lapses))
            if counts[p] > 0:  # finish one request: an absolute write, visible again
                out.append(
                    (
                        _replace(counts, p, counts[p] - 1),
                        _replace(lapsed, p, False),
                        checks,
                        dropped,
                        lapses,
                    )
                )
            if lapsed[p]:  # heartbeat: an absolute write, visible again
                out.append((counts, _replace(lapsed, p, False), checks, dropped, lapses))
        else:
            n, slot, view = check
            if slot < num:  # read one slot: a lapsed server reads as 0, the own slot as own
                value = counts[slot] if slot == p or not lapsed[slot] else 0
                step = protocol.Check(n, slot, view).read(value)
                out.append(
                    (
                        counts,
                        lapsed,
                        _replace(checks, p, (n, step.next_slot, step.view)),
                        dropped,
                        lapses,
                    )
                )
            elif protocol.admits_check_then_write(view, n, cap):  # admit and write
                out.append(
                    (
                        _replace(counts, p, counts[p] + n),
                        _replace(lapsed, p, False),
                        _replace(checks, p, None),
                        dropped,
                        lapses,
                    )
                )
            else:  # reject: nothing written
                out.append((counts, lapsed, _replace(checks, p, None), dropped, lapses))
        if not lapsed[p] and lapses < max_lapses:  # the lease lapses, at any moment
            out.append((counts, _replace(lapsed, p, True), checks, dropped + counts[p], lapses + 1))
    return out


# Compact: a check is (k, view) reading slot k < N, or (N, room) once decided.
_CompactCheck = tuple[int, int] | None
# (real counts, lease lapsed?, checks, lapses so far); `dropped` is the cost of a step.
_CompactState = tuple[tuple[int, ...], tuple[bool, ...], tuple[_CompactCheck, ...], int]


def _room(view: int, cap: int, weight: int) -> int:
    """The largest n <= W that fits at `view` (0: none); every smaller n fits too."""
    fitting = [n for n in range(1, weight + 1) if protocol.admits_check_then_write(view, n, cap)]
    return max(fitting, default=0)


def _decisions(
    state: _CompactState, p: int, room: int, weight: int
) -> list[tuple[_CompactState, int]]:
    """p's decided check: admit any n <= room and write (visible again), or decline room + 1."""
    counts, lapsed, checks, lapses = state
    out: list[tuple[_CompactState, int]] = [
        ((_replace(counts, p, counts[p] + n), _replace(lapsed, p, False),
          _replace(checks, p, None), lapses), 0)
        for n in range(1, room + 1)
    ]  # fmt: skip
    if room < weight:
        out.append(((counts, lapsed, _replace(checks, p, None), lapses), 0))
    return out


def _reads(state: _CompactState, p: int, cap: int, weight: int) -> list[tuple[_CompactState, int]]:
    """p's check reads its next slot (an idle server starts and reads slot 0); its own slot
    is read in the same step as what follows it."""
    # OB-LEASE-4: p's count does not change while p's own check runs (p finishes only
    # between its checks and admits only at the decision), p reads it as its own count,
    # lapsed or not, and nobody reads p's check: every move between the own read and the
    # next step commutes with that read. The merged steps reach the same counts, lapses
    # and dropped counts as the plain ones.
    counts, lapsed, checks, lapses = state
    num = len(counts)
    check = checks[p]
    slot, view = (0, 0) if check is None else check
    while True:
        value = counts[slot] if slot == p or not lapsed[slot] else 0
        view = protocol.accumulate(view, value)
        room = _room(view, cap, weight)
        own, slot = slot == p, slot + 1
        if not room:  # rejected: views only grow
            return [((counts, lapsed, _replace(checks, p, None), lapses), 0)]
        if own and slot == num:  # the own slot last: decide in the same step
            return _decisions(state, p, room, weight)
        if not own or slot == num:
            new: _CompactCheck = (slot, view) if slot < num else (num, room)
            return [((counts, lapsed, _replace(checks, p, new), lapses), 0)]


def _compact_successors(
    state: _CompactState, cap: int, weight: int, max_lapses: int
) -> list[tuple[_CompactState, int]]:
    # OB-LEASE-2: n chosen at the decision, start merged with the first read, early reject.
    counts, lapsed, checks, lapses = state
    num = len(counts)
    out: list[tuple[_CompactState, int]] = []
    can_start = _room(0, cap, weight) > 0
    for p in range(num):
        check = checks[p]
        if check is None:
            if counts[p] > 0:  # finish one request: an absolute write, visible again
                out.append(((_replace(counts, p, counts[p] - 1), _replace(lapsed, p, False),
                             checks, lapses), 0))  # fmt: skip
            if lapsed[p]:  # heartbeat: an absolute write, visible again
                out.append(((counts, _replace(lapsed, p, False), checks, lapses), 0))
        if check is not None and check[0] == num:  # decided: admit n <= room, or decline
            out += _decisions(state, p, check[1], weight)
        elif check is not None or can_start:
            out += _reads(state, p, cap, weight)
        if not lapsed[p] and lapses < max_lapses:  # the lease lapses: `dropped` += counts[p]
            out.append(((counts, _replace(lapsed, p, True), checks, lapses + 1), counts[p]))
    return out


def explore_leases(
    servers: int,
    cap: int,
    weight: int,
    lapses: int,
    *,
    encoding: str = "compact",
    max_states: int = 5_000_000,
) -> LeaseRow:
    """Every reachable state with at most `lapses` lease lapses; the worst excess over `dropped`.

    `states` counts the states of the chosen encoding; the worst cases are the same.

    :raises ValueError: a bound is not an int in range (servers >= 1, cap >= 0, weight >= 1,
        lapses >= 0), an unknown encoding, or more than `max_states` states
    """
    for name, value, low in (("servers", servers, 1), ("cap", cap, 0), ("weight", weight, 1)):
        if not is_int_at_least(value, low):
            raise ValueError(f"OB-LEASE-1: {name} must be an int >= {low}, got {value!r}")
    if not is_int_at_least(lapses, 0):
        raise ValueError(f"OB-LEASE-1: lapses must be an int >= 0, got {lapses!r}")
    if encoding not in ENCODINGS:
        raise ValueError(
            f"OB-LEASE-1: unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}"
        )
    too_many = (
        f"OB-LEASE-1: more than {max_states} states ({encoding} encoding, N={servers}, M={cap}, "
        f"W={weight}, lapses={lapses}); lower the bounds or raise the state limit"
    )
    bound = protocol.overshoot_bound(servers, cap, weight)
    worst_excess = worst_total = 0
    if encoding == "compact":  # OB-LEASE-2: dropped as the least cost of reaching a state
        begin: _CompactState = ((0,) * servers, (False,) * servers, (None,) * servers, 0)
        least_dropped = least_costs(
            begin,
            lambda s: _compact_successors(s, cap, weight, lapses),
            max_states=max_states,
            too_many=too_many,
        )
        for core, dropped in least_dropped.items():
            total = sum(core[0])
            worst_total = max(worst_total, total)
            worst_excess = max(worst_excess, total - dropped)
        return LeaseRow(
            servers, cap, weight, lapses, worst_excess, worst_total, bound, len(least_dropped)
        )
    start: _State = ((0,) * servers, (False,) * servers, (None,) * servers, 0, 0)
    states = 0
    for state in reachable(
        start,
        lambda s: _successors(s, cap, weight, lapses),
        max_states=max_states,
        too_many=too_many,
    ):
        states += 1
        total = sum(state[0])
        worst_total = max(worst_total, total)
        worst_excess = max(worst_excess, total - state[3])
    return LeaseRow(servers, cap, weight, lapses, worst_excess, worst_total, bound, states)
