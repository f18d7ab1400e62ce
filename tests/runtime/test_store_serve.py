"""Two serve groups (two "nodes") sharing one cap through a real Redis (ADM-STORE-8).

Real processes, real HTTP on loopback, a real redis-server started for the
test on a free loopback port and stopped by its PID.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from queueref.oracle import check_admission_trace
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.store import NodeStore
from queueref.runtime.http.wire import busy_body
from queueref.runtime.loadgen import run_builtin
from queueref.runtime.store.redis_config import StoreProtocol, allocate_node
from queueref.runtime.store.redis_server import RedisServer
from queueref.trace.files import read_trace_folder

pytestmark = [pytest.mark.multiprocess, pytest.mark.e2e]

PER_NODE, CAP = 2, 3


@pytest.fixture
def redis_url() -> Iterator[str]:
    server = RedisServer()
    server.start()
    try:
        yield server.url
    finally:
        server.close()


def node(url: str, name: str, protocol: StoreProtocol, deployment: str) -> NodeStore:
    base = allocate_node(url, deployment, name, PER_NODE, 2 * PER_NODE)
    return NodeStore(url, deployment, name, base, 2 * PER_NODE, protocol, lease_ms=2000)


async def load(urls: list[str], seconds: float) -> int:
    reports = await asyncio.gather(*(run_builtin(u, 8, seconds) for u in urls))
    return sum(r.ok for r in reports)


@pytest.mark.parametrize("protocol", list(StoreProtocol))
def test_ADM_STORE_8_two_serve_groups_share_one_cap(
    redis_url: str, protocol: StoreProtocol, tmp_path: Path
) -> None:
    """ADM-STORE-8: two serve groups of 2 servers each, one Redis, cap M = 3, load on both:
    the merged records keep the protocol's bound over all N = 4 servers -- check-then-write's
    M + (N-1)*min(M, W) for slots and snapshot, M admitted for the script."""
    deployment = f"e2e-{protocol.value}"
    nodes = [node(redis_url, name, protocol, deployment) for name in ("node-a", "node-b")]
    assert sorted(n.base for n in nodes) == [0, PER_NODE]
    groups = [
        HttpServers(
            PER_NODE,
            CAP,
            "check-then-write",
            service_time_ms=80,
            trace_dir=tmp_path / "trace",
            store=n,
        )
        for n in nodes
    ]
    try:
        for group in groups:
            group.start()
        ok = asyncio.run(load([g.url for g in groups], 2.0))
    finally:
        for group in groups:
            group.close()
    events = read_trace_folder(tmp_path / "trace", 2 * PER_NODE).events
    admitted = [e for e in events if e.event == "admit"]
    assert len(admitted) == ok > 5
    assert {e.server for e in admitted} == {0, 1, 2, 3}  # both nodes admitted
    assert any(e.event == "reject" for e in events)
    mode = "locked" if protocol is StoreProtocol.SCRIPT else "check-then-write"
    report = check_admission_trace(events, 2 * PER_NODE, CAP, 1, mode=mode)
    assert not report.violations, report.violations
    assert report.ok and report.bound == (CAP if mode == "locked" else CAP + 3 * 1)
    assert report.still_in_flight == 0


def test_ADM_STORE_8_store_down_answers_503_with_vllms_body(tmp_path: Path) -> None:
    """ADM-STORE-5, ADM-STORE-8: a serve group whose store stops answers every request with
    503 and vLLM's busy body (closed policy), and its servers keep running."""
    server = RedisServer()
    server.start()
    try:
        store = node(server.url, "solo", StoreProtocol.SNAPSHOT, "down")
        group = HttpServers(PER_NODE, CAP, "check-then-write", service_time_ms=10, store=store)
        with group:
            assert asyncio.run(load([group.url], 0.5)) > 0
            server.stop()
            report = asyncio.run(run_builtin(group.url, 2, 0.5))
            assert report.ok == 0 and report.busy > 0 and report.bad_busy_bodies == 0
            assert group.alive() == PER_NODE
    finally:
        server.close()
    body = busy_body("x")["error"]
    assert (body["type"], body["code"]) == ("Service Unavailable", 503)


def test_ADM_STORE_8_nodes_get_disjoint_slots_by_name(redis_url: str) -> None:
    """ADM-STORE-8: nodes are given disjoint ranges by name, a restarted node its own again,
    and a node that does not fit is refused."""
    assert allocate_node(redis_url, "d", "a", 2, 5) == 0
    assert allocate_node(redis_url, "d", "b", 2, 5) == 2
    assert allocate_node(redis_url, "d", "a", 2, 5) == 0
    with pytest.raises(ValueError, match="no room for node 'c' with 2 servers"):
        allocate_node(redis_url, "d", "c", 2, 5)
    with pytest.raises(ValueError, match="node name"):
        allocate_node(redis_url, "d", "bad name", 1, 5)
    assert "hunter2" not in repr(NodeStore("redis://u:hunter2@h:1/0", "d", "a", 0, 2))
    assert json.dumps(busy_body("m"))  # the body is JSON


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queueref", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ADM_STORE_8_serve_store_on_the_command_line(tmp_path: Path) -> None:
    """ADM-STORE-7, ADM-STORE-8: `serve --store` runs a node against a password-protected
    Redis and never prints the password; bad store options are one line and exit 2."""
    secret = "pw-not-for-logs"
    server = RedisServer(password=secret)
    server.start()
    try:
        common = ["--port", "0", "--servers", "1", "--duration", "1s", "--store", server.url]
        ran = _serve(*common, "--node", "a", "--store-servers", "2", "--trace", str(tmp_path / "t"))
        assert ran.returncode == 0, ran.stderr
        assert secret not in ran.stdout + ran.stderr
        assert (tmp_path / "t" / "server-0.jsonl").exists()
        missing = _serve(*common)
        assert missing.returncode == 2
        assert missing.stderr.strip() == (
            "queueref serve: --store needs --node NAME and --store-servers N"
        )
    finally:
        server.close()
    down = _serve(*common, "--node", "a", "--store-servers", "2")
    assert down.returncode == 2 and len(down.stderr.strip().splitlines()) == 1
    assert "unavailable" in down.stderr and secret not in down.stderr


def test_ADM_STORE_9_experiment_nodes_one_row_per_protocol() -> None:
    """ADM-STORE-9: `experiment --nodes 2 --store redis --json` starts its own Redis, runs two
    serve groups per protocol and reports one row each, every protocol within its bound
    over N = 4 servers; `--nodes` without `--store` is a usage error."""
    done = subprocess.run(
        [sys.executable, "-m", "queueref", "experiment", "--nodes", "2", "--store", "redis",
         "--servers", "2", "--cap", "3", "--concurrency", "12", "--duration", "1.5s",
         "--service-time-ms", "60", "--json", "--quiet"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [row["protocol"] for row in rows] == ["slots", "snapshot", "script"]
    for row in rows:
        assert (row["nodes"], row["servers"], row["cap"]) == (2, 4, 3)
        assert row["ok"] > 0 and row["busy"] > 0 and row["violations"] == 0
        assert row["bound"] == (3 if row["protocol"] == "script" else 3 + 3 * 1)
        assert row["max_in_flight"] <= row["bound"] and row["within_bound"]
    usage = _serve_like("experiment", "--nodes", "2")
    assert usage.returncode == 2
    assert usage.stderr.strip() == "queueref experiment: --nodes needs --store redis"


def _serve_like(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queueref", *args], capture_output=True, text=True, timeout=60
    )
