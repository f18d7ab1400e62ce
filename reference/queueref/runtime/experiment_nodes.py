"""`queueref experiment --nodes K --store redis`: serve groups on one Redis, per protocol.

For each store protocol (`slots`, `snapshot`, `script`): start one real
redis-server on a free loopback port, start K serve groups ("nodes") of
`servers` API server processes each on their own ports, all admitting through
that Redis (`serve --store`), drive every node with the same closed-loop load,
stop, and check the merged records: the exact maximum global in-flight count
(the ADM-EV-4 sweep; for `script` the admitted measure of ADM-EV-5) against the
protocol's bound over all N = K * servers servers (ADM-STORE-9).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queueref.admission.protocol import Protocol
from queueref.oracle.trace_check import check_admission_trace
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.store import NodeStore
from queueref.runtime.loadgen import run_builtin
from queueref.runtime.nodes_plot import NodesSeries
from queueref.runtime.store.redis_config import StoreProtocol, allocate_node
from queueref.runtime.store.redis_server import RedisServer
from queueref.trace.files import read_trace_folder

#: The trace-checker mode whose measure and bound each store protocol keeps.
CHECK_MODES = {
    StoreProtocol.SLOTS: Protocol.CHECK_THEN_WRITE,
    StoreProtocol.SNAPSHOT: Protocol.CHECK_THEN_WRITE,
    StoreProtocol.SCRIPT: Protocol.LOCKED,
}


@dataclass(frozen=True)
class NodesRow:
    """One protocol's run across the nodes."""

    protocol: str
    nodes: int
    servers: int  # N: every server of every node
    cap: int
    max_in_flight: int
    bound: int
    ok: int  # 200 answers
    busy: int  # 503 answers
    violations: int  # decisions the semantics forbid

    @property
    def within_bound(self) -> bool:
        return self.max_in_flight <= self.bound and self.violations == 0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "within_bound": self.within_bound}


async def _load(urls: list[str], concurrency: int, seconds: float) -> tuple[int, int]:
    per_node = max(1, concurrency // len(urls))
    reports = await asyncio.gather(*(run_builtin(url, per_node, seconds) for url in urls))
    return sum(r.ok for r in reports), sum(r.busy for r in reports)


def run_protocol(
    protocol: StoreProtocol,
    *,
    nodes: int,
    servers: int,
    cap: int,
    concurrency: int,
    seconds: float,
    service_time_ms: float,
    trace_dir: Path,
    on_series: Callable[[NodesSeries], None] | None = None,
) -> NodesRow:
    """One protocol: its own Redis, `nodes` serve groups, the load, the merged records."""
    total = nodes * servers
    redis = RedisServer()
    redis.start()
    groups: list[HttpServers] = []
    try:
        for index in range(nodes):
            name = f"node-{index}"
            base = allocate_node(redis.url, "experiment", name, servers, total)
            store = NodeStore(redis.url, "experiment", name, base, total, protocol)
            groups.append(
                HttpServers(
                    servers,
                    cap,
                    Protocol.CHECK_THEN_WRITE,
                    service_time_ms=service_time_ms,
                    trace_dir=trace_dir,
                    store=store,
                )
            )
        for group in groups:
            group.start()
        ok, busy = asyncio.run(_load([g.url for g in groups], concurrency, seconds))
    finally:
        for group in groups:
            group.close()
        redis.close()
    events = read_trace_folder(trace_dir, total).events
    report = check_admission_trace(events, total, cap, 1, mode=CHECK_MODES[protocol])
    if on_series is not None:  # ADM-STORE-11: for the plot
        on_series(NodesSeries(protocol.value, events, report.bound))
    return NodesRow(
        protocol.value,
        nodes,
        total,
        cap,
        report.max_in_flight,
        report.bound,
        ok,
        busy,
        len(report.violations),
    )


def run_nodes_experiment(
    *,
    nodes: int,
    servers: int,
    cap: int,
    concurrency: int,
    seconds: float,
    service_time_ms: float,
    protocols: list[StoreProtocol] | None = None,
    progress: Callable[[NodesRow], None] | None = None,
    on_series: Callable[[NodesSeries], None] | None = None,
) -> list[NodesRow]:
    """Every protocol in turn, each with a fresh Redis and a fresh trace folder."""
    rows = []
    for protocol in protocols or list(StoreProtocol):
        with tempfile.TemporaryDirectory(prefix="queueref-nodes-") as folder:
            row = run_protocol(
                protocol,
                nodes=nodes,
                servers=servers,
                cap=cap,
                concurrency=concurrency,
                seconds=seconds,
                service_time_ms=service_time_ms,
                trace_dir=Path(folder),
                on_series=on_series,
            )
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def format_rows(rows: list[NodesRow]) -> str:
    """The table: one row per protocol."""
    lines = [
        "| protocol | nodes | servers | cap | max global in flight | bound | within bound "
        "| 200 | 503 |",
        "|---|---:|---:|---:|---:|---:|:---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.protocol} | {row.nodes} | {row.servers} | {row.cap} | {row.max_in_flight} "
            f"| {row.bound} | {'yes' if row.within_bound else 'NO'} | {row.ok} | {row.busy} |"
        )
    return "\n".join(lines)
