"""queueref.oracle.trace_bounds, clause by clause: the sweep order of the peak's measure.

Each expected peak is worked out by hand from specs/oracle.md (ORC-TR-17: the place of
the peak follows the measure of the mode, whose ties ADM-EV-4 and ADM-EV-5 order).
"""

from __future__ import annotations

import pytest
from trace_events import admit

from queueref.oracle import check_admission_trace
from queueref.oracle.trace_bounds import locate_peak
from queueref.oracle.trace_report import InFlight
from queueref.trace.events import AdmissionEvent

#: "b" is admitted at t = 2.0, the instant "a" wrote its departure (its `t_before`), and
#: the trace lists the admission first. The admitted measure (locked, write-then-check)
#: counts a departure at its `t_before` before an admission at that time: never two in
#: flight. The request measure counts the departure at `t` = 2.5: "a" and "b" together.
TIED = [
    admit(1.0, 0, "a", view=0),
    admit(2.0, 0, "b", view=1),
    AdmissionEvent(2.5, 0, "finish", "a", 1, t_before=2.0),
    AdmissionEvent(3.5, 0, "finish", "b", 1, t_before=3.0),
]


def test_sweep_order_counts_a_departure_at_t_before_ahead_of_a_tied_admission() -> None:
    """ORC-TR-17, ADM-EV-5: under the admitted measure the peak is 1, first reached by "a"
    at line 1, whatever order the trace lists the tie in; under the request measure it
    is 2, reached by "b" at line 2 with both in flight."""
    locked = check_admission_trace(TIED, 1, 2, mode="locked")
    assert (locked.measure, locked.max_in_flight, locked.violations) == (
        "max_admitted_in_flight",
        1,
        (),
    )
    assert locked.peak is not None
    assert (locked.peak.count, locked.peak.line, locked.peak.t) == (1, 1, 1.0)
    assert locked.peak.in_flight == (InFlight(0, "a", 1, 1),)
    plain = check_admission_trace(TIED, 1, 2)
    assert plain.peak is not None
    assert (plain.peak.count, plain.peak.line, plain.peak.t) == (2, 2, 2.0)
    assert plain.peak.in_flight == (InFlight(0, "a", 1, 1), InFlight(0, "b", 1, 2))


def test_locate_peak_takes_the_measure_by_name_only() -> None:
    """ORC-TR-17: which measure the peak follows is named at every call (`admitted=`): a
    bare bool in its place is refused, so no call can swap it for the files silently."""
    numbers = [1, 2, 3, 4]
    peak = locate_peak(TIED, numbers, None, admitted=True)
    assert peak is not None and (peak.count, peak.line) == (1, 1)
    with pytest.raises(TypeError, match="positional argument"):
        locate_peak(TIED, numbers, None, True)  # type: ignore[call-arg]


def test_sweep_order_counts_an_admission_ahead_of_a_departure_tied_at_t() -> None:
    """ORC-TR-17, ADM-EV-4: under the request measure an admission at `t` counts before a
    departure at that `t`, whatever order the trace lists them in: "a" finishing at 2.0,
    listed first, and "b" admitted at 2.0 are both in flight at the peak of 2, reached by
    "b" at line 3."""
    trace = [
        admit(1.0, 0, "a", view=0),
        AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.5),
        admit(2.0, 0, "b", view=0),
    ]
    report = check_admission_trace(trace, 1, 2)
    assert (report.measure, report.max_in_flight) == ("max_in_flight", 2)
    assert report.peak is not None
    assert (report.peak.count, report.peak.line, report.peak.t) == (2, 3, 2.0)
    assert report.peak.in_flight == (InFlight(0, "a", 1, 1), InFlight(0, "b", 1, 3))
