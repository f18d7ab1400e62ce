"""serve --render-ms over real processes (E2E-REN-1..5, ORC-TR-19..21).

Real processes, real sockets on 127.0.0.1, real HTTP; a few seconds of load each.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from processes import wait_gone

from queueref.admission.paths import AdmissionPath
from queueref.cli import main as cli
from queueref.oracle.trace_check import check_admission_trace
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.ports import port_is_free
from queueref.runtime.http.render import RenderConfig, RenderTime
from queueref.trace.files import read_trace_folder

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

HOST = "127.0.0.1"
BODY = b'{"prompt": "hi"}'


def post(url: str, headers: dict[str, str] | None = None, timeout: float = 10) -> int:
    request = urllib.request.Request(
        url, data=BODY, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def burst(url: str, count: int) -> list[int]:
    """`count` requests at once, from threads; their statuses."""
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(post(url))) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return statuses


def until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def group(path: AdmissionPath, trace: Path, render_ms: float, cap: int = 2) -> HttpServers:
    render = RenderConfig(RenderTime(render_ms, render_ms), path)
    return HttpServers(2, cap, render.protocol, port=0, service_time_ms=1500.0,
                       trace_dir=trace, worker_timeout=5.0, render=render)  # fmt: skip


def stopped(servers: HttpServers) -> None:
    assert wait_gone(servers.started_pids, 10) == []
    assert port_is_free(HOST, servers.port)


@pytest.mark.parametrize(
    "path", [AdmissionPath.TWO_CHECK, AdmissionPath.RESERVE_WRITE_THEN_CHECK]
)  # fmt: skip
def test_e2e_ren_5_a_burst_wastes_renders_on_vllms_path_only(
    path: AdmissionPath, tmp_path: Path
) -> None:
    """E2E-REN-5, E2E-REN-2: 8 requests at once, M = 2, 400 ms of rendering: vLLM's path
    renders requests it then refuses; the write-then-check reservation refuses them at
    preflight, never above M."""
    servers = group(path, tmp_path / "trace", 400.0)
    with servers:
        statuses = burst(servers.url, 8)
    stopped(servers)
    assert statuses.count(200) >= 1 and statuses.count(503) >= 1, statuses
    wtc = path is AdmissionPath.RESERVE_WRITE_THEN_CHECK
    mode = "write-then-check" if wtc else "check-then-write"
    report = check_admission_trace(tmp_path / "trace", 2, 2, mode=mode)
    assert report.violations == (), report.summary()
    assert report.bound_holds
    wasted = report.counts["wasted_render"]
    if path is AdmissionPath.TWO_CHECK:
        assert wasted >= 1 and report.counts["preflight"] >= statuses.count(200) + wasted
    else:
        assert wasted == 0 and report.max_in_flight <= 2
        assert report.counts["reserve"] == report.counts["release"] + statuses.count(200)
    assert servers.result.final_slots == [0, 0]


def test_e2e_ren_3_a_render_error_gives_the_reservation_back(tmp_path: Path) -> None:
    """E2E-REN-3: x-queueref-fault: render-error: 500, the slot back to 0, reserve then release."""
    servers = group(AdmissionPath.RESERVE_CHECK_THEN_WRITE, tmp_path / "trace", 100.0)
    with servers:
        assert post(servers.url, {"x-queueref-fault": "render-error"}) == 500
        assert until(lambda: servers.slot_counts() == [0, 0], 2)
        assert post(servers.url, {"x-queueref-fault": "no-such-fault"}) == 400
    stopped(servers)
    events = read_trace_folder(tmp_path / "trace", 2).events
    assert [e.event for e in events] == ["reserve", "release"]
    assert check_admission_trace(tmp_path / "trace", 2, 2).ok


def test_e2e_ren_4_a_dead_servers_reservation_is_reclaimed(tmp_path: Path) -> None:
    """E2E-REN-4: kill -9 of a server mid-render: the reaper resets its slot and records
    the release."""
    servers = group(AdmissionPath.RESERVE_CHECK_THEN_WRITE, tmp_path / "trace", 20000.0)
    with servers:

        def doomed() -> None:
            try:
                post(servers.url, timeout=5)
            except OSError:
                pass  # the server died: no answer is expected

        client = threading.Thread(target=doomed, daemon=True)
        client.start()
        assert until(lambda: sum(servers.slot_counts()) == 1, 5)
        index = servers.slot_counts().index(1)
        os.kill(servers.pids()[index], signal.SIGKILL)
        assert until(lambda: bool(servers.poll()), 5)
        assert servers.slot_counts()[index] == 0
    stopped(servers)
    events = read_trace_folder(tmp_path / "trace", 2).events
    assert [e.event for e in events] == ["reserve", "release"]
    report = check_admission_trace(tmp_path / "trace", 2, 2)
    assert report.violations == (), report.summary()


def test_e2e_ren_4_a_trace_without_the_reclaim_fails_orc_tr_20(tmp_path: Path) -> None:
    """E2E-REN-4, ORC-TR-20: the trace with the parent's release record cut off fails."""
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "server-0.jsonl").write_text(
        json.dumps(
            {"t": 1.0, "server": 0, "event": "reserve", "request_id": "a", "n": 1, "view": 0}
        )
        + "\n"  # fmt: skip
    )
    (folder / "server-1.jsonl").write_text("")
    report = check_admission_trace(folder, 2, 2)
    assert [v.rule for v in report.violations] == ["ORC-TR-20"]


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["--render-ms", "-5"], "--render-ms"),
        (["--render-ms", "nan"], "--render-ms"),
        (["--render-ms", "60001"], "--render-ms"),
        (["--render-ms", "100", "--preflight", "reserve"], "--preflight"),
        (["--render-ms", "100", "--admission", "local"], "--admission local"),
        (
            [
                "--render-ms",
                "10",
                "--preflight",
                "reserve-check-then-write",
                "--max-num-queued-tokens",
                "5",
            ],
            "--max-num-queued-tokens",
        ),  # fmt: skip
    ],
)
def test_e2e_ren_1_bad_render_input_is_one_line_exit_2(
    argv: list[str], word: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-REN-1, E2E-REN-2: one line on stderr naming the flag, exit 2, nothing started."""
    assert cli.main(["serve", "--port", "0", "--duration", "1", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("queueref serve:") and word in lines[0], lines
    assert multiprocessing.active_children() == []
