"""How a fault run is judged (E2E-FAULT-3, E2E-FAULT-4): on made-up traces and snapshots.

No process is started: each check is shown passing on a healthy run and
failing on a broken one, for the reason it claims.
"""

from __future__ import annotations

from pathlib import Path

from queueref.runtime.faults.checks import (
    FaultClock,
    Snapshot,
    fault_observed,
    recovered_within,
    store_matches_trace,
    true_counts,
)
from queueref.runtime.faults.runs import Sizes, judge
from queueref.runtime.store.redis_config import StoreProtocol
from queueref.trace.events import AdmissionEvent

EVENTS = [
    AdmissionEvent(1.0, 0, "admit", "a", 1, view=0),
    AdmissionEvent(2.0, 0, "admit", "b", 1, view=1),
    AdmissionEvent(5.0, 0, "finish", "a", 1, t_before=4.9),
    AdmissionEvent(1.5, 1, "admit", "c", 1, view=1),
]


def test_E2E_FAULT_4_the_store_matches_the_trace_only_when_it_shows_the_true_count() -> None:
    """E2E-FAULT-4: at t = 3 server 0 holds 2 and server 1 holds 1: a snapshot showing
    (2, 1) matches; a store that lost server 0's count (0, 1) -- Redis restarted empty and
    no heartbeat yet -- does not, nor one that still counts a finished request."""
    steps = true_counts(sorted(EVENTS, key=lambda e: e.t), 2)
    assert store_matches_trace(Snapshot(3.0, 3.01, (2, 1)), steps, 0.1)
    assert not store_matches_trace(Snapshot(3.0, 3.01, (0, 1)), steps, 0.1)
    assert not store_matches_trace(Snapshot(6.0, 6.01, (2, 1)), steps, 0.1)
    # A write in flight while the snapshot is read: either value is the truth.
    assert store_matches_trace(Snapshot(4.85, 4.95, (1, 1)), steps, 0.1)
    assert store_matches_trace(Snapshot(4.85, 4.95, (2, 1)), steps, 0.1)


def test_E2E_FAULT_4_recovery_counts_only_snapshots_within_the_window() -> None:
    """E2E-FAULT-4: recovered iff a matching snapshot was read within the window after the
    heal; a matching one before the heal, or after the window, does not count."""
    steps = true_counts(sorted(EVENTS, key=lambda e: e.t), 2)
    wrong = Snapshot(3.0, 3.01, (0, 0))
    right = Snapshot(3.5, 3.51, (2, 1))
    assert recovered_within([wrong, right], steps, healed=2.9, window=1.0, slack=0.05)
    assert not recovered_within([wrong], steps, healed=2.9, window=1.0, slack=0.05)
    assert not recovered_within([right], steps, healed=3.6, window=1.0, slack=0.05)
    assert not recovered_within([right], steps, healed=1.0, window=1.0, slack=0.05)


def _write(folder: Path, events: list[AdmissionEvent]) -> Path:
    folder.mkdir()
    for server in (0, 1):
        lines = [e.to_json() for e in events if e.server == server]
        (folder / f"server-{server}.jsonl").write_text("".join(f"{x}\n" for x in lines))
    return folder


def test_E2E_FAULT_3_records_lost_and_the_bound(tmp_path: Path) -> None:
    """E2E-FAULT-3: a clean trace loses nothing and stays within the bound; a 200 answer
    without a finish record and a request left in flight are lost records; more in flight
    than bound + expected overshoot is outside the bound."""
    sizes = Sizes(cap=1)
    clock = FaultClock(injected=1.2, healed=1.2)
    clean = [
        AdmissionEvent(1.0, 0, "admit", "a", 1, view=0),
        AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.9),
    ]
    good = judge("node-kill", StoreProtocol.SLOTS, sizes, _write(tmp_path / "good", clean),
                 [], clock, ok=1, began=0.0)  # fmt: skip
    assert (good.records_lost, good.within_bound, good.max_in_flight) == (0, True, 1)
    unfinished = clean[:1]
    lost = judge("node-kill", StoreProtocol.SLOTS, sizes, _write(tmp_path / "lost", unfinished),
                 [], clock, ok=1, began=0.0)  # fmt: skip
    assert lost.records_lost == 2  # the 200 without a finish, and the request still in flight
    # Three at once on N = 2, M = 1: over M + (N-1)*min(M, W) = 2, and a kill overshoots 0.
    crowd = [
        AdmissionEvent(1.0, 0, "admit", "a", 1, view=0),
        AdmissionEvent(1.1, 1, "admit", "b", 1, view=0),
        AdmissionEvent(1.15, 0, "admit", "c", 1, view=0),
        *(AdmissionEvent(2.0 + i, s, "finish", r, 1, t_before=1.9 + i)
          for i, (s, r) in enumerate([(0, "a"), (1, "b"), (0, "c")])),
    ]  # fmt: skip
    broken = judge("node-kill", StoreProtocol.SLOTS, sizes, _write(tmp_path / "crowd", crowd),
                   [], clock, ok=3, began=0.0)  # fmt: skip
    assert broken.max_in_flight == 3 and broken.expected_overshoot == 0
    assert not broken.within_bound and not broken.passed


def test_E2E_FAULT_3_a_killed_nodes_requests_end_at_the_kill(tmp_path: Path) -> None:
    """E2E-FAULT-3: the requests of a node killed with -9 end at the kill (as the parent's
    reclaim records them): they are not lost records and do not count after it."""
    events = [
        AdmissionEvent(1.0, 0, "admit", "a", 1, view=0),
        AdmissionEvent(1.1, 1, "admit", "b", 1, view=1),
        AdmissionEvent(3.0, 1, "finish", "b", 1, t_before=2.9),
    ]
    clock = FaultClock(injected=1.5, healed=1.5, killed=[0])
    scenario = judge("node-kill", StoreProtocol.SLOTS, Sizes(cap=2),
                     _write(tmp_path / "t", events), [], clock, ok=1, began=0.0)  # fmt: skip
    assert scenario.records_lost == 0 and scenario.max_in_flight == 2


def test_E2E_FAULT_3_a_fault_counts_only_when_the_store_showed_it() -> None:
    """E2E-FAULT-3: a partition is observed when server 0's slot read 0 during it while
    server 0 held requests (its lease lapsed); a store that kept showing the count (the
    link never went down) is no evidence. A kill is observed when the dead count still
    counted after it; a restart when the nodes' allocation was gone after it (Redis came
    back empty); a failover when the Sentinel named another primary."""
    steps = true_counts(sorted(EVENTS, key=lambda e: e.t), 2)
    clock = FaultClock(injected=2.5, healed=4.0)
    lapsed = [Snapshot(3.0, 3.01, (0, 1))]
    kept = [Snapshot(3.0, 3.01, (2, 1))]
    assert fault_observed("partition", lapsed, steps, clock, 0.05)
    assert not fault_observed("partition", kept, steps, clock, 0.05)
    assert not fault_observed("pause", [Snapshot(4.5, 4.51, (0, 1))], steps, clock, 0.05)
    killed = FaultClock(injected=2.5, healed=2.5, killed=[0])
    assert fault_observed("node-kill", kept, steps, killed, 0.05)
    assert not fault_observed("node-kill", lapsed, steps, killed, 0.05)
    empty = [Snapshot(3.0, 3.01, (2, 1), allocated=False)]
    assert fault_observed("redis-restart", empty, steps, killed, 0.05)
    assert not fault_observed("redis-restart", kept, steps, killed, 0.05)
    assert not fault_observed("failover", kept, steps, clock, 0.05)
    assert fault_observed("failover", kept, steps, FaultClock(promoted=True), 0.05)
