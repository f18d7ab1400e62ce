"""`/metrics` under a real load: the global gauge against the records (E2E-SRV-3, E2E-SRV-9).

A real `serve` group (4 servers, cap 10, check-then-write) is loaded by 80
clients while the test scrapes `/metrics` over fresh connections (so the
kernel hands the scrapes to different servers). Every scraped gauge is then
checked against what the servers' own records allow over the time of the
scrape (`metrics_bounds`). The same scrapes with the own count put in place
of the global one -- the broken variant the issue describes -- are caught.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from metrics_bounds import SlotSteps, gauge_range, samples, slot_steps
from processes import pids_alive

from queueref.admission.protocol import Protocol
from queueref.admission.shared_stats import allocate_admission_counters
from queueref.runtime.http.app import CompletionApp
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.metrics import RejectionCounts
from queueref.runtime.http.ports import port_is_free
from queueref.runtime.loadgen import LoadReport, run_builtin
from queueref.runtime.servers import ServerSpec
from queueref.trace.events import AdmissionEvent

N, CAP, CLIENTS, SECONDS = 4, 10, 80, 3.0
GLOBAL, OWN = "queueref:global_num_requests_running", "queueref:num_requests_running"


def _event(t: float, kind: str, n: int = 1, t_before: float | None = None) -> AdmissionEvent:
    return AdmissionEvent(t, 0, kind, "r", n, 0 if kind == "admit" else None, t_before)  # type: ignore[arg-type]


def test_the_bounds_of_a_slot_follow_its_stamps() -> None:
    """E2E-SRV-3: an admit counts surely from the next record, a finish from its t_before."""
    steps = slot_steps(
        [_event(1.0, "admit", 2), _event(2.0, "reject"), _event(4.0, "finish", 1, t_before=3.0)]
    )
    assert steps == SlotSteps(low=[(2.0, 2), (3.0, -1)], high=[(1.0, 2), (4.0, -1)])
    assert (steps.least(0.0, 0.5), steps.most(0.0, 0.5)) == (0, 0)
    assert (steps.least(1.0, 1.5), steps.most(1.0, 1.5)) == (0, 2)  # written or not yet
    assert (steps.least(2.0, 2.5), steps.most(2.0, 2.5)) == (2, 2)
    assert (steps.least(2.5, 3.5), steps.most(2.5, 3.5)) == (1, 2)
    assert gauge_range([steps, steps], 2.0, 2.5) == (4, 4)


def test_metrics_text_names_the_own_and_global_counts_and_the_rejections() -> None:
    """E2E-SRV-3, E2E-SRV-9: distinct names, per-server HELP, rejections summed over servers."""
    counters = allocate_admission_counters(2, 3)
    spec = ServerSpec(0, 2, counters, 3, None, Protocol.CHECK_THEN_WRITE)
    other = ServerSpec(1, 2, counters, 3, None, Protocol.CHECK_THEN_WRITE).build()
    other.admit("elsewhere", 2)
    shared = [0] * 6
    RejectionCounts(shared, 2, 1).add("max_num_queued_reqs")  # the other server's rejection
    api = spec.build()
    app = CompletionApp(
        api,
        service_time_ms=1.0,
        global_view=api.controller.shared_stats,
        rejections=RejectionCounts(shared, 2, 0),
    )
    api.admit("here", 1)
    text = app.metrics_text()
    assert samples(text, GLOBAL) == [({"server": "0"}, 3)]
    assert samples(text, OWN) == [({"server": "0"}, 1)]
    assert samples(text, "vllm:num_requests_running") == [
        ({"model_name": "queueref-simulated", "server": "0"}, 1)
    ]
    help_line = next(x for x in text.splitlines() if x.startswith("# HELP vllm:num_requests_r"))
    assert "per server" in help_line
    assert "# TYPE vllm:admission_rejections counter" in text
    assert samples(text, "vllm:admission_rejections_total") == [
        ({"model_name": "queueref-simulated", "reason": "max_num_queued_reqs"}, 1),
        ({"model_name": "queueref-simulated", "reason": "max_num_queued_tokens"}, 0),
    ]


def _scrape(url: str) -> tuple[float, float, str]:
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return t0, time.monotonic(), text


def _by_server(events: list[AdmissionEvent]) -> list[SlotSteps]:
    return [slot_steps([e for e in events if e.server == index]) for index in range(N)]


@pytest.mark.e2e
@pytest.mark.multiprocess
def test_the_global_gauge_agrees_with_the_records_during_a_load(tmp_path: Path) -> None:
    """E2E-SRV-3, E2E-SRV-9: scraped during a real load, checked against the trace."""
    servers = HttpServers(
        N, CAP, "check-then-write", port=0, service_time_ms=200.0, trace_dir=tmp_path / "run"
    )
    scraped: list[tuple[float, float, str]] = []
    with servers:
        metrics = f"http://127.0.0.1:{servers.port}/metrics"
        report: list[LoadReport] = []
        load = threading.Thread(
            target=lambda: report.append(asyncio.run(run_builtin(servers.url, CLIENTS, SECONDS)))
        )
        load.start()
        while load.is_alive():
            scraped.append(_scrape(metrics))
            time.sleep(0.05)
        load.join()
        after = [_scrape(metrics)[2] for _ in range(8)]
        rejects = sum(1 for e in servers.read_events() if e.event == "reject")
    events = servers.read_events()
    assert pids_alive(servers.started_pids) == [] and port_is_free("127.0.0.1", servers.port)
    assert report and report[0].busy > 0 and rejects == report[0].busy
    # E2E-SRV-9: any server tells every server's rejections, by vLLM 0.32.0's reason.
    for text in after:
        totals = dict(
            (labels["reason"], value)
            for labels, value in samples(text, "vllm:admission_rejections_total")
        )
        assert totals == {"max_num_queued_reqs": rejects, "max_num_queued_tokens": 0}
    steps = _by_server(events)
    wrong_global, wrong_own, busy, answered_by = [], [], 0, set()
    own_as_global = []  # the broken variant: each server's own count shown as the global one
    for t0, t1, text in scraped:
        ((labels, shown),) = samples(text, GLOBAL)
        ((_, own),) = samples(text, OWN)
        server = int(labels["server"])
        answered_by.add(server)
        low, high = gauge_range(steps, t0, t1)
        busy += low > CAP // 2
        if not low <= shown <= high:
            wrong_global.append((shown, low, high))
        if not steps[server].least(t0, t1) <= own <= steps[server].most(t0, t1):
            wrong_own.append((server, own))
        if not low <= own <= high:
            own_as_global.append((own, low, high))
    assert wrong_global == [] and wrong_own == []
    assert busy > 0 and len(answered_by) > 1, (busy, answered_by)
    assert own_as_global, "reporting the own count as the global one went unnoticed"
