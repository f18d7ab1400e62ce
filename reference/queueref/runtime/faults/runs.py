"""One fault under load across `serve --store` nodes, measured (E2E-FAULT-1 .. E2E-FAULT-4).

Each scenario starts its own Redis (on loopback, or alone in a network
namespace the run makes for a partition), two `serve --store` nodes in their
own process groups, drives both with a closed-loop load, injects one fault
and heals it, stops everything and judges the merged trace of every server:

* `max_in_flight` and `bound`: the trace checker's measure and the
  protocol's bound over all N servers (ADM-STORE-3);
* `expected_overshoot`: how far the fault may push the real count over that
  bound, from the exhaustive model `queueref.verify.store_faults` at the
  run's sizes (OB-FAULT-1 .. OB-FAULT-5), never from the run;
* `records_lost`: 200 answers without a finish record, plus requests still
  in flight in the trace of a node that was not killed;
* `recovered`: the store showed every server's true count (from the trace)
  within one lease, plus the store's command timeout, after the fault healed.

Polling the store gives snapshots; they are judged after the run against the
trace (`store_matches_trace`), because the trace files are only complete then.
"""

from __future__ import annotations

import asyncio
import json
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from queueref.oracle.trace_check import check_admission_trace, in_flight_requests
from queueref.runtime.faults.checks import (
    FaultClock,
    Snapshot,
    StorePoller,
    fault_observed,
    recovered_within,
    true_counts,
)
from queueref.runtime.faults.parts import NetnsRedis, SentinelRedis, ServeNode
from queueref.runtime.loadgen import LoadReport, run_builtin
from queueref.runtime.nodes_plot import NodesSeries
from queueref.runtime.store.redis_config import StoreConfig, StoreProtocol, allocate_node
from queueref.runtime.store.redis_server import RedisServer
from queueref.trace.events import AdmissionEvent
from queueref.trace.files import read_trace_folder
from queueref.verify.store_faults import explore_fault

#: The faults of `make faults`, in the report's order.
FAULTS: Final = ("partition", "redis-restart", "failover", "node-kill", "pause", "tokens")

#: The model of each fault (`queueref.verify.store_faults`); tokens inject none.
MODEL_FAULT: Final = {
    "partition": "partition",
    "redis-restart": "restart",
    "failover": "failover",
    "node-kill": "kill",
    "pause": "pause",
}

#: How long a store command may take before it fails (`StoreConfig.timeout_s`): a write
#: stamped in the trace lands in the store within this, or it fails and stays pending.
WRITE_SLACK: Final = StoreConfig("redis://x", "d", 1, 0).timeout_s

DEPLOYMENT: Final = "faults"


@dataclass(frozen=True)
class Sizes:
    """One run's sizes: 2 nodes of 1 server (N = 2), cap M, requests of one slot (W = 1)."""

    nodes: int = 2
    servers_per_node: int = 1
    cap: int = 3
    weight: int = 1
    lease_s: float = 1.0
    service_ms: float = 3000.0  # 2.4-3.6 s: node 0's first requests outlive a lapse
    concurrency: int = 5  # per node: more than the cap, so the cap binds
    fault_at: float = 1.0  # seconds into the load: node 0 holds the cap then
    head_start: float = 0.3  # node 0's load starts first, so the fault hits a full node
    fault_for: float = 2.0  # a partition or pause twice the lease: the lease lapses
    load_s: float = 7.0
    token_limit: int | None = None  # Mt through the store (the `tokens` scenario)
    prompt_tokens: int = 1  # p: the words of the load's prompt

    @property
    def body(self) -> bytes:
        """The load's request: one prompt of `prompt_tokens` words."""
        prompt = " ".join(["token"] * self.prompt_tokens)
        return json.dumps({"model": "queueref-simulated", "prompt": prompt}).encode()

    @property
    def total(self) -> int:
        return self.nodes * self.servers_per_node


@dataclass
class Scenario:
    """One line of `build/faults-report.json` (E2E-FAULT-1)."""

    name: str
    fault: str
    protocol: str
    bound: int
    max_in_flight: int
    within_bound: bool
    expected_overshoot: int
    records_lost: int
    recovered: bool
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)
    series: NodesSeries | None = field(default=None, repr=False)  # for the plot

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "series"}

    @property
    def passed(self) -> bool:
        # E2E-FAULT-3: a fault the store never showed was not injected: no evidence.
        observed = self.details.get("fault_observed", True)
        return self.within_bound and self.records_lost == 0 and self.recovered and observed


def expected_overshoot(fault: str, protocol: StoreProtocol, sizes: Sizes) -> int:
    """OB-FAULT-1 .. OB-FAULT-5: the model's worst real total over the bound, at the run's sizes."""
    if fault not in MODEL_FAULT:
        return 0
    atomic = protocol is StoreProtocol.SCRIPT
    sized = (sizes.total, sizes.cap, sizes.weight)
    if fault == "failover":
        # ADM-FAULT-3: with WAIT each server has at most one write not on the replica
        # (k = N); ADM-FAULT-2, OB-FAULT-3: a failover slower than the lease is a restart.
        lost = explore_fault("failover", *sized, sizes.total, atomic=atomic)
        empty = explore_fault("restart", *sized, atomic=atomic)
        return max(lost.overshoot, empty.overshoot)
    row = explore_fault(MODEL_FAULT[fault], *sized, sizes.servers_per_node, atomic=atomic)
    return row.overshoot


def run_scenario(
    fault: str,
    protocol: StoreProtocol,
    sizes: Sizes,
    *,
    inject: Callable[[list[ServeNode], FaultClock], None],
    urls: list[str],
    poll_url: str,
    workdir: Path,
    extra_args: tuple[str, ...] = (),
    sentinel_master: str | None = None,
) -> Scenario:
    """Start the nodes, load them, run `inject` at `fault_at`, stop, and judge the trace."""
    began = time.monotonic()
    trace = workdir / "trace"
    args = [
        "--servers", str(sizes.servers_per_node), "--store-servers", str(sizes.total),
        "--cap", str(sizes.cap), "--lease", f"{sizes.lease_s}s",
        "--service-time-ms", str(sizes.service_ms), "--store-protocol", protocol.value,
        "--deployment", DEPLOYMENT, *extra_args,
    ]  # fmt: skip
    if sizes.token_limit is not None:
        args += ["--max-num-queued-tokens", str(sizes.token_limit), "--token-rule", "ge"]
    nodes = [ServeNode(f"node-{i}", urls[i], trace, args) for i in range(sizes.nodes)]
    for index, node in enumerate(nodes):
        # In order, before they start together: node i gets the servers from i * K (by name,
        # ADM-STORE-8), so node 0 -- the one a fault hits -- holds servers 0 .. K-1.
        base = allocate_node(
            urls[index], DEPLOYMENT, node.name, sizes.servers_per_node, sizes.total,
            sentinel_master=sentinel_master,
        )  # fmt: skip
        assert base == index * sizes.servers_per_node, (node.name, base)
    clock = FaultClock()
    ok = 0
    try:
        for node in nodes:
            node.launch()  # both start at once: Python's start-up is most of the wait
        for node in nodes:
            node.wait_ready()
        with StorePoller(poll_url, DEPLOYMENT, sizes.total, sentinel_master) as poller:

            async def drive() -> int:
                async def fault_later() -> None:
                    await asyncio.sleep(sizes.fault_at)
                    await asyncio.to_thread(inject, nodes, clock)

                async def load(index: int, node: ServeNode) -> LoadReport:
                    delay = index * sizes.head_start
                    await asyncio.sleep(delay)
                    return await run_builtin(
                        node.url, sizes.concurrency, sizes.load_s - delay, body=sizes.body
                    )

                loads = [load(index, node) for index, node in enumerate(nodes)]
                _, *reports = await asyncio.gather(fault_later(), *loads)
                return sum(report.ok for report in reports if report is not None)

            ok = asyncio.run(drive())
            # Let the last lease after the heal run out before the poller stops.
            time.sleep(max(0.0, clock.healed + sizes.lease_s + WRITE_SLACK - time.monotonic()))
    finally:
        for node in nodes:
            node.close()
    return judge(fault, protocol, sizes, trace, poller.snapshots, clock, ok, began)


def judge(
    fault: str,
    protocol: StoreProtocol,
    sizes: Sizes,
    trace: Path,
    snapshots: list[Snapshot],
    clock: FaultClock,
    ok: int,
    began: float,
) -> Scenario:
    """The scenario's line: the merged trace checked, records counted, recovery judged.

    E2E-FAULT-3: no forbidden decision, within the bound plus the model's overshoot, no
    record lost; E2E-FAULT-4: the store showed the true counts within one lease of the heal.
    """
    events = read_trace_folder(trace, sizes.total).events
    # A node killed with -9 wrote no departure: its requests ended when it died, as the
    # parent's reclaim records them for a dead server (E2E-SRV-7).
    for server in clock.killed:
        for request_id, n in in_flight_requests(events, server).items():
            events.append(
                AdmissionEvent(clock.injected, server, "abort", request_id, n, None, clock.injected)
            )
    events.sort(key=lambda e: e.t)
    mode = "locked" if protocol is StoreProtocol.SCRIPT else "check-then-write"
    report = check_admission_trace(
        events, sizes.total, sizes.cap, sizes.weight, mode=mode,
        max_num_queued_tokens=sizes.token_limit, token_rule="ge",
    )  # fmt: skip
    finishes = sum(e.event == "finish" for e in events)
    lost = max(0, ok - finishes) + report.still_in_flight
    overshoot = expected_overshoot(fault, protocol, sizes)
    steps = true_counts(events, sizes.total)
    window = sizes.lease_s + WRITE_SLACK
    recovered = recovered_within(snapshots, steps, clock.healed, window, WRITE_SLACK)
    observed = fault_observed(fault, snapshots, steps, clock, WRITE_SLACK)
    return Scenario(
        name=f"{fault}-{protocol.value}",
        fault=fault,
        protocol=protocol.value,
        bound=report.bound,
        max_in_flight=report.max_in_flight,
        within_bound=(
            not report.violations
            and report.max_in_flight <= report.bound + overshoot
            and report.token_bound_holds
        ),
        expected_overshoot=overshoot,
        records_lost=lost,
        recovered=recovered,
        seconds=round(time.monotonic() - began, 2),
        details={
            "ok": ok,
            "admitted": report.counts.get("admit", 0),
            "rejected": report.counts.get("reject", 0),
            "violations": [str(v) for v in report.violations[:5]],
            "snapshots": len(snapshots),
            "fault_seconds": round(clock.healed - clock.injected, 2),
            "fault_observed": observed,
            "max_queued_tokens": report.max_queued_tokens,
            "token_bound": report.token_bound,
            "prefills": report.counts.get("prefill_done", 0),
            "token_rejections": sum(
                e.event == "reject" and e.view is None and e.token_view is not None for e in events
            ),
        },
        series=NodesSeries(
            protocol.value,
            events,
            report.bound,
            overshoot,
            (fault, clock.injected, clock.healed) if fault != "tokens" else None,
        ),
    )


# ---------------------------------------------------------------------------
# The faults


def partition(protocol: StoreProtocol, sizes: Sizes, workdir: Path) -> Scenario:
    """E2E-FAULT-2 partition: node 0's link to Redis down for `fault_for`, node 0 serving."""
    redis = NetnsRedis(sizes.nodes)
    try:
        redis.start()

        def inject(nodes: list[ServeNode], clock: FaultClock) -> None:
            clock.injected = time.monotonic()
            redis.cut(0)
            time.sleep(sizes.fault_for)
            redis.heal(0)
            clock.healed = time.monotonic()

        urls = [redis.url(i) for i in range(sizes.nodes)]
        return run_scenario(
            "partition", protocol, sizes, inject=inject, urls=urls,
            poll_url=redis.url(sizes.nodes - 1), workdir=workdir,
        )  # fmt: skip
    finally:
        redis.close()


def _on_loopback(
    fault: str,
    protocol: StoreProtocol,
    sizes: Sizes,
    workdir: Path,
    inject: Callable[[RedisServer, list[ServeNode], FaultClock], None],
    extra_args: tuple[str, ...] = (),
) -> Scenario:
    redis = RedisServer()
    try:
        redis.start()
        return run_scenario(
            fault, protocol, sizes,
            inject=lambda nodes, clock: inject(redis, nodes, clock),
            urls=[redis.url] * sizes.nodes, poll_url=redis.url, workdir=workdir,
            extra_args=extra_args,
        )  # fmt: skip
    finally:
        redis.close()


def redis_restart(protocol: StoreProtocol, sizes: Sizes, workdir: Path) -> Scenario:
    """E2E-FAULT-2 redis-restart: Redis stopped and started again empty on its port."""

    def inject(redis: RedisServer, nodes: list[ServeNode], clock: FaultClock) -> None:
        clock.injected = time.monotonic()
        redis.stop()
        time.sleep(sizes.lease_s / 2)
        redis.start()
        clock.healed = time.monotonic()

    return _on_loopback("redis-restart", protocol, sizes, workdir, inject)


def node_kill(protocol: StoreProtocol, sizes: Sizes, workdir: Path) -> Scenario:
    """E2E-FAULT-2 node-kill: kill -9 of node 0's whole process group, parent and workers."""

    def inject(redis: RedisServer, nodes: list[ServeNode], clock: FaultClock) -> None:
        clock.injected = clock.healed = time.monotonic()
        nodes[0].signal(signal.SIGKILL)
        clock.killed = list(range(sizes.servers_per_node))

    return _on_loopback("node-kill", protocol, sizes, workdir, inject)


def pause(protocol: StoreProtocol, sizes: Sizes, workdir: Path) -> Scenario:
    """E2E-FAULT-2 pause: SIGSTOP of node 0's whole group past its lease, then SIGCONT."""

    def inject(redis: RedisServer, nodes: list[ServeNode], clock: FaultClock) -> None:
        clock.injected = time.monotonic()
        nodes[0].signal(signal.SIGSTOP)
        time.sleep(sizes.fault_for)
        nodes[0].signal(signal.SIGCONT)
        clock.healed = time.monotonic()

    return _on_loopback("pause", protocol, sizes, workdir, inject)


def failover(protocol: StoreProtocol, sizes: Sizes, workdir: Path) -> Scenario:
    """E2E-FAULT-2 failover: Sentinel promotes the replica; nodes WAIT for 1 replica."""
    redis = SentinelRedis()
    try:
        redis.start()

        def inject(nodes: list[ServeNode], clock: FaultClock) -> None:
            clock.injected = time.monotonic()
            before = redis.primary_port()
            redis.failover()
            clock.healed = time.monotonic()
            clock.promoted = redis.primary_port() != before

        master = SentinelRedis.MASTER
        return run_scenario(
            "failover", protocol, sizes, inject=inject, urls=[redis.url] * sizes.nodes,
            poll_url=redis.url, workdir=workdir, sentinel_master=master,
            extra_args=("--store-sentinel", master, "--store-replicas", "1"),
        )  # fmt: skip
    finally:
        redis.close()


def tokens(protocol: StoreProtocol, sizes: Sizes, workdir: Path) -> Scenario:
    """ADM-STORE-10: the token limit through the store, every protocol; the merged trace's
    queued tokens within OB-TOK-1 over N servers (one server's bound for the script)."""
    sizes = replace(sizes, token_limit=8, prompt_tokens=4)

    def inject(redis: RedisServer, nodes: list[ServeNode], clock: FaultClock) -> None:
        clock.injected = clock.healed = time.monotonic()  # no fault: the store must agree

    return _on_loopback("tokens", protocol, sizes, workdir, inject)


SCENARIOS: Final[dict[str, Callable[[StoreProtocol, Sizes, Path], Scenario]]] = {
    "partition": partition,
    "redis-restart": redis_restart,
    "failover": failover,
    "node-kill": node_kill,
    "pause": pause,
    "tokens": tokens,
}


def run_fault(fault: str, protocol: StoreProtocol, sizes: Sizes | None = None) -> Scenario:
    """One fault with one protocol, in a fresh folder that is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="queueref-faults-") as folder:
        return SCENARIOS[fault](protocol, sizes or Sizes(), Path(folder))
