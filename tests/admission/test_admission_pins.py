"""Behaviours mutation testing found unpinned: each test kills mutants that survived before.

`make mutation` (tools/mutation.py) runs cosmic-ray over the reference; the survivors it
found that change behaviour are pinned here, each test naming the mutant it kills. The
rest are listed with their reasons in `docs/mutation/survivors.md`.
"""

from __future__ import annotations

import pytest

from queueref import RequestTracker, SharedAdmissionStats
from queueref.oracle import check_admission_trace
from queueref.trace.events import AdmissionEvent, max_admitted_in_flight, max_in_flight


@pytest.mark.parametrize("index", [-1, -2, 2, 3, True])
def test_read_slot_refuses_an_index_out_of_range(index: int) -> None:
    """ADM-STATS-3: `read_slot(-1)` is an IndexError, not the last slot read from the back
    (kills the mutant without the precondition); the counters stay as they were."""
    counters = [0] * 16
    counters[8] = 5  # the last slot holds a count a negative index would read
    stats = SharedAdmissionStats(counters, 2, 0)
    with pytest.raises(IndexError, match="ADM-STATS-3"):
        stats.read_slot(index)
    assert counters == [0] * 8 + [5] + [0] * 7
    assert stats.read_slot(1) == 5 and stats.read_slot(0) == 0


def _rules(mode: str, events: list[AdmissionEvent], cap: int = 1, max_n: int = 2) -> list[str]:
    report = check_admission_trace(
        events, num_servers=1, max_num_queued_reqs=cap, max_n=max_n, mode=mode
    )
    return [v.rule for v in report.violations]


@pytest.mark.parametrize("mode", ["check-then-write", "locked", "local"])
def test_check_then_write_modes_judge_the_admit_by_view_plus_n(mode: str) -> None:
    """ORC-TR-2, ORC-TR-3: in the check-then-write, locked and local modes a request fits iff
    view + n <= cap: an admit of n = 2 on view 0 with cap 1 is flagged although view <= cap,
    and the matching rejection is not (kills `view <= cap` in these modes)."""
    admit = AdmissionEvent(1.0, 0, "admit", "a", 2, view=0)
    assert _rules(mode, [admit]) == ["ORC-TR-2"]
    reject = AdmissionEvent(1.0, 0, "reject", "a", 2, view=0)
    assert _rules(mode, [reject]) == []
    fits = AdmissionEvent(1.0, 0, "reject", "b", 1, view=0)
    assert _rules(mode, [fits]) == ["ORC-TR-3"]


def test_write_then_check_judges_the_admit_by_the_view_alone() -> None:
    """ORC-TR-2, ORC-TR-3: in write-then-check mode the view already holds the own reservation:
    a view of n = 2 with cap 2 fits (kills `view + n <= cap` in write-then-check mode)."""
    admit = AdmissionEvent(1.0, 0, "admit", "a", 2, view=2)
    assert _rules("write-then-check", [admit], cap=2) == []
    reject = AdmissionEvent(1.0, 0, "reject", "a", 2, view=3)
    assert _rules("write-then-check", [reject], cap=2) == []
    fits = AdmissionEvent(1.0, 0, "reject", "b", 2, view=2)
    assert _rules("write-then-check", [fits], cap=2) == ["ORC-TR-3"]


def test_registration_takes_over_only_n_of_more_reservations() -> None:
    """ADM-TRK-7: with 3 reservations held, registering a request of n = 1 takes over one:
    2 stay reserved and the slot holds 1 unfinished + 2 reserved (kills taking over all
    of them, or none)."""
    counters = [0] * 16
    tracker = RequestTracker(SharedAdmissionStats(counters, 2, 0))
    tracker.reserve(3)
    assert tracker.num_reserved == 3 and counters[0] == 3
    tracker.add("a", n=1)
    assert tracker.num_reserved == 2 and tracker.get_num_unfinished_requests() == 1
    assert counters[0] == 3
    tracker.add("b", n=2)
    assert tracker.num_reserved == 0 and counters[0] == 3


def test_max_in_flight_counts_a_tied_admission_first_in_any_input_order() -> None:
    """ADM-EV-4: at equal t an admission counts before a departure, also when the trace
    lists the departure first (kills an equal sort rank, which the stable sort would hide
    when the admission comes first)."""
    events = [
        AdmissionEvent(0.0, 0, "admit", "a", 1, view=0),
        AdmissionEvent(1.0, 0, "finish", "a", 1, t_before=1.0),
        AdmissionEvent(1.0, 1, "admit", "b", 1, view=0),
    ]
    assert max_in_flight(events) == 2
    assert max_in_flight([events[0], events[2], events[1]]) == 2


def test_max_admitted_in_flight_counts_a_tied_departure_first_in_any_input_order() -> None:
    """ADM-EV-5: at equal time a departure (at its t_before) counts before an admission,
    also when the trace lists the admission first (kills an equal sort rank)."""
    events = [
        AdmissionEvent(0.0, 0, "admit", "a", 1, view=0),
        AdmissionEvent(1.0, 1, "admit", "b", 1, view=0),
        AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.0),
    ]
    assert max_admitted_in_flight(events) == 1
    assert max_admitted_in_flight([events[0], events[2], events[1]]) == 1


def test_abort_keeps_exact_counts_past_the_small_int_cache() -> None:
    """ADM-TRK-2, ADM-TRK-5: aborting among 300 tracked requests leaves exactly the others,
    and the slot says so (kills count checks by identity, `is`, which hold only for ints
    Python caches, up to 256)."""
    counters = [0] * 16
    tracker = RequestTracker(SharedAdmissionStats(counters, 2, 1))
    for index in range(300):
        tracker.add(f"r{index}")
    assert tracker.abort(["r0", "r1", "unknown"]) == ["r0", "r1"]
    assert tracker.get_num_unfinished_requests() == 298 and counters[8] == 298
    assert not tracker.has_request("r0") and tracker.has_request("r299")


def test_the_global_count_reads_every_slot_of_300_servers() -> None:
    """ADM-STATS-3: the read loop stops after the last of 300 slots, having read them all
    (kills a loop end tested by identity, `is`, which only holds up to 256)."""
    counters = [0] * SharedAdmissionStats.num_counters(300)
    counters[0], counters[8 * 299] = 1, 2
    assert SharedAdmissionStats(counters, 300, 0).get_num_requests() == 3


def test_a_time_read_from_json_is_a_float_and_a_boolean_time_is_refused() -> None:
    """ADM-EV-1, ADM-EV-2: `"t": 1` is read as the float 1.0; `"t": true` is not a time,
    it is refused, not read as 1.0 (kills the negated bool test)."""
    line = '{"t": 1, "server": 0, "event": "admit", "request_id": "a", "n": 1, "view": 0}'
    event = AdmissionEvent.from_json(line)
    assert type(event.t) is float and event.t == 1.0
    with pytest.raises(ValueError, match="ADM-EV-1"):
        AdmissionEvent.from_json(line.replace('"t": 1', '"t": true'))
