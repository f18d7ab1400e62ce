"""End to end: real server processes, real sockets, real HTTP (specs/end-to-end.md).

One small experiment (4 servers, cap 10, 80 clients, 2 s per mode) runs once
per module; the tests read its server-side records. Everything stays on
127.0.0.1 and every process started is stopped and checked gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from plot_checks import plot_problems
from processes import pids_alive, read_line_within

from queueref.oracle.trace_check import check_admission_trace
from queueref.runtime.experiment import ModeResult, format_table, plot, plot_figure, run_experiment
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.ports import port_is_free
from queueref.runtime.loadgen import run_builtin
from queueref.trace.files import read_trace_folder

# `make test` runs these after the others, serially (they start real processes).
pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

N, CAP, CLIENTS, SECONDS, SERVICE_MS = 4, 10, 80, 2.0, 150.0
HOST = "127.0.0.1"


PROGRESS: list[str] = []


@pytest.fixture(scope="module")
def results() -> dict[str, ModeResult]:
    runs = run_experiment(
        num_servers=N,
        cap=CAP,
        concurrency=CLIENTS,
        duration=SECONDS,
        service_time_ms=SERVICE_MS,
        progress=lambda result: PROGRESS.append(result.mode),
    )
    return {result.mode: result for result in runs}


def test_one_progress_call_per_mode_and_json_rows(results: dict[str, ModeResult]) -> None:
    """E2E-CLI-4, E2E-EXP-2: progress after each mode; each row as JSON data."""
    assert PROGRESS == ["local", "check-then-write", "write-then-check"]
    rows = [json.loads(json.dumps(result.to_dict())) for result in results.values()]
    assert [(row["mode"], row["bound"]) for row in rows] == [
        ("local", 40),
        ("check-then-write", 13),
        ("write-then-check", 10),
    ]
    assert all(row["within_bound"] and row["final_slots"] == [0] * N for row in rows)


def test_local_exceeds_the_cap(results: dict[str, ModeResult]) -> None:
    """E2E-EXP-1: each server caps only itself, so the global count goes past M."""
    local = results["local"]
    assert local.max_in_flight > CAP
    assert local.max_in_flight <= N * CAP == local.bound


def test_check_then_write_stays_within_the_overshoot_bound(
    results: dict[str, ModeResult],
) -> None:
    """E2E-EXP-1: check-then-write stays within M + (N-1)*min(M, W)."""
    checked = results["check-then-write"]
    assert checked.bound == CAP + (N - 1) * min(CAP, 1)
    assert checked.max_in_flight <= checked.bound
    assert checked.trace.ok, checked.trace.summary()


def test_write_then_check_never_exceeds_the_cap(results: dict[str, ModeResult]) -> None:
    """E2E-EXP-1: write-then-check never admits more than M."""
    reserving = results["write-then-check"]
    assert reserving.bound == CAP
    assert reserving.max_in_flight <= CAP
    assert reserving.trace.ok, reserving.trace.summary()


def test_every_admitted_request_finished_and_slots_are_zero(
    results: dict[str, ModeResult],
) -> None:
    """E2E-TRACE-1, E2E-SRV-4: every admission has its departure; every slot is back to 0."""
    for result in results.values():
        assert result.admitted > 0
        assert result.admitted == result.departed, result.mode
        assert result.trace.still_in_flight == 0
        assert result.final_slots == [0] * N, result.mode
        assert result.crashed == [], result.mode
        assert result.load.ok == result.admitted, result.mode
        assert result.trace.ok or result.mode == "local", result.trace.summary()


def test_every_503_has_the_documented_body(results: dict[str, ModeResult]) -> None:
    """E2E-SRV-2, E2E-LOAD-1: rejections answer 503 with vLLM's busy body; the load counts them."""
    for result in results.values():
        assert result.load.busy > 0, result.mode
        assert result.load.bad_busy_bodies == 0, result.mode
        assert result.load.errors == 0, result.mode
        assert result.load.sent == result.load.completed
        rejects = sum(1 for event in result.events if event.event == "reject")
        assert rejects == result.load.busy
        assert "503" in result.load.summary() and "p99" in result.load.summary()


def test_no_process_left_and_port_free(results: dict[str, ModeResult]) -> None:
    """E2E-SRV-4: after each mode every server process is gone and the port is free."""
    for result in results.values():
        assert len(result.pids) == N
        assert pids_alive(result.pids) == []
        assert port_is_free(HOST, result.port)


def test_table_and_plot(results: dict[str, ModeResult], tmp_path: Path) -> None:
    """E2E-EXP-1: one row per mode with the bound; the plot is written when matplotlib is there."""
    table = format_table(list(results.values()))
    for mode, bound in (("local", 40), ("check-then-write", 13), ("write-then-check", 10)):
        assert f"| {mode} | {results[mode].max_in_flight} | {bound} |" in table
    target = tmp_path / "plot.png"
    assert plot(list(results.values()), target)
    assert target.stat().st_size > 0


def test_plot_draws_every_bound_and_keeps_the_legend_off(results: dict[str, ModeResult]) -> None:
    """E2E-EXP-1, E2E-EXP-4: the cap, a dashed line at each bound, modes apart; legend outside."""
    import matplotlib.pyplot as plt

    figure = plot_figure(list(results.values()))
    try:
        (axes,) = figure.axes
        bounds = {"local": N * CAP, "check-then-write": CAP + (N - 1) * 1, "write-then-check": CAP}
        assert plot_problems(figure, CAP, bounds) == []
        figure.canvas.draw()
        legend = axes.get_legend().get_window_extent()
        assert legend.x0 >= axes.get_window_extent().x1  # to the right of the plot area
    finally:
        plt.close(figure)


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


def test_serve_command_metrics_trace_and_sigterm(tmp_path: Path) -> None:
    """E2E-SRV-1, E2E-SRV-3, E2E-SRV-4, E2E-TRACE-1: the real command, stopped by SIGTERM."""
    trace = tmp_path / "trace"
    command = [
        sys.executable,
        "-m",
        "queueref",
        "serve",
        "--servers",
        "2",
        "--max-num-queued-reqs",
        "3",
        "--admission",
        "check-then-write",
        "--port",
        "0",
        "--service-time-ms",
        "100",
        "--trace",
        str(trace),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = read_line_within(process.stdout, seconds=60)
        assert "http://127.0.0.1:" in banner, banner + (
            process.stderr.read() if process.stderr else ""
        )
        port = int(banner.split("http://127.0.0.1:")[1].split()[0])
        pids = json.loads(banner.split("pids ")[1].split(";")[0])
        url = f"http://{HOST}:{port}"
        import asyncio

        load = asyncio.run(run_builtin(f"{url}/v1/completions", 10, 1.0))
        assert load.ok > 0 and load.busy > 0 and load.bad_busy_bodies == 0
        status, text = _get(f"{url}/metrics")
        assert status == 200
        assert 'vllm:num_requests_running{model_name="queueref-simulated",server="' in text
        assert "queueref:global_num_requests_running" in text
        # E2E-CLI-5: `--admission check-then-write` is shown by that name.
        assert 'queueref:max_num_queued_reqs{mode="check-then-write"} 3' in text
        # E2E-TRACE-1: the records are on disk while serve runs, one file per server.
        during = read_trace_folder(trace, 2)
        assert sum(1 for e in during.events if e.event == "admit") == load.ok
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert process.returncode == 0, err
    assert "slots [0, 0]" in out and f"port {port} free" in out
    assert pids_alive(pids) == []
    assert port_is_free(HOST, port)
    events = read_trace_folder(trace, 2).events
    report = check_admission_trace(str(trace), 2, 3, 1, mode="check-then-write")
    assert report.ok, report.summary()
    assert report.still_in_flight == 0
    assert sum(1 for e in events if e.event == "admit") == load.ok
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "queueref",
            "check-trace",
            str(trace),
            "--cap",
            "3",
            "--servers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_crashed_server_is_reported_and_its_slot_reclaimed() -> None:
    """E2E-SRV-4: a server killed while holding requests is reported; its slot goes back to 0."""
    servers = HttpServers(2, 10, "check-then-write", port=0, service_time_ms=2000.0, restart=False)
    with servers:
        import asyncio

        victim = servers.group.processes[0]
        pids = [p.pid for p in servers.group.processes if p.pid is not None]

        async def hold_then_kill() -> None:
            load = asyncio.create_task(run_builtin(servers.url, 16, 1.0))
            deadline = time.monotonic() + 5
            while servers.slot_counts()[0] == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert servers.slot_counts()[0] > 0
            assert victim.pid is not None
            os.kill(victim.pid, signal.SIGKILL)
            await load

        asyncio.run(hold_then_kill())
        deadline = time.monotonic() + 5
        lines: list[str] = []
        while not lines and time.monotonic() < deadline:
            lines = servers.poll()
            time.sleep(0.05)
        assert len(lines) == 1 and "server 0" in lines[0] and "code -9" in lines[0]
        assert servers.slot_counts()[0] == 0
        assert servers.result.resets and servers.result.resets[0].stale_count > 0
        assert servers.alive() == 1
    assert servers.result.final_slots == [0, 0]
    assert pids_alive(pids) == []
    assert port_is_free(HOST, servers.port)
