"""One spelling per protocol in the CLI (E2E-CLI-5): names in, names out.

`serve --admission`, `check-trace --mode`, `experiment --modes` and
`bound-table --protocol` take a protocol by its name, print that name, and
refuse any other value -- the old spellings `shared` and `reserve` included --
in one line. The expected texts are written out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from queueref.admission.protocol import Protocol, parse_protocol
from queueref.cli import experiment as experiment_command
from queueref.cli.main import build_parser, main
from queueref.oracle.trace_check import check_admission_trace
from queueref.runtime.experiment import ModeResult, timeline
from queueref.runtime.http.group import HttpServers
from queueref.runtime.loadgen import LoadReport
from queueref.trace.events import AdmissionEvent, write_jsonl

# The README's worst case of the overshoot bound: 3 servers, cap 2, four admitted at once.
WORST_CASE = [
    AdmissionEvent(1.0, 0, "admit", "first", 1, view=0),
    AdmissionEvent(2.0, 0, "admit", "a", 1, view=1),
    AdmissionEvent(2.1, 1, "admit", "b", 1, view=1),
    AdmissionEvent(2.2, 2, "admit", "c", 1, view=1),
    AdmissionEvent(3.0, 1, "reject", "d", 1, view=4),
    AdmissionEvent(4.0, 0, "finish", "first", 1, t_before=3.99),
    AdmissionEvent(4.1, 0, "finish", "a", 1, t_before=4.09),
    AdmissionEvent(4.2, 1, "finish", "b", 1, t_before=4.19),
    AdmissionEvent(4.3, 2, "finish", "c", 1, t_before=4.29),
]

# A trace line as queueref wrote it before the protocols had one name (no token fields).
OLD_TRACE_LINES = (
    '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"view":1}\n'
    '{"t":2.0,"server":0,"event":"finish","request_id":"a","n":1,"view":null,"t_before":1.9}\n'
)


def check_trace(
    path: Path, mode: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    code = main(["check-trace", str(path), "--cap", "2", "--servers", "3", "--mode", mode, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def worst_case(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    write_jsonl(WORST_CASE, path)
    return path


def test_check_trace_prints_the_protocol_name(
    worst_case: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-5, ORC-TR-11: `--mode check-then-write` is reported by that name, no note."""
    code, out, err = check_trace(worst_case, "check-then-write", capsys)
    assert code == 0 and err == ""
    assert out.splitlines()[0] == (
        f"{worst_case}: 9 events, 3 servers, cap M=2, W=1 (inferred: the largest n in the trace), "
        "mode check-then-write"
    )
    assert "bound: 4 -- holds" in out
    code, out, err = check_trace(worst_case, "check-then-write", capsys, "--json")
    assert code == 0 and err == ""
    assert json.loads(out)["mode"] == "check-then-write"


def test_check_trace_is_check_then_write_by_default(
    worst_case: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-5: without --mode the report names check-then-write (not `shared`)."""
    assert main(["check-trace", str(worst_case), "--cap", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["mode"] == "check-then-write"
    assert captured.err == ""


@pytest.mark.parametrize("old", ["shared", "reserve"])
def test_check_trace_refuses_an_old_spelling_in_one_line(
    worst_case: Path, old: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-5: `--mode shared` / `--mode reserve` is an unknown name: exit 2, one line
    naming the value and the choices, no report."""
    code, out, err = check_trace(worst_case, old, capsys, "--json")
    assert (code, out) == (2, "")
    assert err == (
        f"queueref check-trace: argument --mode: unknown admission protocol {old!r}: "
        "expected one of check-then-write, write-then-check, locked, local (see --help)\n"
    )


def test_old_traces_read_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-5, ORC-TR-9: a trace file holds no protocol name; an old one reads as before."""
    path = tmp_path / "old.jsonl"
    path.write_text(OLD_TRACE_LINES, encoding="utf-8")
    code, out, _ = check_trace(path, "write-then-check", capsys, "--json")
    assert code == 0
    report = json.loads(out)
    assert (report["mode"], report["num_events"], report["bound"]) == (
        "write-then-check",
        2,
        2,
    )


def test_check_trace_messages_name_the_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-5, ORC-TR-10: the forbidden-decision text names write-then-check, not reserve."""
    path = tmp_path / "no-t-before.jsonl"
    write_jsonl(
        [AdmissionEvent(1.0, 0, "admit", "a", 1, view=1), AdmissionEvent(2.0, 0, "finish", "a", 1)],
        path,
    )
    code, out, _ = check_trace(path, "write-then-check", capsys)
    assert code == 1
    assert "ORC-TR-10: write-then-check mode measures with t_before" in out
    assert "reserve" not in out


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        (
            ["check-trace", "x.jsonl", "--cap", "1", "--mode"],
            "check-then-write, write-then-check, locked, local",
        ),
        (["serve", "--admission"], "local, check-then-write, write-then-check"),
        (["experiment", "--modes"], "local, check-then-write, write-then-check"),
        (["bound-table", "--protocol"], "check-then-write, write-then-check"),
    ],
)
@pytest.mark.parametrize("bad", ["lock", "shared", "reserve"])
def test_an_unknown_protocol_is_one_line_naming_the_choices(
    command: list[str], choices: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-5, E2E-CLI-2: exit 2, one line on stderr naming the value and the choices by
    their names, nothing run; the old spellings `shared` and `reserve` are unknown names."""
    assert main([*command, bad]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"queueref {command[0]}: ")
    assert f"unknown admission protocol {bad!r}: expected one of {choices} (see" in line


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["check-trace"], "{check-then-write,write-then-check,locked,local}"),
        (["serve"], "{local,check-then-write,write-then-check}"),
        (["bound-table"], "{check-then-write,write-then-check}"),
    ],
)
def test_help_shows_the_names(
    command: list[str], shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-5: --help offers the names, and only them."""
    assert main([*command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse's wraps
    assert shown in out
    assert "(default check-then-write)" in out
    assert "deprecated" not in out and "default shared" not in out


def test_serve_parses_the_names(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-5, E2E-SRV-1: --admission gives the Protocol, and says nothing."""
    parser = build_parser()
    assert parser.parse_args(["serve"]).admission is Protocol.CHECK_THEN_WRITE
    assert parser.parse_args(["serve", "--admission", "local"]).admission is Protocol.LOCAL
    args = parser.parse_args(["serve", "--admission", "write-then-check"])
    assert args.admission is Protocol.WRITE_THEN_CHECK
    assert capsys.readouterr().err == ""


def test_serve_store_error_names_the_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-5, E2E-CLI-1: the --store refusal names check-then-write; nothing starts."""
    args = ["serve", "--store", "redis://127.0.0.1:1/0", "--node", "a", "--store-servers", "2"]
    assert main([*args, "--admission", "write-then-check"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "queueref serve: --store runs check-then-write through the store: "
        "use --admission check-then-write"
    )


def test_serve_group_takes_a_name_or_a_protocol() -> None:
    """E2E-CLI-5, E2E-SRV-1: the group accepts a name or a Protocol; not a typo, not an old
    spelling."""
    for mode in ("write-then-check", Protocol.WRITE_THEN_CHECK, "local"):
        assert HttpServers(2, 3, mode).mode == mode
    for bad in ("locked", "shared", "reserve"):
        with pytest.raises(ValueError) as caught:
            HttpServers(2, 3, bad)  # type: ignore[arg-type]
        assert str(caught.value) == (
            f"--admission must be one of local, check-then-write, write-then-check, got {bad!r}"
        )


def test_the_trace_checker_takes_the_names_and_reports_the_name() -> None:
    """E2E-CLI-5, ORC-TR-10: check_admission_trace knows the protocols by their names; the
    report names the protocol; a typo or an old spelling is refused."""
    events = [
        AdmissionEvent(1.0, 0, "admit", "a", 1, view=1),
        AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.5),
    ]
    for name in ("write-then-check", "check-then-write"):
        assert check_admission_trace(events, 2, 2, 1, mode=name).mode == name
    for old in ("shared", "reserve"):
        refused = f"ORC-TR-10: mode: unknown admission protocol {old!r}"
        with pytest.raises(ValueError, match=refused):
            check_admission_trace(events, 2, 2, 1, mode=old)
    # write-then-check's view holds the own reservation; check-then-write's need not
    assert check_admission_trace(events, 2, 2, 1, mode=Protocol.WRITE_THEN_CHECK).ok
    low = [AdmissionEvent(1.0, 0, "admit", "a", 1, view=0)]
    assert not check_admission_trace(low, 2, 2, 1, mode="write-then-check").ok
    assert check_admission_trace(low, 2, 2, 1, mode="check-then-write").ok
    with pytest.raises(ValueError, match="ORC-TR-10: mode: unknown admission protocol 'atomic'"):
        check_admission_trace(events, 2, 2, 1, mode="atomic")


def test_timeline_counts_write_then_check_departures_at_t_before() -> None:
    """E2E-CLI-5, E2E-EXP-1: write-then-check counts departures at t_before; the mode is
    typed by its name."""
    events = [
        AdmissionEvent(1.0, 0, "admit", "a", 1, view=1),
        AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.5),
    ]
    with pytest.raises(ValueError, match="unknown admission protocol 'reserve'"):
        timeline(events, "reserve")
    assert timeline(events, "write-then-check") == ([0.0, 0.5], [1, 0])
    assert timeline(events, "check-then-write") == ([0.0, 1.0], [1, 0])


def _result(mode: Any, num_servers: int, cap: int) -> ModeResult:
    """A mode's result from a hand-written trace, as `run_mode` assembles it."""
    own = 1 if parse_protocol(mode) is Protocol.WRITE_THEN_CHECK else 0  # it holds its own
    events = [
        AdmissionEvent(1.0, 0, "admit", "a", 1, view=own),
        AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.9),
    ]
    trace = check_admission_trace(events, num_servers, cap, 1, mode=mode)
    load = LoadReport("builtin", 1, 1.0, sent=1, status={200: 1})
    return ModeResult(mode, num_servers, cap, load, trace, events, [0] * num_servers, [], 0)


def test_experiment_runs_and_prints_the_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-5, E2E-EXP-1, E2E-EXP-2: --modes reach the run as Protocols; rows name them."""
    seen: list[Any] = []

    def fake_run(**options: Any) -> list[ModeResult]:
        seen.extend(options["modes"])
        return [_result(mode, options["num_servers"], options["cap"]) for mode in options["modes"]]

    monkeypatch.setattr(experiment_command, "run_experiment", fake_run)
    modes = "local,write-then-check"
    assert main(["experiment", "--servers", "2", "--cap", "3", "--modes", modes]) == 0
    captured = capsys.readouterr()
    assert seen == [Protocol.LOCAL, Protocol.WRITE_THEN_CHECK]
    assert captured.err == ""
    assert "| local | 1 | 6 | yes |" in captured.out
    assert "| write-then-check | 1 | 3 | yes |" in captured.out
    seen.clear()
    assert main(["experiment", "--servers", "2", "--cap", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["mode"], row["bound"]) for row in rows] == [
        ("local", 6),
        ("check-then-write", 4),
        ("write-then-check", 3),
    ]


def test_bound_table_takes_the_name_and_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-5, OB-TABLE-2: `--protocol write-then-check` explores write-then-check."""
    argv = ["bound-table", "--servers", "2", "--cap", "1", "--weight", "1", "--json"]
    assert main([*argv, "--protocol", "write-then-check"]) == 0
    captured = capsys.readouterr()
    (row,) = json.loads(captured.out)
    assert (row["protocol"], row["worst_total"], row["bound"]) == ("write-then-check", 1, 1)
    assert captured.err == ""
