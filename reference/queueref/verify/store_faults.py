"""The store's faults as an exhaustive model: partition, restart, failover (OB-FAULT-1..3).

The multi-node store (`queueref.runtime.store.redis_store`, `specs/multi-node.md`) keeps
each server's absolute count in Redis. This model is the fine-grained
check-then-write model of `queueref.verify.lease` (reads one slot at a time,
in index order, decided by `queueref.admission.protocol`) with what the store
holds made explicit: `stored[i]` is what the others read for server i (None:
missing or expired, read as 0) and `counts[i]` is its real count. A write
(an admission, a finish, a heartbeat; all absolute, all under the server's
lock, ADM-STORE-2) sets `stored[i] = counts[i]`. One fault happens once, at
any moment, under the `closed` failure policy (a server that cannot reach
the store admits nothing; a check that fails is a rejection):

* `partition` (OB-FAULT-1): the servers `cut` lose the store; their leases
  lapse (their slots read as 0) at any moment while cut; they still finish
  requests, but no write of theirs lands until the partition heals, which it
  may do at any moment.
* `restart` (OB-FAULT-2): Redis is restarted empty: every slot is gone at
  once; while it is down nobody checks or writes; after it is back each slot
  is missing until its server's next write.
* `failover` (OB-FAULT-3): the replica promoted holds every write but the
  last `lost` ones (asynchronous replication keeps a prefix of the stream):
  those are undone, newest first; while the promotion runs nobody checks or
  writes.

The ghost `dropped` adds, at the fault, every server's real count above what
the store then shows for it. In every reachable state
`real total <= M + (N-1)*min(M, W) + dropped` (checked, `worst_excess`), and
`worst_total - bound` is the overshoot the fault can cause at those sizes
(`queueref.runtime.faults.runs` reports it as `expected_overshoot`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeVar

from queueref.admission import protocol
from queueref.validators import is_int_at_least
from queueref.verify.search import reachable

T = TypeVar("T")

#: The faults the model knows.
FAULTS: Final = ("partition", "restart", "failover", "pause", "kill")

#: The faults whose first k servers are the node the fault hits.
_NODE_FAULTS: Final = ("partition", "pause", "kill")

# Phases of the one fault: before it, during it (cut / down / promoting), after it.
_BEFORE, _DURING, _AFTER = 0, 1, 2

_Check = tuple[int, int, int] | None  # (n, next slot, view) or idle
# (real counts, stored counts (None = missing), checks, phase, dropped, write log)
_State = tuple[
    tuple[int, ...],
    tuple[int | None, ...],
    tuple[_Check, ...],
    int,
    int,
    tuple[tuple[int, int | None], ...],
]


@dataclass(frozen=True)
class FaultRow:
    """One exhaustive search of one fault."""

    fault: str
    servers: int
    cap: int
    weight: int
    k: int  # servers hit (partition, pause, kill); writes lost (failover); restart: 0
    atomic: bool  # the `script` protocol: one atomic check and write
    worst_excess: int  # max of real total - dropped
    worst_total: int  # max real total
    bound: int  # the bound without faults: M + (N-1)*min(M, W), or M when atomic
    states: int

    @property
    def holds(self) -> bool:
        """OB-FAULT-1 .. OB-FAULT-5: real total <= bound + dropped in every reachable state."""
        return self.worst_excess <= self.bound

    @property
    def overshoot(self) -> int:
        """How far above the bound the real total can go with this fault."""
        return max(0, self.worst_total - self.bound)


def _put(values: tuple[T, ...], i: int, value: T) -> tuple[T, ...]:
    return values[:i] + (value,) + values[i + 1 :]


def _reachable_store(fault: str, phase: int, server: int, k: int) -> bool:
    """Can `server` read and write the store now?"""
    if fault == "kill" and phase != _BEFORE:
        return server >= k  # a killed server never comes back (a restart is a new server)
    if phase != _DURING:
        return True
    return fault in _NODE_FAULTS and server >= k  # the first k servers are the node hit


def _write(state: _State, p: int, count: int, k: int, fault: str) -> _State:
    """Server p's absolute write of `count` (its log entry kept for a failover)."""
    counts, stored, checks, phase, dropped, log = state
    if fault == "failover" and phase == _BEFORE and k > 0:
        log = (log + ((p, stored[p]),))[-k:]
    return (_put(counts, p, count), _put(stored, p, count), checks, phase, dropped, log)


def _fault_starts(state: _State, fault: str, k: int) -> _State:
    counts, stored, checks, _, dropped, log = state
    if fault == "partition":
        # The cut servers' in-flight checks fail (closed: rejected); the leases lapse later.
        checks = tuple(None if i < k else c for i, c in enumerate(checks))
    elif fault == "kill":
        # OB-FAULT-5: kill -9: the requests die with the server; its slot stays until its
        # lease lapses.
        counts = tuple(0 if i < k else c for i, c in enumerate(counts))
        checks = tuple(None if i < k else c for i, c in enumerate(checks))
    elif fault == "pause":
        pass  # OB-FAULT-4: a paused server keeps everything, its check too, takes no step
    elif fault == "restart":
        stored = (None,) * len(counts)
        checks = (None,) * len(counts)
    else:  # failover: undo the last k writes, newest first
        for server, previous in reversed(log):
            stored = _put(stored, server, previous)
        checks = (None,) * len(counts)
    hidden = sum(max(0, c - (s or 0)) for c, s in zip(counts, stored, strict=True))
    return (counts, stored, checks, _DURING, dropped + hidden, ())


def _successors(
    state: _State, fault: str, cap: int, weight: int, k: int, atomic: bool
) -> list[_State]:
    counts, stored, checks, phase, dropped, log = state
    num = len(counts)
    out: list[_State] = []
    if phase == _BEFORE:
        out.append(_fault_starts(state, fault, k))
    elif phase == _DURING:
        out.append((counts, stored, checks, _AFTER, dropped, log))
    if phase != _BEFORE and fault in _NODE_FAULTS and (phase == _DURING or fault == "kill"):
        for p in range(min(k, num)):
            if stored[p] is not None:  # the node's lease lapses: its slot now reads as 0
                out.append((counts, _put(stored, p, None), checks, phase, dropped + counts[p], log))
    for p in range(num):
        online = _reachable_store(fault, phase, p, k)
        if fault == "pause" and not online:
            continue  # SIGSTOP: not a step, not even a finish
        check = checks[p]
        if check is None:
            if fault == "kill" and not online:
                continue
            if counts[p] > 0:  # finish one request: written if the store is reachable
                if online:
                    out.append(_write(state, p, counts[p] - 1, k, fault))
                else:
                    out.append(
                        (_put(counts, p, counts[p] - 1), stored, checks, phase, dropped, log)
                    )
            if not online:
                continue
            for n in range(1, weight + 1):
                if atomic:  # the script: read, decide and write in one step
                    view = sum(counts[i] if i == p else (stored[i] or 0) for i in range(num))
                    if protocol.admits_check_then_write(view, n, cap):
                        out.append(_write(state, p, counts[p] + n, k, fault))
                    continue
                # start a check of weight n
                out.append((counts, stored, _put(checks, p, (n, 0, 0)), phase, dropped, log))
            if stored[p] != counts[p]:  # a heartbeat: the absolute count again
                out.append(_write(state, p, counts[p], k, fault))
            continue
        n, slot, view = check
        if slot < num:  # read one slot: the own slot as the own count, a missing one as 0
            value = counts[p] if slot == p else (stored[slot] or 0)
            step = protocol.Check(n, slot, view).read(value)
            out.append(
                (
                    counts,
                    stored,
                    _put(checks, p, (n, step.next_slot, step.view)),
                    phase,
                    dropped,
                    log,
                )
            )
        elif protocol.admits_check_then_write(view, n, cap):  # admit and write
            admitted = _write(state, p, counts[p] + n, k, fault)
            out.append(admitted[:2] + (_put(checks, p, None),) + admitted[3:])
        else:  # reject: nothing written
            out.append((counts, stored, _put(checks, p, None), phase, dropped, log))
    return out


def explore_fault(
    fault: str, servers: int, cap: int, weight: int, k: int = 0, *, atomic: bool = False
) -> FaultRow:
    """Every reachable state around one `fault`; the worst real total and excess over `dropped`.

    `k` is the number of servers hit (the first k) by a partition, a pause or a kill, or
    the number of writes lost in a failover; a restart ignores it. `atomic` models the
    `script` protocol (a check reads, decides and writes in one step; bound M).

    :raises ValueError: an unknown fault, or a size not an int in range
    """
    if fault not in FAULTS:
        raise ValueError(f"OB-FAULT-1: fault must be one of {FAULTS}, got {fault!r}")
    for name, value, low in (
        ("servers", servers, 1),
        ("cap", cap, 0),
        ("weight", weight, 1),
        ("k", k, 0),
    ):
        if not is_int_at_least(value, low):
            raise ValueError(f"OB-FAULT-1: {name} must be an int >= {low}, got {value!r}")
    start: _State = ((0,) * servers, (0,) * servers, (None,) * servers, _BEFORE, 0, ())
    worst_excess = worst_total = states = 0
    for state in reachable(start, lambda s: _successors(s, fault, cap, weight, k, atomic)):
        states += 1
        total = sum(state[0])
        worst_total = max(worst_total, total)
        worst_excess = max(worst_excess, total - state[4])
    bound = cap if atomic else protocol.overshoot_bound(servers, cap, weight)
    used = 0 if fault == "restart" else k
    return FaultRow(
        fault, servers, cap, weight, used, atomic, worst_excess, worst_total, bound, states
    )
