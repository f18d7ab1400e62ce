"""Bad input to serve, load and experiment: one line, non-zero, nothing left (E2E-CLI-1)."""

from __future__ import annotations

import multiprocessing
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

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
