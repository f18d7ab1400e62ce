"""One convention for every command (E2E-CLI-2): durations, finite numbers, one-line
usage errors with exit 2, --version, quiet broken pipes, exit codes in --help."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from queueref.cli.args import parse_duration
from queueref.cli.main import COMMANDS, main
from queueref.trace.events import AdmissionEvent, write_jsonl


@pytest.mark.parametrize(
    ("text", "seconds"), [("2s", 2.0), ("500ms", 0.5), ("1m", 60.0), ("3", 3.0), ("0.25", 0.25)]
)
def test_durations(text: str, seconds: float) -> None:
    """E2E-CLI-2: 2s, 500ms, 1m and plain seconds."""
    assert parse_duration(text) == seconds


@pytest.mark.guard
@pytest.mark.parametrize("text", ["", "soon", "1h", "-1s", "nan", "inf", "1e999"])
def test_bad_durations(text: str) -> None:
    """E2E-CLI-2: anything else is refused."""
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def exit_status(argv: list[str]) -> int:
    """The exit status of `queueref ARGV`, whether argparse exits or the command returns."""
    try:
        return main(argv)
    except SystemExit as stopped:
        assert isinstance(stopped.code, int)
        return stopped.code


USAGE_ERRORS = [
    ["serve", "--service-time-ms", "inf"],
    ["serve", "--service-time-ms", "nan"],
    ["serve", "--duration", "soon"],
    ["serve", "--servers", "x"],
    ["serve", "--worker-timeout", "0"],
    ["load", "--duration", "inf"],
    ["load", "--concurrency", "0"],
    ["experiment", "--service-time-ms", "-inf"],
    ["experiment", "--duration", "-2s"],
    ["check-trace", "x.jsonl", "--cap", "nan"],
    ["check-trace", "x.jsonl"],
    ["bound-table", "--max-states", "inf"],
    ["no-such-command"],
    [],
]


@pytest.mark.guard
@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=lambda argv: " ".join(argv) or "nothing")
def test_usage_errors_are_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-2: argparse's two-line usage dump is one line naming the command and problem."""
    assert exit_status(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    command = argv[0] if argv and argv[0] in COMMANDS else None
    assert captured.err.startswith(f"queueref {command}: " if command else "queueref: ")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-2: queueref --version."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "queueref 0.1.0"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_the_exit_codes(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-2: every --help ends with the command's exit statuses."""
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "exit status:" in out
    tail = out.split("exit status:")[1]
    assert "  0  " in tail and "  2  " in tail


def test_broken_pipe_is_quiet(tmp_path: Path) -> None:
    """E2E-CLI-2: `check-trace --json | head -1` prints no traceback."""
    path = tmp_path / "trace.jsonl"
    events = [AdmissionEvent(float(i), 0, "reject", f"r{i}", 1, view=0) for i in range(1, 5000)]
    write_jsonl(events, path)
    command = f"{sys.executable} -m queueref check-trace {path} --cap 1 --json | head -c 10"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == '{\n  "ok": '  # 5,000 violations: far more than a pipe buffer
    assert done.stderr == "", done.stderr
    assert done.returncode == 141


def test_bound_table_clamps_weights_above_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-3: W above the largest M is clamped with a note (it used to run on and on)."""
    argv = ["bound-table", "--servers", "2", "--cap", "0-2", "--weight", "1-99999999999999"]
    assert exit_status([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert [(row["cap"], row["weight"]) for row in rows] == [
        (m, w) for m in (0, 1, 2) for w in (1, 2)
    ]
    assert captured.err == (
        "queueref bound-table: note: weights above the largest cap M=2 admit nothing a weight "
        "of M does not; using --weight 1-2\n"
    )


@pytest.mark.guard
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--servers", "1-99999999999999"], "rows is more than 1000"),
        (["--servers", "40", "--cap", "3", "--weight", "3"], "about 10^36 states"),
    ],
)
def test_bound_table_refuses_absurd_ranges(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-CLI-3: too many rows or states: one line, exit 2, unless --force."""
    assert exit_status(["bound-table", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "--force" in err


def test_experiment_and_load_have_json_and_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-LOAD-2, E2E-EXP-2, E2E-CLI-4: --json and --quiet are offered."""
    for command in ("load", "experiment"):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert "--json" in out and "--quiet" in out


class _Answer200(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the load generator expects

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tiny_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer200)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_load_json_and_progress(
    tiny_server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """E2E-LOAD-2, E2E-CLI-4: --json is one object; progress on a tty, none with --quiet."""
    argv = ["load", "--url", tiny_server, "--client", "builtin", "-c", "2", "--duration", "1.6s"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["client"] == "builtin" and report["ok"] == report["sent"] > 0
    assert report["status"] == {"200": report["ok"]}
    progress = captured.err.splitlines()
    assert progress and all(line.startswith("queueref load: ") for line in progress)
    assert "requests sent" in progress[0]
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert main(argv) == 0
    assert capsys.readouterr().err == ""  # not a terminal: no progress


def test_bound_table_progress_per_row(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """E2E-CLI-4: on a terminal, one line per row with the states explored and the rate."""
    argv = ["bound-table", "--servers", "2", "--cap", "1-2", "--weight", "1", "--json"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(argv) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all("states/s" in line for line in lines)
    assert lines[0].startswith("queueref bound-table: N=2 M=1 W=1: ")
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
