"""A soak run of `queueref serve` (E2E-SOAK-1): marked slow, run by `make soak`.

`serve --servers 4` under 2,000 concurrent connections for 60 s, with clients
that hang up mid-request at random and one server killed with SIGKILL
during the run. Afterwards: the global count is back at 0, no slot leaked,
the trace folder checks clean, and the parent's memory did not grow.
Loopback only; bounded (about 90 s); everything it starts is stopped.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from processes import read_line_within, wait_gone

from queueref.runtime.http.ports import port_is_free

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.e2e]

HOST = "127.0.0.1"
SERVERS, CAP, CONNECTIONS, SECONDS = 4, 10, 2000, 60.0
BODY = b'{"prompt": "hello", "max_tokens": 16}'


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def global_count(port: int) -> int:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    line = next(
        x for x in text.splitlines() if x.startswith("queueref:global_num_requests_running")
    )
    return int(line.split()[-1])


async def soak_load(port: int, seconds: float, seed: int) -> dict[str, int]:
    """CONNECTIONS closed-loop clients; about 1 request in 10 is abandoned mid-way."""
    rng = random.Random(seed)
    counts = {"sent": 0, "answered": 0, "hung_up": 0, "errors": 0}
    request = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY
    deadline = time.monotonic() + seconds

    async def client() -> None:
        writer: asyncio.StreamWriter | None = None
        while time.monotonic() < deadline:
            try:
                if writer is None:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 10)
                assert writer is not None
                writer.write(request)
                counts["sent"] += 1
                if rng.random() < 0.1:
                    await asyncio.sleep(rng.uniform(0.0, 0.15))
                    writer.close()  # hang up mid-request
                    writer = None
                    counts["hung_up"] += 1
                    continue
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await asyncio.wait_for(reader.readexactly(length), 15)
                counts["answered"] += 1
            except (OSError, asyncio.IncompleteReadError, TimeoutError, StopIteration):
                counts["errors"] += 1
                if writer is not None:
                    writer.close()
                writer = None
                await asyncio.sleep(0.05)
        if writer is not None:
            writer.close()

    await asyncio.gather(*(client() for _ in range(CONNECTIONS)))
    return counts


def test_soak(tmp_path: Path) -> None:
    """E2E-SOAK-1: 2,000 connections, random hang-ups, a killed server: nothing leaks."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 3 * CONNECTIONS + 1024)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    trace = tmp_path / "trace"
    command = [
        sys.executable,
        "-m",
        "queueref",
        "serve",
        "--servers",
        str(SERVERS),
        "--cap",
        str(CAP),
        "--port",
        "0",
        "--service-time-ms",
        "200",
        "--trace",
        str(trace),
    ]
    errors = tmp_path / "serve.err"  # a file, not a pipe: serve must never block on stderr
    with open(errors, "w", encoding="utf-8") as err_file:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err_file, text=True)
    workers: list[int] = []
    try:
        assert process.stdout is not None
        banner = read_line_within(process.stdout, seconds=60)
        port = int(banner.split("http://127.0.0.1:")[1].split()[0])
        workers = json.loads(banner.split("pids ")[1].split(";")[0])

        async def run() -> tuple[dict[str, int], int, int]:
            load = asyncio.create_task(soak_load(port, SECONDS, seed=12))
            await asyncio.sleep(5)
            early = rss_kib(process.pid)
            await asyncio.sleep(15)
            assert errors.read_text() == ""  # no server died or hung before the kill
            os.kill(workers[1], signal.SIGKILL)
            await asyncio.sleep(SECONDS - 25)
            late = rss_kib(process.pid)
            return await load, early, late

        counts, early, late = asyncio.run(run())
        assert counts["answered"] > 1000 and counts["hung_up"] > 100, counts
        deadline = time.monotonic() + 15
        while global_count(port) != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert global_count(port) == 0
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    err = errors.read_text()
    assert process.returncode == 0, err
    assert late - early < 20 * 1024, (early, late)
    assert f"slots {[0] * SERVERS}" in out
    assert f"server 1 (pid {workers[1]}) exited with code -9" in err and "restarted as pid" in err
    assert err.count("\n") == 1, err  # that restart, and nothing else
    assert wait_gone(workers, 15) == []
    assert port_is_free(HOST, port)
    checked = subprocess.run(
        [sys.executable, "-m", "queueref", "check-trace", str(trace), "--cap", str(CAP), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr
    report = json.loads(checked.stdout)
    assert report["still_in_flight"] == 0 and report["counts"]["abort"] > 0
