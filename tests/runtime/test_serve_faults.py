"""serve under bad input and faults (E2E-SRV-5, E2E-SRV-6, E2E-SRV-7, E2E-TRACE-1, E2E-CLI-1).

Real processes, real sockets on 127.0.0.1, real HTTP. Every test stops what
it started and checks that no process is left and the port is free.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from processes import pids_alive, read_line_within, wait_gone

from queueref.cli import main as cli
from queueref.oracle.trace_check import check_admission_trace
from queueref.runtime.http.group import SUPERVISOR_LOG, HttpServers
from queueref.runtime.http.ports import port_is_free
from queueref.runtime.loadgen import run_builtin
from queueref.trace.files import read_trace_folder

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

HOST = "127.0.0.1"


def post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, dict]:  # type: ignore[type-arg]
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[HttpServers]:
    group = HttpServers(
        2,
        4,
        "check-then-write",
        port=0,
        service_time_ms=3000.0,
        trace_dir=tmp_path / "trace",
        worker_timeout=1.0,
    )
    with group:
        yield group
    assert len(group.started_pids) >= 2
    assert wait_gone(group.started_pids, 10) == []
    assert port_is_free(HOST, group.port)


def test_bodies_are_parsed_and_n_is_admitted(servers: HttpServers, tmp_path: Path) -> None:
    """E2E-SRV-5: 400 for bad bodies, 405 for GET, and a request of n=3 takes 3 slots."""
    url = servers.url
    assert post(url, b'{"prompt": "hi", "n": 0}') == (
        400,
        {
            "error": {
                "message": "n must be at least 1, got 0.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
    )
    for body, content_type in (
        (b"{not json", "application/json"),
        (b'{"prompt": "hi", "n": "abc"}', "application/json"),
        (b"", "application/json"),
        (b'{"prompt": "hi"}', "text/plain"),
    ):
        status, answer = post(url, body, content_type)
        assert status == 400 and answer["error"]["type"] == "Bad Request", answer
    status, answer = post(url, b'{"prompt": "hi", "n": 1000000000}')
    assert status == 400 and "at most 16384" in answer["error"]["message"]
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, timeout=10)
    assert caught.value.code == 405 and caught.value.headers["Allow"] == "POST"
    assert json.loads(caught.value.read())["error"]["type"] == "Method Not Allowed"
    status, answer = post(url, b'{"prompt": "hi", "n": 5}')  # more than the cap of 4
    assert status == 503 and answer["error"]["type"] == "Service Unavailable"

    async def one_of_three() -> tuple[int, dict]:  # type: ignore[type-arg]
        return await asyncio.to_thread(post, url, b'{"prompt": "hi", "n": 3}')

    status, answer = asyncio.run(one_of_three())
    assert status == 200 and len(answer["choices"]) == 3
    events = read_trace_folder(tmp_path / "trace", 2).events
    assert [(e.event, e.n) for e in events if e.event in ("admit", "reject")] == [
        ("reject", 5),
        ("admit", 3),
    ]
    assert sum(1 for e in events if e.event == "finish") == 3


def test_a_client_that_hangs_up_is_aborted_at_once(servers: HttpServers, tmp_path: Path) -> None:
    """E2E-SRV-6: closing the connection mid-request gives the slot back long before 3 s."""
    body = b'{"prompt": "hi"}'
    client = socket.create_connection((HOST, servers.port), timeout=5)
    client.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    assert until(lambda: sum(servers.slot_counts()) == 1, 5)
    closed_at = time.monotonic()
    client.close()
    assert until(lambda: sum(servers.slot_counts()) == 0, 2)
    assert time.monotonic() - closed_at < 1.5  # the service time is 3 s
    events = read_trace_folder(tmp_path / "trace", 2).events
    assert [e.event for e in events] == ["admit", "abort"]
    assert check_admission_trace(tmp_path / "trace", 2, 4).ok


def test_a_hung_server_is_killed_reclaimed_and_restarted(
    servers: HttpServers, tmp_path: Path
) -> None:
    """E2E-SRV-7: SIGSTOP: killed after --worker-timeout, slot reclaimed, restarted, recorded.
    The victim is the first server seen holding a request: the kernel balances connections
    over the shared port, so which server gets one first (the other may find the cap of 4
    already taken) is not ours to choose."""
    stopped: list[tuple[int, int]] = []  # (index, pid) of the server stopped

    async def hold() -> None:
        load = asyncio.create_task(run_builtin(servers.url, 6, 1.0, request_timeout=2.0))
        assert await asyncio.to_thread(until, lambda: any(servers.slot_counts()), 5)
        index = next(i for i, count in enumerate(servers.slot_counts()) if count > 0)
        stopped.append((index, servers.pids()[index]))
        os.kill(stopped[0][1], signal.SIGSTOP)
        await load

    asyncio.run(hold())
    ((index, victim),) = stopped
    assert servers.slot_counts()[index] > 0  # the stopped server still holds its count
    lines: list[str] = []
    assert until(lambda: bool(lines.extend(servers.poll()) or lines), 5)
    assert len(lines) == 1 and f"server {index} (pid {victim}) did not beat for 1 s" in lines[0]
    assert "restarted as pid" in lines[0]
    assert servers.slot_counts()[index] == 0
    assert pids_alive([victim]) == []
    (restart,) = servers.result.restarts
    assert (restart.reason, restart.old_pid) == ("hung", victim) and restart.stale_count > 0
    assert restart.reclaimed == restart.stale_count
    assert servers.restart_counts()[index] == {"crashed": 0, "hung": 1}
    assert servers.restart_counts()[1 - index] == {"crashed": 0, "hung": 0}
    # The new process serves, and /metrics of any server shows the restart.
    assert until(lambda: servers.heartbeat_age(index) < 0.5, 30)
    metrics = urllib.request.urlopen(f"http://{HOST}:{servers.port}/metrics", timeout=5).read()
    assert f'queueref:server_restarts_total{{server="{index}",reason="hung"}} 1'.encode() in metrics
    log = [
        json.loads(line) for line in (tmp_path / "trace" / SUPERVISOR_LOG).read_text().splitlines()
    ]
    assert [(r["event"], r["server"], r["reason"], r["pid"]) for r in log] == [
        ("restart", index, "hung", victim)
    ]
    # The trace records the reclaimed requests as aborts, so it checks clean.
    report = check_admission_trace(tmp_path / "trace", 2, 4)
    assert report.violations == (), report.summary()
    assert report.still_in_flight == sum(servers.slot_counts())


def test_a_crashed_server_is_restarted(servers: HttpServers) -> None:
    """E2E-SRV-7: kill -9 of a server: reported, reclaimed, restarted; it answers again."""
    victim = servers.pids()[1]
    os.kill(victim, signal.SIGKILL)
    lines: list[str] = []
    assert until(lambda: bool(lines.extend(servers.poll()) or lines), 5)
    assert "exited with code -9" in lines[0] and "restarted as pid" in lines[0]
    assert servers.restart_counts()[1] == {"crashed": 1, "hung": 0}
    assert servers.alive() == 2 and victim not in servers.pids()


def test_kill_9_of_the_parent_leaves_nothing(tmp_path: Path) -> None:
    """E2E-SRV-7, E2E-TRACE-1: workers exit with the parent; records on disk; port free."""
    trace = tmp_path / "trace"
    # The server's own temporary directory, so other programs' files in /tmp cannot
    # make the test fail (or hide what the server leaves).
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [
        sys.executable,
        "-m",
        "queueref",
        "serve",
        "--servers",
        "2",
        "--cap",
        "3",
        "--port",
        "0",
        "--service-time-ms",
        "1500",
        "--trace",
        str(trace),
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TMPDIR=str(scratch)),
    )
    try:
        assert process.stdout is not None
        banner = read_line_within(process.stdout, seconds=60)
        port = int(banner.split("http://127.0.0.1:")[1].split()[0])
        workers = json.loads(banner.split("pids ")[1].split(";")[0])
        client = socket.create_connection((HOST, port), timeout=5)
        body = b'{"prompt": "hi"}'
        client.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert until(
            lambda: (
                (trace / "server-0.jsonl").stat().st_size
                + (trace / "server-1.jsonl").stat().st_size
                > 0
            ),
            5,
        )
        process.kill()
        process.wait(10)
        assert wait_gone(workers, 15) == []
        client.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert until(lambda: port_is_free(HOST, port), 5)
    assert sorted(os.listdir(trace)) == ["server-0.jsonl", "server-1.jsonl", SUPERVISOR_LOG]
    report = check_admission_trace(trace, 2, 3)
    assert report.ok and report.counts["admit"] == 1 and report.still_in_flight == 0
    assert os.listdir(scratch) == []


def test_unwritable_outputs_are_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """E2E-CLI-1, E2E-EXP-2: --trace and --plot are checked first; vectors --out '' refused."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    started = time.monotonic()
    assert cli.main(["serve", "--port", "0", "--trace", str(blocker / "trace")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("queueref serve: cannot use ")
    assert cli.main(["serve", "--port", "0", "--trace", str(blocker)]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert cli.main(["experiment", "--plot", str(blocker / "x.png"), "--duration", "1s"]) == 2
    err = capsys.readouterr().err
    assert err == f"queueref experiment: cannot write {blocker}: Not a directory\n"
    assert time.monotonic() - started < 5  # nothing ran
    monkeypatch.chdir(tmp_path)
    assert cli.main(["vectors", "--out", ""]) == 2
    assert sorted(os.listdir(tmp_path)) == ["a-file"]


def test_a_damaged_trace_file_is_reported_not_raised(tmp_path: Path) -> None:
    """E2E-SRV-4: a trace file someone damaged does not crash the stop; it is reported."""
    group = HttpServers(
        2, 2, "check-then-write", port=0, service_time_ms=10.0, trace_dir=tmp_path / "t"
    )
    with group:
        with open(tmp_path / "t" / "server-0.jsonl", "a", encoding="utf-8") as stream:
            stream.write("garbage\n")
    assert len(group.result.problems) == 1
    assert group.result.problems[0].startswith("server 0's trace: ")
    assert "server-0.jsonl:1: not valid JSON" in group.result.problems[0]
    assert group.result.final_slots == [0, 0]
    assert wait_gone(group.started_pids, 10) == []
