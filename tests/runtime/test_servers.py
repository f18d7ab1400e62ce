"""Real spawned API server processes sharing one counter array (marked `multiprocess`).

Every test is bounded in seconds and leaves no process behind: `ServerGroup`
joins (or stops) every child on exit, and `run_stress` returns only after all
of them ended. Expected values are computed by hand from the spec.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import pytest
from broken_trackers import LazyRefreshTracker

from queueref import AdmissionRejected
from queueref.admission.protocol import overshoot_bound
from queueref.runtime.servers import ServerGroup, ServerSpec, SlotReset
from queueref.runtime.stress import StressConfig, run_stress

pytestmark = pytest.mark.multiprocess

SPAWN = multiprocessing.get_context("spawn")


# ---------------------------------------------------------------------------
# Targets run in the children (module level: spawn imports them by name)


def write_index_plus_one(spec: ServerSpec, barrier: Any, results: Any) -> None:
    stats = spec.shared_stats()
    assert stats is not None
    stats.set_num_requests(spec.index + 1)
    barrier.wait(30)
    results.put((spec.index, stats.get_num_requests()))
    barrier.wait(30)


def crash_or_probe(spec: ServerSpec, held: Any, go: Any, results: Any) -> None:
    server = spec.build()
    if spec.index == 0:
        server.admit("doomed", 3)  # holds the whole cap
        held.set()
        time.sleep(0.05)
        os._exit(17)  # dies holding its requests: no finish, no abort, no refresh
    for attempt in range(2):
        go[attempt].wait(30)
        try:
            server.admit(f"probe-{attempt}")
        except AdmissionRejected:
            results.put((attempt, "rejected"))
        else:
            results.put((attempt, "admitted"))
            server.abort(f"probe-{attempt}")


def hold_then_crash(spec: ServerSpec) -> None:
    server = spec.build()
    server.admit(f"held-{spec.index}", 2)
    os._exit(3)


def drain(results: Any, count: int, timeout: float = 30.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    items: list[Any] = []
    while len(items) < count:
        items.append(results.get(timeout=max(0.1, deadline - time.monotonic())))
    return items


# ---------------------------------------------------------------------------
# Sharing one array


def test_three_spawned_processes_share_one_array() -> None:
    """ADM-SRV-1, ADM-STATS-4: three processes write index+1 into the parent's array; all read 6."""
    barrier = SPAWN.Barrier(3)
    results = SPAWN.Queue()
    with ServerGroup(
        write_index_plus_one, 3, max_num_queued_reqs=10, args=(barrier, results)
    ) as group:
        assert group.context.get_start_method() == "spawn"
        assert len(group.counters) == 24 and list(group.counters) == [0] * 24
        group.start()
        assert sorted(drain(results, 3)) == [(0, 6), (1, 6), (2, 6)]
        assert group.join(30) == [0, 0, 0]
        assert group.slot_counts() == [1, 2, 3]
        assert [p.name for p in group.processes] == [f"queueref-server-{i}" for i in range(3)]
        # ADM-SRV-2: they exited holding their counts; the parent resets and reports each.
        resets = group.reap()
        assert [(r.index, r.exitcode, r.stale_count) for r in resets] == [
            (0, 0, 1),
            (1, 0, 2),
            (2, 0, 3),
        ]
        assert group.slot_counts() == [0, 0, 0]
        assert group.reap() == []  # each dead server is reaped once
    results.close()


def test_single_server_has_no_shared_array() -> None:
    """ADM-SRV-1, ADM-ALLOC-1: one server or no request limit: no array, the local count decides."""
    assert ServerGroup(hold_then_crash, 1, max_num_queued_reqs=4).counters is None
    group = ServerGroup(hold_then_crash, 2, max_num_queued_reqs=None)
    assert group.counters is None and group.slot_counts() == []
    spec = group.specs[1]
    assert spec.shared_stats() is None
    assert spec.build().controller.shared_stats is None


def test_bad_group_input() -> None:
    """ADM-SRV-1: bad sizes, limits or protocols are refused before anything starts."""
    for kwargs in (
        {"num_servers": 0, "max_num_queued_reqs": 1},
        {"num_servers": 2, "max_num_queued_reqs": -1},
        {"num_servers": 2, "max_num_queued_reqs": 1, "protocol": "optimistic"},
    ):
        with pytest.raises(ValueError, match="ADM-SRV-1"):
            ServerGroup(hold_then_crash, **kwargs)


# ---------------------------------------------------------------------------
# A crashed server


def test_crashed_server_leaks_capacity_until_the_parent_resets_its_slot() -> None:
    """ADM-SRV-2, ADM-RISK-1: before the reset every request is refused; after it, admitted."""
    held = SPAWN.Event()
    go = [SPAWN.Event(), SPAWN.Event()]
    results = SPAWN.Queue()
    with ServerGroup(crash_or_probe, 2, max_num_queued_reqs=3, args=(held, go, results)) as group:
        group.start()
        assert held.wait(30)
        crashed = group.processes[0]
        crashed.join(30)
        assert crashed.exitcode == 17
        assert group.slot_counts() == [3, 0]
        # Broken state (no reset yet): nothing runs, yet the survivor refuses everything.
        go[0].set()
        assert drain(results, 1) == [(0, "rejected")]
        resets = group.reap()
        assert resets == [SlotReset(0, crashed.pid, 17, 3)]
        assert group.slot_counts() == [0, 0]
        go[1].set()
        assert drain(results, 1) == [(1, "admitted")]
        assert group.join(30) == [17, 0]
        assert group.resets == resets
    results.close()


def test_background_reaper_resets_dead_slots() -> None:
    """ADM-SRV-2: the reaper thread finds the dead servers and reports their stale counts."""
    with ServerGroup(hold_then_crash, 2, max_num_queued_reqs=4) as group:
        group.start_reaper(interval=0.02)
        group.start()
        deadline = time.monotonic() + 30
        while len(group.resets) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted((r.index, r.exitcode, r.stale_count) for r in group.resets) == [
            (0, 3, 2),
            (1, 3, 2),
        ]
        assert group.slot_counts() == [0, 0]


def test_close_stops_and_joins_everything() -> None:
    """ADM-SRV-3: leaving the group stops running servers and joins them; nothing is left."""
    never = SPAWN.Event()
    results = SPAWN.Queue()
    go = [never, never]
    held = SPAWN.Event()
    group = ServerGroup(crash_or_probe, 2, max_num_queued_reqs=3, args=(held, go, results))
    with group:
        group.start()
        assert held.wait(30)
    assert all(process._closed for process in group.processes)  # type: ignore[attr-defined]
    assert multiprocessing.active_children() == []
    assert group.slot_counts() == [0, 0]
    results.close()


# ---------------------------------------------------------------------------
# The stress run


def check_nothing_leaked(result: Any) -> None:
    assert result.exitcodes == [0] * result.config.num_servers
    assert result.slots_after == [0] * result.config.num_servers
    assert result.slots_admitted() == result.slots_released()
    assert multiprocessing.active_children() == []


def test_stress_check_then_write_stays_within_the_bound() -> None:
    """ADM-BOUND-1, ADM-EV-4, ADM-SRV-3: N=3, M=3, W=2: never more than 3 + 2*2 = 7 in flight."""
    config = StressConfig(
        num_servers=3, max_num_queued_reqs=3, max_n=2, protocol="check-then-write", seconds=1.0
    )
    assert config.bound == overshoot_bound(3, 3, 2) == 7
    result = run_stress(config)
    check_nothing_leaked(result)
    assert result.admitted > 0 and result.rejected > 0
    assert 3 <= result.max_in_flight <= 7
    times = [event.t for event in result.events]
    assert times == sorted(times)


def test_stress_write_then_check_keeps_the_cap() -> None:
    """ADM-BOUND-2, ADM-EV-5, ADM-CTL-9: write-then-check never has more than M=3 admitted."""
    result = run_stress(
        StressConfig(num_servers=3, max_num_queued_reqs=3, max_n=2, protocol="write-then-check")
    )
    check_nothing_leaked(result)
    assert result.admitted > 0
    assert 1 <= result.max_admitted_in_flight <= 3


def test_stress_locked_baseline_keeps_the_cap() -> None:
    """ADM-BOUND-2, ADM-EV-5: the lock-protected baseline is exact as well."""
    result = run_stress(
        StressConfig(num_servers=3, max_num_queued_reqs=3, max_n=2, protocol="locked")
    )
    check_nothing_leaked(result)
    assert 1 <= result.max_admitted_in_flight <= 3


def test_stress_with_a_lazy_slot_refresh_exceeds_the_bound() -> None:
    """ADM-BOUND-1, ADM-TRK-5 have teeth: a server that does not refresh on add overshoots.

    Deterministic: lazy servers write their slots only when a request ends,
    so the first server to write one ran its whole opening burst (bound + 1 =
    6 attempts of n = 1) while every slot read 0, and admitted all six.
    """
    config = StressConfig(
        num_servers=3,
        max_num_queued_reqs=3,
        max_n=1,
        seconds=0.3,
        tracker_factory=LazyRefreshTracker,
    )
    assert config.bound == 5 and config.burst_attempts == 6
    result = run_stress(config)
    assert result.exitcodes == [0, 0, 0]
    assert result.max_in_flight >= 6 > config.bound
