"""Bad input to serve, load and experiment: one line, non-zero, nothing left (E2E-CLI-1)."""

from __future__ import annotations

import json
import multiprocessing
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import read_line_within

from queueref.cli import main as cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def busy_port() -> Iterator[int]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def _one_line(capsys: pytest.CaptureFixture[str], prefix: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix)
    return lines[0]


def test_port_in_use(busy_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-1: a port in use is one line, exit non-zero, no server process started."""
    code = cli.main(["serve", "--servers", "2", "--port", str(busy_port), "--duration", "1"])
    assert code != 0
    line = _one_line(capsys, "queueref serve:")
    assert f"port {busy_port}" in line and "in use" in line
    assert multiprocessing.active_children() == []


def test_zero_servers(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-1: --servers 0 is refused before anything starts."""
    assert cli.main(["serve", "--servers", "0", "--port", "0"]) != 0
    assert "--servers" in _one_line(capsys, "queueref serve:")
    assert multiprocessing.active_children() == []
    assert cli.main(["experiment", "--servers", "0"]) != 0
    assert "--servers" in _one_line(capsys, "queueref experiment:")


def test_negative_cap(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-1: a negative cap is refused before anything starts."""
    assert cli.main(["serve", "--max-num-queued-reqs", "-1", "--port", "0"]) != 0
    assert "--max-num-queued-reqs" in _one_line(capsys, "queueref serve:")
    assert cli.main(["experiment", "--cap", "-3"]) != 0
    assert "--cap" in _one_line(capsys, "queueref experiment:")
    assert multiprocessing.active_children() == []


def test_unreachable_url(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-CLI-1: load against a port nobody listens on is one line and exit 1."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    url = f"http://127.0.0.1:{port}/v1/completions"
    code = cli.main(["load", "--url", url, "--duration", "1s", "--client", "builtin"])
    assert code == 1
    assert "cannot connect" in _one_line(capsys, "queueref load:")
    assert cli.main(["load", "--url", "ftp://nowhere", "--client", "builtin"]) == 1
    assert "http://" in _one_line(capsys, "queueref load:")


def test_real_command_port_in_use(busy_port: int) -> None:
    """E2E-CLI-1: the installed command: exit non-zero, one stderr line, nothing on stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "queueref", "serve", "--port", str(busy_port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "already in use" in done.stderr


def test_a_trace_folder_with_files_is_refused_unless_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-TRACE-2: a non-empty --trace folder is one line and exit 2, the files untouched;
    --overwrite replaces the old records and keeps other files."""
    folder = tmp_path / "run"
    folder.mkdir()
    old = b'{"old": "record"}\n'
    (folder / "server-0.jsonl").write_bytes(old)
    (folder / "server-7.jsonl").write_bytes(old)  # a run with more servers left it
    (folder / "notes.txt").write_text("mine")
    args = ["serve", "--servers", "2", "--port", "0", "--trace", str(folder)]
    assert cli.main([*args, "--duration", "0.1s"]) == 2
    line = _one_line(capsys, "queueref serve:")
    assert f"--trace {folder} is not empty (3 entries" in line and "--overwrite" in line
    assert (folder / "server-0.jsonl").read_bytes() == old  # nothing was touched
    assert multiprocessing.active_children() == []
    assert cli.main([*args, "--duration", "0.1s", "--overwrite"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        "notes.txt",
        "server-0.jsonl",
        "server-1.jsonl",
        "supervisor.jsonl",
    ]
    assert (folder / "server-0.jsonl").read_bytes() == b""  # a fresh run with no request
    assert (folder / "notes.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        cli.main(
            ["serve", "--servers", "1", "--port", "0", "--trace", str(empty), "--duration", "0.1s"]
        )
        == 0
    )


def _http(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_serve_answers_as_the_vllm_version_named(capsys: pytest.CaptureFixture[str]) -> None:
    """E2E-SRV-10: the real command with --vllm-version 0.33.0: a pause reaches every server,
    a new request gets 0.33.0's 503; a release queueref does not know is one line, exit 2."""
    assert cli.main(["serve", "--port", "0", "--vllm-version", "0.29.0"]) == 2
    assert "--vllm-version" in _one_line(capsys, "queueref serve:")
    command = [sys.executable, "-m", "queueref", "serve", "--servers", "2", "--port", "0"]
    command += ["--service-time-ms", "50", "--vllm-version", "0.33.0", "--duration", "60s"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = read_line_within(process.stdout, seconds=60)
        assert "answering as vLLM 0.33.0" in banner, banner
        base = "http://127.0.0.1:" + banner.split("http://127.0.0.1:")[1].split()[0]
        request = b'{"prompt": "hello", "max_tokens": 4}'
        assert _http(f"{base}/v1/completions", request)[0] == 200
        assert _http(f"{base}/pause?mode=wait", b"") == (200, b'{"status": "paused"}')
        answers = {_http(f"{base}/v1/completions", request) for _ in range(20)}
        paused = {
            "error": {
                "message": "Generation is paused. Please retry after it resumes.",
                "type": "ServiceUnavailableError",
                "param": None,
                "code": 503,
            }
        }
        assert {(status, json.dumps(json.loads(body))) for status, body in answers} == {
            (503, json.dumps(paused))
        }
        # Every server refused some: the kernel spread the 20 connections over both.
        refused: dict[str, int] = {}
        for _ in range(40):
            text = _http(f"{base}/metrics")[1].decode()
            for server, count in re.findall(
                r'queueref:requests_total\{server="(\d+)",outcome="aborted"\} (\d+)', text
            ):
                refused[server] = int(count)
            if len(refused) == 2:
                break
        assert sum(refused.values()) == 20 and min(refused.values()) > 0, refused
        assert _http(f"{base}/resume", b"")[0] == 200
        assert _http(f"{base}/v1/completions", request)[0] == 200
        metrics = _http(f"{base}/metrics")[1].decode()
        assert 'vllm:admission_rejections_total{model_name="queueref-simulated",' in metrics
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 0
