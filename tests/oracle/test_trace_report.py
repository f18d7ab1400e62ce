"""queueref.oracle.trace_report, clause by clause: the report's values and its text.

Each expected text and value is written out from specs/oracle.md (ORC-TR-1, ORC-TR-16,
ORC-TR-17), not computed by the report.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from trace_events import admit

from queueref.oracle import check_admission_trace
from queueref.oracle.trace_report import SHOWN_IN_FLIGHT, InFlight, TraceReport


@pytest.mark.parametrize(
    ("in_flight", "more"),
    [
        (7, None),  # fewer than ten: all listed, no "more" line
        (10, None),  # exactly ten: all listed, no "more" line
        (11, "    ... and 1 more (--json lists them all)"),
        (25, "    ... and 15 more (--json lists them all)"),
    ],
)
def test_peak_lines_list_ten_and_count_the_rest(in_flight: int, more: str | None) -> None:
    """ORC-TR-17: over a bound of 0 the text lists the first ten requests in flight at the
    peak and says how many more there are, only when there are more."""
    assert SHOWN_IN_FLIGHT == 10
    trace = [admit(1.0 + k, 0, f"r{k}", view=None) for k in range(in_flight)]
    text = check_admission_trace(trace, 1, 0).summary().splitlines()
    listed = [line for line in text if line.startswith("    server 0 ")]
    assert listed == [
        f"    server 0 'r{k}' holding 1 (admitted at line {k + 1})"
        for k in range(min(in_flight, 10))
    ]
    extra = [line for line in text if line.startswith("    ... and ")]
    assert extra == ([] if more is None else [more])


def test_an_in_flight_request_is_an_immutable_hashable_value() -> None:
    """ORC-TR-17: a request in flight at the peak is a value: its fields cannot be
    rebound, equal ones hash alike (a set of them keeps one), and a copy through pickle
    or deepcopy is equal to it."""
    request = InFlight(0, "a", 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.slots = 5  # type: ignore[misc]
    assert request.slots == 2
    again = InFlight(0, "".join(["", "a"]), 2, 3)
    assert {request, again} == {request}
    assert pickle.loads(pickle.dumps(request)) == request
    assert copy.deepcopy(request) == request


def test_max_n_inferred_is_false_unless_told() -> None:
    """ORC-TR-16: a report built without saying W was inferred says it was given: no
    "(inferred ...)" in its text, `max_n_inferred` false in its JSON."""
    report = TraceReport(
        mode="check-then-write",
        num_servers=1,
        max_num_queued_reqs=2,
        max_n=3,
        num_events=0,
        max_in_flight=0,
        measure="max_in_flight",
        bound=2,
        bound_holds=True,
        violations=(),
    )
    assert report.max_n_inferred is False
    assert report.to_dict()["max_n_inferred"] is False
    assert report.summary().splitlines()[0] == (
        "0 events, 1 servers, cap M=2, W=3, mode check-then-write"
    )
