"""`check_admission_trace` and `queueref check-trace`: recorded admission traces.

Hand-written traces with the verdicts written out from specs/admission.md and
specs/oracle.md; traces recorded by queueref's own `APIServer` fronts (which
must be judged clean); and malformed files, which must give one error line
naming the line and the field.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from trace_events import abort, admit, finish, reject

from queueref.admission.controller import AdmissionController, AdmissionMode
from queueref.admission.front import APIServer
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.admission.tracker import RequestTracker
from queueref.cli.main import main
from queueref.errors import AdmissionRejected
from queueref.oracle import TraceFormatError, check_admission_trace
from queueref.trace.events import AdmissionEvent, write_jsonl
from queueref.trace.files import read_trace


def rules(report: object) -> list[tuple[int, str]]:
    return [(v.line, v.rule) for v in report.violations]  # type: ignore[attr-defined]


# The worst case of ADM-BOUND-1 for N=3, M=2, W=1: server 0 holds one request,
# then all three read before any writes and each admits one: 4 in flight.
BOUND_REACHED = [
    admit(1.0, 0, "first", view=0),
    admit(2.0, 0, "a", view=1),
    admit(2.1, 1, "b", view=1),
    admit(2.2, 2, "c", view=1),
    reject(3.0, 1, "d", view=4),
    finish(4.0, 0, "first"),
    finish(4.1, 0, "a"),
    finish(4.2, 1, "b"),
    finish(4.3, 2, "c"),
]


def test_the_bound_reached_is_reported_and_holds() -> None:
    """ORC-TR-1, ADM-BOUND-1, ADM-EV-4: max in flight 4 = M + (N-1)*min(M, W), nothing forbidden."""
    report = check_admission_trace(BOUND_REACHED, num_servers=3, max_num_queued_reqs=2)
    assert (report.max_in_flight, report.bound, report.bound_holds) == (4, 4, True)
    assert report.violations == ()
    assert report.ok
    assert report.counts == {"admit": 4, "reject": 1, "finish": 4, "abort": 0}
    assert report.still_in_flight == 0
    assert report.measure == "max_in_flight"


def test_decisions_against_the_rule_are_flagged() -> None:
    """ORC-TR-2, ORC-TR-3, ADM-CTL-3: admit with view + n > M, reject with view + n <= M."""
    trace = [
        admit(1.0, 0, "a", view=1, n=2),  # 1 + 2 > 2: forbidden
        reject(2.0, 1, "b", view=0),  # 0 + 1 <= 2: forbidden
        reject(3.0, 1, "c", view=2),  # 2 + 1 > 2: fine
        reject(4.0, 1, "d", view=None),  # a token-limit rejection: not judged
    ]
    report = check_admission_trace(trace, 2, 2, max_n=2)
    assert rules(report) == [(1, "ORC-TR-2"), (2, "ORC-TR-3")]
    assert "admitted although not view 1 + n 2 <= cap 2" in str(report.violations[0])
    assert not report.ok


def test_departures_must_end_requests_in_flight() -> None:
    """ORC-TR-4, ADM-TRK-1, ADM-TRK-2, ADM-TRK-3: unknown, ended twice, wrong n, admitted twice."""
    trace = [
        admit(1.0, 0, "fan", view=0, n=3),  # children 0_fan, 1_fan, 2_fan
        finish(2.0, 0, "1_fan"),
        finish(2.1, 0, "1_fan"),  # already ended
        finish(2.2, 1, "0_fan"),  # unknown on server 1
        admit(2.3, 0, "fan", view=2),  # still in flight
        abort(3.0, 0, "fan", n=3),  # two children left, not three
        abort(3.1, 0, "fan", n=2),  # all ended already
        finish(3.2, 0, "ghost"),  # never admitted
    ]
    report = check_admission_trace(trace, 2, 5, max_n=3)
    assert rules(report) == [
        (3, "ORC-TR-4"),
        (4, "ORC-TR-4"),
        (5, "ORC-TR-4"),
        (6, "ORC-TR-4"),
        (7, "ORC-TR-4"),
        (8, "ORC-TR-4"),
    ]
    messages = [v.message for v in report.violations]
    assert "already ended on server 0" in messages[0]
    assert "unknown on server 1" in messages[1]
    assert "while" in messages[2] and "still in flight" in messages[2]
    assert "gives back n=3, but it ends 2" in messages[3]
    assert "already ended" in messages[4]
    assert "unknown" in messages[5]
    assert report.still_in_flight == 0


def test_server_range_and_time_order_per_server() -> None:
    """ORC-TR-5, ORC-TR-6: an index >= N, and time going back on one server (not across)."""
    trace = [
        admit(5.0, 0, "a", view=0),
        admit(1.0, 1, "b", view=1),  # earlier than server 0's event: fine
        finish(4.0, 0, "a"),  # back in time on server 0
        admit(6.0, 2, "c", view=1),  # server 2 of 2
    ]
    report = check_admission_trace(trace, num_servers=2, max_num_queued_reqs=3)
    assert rules(report) == [(3, "ORC-TR-6"), (4, "ORC-TR-5")]


def test_views_must_fit_the_servers_own_count() -> None:
    """ORC-TR-7, ADM-CTL-7: a server reads its own slot, so its view is at least its own count."""
    shared = [admit(1.0, 0, "a", view=0), admit(2.0, 0, "b", view=0)]
    assert rules(check_admission_trace(shared, 2, 5)) == [(2, "ORC-TR-7")]
    local = [admit(1.0, 0, "a", view=0), admit(2.0, 1, "b", view=0), admit(3.0, 0, "c", view=2)]
    report = check_admission_trace(local, 2, 5, mode="local")
    assert rules(report) == [(3, "ORC-TR-7")]
    assert "is not the server's own in-flight count 1" in report.violations[0].message


def test_admissions_heavier_than_max_n_are_flagged() -> None:
    """ORC-TR-8: the bound assumes every request takes at most W slots."""
    report = check_admission_trace([admit(1.0, 0, "a", view=0, n=2)], 2, 4, max_n=1)
    assert rules(report) == [(1, "ORC-TR-8")]


def test_a_broken_bound_is_reported() -> None:
    """ORC-TR-1: admissions without a recorded view cannot be judged, but the sweep still counts."""
    trace = [admit(1.0 + s, s, f"r{s}", view=None) for s in range(3)]
    report = check_admission_trace(trace, 3, 0)
    assert (report.max_in_flight, report.bound, report.bound_holds) == (3, 0, False)
    assert report.violations == ()
    assert not report.ok
    assert "bound: 0 -- BROKEN" in report.summary()


def test_modes_change_the_rule_the_measure_and_the_bound() -> None:
    """ORC-TR-10, ADM-CTL-9, ADM-BOUND-2, ADM-EV-5: reserve, locked and local modes."""
    # reserve: the view includes the own reservation; admit iff view <= M.
    reserve = [
        admit(1.0, 0, "a", view=1),
        admit(1.5, 1, "b", view=2),
        reject(2.0, 1, "c", view=3),
        finish(3.0, 0, "a"),
        admit(3.0, 1, "d", view=2),  # a's departure was written (t_before 2.99) before
    ]
    report = check_admission_trace(reserve, 2, 2, mode="write-then-check")
    assert report.violations == ()
    assert (report.measure, report.max_in_flight, report.bound) == ("max_admitted_in_flight", 2, 2)
    assert check_admission_trace(reserve, 2, 2, mode="check-then-write").max_in_flight == 3
    assert rules(
        check_admission_trace([admit(1.0, 0, "a", view=3)], 2, 2, mode="write-then-check")
    ) == [(1, "ORC-TR-2")]
    # reserve and locked need t_before on every departure.
    no_stamp = [admit(1.0, 0, "a", view=0), AdmissionEvent(2.0, 0, "finish", "a", 1)]
    report = check_admission_trace(no_stamp, 1, 1, mode="locked")
    assert rules(report) == [(2, "ORC-TR-10")]
    assert report.measure == "max_in_flight"
    # local: every server alone may hold M; the bound is N * M.
    local = [admit(1.0, s, f"r{s}", view=0) for s in range(3)]
    report = check_admission_trace(local, 3, 1, mode="local")
    assert (report.max_in_flight, report.bound, report.ok) == (3, 3, True)
    assert check_admission_trace(local, 3, 1, mode="check-then-write").bound == 3
    assert check_admission_trace(local, 3, 1, mode="locked").bound_holds is False


@pytest.mark.guard
def test_bad_parameters_are_rejected() -> None:
    """ORC-TR-10: unknown mode, N < 1, M < 0, W < 1."""
    for kwargs in (
        {"mode": "atomic"},
        {"num_servers": 0},
        {"max_num_queued_reqs": -1},
        {"max_n": 0},
    ):
        arguments = {"num_servers": 1, "max_num_queued_reqs": 1, "max_n": 1, **kwargs}
        with pytest.raises(ValueError, match="ORC-TR-10"):
            check_admission_trace([], **arguments)  # type: ignore[arg-type]


def recorded_trace(mode: AdmissionMode, seed: int, steps: int = 120) -> list[AdmissionEvent]:
    """A trace recorded by three queueref APIServer fronts sharing one counter array."""
    rng = random.Random(seed)
    clock = itertools.count(1)
    counters = [0] * SharedAdmissionStats.num_counters(3)
    events: list[AdmissionEvent] = []
    servers = []
    for index in range(3):
        stats = SharedAdmissionStats(counters, 3, index)
        controller = AdmissionController(
            3, tracker=RequestTracker(stats), shared_stats=stats, mode=mode
        )
        servers.append(
            APIServer(
                controller,
                server_index=index,
                record=events.append,
                clock=lambda: float(next(clock)),
            )
        )
    live: list[tuple[int, str, list[str]]] = []
    for step in range(steps):
        server = rng.randrange(3)
        choice = rng.random()
        if choice < 0.5:
            request_id = f"s{server}-{step}"
            try:
                live.append(
                    (server, request_id, servers[server].admit(request_id, rng.choice([1, 2])))
                )
            except AdmissionRejected:
                pass
        elif live and choice < 0.8:
            index, request_id, children = live[rng.randrange(len(live))]
            servers[index].finish(children.pop())
            if not children:
                live.remove((index, request_id, children))
        elif live:
            index, request_id, children = live.pop(rng.randrange(len(live)))
            servers[index].abort(request_id)
    return events


@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
def test_traces_recorded_by_queueref_servers_are_clean(mode: AdmissionMode, tmp_path: Path) -> None:
    """ORC-TR-1, ORC-TR-4, ADM-EV-3, ADM-FRONT-2: real fronts' records pass, also via a file."""
    for seed in range(3):
        events = recorded_trace(mode, seed)
        assert {e.event for e in events} == {"admit", "reject", "finish", "abort"}
        report = check_admission_trace(events, 3, 3, max_n=2, mode=mode)
        assert report.violations == (), report.summary()
        assert report.bound_holds
        path = tmp_path / f"{mode}-{seed}.jsonl"
        write_jsonl(events, path)
        assert check_admission_trace(path, 3, 3, max_n=2, mode=mode) == report


def test_a_tampered_recording_is_caught(tmp_path: Path) -> None:
    """ORC-TR-4, ORC-TR-2: a duplicated departure line and a forged view are found by line."""
    events = recorded_trace("check-then-write", 7)
    lines = [e.to_json() for e in events]
    departure = next(i for i, e in enumerate(events) if e.event == "finish")
    lines.insert(departure + 1, lines[departure])
    first_admit = next(i for i, e in enumerate(events) if e.event == "admit")
    forged = json.loads(lines[first_admit])
    forged["view"] = 3
    lines[first_admit] = json.dumps(forged)
    path = tmp_path / "tampered.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = check_admission_trace(path, 3, 3, max_n=2)
    found = rules(report)
    assert (first_admit + 1, "ORC-TR-2") in found
    assert (departure + 2, "ORC-TR-4") in found


MALFORMED = [
    ('{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"view":0}\nnot json\n', 2, None),
    ('{"t":1.0,"server":0,"event":"admit","request_id":"a","view":0}\n', 1, "n"),
    ('\n{"t":1.0,"server":0,"event":"admit","request_id":"a","n":0,"view":0}\n', 2, "n"),
    ('{"t":1.0,"server":-1,"event":"admit","request_id":"a","n":1}\n', 1, "server"),
    ('{"t":1.0,"server":0,"event":"admitted","request_id":"a","n":1}\n', 1, "event"),
    ('{"t":1.0,"server":0,"event":"finish","request_id":"a","n":1,"view":3}\n', 1, "view"),
    ('{"t":"soon","server":0,"event":"admit","request_id":"a","n":1}\n', 1, "t"),
    ('{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"colour":"red"}\n', 1, "colour"),
    ("[1, 2]\n", 1, None),
]


@pytest.mark.guard
@pytest.mark.parametrize(("text", "line", "field"), MALFORMED)
def test_malformed_lines_name_the_line_and_the_field(
    text: str, line: int, field: str | None, tmp_path: Path
) -> None:
    """ORC-TR-9, ADM-EV-1, ADM-EV-2: the first bad line, by number and field."""
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    if field is not None:
        assert f"field {field!r}" in str(caught.value)


def test_cli_reports_and_sets_the_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-11, ORC-TR-1: exit 0 when clean, 1 with a forbidden decision; --json is data."""
    good = tmp_path / "good.jsonl"
    write_jsonl(BOUND_REACHED, good)
    assert main(["check-trace", str(good), "--cap", "2", "--servers", "3"]) == 0
    out = capsys.readouterr().out
    assert "largest global in-flight count (max_in_flight): 4" in out
    assert "bound: 4 -- holds" in out and out.rstrip().endswith("OK")
    # Without --servers, N is taken from the trace (indices 0..2).
    assert main(["check-trace", str(good), "--cap", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["num_servers"], data["max_in_flight"], data["ok"]) == (3, 4, True)
    assert main(["check-trace", str(good), "--cap", "1", "--servers", "3"]) == 1
    out = capsys.readouterr().out
    assert "line 2: ORC-TR-2: admitted although not view 1 + n 1 <= cap 1" in out
    assert out.rstrip().endswith("FAILED")


@pytest.mark.guard
def test_cli_malformed_input_is_one_line_and_no_traceback(tmp_path: Path) -> None:
    """ORC-TR-9, ORC-TR-11: exit 2, one line on stderr naming line and field, in a real process."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"view":0}\n'
        '{"t":2.0,"server":0,"event":"finish","request_id":"a","n":"1"}\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "queueref", "check-trace", str(bad), "--cap", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert f"{bad}:2: field 'n': n must be an int >= 1" in done.stderr
    assert "Traceback" not in done.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "queueref", "check-trace", str(tmp_path / "nope"), "--cap", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert "Traceback" not in missing.stderr


# ---------------------------------------------------------------------------
# Untrusted traces: bounded resources, one line per malformed input (issue 12)

HUGE_N = 10**20


def _run_limited(
    args: list[str], memory_bytes: int, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`queueref ARGS` in a child whose address space (RLIMIT_AS) and CPU time are capped."""
    program = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({memory_bytes}, {memory_bytes}))\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (20, 20))\n"
        "from queueref.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_huge_n_costs_nothing_more_than_its_line(tmp_path: Path) -> None:
    """ORC-TR-12: n = 10^20 is one event: under a second, under 100 MB (it used to grow to GBs)."""
    path = tmp_path / "huge.jsonl"
    path.write_text(
        json.dumps(
            {"t": 1.0, "server": 0, "event": "admit", "request_id": "a", "n": HUGE_N, "view": 0}
        )
        + "\n"
        + json.dumps(
            {"t": 2.0, "server": 0, "event": "finish", "request_id": "7_a", "n": 1, "t_before": 1.5}
        )
        + "\n"
        + json.dumps(
            {
                "t": 3.0,
                "server": 0,
                "event": "abort",
                "request_id": "a",
                "n": HUGE_N - 1,
                "t_before": 2.5,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    done = _run_limited(
        ["check-trace", str(path), "--cap", str(HUGE_N), "--max-n", str(HUGE_N), "--json"],
        memory_bytes=100 << 20,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["max_in_flight"], data["still_in_flight"], data["violations"]) == (HUGE_N, 0, [])
    # In process: the replay itself, timed and measured.
    tracemalloc.start()
    try:
        started = time.process_time()  # CPU time: the machine may be busy
        report = check_admission_trace(path, 1, HUGE_N, HUGE_N)
        elapsed = time.process_time() - started
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok and report.max_in_flight == HUGE_N
    assert elapsed < 1.0 and peak < 100 << 20


def test_children_of_a_huge_request_are_tracked_without_listing_them() -> None:
    """ORC-TR-12, ORC-TR-4: finish twice, a child beyond n, re-admission: as with small n."""
    trace = [
        admit(1.0, 0, "a", view=0, n=HUGE_N),
        finish(2.0, 0, "5_a"),
        finish(2.1, 0, "5_a"),  # already ended
        finish(2.2, 0, f"{HUGE_N}_a"),  # child index n does not exist
        admit(2.3, 0, "3_a", view=HUGE_N - 1),  # a live child's id
        admit(2.4, 0, "0_b", view=HUGE_N - 1),  # fine: a request named like a child of b
        admit(2.5, 0, "b", view=HUGE_N, n=2),  # its child 0_b is in flight
        abort(3.0, 0, "a", n=HUGE_N - 1),
        finish(3.1, 0, "9_a"),  # the whole request ended
    ]
    report = check_admission_trace(trace, 1, 2 * HUGE_N, max_n=HUGE_N)
    assert rules(report) == [
        (3, "ORC-TR-4"),
        (4, "ORC-TR-4"),
        (5, "ORC-TR-4"),
        (7, "ORC-TR-4"),
        (9, "ORC-TR-4"),
    ]
    messages = [v.message for v in report.violations]
    assert "already ended" in messages[0] and "unknown" in messages[1]
    assert "['3_a']" in messages[2] and "['0_b']" in messages[3]
    assert "already ended" in messages[4]
    assert report.still_in_flight == 1  # 0_b


UNTRUSTED = [
    ('{"t":' + "[" * 100_000 + "]" * 100_000 + "}\n", 1, None, "nested too deeply"),
    (
        '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":' + "9" * 5000 + "}\n",
        1,
        None,
        "not valid JSON",
    ),
    (
        '{"t":1.0,"server":0,"event":"admit","request_id":"' + "x" * (1 << 20) + '","n":1}\n',
        1,
        None,
        "longer than",
    ),
    (b'{"t":1.0,"server":0,"event":"admit","request_id":"\xff","n":1}\n', 1, None, "UTF-8"),
    ('{"t":NaN,"server":0,"event":"admit","request_id":"a","n":1}\n', 1, "t", "finite"),
    ('{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1.5}\n', 1, "n", "int"),
]


@pytest.mark.guard
@pytest.mark.parametrize(("text", "line", "field", "words"), UNTRUSTED)
def test_untrusted_lines_are_one_line_errors(
    text: str | bytes, line: int, field: str | None, words: str, tmp_path: Path
) -> None:
    """ORC-TR-9, ORC-TR-12: deep nesting, huge numbers, huge lines, bad bytes: exit 2, one line."""
    path = tmp_path / "bad.jsonl"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    assert words in str(caught.value)
    done = _run_limited(["check-trace", str(path), "--cap", "1"], 200 << 20, 30)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and len(done.stderr) < 500, done.stderr
    assert done.stderr.startswith(f"queueref check-trace: {path}:{line}: ")


@pytest.mark.guard
def test_a_server_index_out_of_range_is_an_error_not_a_larger_bound(tmp_path: Path) -> None:
    """ORC-TR-11: an index >= --servers, or a gap when N is inferred, is exit 2 at its line."""
    path = tmp_path / "far.jsonl"
    write_jsonl([admit(1.0, 0, "a", view=0), admit(2.0, 99, "b", view=0)], path)
    for extra, words in (([], "pass --servers N"), (["--servers", "2"], "not below --servers 2")):
        done = subprocess.run(
            [sys.executable, "-m", "queueref", "check-trace", str(path), "--cap", "1", *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == f"queueref check-trace: {path}:2: field 'server': " + (
            "server 99, but only 2 server indices occur in the trace: pass --servers N\n"
            if not extra
            else "server 99 is not below --servers 2\n"
        )
        assert words in done.stderr


def test_a_trace_folder_is_read_per_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-13: server-<i>.jsonl files merged by t; N from the files; misplaced events refused."""
    folder = tmp_path / "run"
    folder.mkdir()
    for index in range(3):
        write_jsonl(
            [e for e in BOUND_REACHED if e.server == index], folder / f"server-{index}.jsonl"
        )
    assert main(["check-trace", str(folder), "--cap", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["num_servers"], data["num_events"], data["max_in_flight"]) == (3, 9, 4)
    assert main(["check-trace", str(folder), "--cap", "1"]) == 1
    out = capsys.readouterr().out
    assert f"{folder / 'server-0.jsonl'}:2: ORC-TR-2" in out
    # An event of server 1 in server 0's file, and a file beyond --servers.
    write_jsonl([admit(1.0, 1, "x", view=0)], folder / "server-0.jsonl")
    assert main(["check-trace", str(folder), "--cap", "2"]) == 2
    assert capsys.readouterr().err == (
        f"queueref check-trace: {folder / 'server-0.jsonl'}:1: field 'server': "
        "server 1 in the file of server 0\n"
    )
    assert main(["check-trace", str(folder), "--cap", "2", "--servers", "2"]) == 2
    assert "a trace file of server 2, but there are 2 servers" in capsys.readouterr().err
    (folder / "server-1.jsonl").unlink()
    assert main(["check-trace", str(folder), "--cap", "2"]) == 2
    assert "the trace files of servers [1] are missing" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["check-trace", str(empty), "--cap", "2"]) == 2
    assert capsys.readouterr().err == (
        f"queueref check-trace: {empty}: no server-<i>.jsonl trace file in this folder\n"
    )


def test_an_empty_trace_file_is_checked_only_when_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORC-TR-11, ORC-TR-18: no events: exit 2; with --allow-empty one server, exit 0."""
    path = tmp_path / "empty.jsonl"
    path.write_text("\n", encoding="utf-8")
    assert main(["check-trace", str(path), "--cap", "1"]) == 2
    assert "the trace holds no events" in capsys.readouterr().err
    assert main(["check-trace", str(path), "--cap", "1", "--allow-empty"]) == 0
    assert "0 events, 1 servers" in capsys.readouterr().out
