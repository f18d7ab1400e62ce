"""check-trace infers W, locates a broken bound's peak, and refuses an empty trace.

ORC-TR-16 (W read off the trace), ORC-TR-17 (the line, time and in-flight set
of the peak), ORC-TR-18 (an empty trace is exit 2 unless --allow-empty). Every
verdict below is written out by hand from specs/oracle.md; each clause's
check is also run against a broken variant of the checker (patched in with
`monkeypatch`) and must fail on it, for the reason it claims.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from trace_events import abort, admit, finish, reject

import queueref.oracle.trace_bounds as trace_bounds
import queueref.oracle.trace_check as trace_check
from queueref.admission.controller import AdmissionMode
from queueref.cli.main import main
from queueref.oracle import check_admission_trace
from queueref.oracle.trace_report import InFlight, Peak, TraceReport
from queueref.trace.events import AdmissionEvent, write_jsonl

# ---------------------------------------------------------------------------
# ORC-TR-16: W inferred from the trace

# Two servers, M = 2, each admits one request of n = 2 on a view of 0: four slots in
# flight, exactly the bound M + (N-1)*min(M, W) = 2 + 1*2 = 4 of W = 2. With W = 1
# the bound would be 3 (broken) and both admissions ORC-TR-8 violations.
TWO_OF_TWO = [
    admit(1.0, 0, "x", view=0, n=2),
    admit(1.1, 1, "y", view=0, n=2),
    finish(2.0, 0, "x", n=2),
    finish(2.1, 1, "y", n=2),
]


def assert_w_is_inferred(check: Callable[..., TraceReport]) -> None:
    """The n = 2 trace passes with W = 2 read off it; an explicit W = 1 still fails it."""
    report = check(TWO_OF_TWO, 2, 2)
    assert (report.max_n, report.max_n_inferred) == (2, True)
    assert (report.max_in_flight, report.bound, report.bound_holds) == (4, 4, True)
    assert report.violations == () and report.ok
    assert "W=2 (inferred: the largest n in the trace)" in report.summary()
    assert report.to_dict()["max_n_inferred"] is True
    given = check(TWO_OF_TWO, 2, 2, max_n=1)
    assert (given.max_n, given.max_n_inferred, given.bound) == (1, False, 3)
    assert [(v.line, v.rule) for v in given.violations] == [(1, "ORC-TR-8"), (2, "ORC-TR-8")]
    assert "inferred" not in given.summary()
    assert given.to_dict()["max_n_inferred"] is False


def test_w_is_inferred_from_the_trace_when_not_given() -> None:
    """ORC-TR-16: a correct two-server trace of n = 2 passes without max_n."""
    assert_w_is_inferred(check_admission_trace)


def test_a_checker_that_ignores_the_inferred_w_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORC-TR-16: with W fixed at 1 (the old default) the same check fails."""
    monkeypatch.setattr(trace_check, "infer_max_n", lambda events: 1)
    with pytest.raises(AssertionError):
        assert_w_is_inferred(check_admission_trace)


# A rejected request of n = 3 on a view of 0 (0 + 3 > M = 2): it was sent with n = 3.
REJECTED_HEAVY = [
    admit(1.0, 0, "a", view=0),
    reject(1.5, 1, "heavy", view=0, n=3),
    finish(2.0, 0, "a"),
]


def assert_a_rejected_n_counts(check: Callable[..., TraceReport]) -> None:
    report = check(REJECTED_HEAVY, 2, 2)
    assert (report.max_n, report.max_n_inferred) == (3, True)
    assert report.bound == 2 + 1 * min(2, 3)
    assert report.ok


def test_a_rejected_request_counts_for_w() -> None:
    """ORC-TR-16: W is the largest n admitted or rejected; 1 without either."""
    assert_a_rejected_n_counts(check_admission_trace)
    nothing = check_admission_trace([], 1, 2)
    assert (nothing.max_n, nothing.max_n_inferred) == (1, True)


def test_inferring_w_from_admissions_only_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORC-TR-16: a variant that forgets the rejected requests infers W = 1 and fails."""

    def admitted_only(events: Sequence[AdmissionEvent]) -> int:
        return max((e.n for e in events if e.event == "admit"), default=1)

    monkeypatch.setattr(trace_check, "infer_max_n", admitted_only)
    with pytest.raises(AssertionError):
        assert_a_rejected_n_counts(check_admission_trace)


def test_the_cli_infers_w_and_max_n_still_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-16, ORC-TR-11: exit 0 without --max-n, exit 1 with --max-n 1 (ORC-TR-8)."""
    path = tmp_path / "two.jsonl"
    write_jsonl(TWO_OF_TWO, path)
    assert main(["check-trace", str(path), "--cap", "2"]) == 0
    out = capsys.readouterr().out
    assert "W=2 (inferred: the largest n in the trace)" in out
    assert "bound: 4 -- holds" in out and out.rstrip().endswith("OK")
    assert main(["check-trace", str(path), "--cap", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["max_n"], data["max_n_inferred"], data["bound"]) == (2, True, 4)
    assert main(["check-trace", str(path), "--cap", "2", "--max-n", "1"]) == 1
    out = capsys.readouterr().out
    assert "line 1: ORC-TR-8: admitted n=2 > max_n=1" in out
    assert "W=1, mode" in out and "inferred" not in out
    assert main(["check-trace", str(path), "--cap", "2", "--max-n", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["max_n"], data["max_n_inferred"], data["bound"]) == (3, False, 4)


# ---------------------------------------------------------------------------
# ORC-TR-17: where a broken bound peaks

# N = 2, M = 2, every n = 1 (W = 1): the bound is 3. Each server holds two requests
# on legal views, so nothing is forbidden and the count reaches 4. The file lists
# server 1's events first: in time order the peak is line 2 (e at t = 2.8) with
# b, d, c, e in flight; a walk in file order never gets past 2.
PEAK_TRACE = [
    admit(2.6, 1, "c", view=0),  # line 1
    admit(2.8, 1, "e", view=1),  # line 2: the peak, 4 in flight
    finish(3.0, 1, "c"),  # line 3
    finish(4.2, 1, "e"),  # line 4
    admit(1.0, 0, "a", view=0),  # line 5
    admit(1.5, 0, "b", view=1),  # line 6
    finish(2.0, 0, "a"),  # line 7: a is gone before the peak
    admit(2.2, 0, "d", view=1),  # line 8
    reject(3.5, 0, "f", view=3),  # line 9
    finish(4.0, 0, "b"),  # line 10
    finish(4.1, 0, "d"),  # line 11
]

PEAK_IN_FLIGHT = (
    InFlight(0, "b", 1, 6),
    InFlight(0, "d", 1, 8),
    InFlight(1, "c", 1, 1),
    InFlight(1, "e", 1, 2),
)


def assert_peak_located(check: Callable[..., TraceReport]) -> None:
    """The peak of PEAK_TRACE is line 2 at t = 2.8 with b, d, c, e in flight."""
    report = check(PEAK_TRACE, 2, 2)
    assert (report.max_in_flight, report.bound, report.bound_holds) == (4, 3, False)
    assert report.violations == ()
    assert report.peak == Peak(4, 2.8, 2, PEAK_TRACE[1], PEAK_IN_FLIGHT)


def test_a_broken_bound_names_the_line_time_and_requests_of_its_peak() -> None:
    """ORC-TR-17: the peak in time order, not in file order; ended requests not listed."""
    assert_peak_located(check_admission_trace)
    text = check_admission_trace(PEAK_TRACE, 2, 2).summary()
    assert (
        "largest global in-flight count (max_in_flight): 4\n"
        "  reached at line 2 (t=2.8): server 1 admitting 'e'\n"
        "bound: 3 -- BROKEN\n"
        "  in flight at the peak: 4 request(s) holding 4 slot(s)\n"
        "    server 0 'b' holding 1 (admitted at line 6)\n"
        "    server 0 'd' holding 1 (admitted at line 8)\n"
        "    server 1 'c' holding 1 (admitted at line 1)\n"
        "    server 1 'e' holding 1 (admitted at line 2)\n"
    ) in text


def test_a_peak_found_in_file_order_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORC-TR-17: a variant that sweeps in trace order, not by time, points elsewhere."""

    def file_order(
        events: Sequence[AdmissionEvent], admitted: bool
    ) -> list[tuple[float, int, int]]:
        return [(e.t, 0, i) for i, e in enumerate(events) if e.event != "reject"]

    monkeypatch.setattr(trace_bounds, "_sweep_order", file_order)
    with pytest.raises(AssertionError):
        assert_peak_located(check_admission_trace)


def test_the_cli_reports_the_peak_as_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-17, ORC-TR-11: exit 1; the text names line 2; --json holds the whole peak."""
    path = tmp_path / "peak.jsonl"
    write_jsonl(PEAK_TRACE, path)
    assert main(["check-trace", str(path), "--cap", "2"]) == 1
    out = capsys.readouterr().out
    assert "  reached at line 2 (t=2.8): server 1 admitting 'e'\nbound: 3 -- BROKEN" in out
    assert "    server 0 'd' holding 1 (admitted at line 8)" in out
    assert main(["check-trace", str(path), "--cap", "2", "--json"]) == 1
    peak = json.loads(capsys.readouterr().out)["peak"]
    assert peak == {
        "count": 4,
        "t": 2.8,
        "file": None,
        "line": 2,
        "event": PEAK_TRACE[1].to_json(),
        "in_flight": [
            {"server": 0, "request_id": "b", "slots": 1, "file": None, "line": 6},
            {"server": 0, "request_id": "d", "slots": 1, "file": None, "line": 8},
            {"server": 1, "request_id": "c", "slots": 1, "file": None, "line": 1},
            {"server": 1, "request_id": "e", "slots": 1, "file": None, "line": 2},
        ],
    }


def peak_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    for server in (0, 1):
        write_jsonl(
            [e for e in PEAK_TRACE if e.server == server], folder / f"server-{server}.jsonl"
        )
    return folder


def assert_folder_peak_located(check: Callable[..., TraceReport], folder: Path) -> None:
    """In a folder the peak is server-1.jsonl:2 and each request names its own file's line."""
    zero, one = str(folder / "server-0.jsonl"), str(folder / "server-1.jsonl")
    report = check(folder, 2, 2)
    assert report.peak is not None
    assert (report.peak.file, report.peak.line, report.peak.t) == (one, 2, 2.8)
    assert report.peak.in_flight == (
        InFlight(0, "b", 1, 2, zero),
        InFlight(0, "d", 1, 4, zero),
        InFlight(1, "c", 1, 1, one),
        InFlight(1, "e", 1, 2, one),
    )
    assert f"  reached at {one}:2 (t=2.8)" in report.summary()
    assert f"(admitted at {zero}:4)" in report.summary()


def test_a_folder_peak_names_the_file_and_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-17, ORC-TR-13: file:line of the peak and of each request in flight there."""
    folder = peak_folder(tmp_path)
    assert_folder_peak_located(check_admission_trace, folder)
    assert main(["check-trace", str(folder), "--cap", "2"]) == 1
    assert f"  reached at {folder / 'server-1.jsonl'}:2 (t=2.8)" in capsys.readouterr().out


@pytest.mark.parametrize("variant", ["no files", "merged positions"])
def test_a_folder_peak_at_the_wrong_place_is_caught(
    variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORC-TR-17: without the files, or with the merged order's positions, the place is wrong."""
    real = trace_bounds.locate_peak

    def broken(
        events: Sequence[AdmissionEvent],
        numbers: Sequence[int],
        files: Sequence[str] | None,
        *,
        admitted: bool,
    ) -> Peak | None:
        if variant == "no files":
            return real(events, numbers, None, admitted=admitted)
        return real(events, range(1, len(events) + 1), files, admitted=admitted)

    monkeypatch.setattr(trace_check, "locate_peak", broken)
    with pytest.raises(AssertionError):
        assert_folder_peak_located(check_admission_trace, peak_folder(tmp_path))


# Server 0's request a leaves at t = 2.0 having written its slot at t_before 1.99;
# server 1 admits b at 1.995. Counted at t (max_in_flight) a and b overlap: the peak
# is b, line 3. Counted from t_before (max_admitted_in_flight, locked mode) they never
# do: the count first reaches 1 at a, line 1.
MEASURED = [
    admit(1.0, 0, "a", view=0),
    finish(2.0, 0, "a"),
    admit(1.995, 1, "b", view=0),
    finish(3.0, 1, "b"),
]


def assert_peak_follows_the_measure(check: Callable[..., TraceReport]) -> None:
    plain = check(MEASURED, 2, 1, mode="check-then-write").peak
    assert plain is not None
    assert (plain.count, plain.line, [r.request_id for r in plain.in_flight]) == (2, 3, ["a", "b"])
    locked = check(MEASURED, 2, 1, mode="locked").peak
    assert locked is not None
    assert (locked.count, locked.line, [r.request_id for r in locked.in_flight]) == (1, 1, ["a"])


def test_the_peak_follows_the_measure_of_the_mode() -> None:
    """ORC-TR-17, ADM-EV-4, ADM-EV-5: departures count at t, or at t_before when admitted."""
    assert_peak_follows_the_measure(check_admission_trace)


def test_a_peak_that_ignores_the_measure_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORC-TR-17: a variant that always sweeps departures at t points at line 3 in locked mode."""
    real = trace_bounds.locate_peak

    def at_t(
        events: Sequence[AdmissionEvent],
        numbers: Sequence[int],
        files: Sequence[str] | None,
        *,
        admitted: bool,
    ) -> Peak | None:
        return real(events, numbers, files, admitted=False)

    monkeypatch.setattr(trace_check, "locate_peak", at_t)
    with pytest.raises(AssertionError):
        assert_peak_follows_the_measure(check_admission_trace)


def test_a_child_departure_leaves_its_parent_holding_the_rest() -> None:
    """ORC-TR-17, ADM-TRK-1: after 1_fan finishes, fan holds 2 of its 3 slots at the peak."""
    trace = [
        admit(1.0, 0, "fan", view=0, n=3),
        finish(2.0, 0, "1_fan"),
        admit(2.5, 1, "x", view=0, n=2),
        abort(3.0, 0, "fan", n=2),
        finish(3.5, 1, "0_x"),
        finish(3.6, 1, "1_x"),
    ]
    report = check_admission_trace(trace, 2, 5)
    assert report.violations == () and report.max_n == 3
    assert report.peak == Peak(
        4, 2.5, 3, trace[2], (InFlight(0, "fan", 2, 1), InFlight(1, "x", 2, 3))
    )


def test_equal_times_peak_at_the_later_line_and_nothing_in_flight_is_no_peak() -> None:
    """ORC-TR-17: ties keep the trace order; a trace of rejections has no peak (null)."""
    tied = check_admission_trace([admit(1.0, 0, "a", view=0), admit(1.0, 1, "b", view=0)], 2, 1)
    assert tied.peak is not None and (tied.peak.line, tied.peak.count) == (2, 2)
    rejected = check_admission_trace([reject(1.0, 0, "a", view=1)], 1, 1)
    assert rejected.peak is None and rejected.to_dict()["peak"] is None
    assert "reached at" not in rejected.summary()


def test_the_text_lists_ten_requests_in_flight_and_the_json_all() -> None:
    """ORC-TR-17: twelve in flight over a bound of 0: ten lines, then '... and 2 more'."""
    trace = [admit(1.0 + k, 0, f"r{k}", view=None) for k in range(12)]
    report = check_admission_trace(trace, 1, 0)
    text = report.summary()
    assert "  in flight at the peak: 12 request(s) holding 12 slot(s)" in text
    assert "    server 0 'r9' holding 1 (admitted at line 10)" in text
    assert "'r10'" not in text
    assert "    ... and 2 more (--json lists them all)" in text
    listed = report.to_dict()["peak"]["in_flight"]
    assert [r["request_id"] for r in listed] == [f"r{k}" for k in range(12)]


def test_a_holding_bound_names_the_peak_but_lists_nothing() -> None:
    """ORC-TR-17: when the bound holds the text gives the place of the peak only."""
    text = check_admission_trace(TWO_OF_TWO, 2, 2).summary()
    assert "  reached at line 2 (t=1.1): server 1 admitting 'y'\nbound: 4 -- holds" in text
    assert "in flight at the peak" not in text


# ---------------------------------------------------------------------------
# ORC-TR-18: an empty trace is refused unless --allow-empty


@pytest.mark.guard
def test_an_empty_trace_is_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-18: an empty file and a folder of empty files: exit 2, one line; 0 when allowed."""
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    folder = tmp_path / "run"
    folder.mkdir()
    for server in (0, 1):
        (folder / f"server-{server}.jsonl").write_text("\n", encoding="utf-8")
    for target in (path, folder):
        assert main(["check-trace", str(target), "--cap", "1"]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err == (
            f"queueref check-trace: {target}: the trace holds no events, nothing to check "
            "(pass --allow-empty to accept it)\n"
        )
    assert main(["check-trace", str(path), "--cap", "1", "--allow-empty"]) == 0
    assert "0 events, 1 servers" in capsys.readouterr().out
    assert main(["check-trace", str(folder), "--cap", "1", "--allow-empty", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["num_events"], data["num_servers"], data["peak"], data["ok"]) == (0, 2, None, True)


def test_a_trace_of_rejections_only_is_not_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-18: only a trace with no event at all is refused; one rejection is checked."""
    path = tmp_path / "rejected.jsonl"
    write_jsonl([reject(1.0, 0, "a", view=1)], path)
    assert main(["check-trace", str(path), "--cap", "1"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("OK")


@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
def test_the_peak_of_recorded_traces_agrees_with_the_sweep(mode: AdmissionMode) -> None:
    """ORC-TR-17, ADM-EV-4, ADM-EV-5: on traces of real fronts the peak's count is the
    measure (computed apart, by queueref.trace.events) and the requests in flight hold it all."""
    from test_check_trace import recorded_trace

    for seed in range(3):
        events = recorded_trace(mode, seed)
        report = check_admission_trace(events, 3, 3, mode=mode)
        assert report.violations == () and report.peak is not None
        assert report.peak.count == report.max_in_flight > 0
        assert sum(request.slots for request in report.peak.in_flight) == report.peak.count
        assert report.peak.event.event == "admit"
        assert report.peak.event is events[report.peak.line - 1]
