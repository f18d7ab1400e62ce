"""ORC-TR-19, ORC-TR-20, ORC-TR-21, ADM-EV-7: check-trace judges the preflight records.

Each check: a correct trace of its mode passes; the same trace with the one fault the
check names fails with that check's ID, and only it.
"""

from __future__ import annotations

import pytest

from queueref.oracle.trace_check import check_admission_trace
from queueref.oracle.trace_preflight import held_reservations
from queueref.trace.events import AdmissionEvent

E = AdmissionEvent


def two_check_trace() -> list[AdmissionEvent]:
    """vLLM's path, one server, M = 1: a admitted; b passes preflight, renders, is refused."""
    return [
        E(1.0, 0, "preflight", "a", 1, view=0),
        E(1.1, 0, "preflight", "b", 1, view=0),
        E(1.2, 0, "admit", "a", 1, view=0),
        E(1.3, 0, "reject", "b", 1, view=1),
        E(2.0, 0, "finish", "a", 1, t_before=1.9),
    ]


def reserve_trace() -> list[AdmissionEvent]:
    """A write-then-check reservation, M = 2: a registered, b refused, c released."""
    return [
        E(1.0, 0, "reserve", "a", 1, view=1),
        E(1.1, 0, "reserve", "c", 1, view=2),
        E(1.2, 0, "reject", "b", 1, view=3),
        E(1.3, 0, "admit", "a", 1),
        E(1.5, 0, "release", "c", 1, t_before=1.4),
        E(2.0, 0, "finish", "a", 1, t_before=1.9),
    ]


def rules(trace: list[AdmissionEvent], mode: str = "check-then-write", cap: int = 1) -> list[str]:
    report = check_admission_trace(trace, num_servers=1, max_num_queued_reqs=cap, mode=mode)
    return [v.rule for v in report.violations]


def test_orc_tr_19_to_21_correct_traces_pass() -> None:
    """The correct traces of vLLM's path and of a reservation have no violation."""
    assert rules(two_check_trace()) == []
    assert rules(reserve_trace(), "write-then-check", cap=2) == []


def test_e2e_ren_5_wasted_renders_are_counted_from_the_records() -> None:
    """A reject after a passing preflight is a wasted render; a preflight refusal is not."""
    report = check_admission_trace(two_check_trace(), num_servers=1, max_num_queued_reqs=1)
    assert report.counts["wasted_render"] == 1
    assert report.counts["preflight"] == 2
    assert "wasted_render 1" in report.summary()
    report = check_admission_trace(
        reserve_trace(), num_servers=1, max_num_queued_reqs=2, mode="write-then-check"
    )
    assert report.counts["wasted_render"] == 0
    assert (report.counts["reserve"], report.counts["release"]) == (2, 1)


def test_orc_tr_19_registration_without_a_passing_preflight() -> None:
    """An admit whose preflight is missing, on a server that records preflights."""
    trace = two_check_trace()
    del trace[0]  # a's preflight
    assert rules(trace) == ["ORC-TR-19"]
    # A second registration of a request consumes no second pass.
    trace = [*two_check_trace(), E(2.1, 0, "admit", "a", 1, view=0)]
    assert rules(trace) == ["ORC-TR-19"]


def test_orc_tr_19_traces_without_preflight_records_are_not_judged() -> None:
    """A trace of a server that never renders (no preflight records) is unchanged."""
    trace = [E(1.0, 0, "admit", "a", 1, view=0), E(2.0, 0, "finish", "a", 1, t_before=1.9)]
    assert rules(trace) == []


def test_orc_tr_20_reservation_never_released() -> None:
    """c's release is missing: reported at c's reserve."""
    trace = [e for e in reserve_trace() if e.event != "release"]
    report = check_admission_trace(trace, num_servers=1, max_num_queued_reqs=2,
                                   mode="write-then-check")  # fmt: skip
    assert [(v.rule, v.line, v.event.request_id) for v in report.violations] == [
        ("ORC-TR-20", 2, "c")
    ]


@pytest.mark.parametrize(
    "fault",
    ["released twice", "released and registered", "reserved twice", "released with another n"],
)
def test_orc_tr_21_reservation_counted_twice(fault: str) -> None:
    """Each way of counting a reservation twice is ORC-TR-21."""
    trace = reserve_trace()
    if fault == "released twice":
        trace.insert(5, E(1.6, 0, "release", "c", 1, t_before=1.55))
    elif fault == "released and registered":
        trace.insert(3, E(1.25, 0, "release", "a", 1, t_before=1.2))
    elif fault == "reserved twice":
        trace.insert(2, E(1.15, 0, "reserve", "c", 1, view=2))
    else:
        trace[4] = E(1.5, 0, "release", "c", 2, t_before=1.4)
    assert rules(trace, "write-then-check", cap=2) == ["ORC-TR-21"]


def test_e2e_ren_4_held_reservations_are_what_a_reclaim_gives_back() -> None:
    """After the trace, only the reservations neither registered nor released are held."""
    trace = [e for e in reserve_trace() if e.event != "release"]
    assert held_reservations(trace, 0) == {"c": 1}
    assert held_reservations(reserve_trace(), 0) == {}
    assert held_reservations(trace, 1) == {}


def test_adm_ev_7_preflight_records_round_trip_and_refuse_tokens() -> None:
    """The new kinds go to JSON and back; a release carries no view, no record tokens."""
    for event in reserve_trace() + two_check_trace():
        assert E.from_json(event.to_json()) == event
    with pytest.raises(ValueError, match="ADM-EV-1: view must be None for a release"):
        E(1.0, 0, "release", "a", 1, view=0)
    with pytest.raises(ValueError, match="ADM-EV-1: tokens must be None for a reserve"):
        E(1.0, 0, "reserve", "a", 1, view=0, tokens=3)


def test_orc_tr_2_a_preflight_view_that_breaks_the_rule_is_reported() -> None:
    """ORC-TR-2, ORC-TR-7: a passing preflight or reservation is judged as a decision to
    admit: its view must pass the mode's rule and include the server's own count."""
    trace = two_check_trace()
    trace[1] = E(1.1, 0, "preflight", "b", 1, view=1)  # 1 + 1 > M = 1
    assert rules(trace) == ["ORC-TR-2"]
    trace = reserve_trace()
    trace[1] = E(1.1, 0, "reserve", "c", 1, view=3)  # 3 > M = 2
    assert rules(trace, "write-then-check", cap=2) == ["ORC-TR-2"]
    trace = reserve_trace()
    trace[0] = E(1.0, 0, "reserve", "a", 1, view=0)  # below its own reservation of 1
    assert rules(trace, "write-then-check", cap=2) == ["ORC-TR-7"]
