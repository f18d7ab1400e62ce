"""Admission latency of the multi-node store's protocols (part of `make bench`).

One server's `admit` + `release` against a real redis-server on loopback
(started for the run on a free port, stopped by its PID), for N = 4, 16, 64
servers in the deployment (the other servers' keys hold counts and live
heartbeats, so every read is real), beside one shared-memory check of the
same N (`AdmissionController.check_admission` over a `RawArray`). Medians and
spread of interleaved rounds; nothing is asserted. Run alone:
`PYTHONPATH=reference:tests python tools/bench_store.py`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "reference"), str(ROOT / "tests" / "helpers")]

SERVER_COUNTS = (4, 16, 64)
ROUNDS = 5
PER_ROUND = 300


async def _store_round(store: Any) -> float:
    started = time.perf_counter()
    for _ in range(PER_ROUND):
        decision = await store.admit(1)
        if decision.admitted:
            await store.release(1)
    return (time.perf_counter() - started) / PER_ROUND * 1e6


def _shared_memory_round(servers: int) -> float:
    from queueref.admission.controller import AdmissionController
    from queueref.admission.shared_stats import SharedAdmissionStats, allocate_admission_counters
    from queueref.admission.tracker import RequestTracker

    counters = allocate_admission_counters(max(servers, 2), 1 << 40)
    stats = SharedAdmissionStats(counters, max(servers, 2), 0)
    controller = AdmissionController(
        max_num_queued_reqs=1 << 40, tracker=RequestTracker(stats), shared_stats=stats
    )
    started = time.perf_counter()
    for _ in range(PER_ROUND):
        controller.check_admission(1)
    return (time.perf_counter() - started) / PER_ROUND * 1e6


async def _measure(url: str) -> list[dict[str, Any]]:
    import redis.asyncio

    from queueref.runtime.store.redis_config import StoreConfig, StoreProtocol
    from queueref.runtime.store.redis_store import RedisAdmissionStore

    rows = []
    client = redis.asyncio.Redis.from_url(url)
    for servers in SERVER_COUNTS:
        deployment = f"bench{servers}"
        for index in range(1, servers):  # the others: a count and a live lease each
            await client.set(f"queueref:{{{deployment}}}:count:{index}", 0)
            await client.set(f"queueref:{{{deployment}}}:hb:{index}", 1, px=600_000)
        stores = {}
        for protocol in StoreProtocol:
            cfg = StoreConfig(url, deployment, servers, 0, protocol, lease_ms=600_000)
            stores[protocol.value] = RedisAdmissionStore(cfg, 1 << 30)
            await stores[protocol.value].start()
        samples: dict[str, list[float]] = {name: [] for name in [*stores, "shared memory"]}
        for _ in range(ROUNDS):  # interleaved: every variant once per round
            for name, store in stores.items():
                samples[name].append(await _store_round(store))
            samples["shared memory"].append(_shared_memory_round(servers))
        base = statistics.median(samples["shared memory"])
        for name, values in samples.items():
            median = statistics.median(values)
            rows.append(
                {
                    "servers": servers,
                    "protocol": name,
                    "median_us": round(median, 2),
                    "min_us": round(min(values), 2),
                    "max_us": round(max(values), 2),
                    "vs_shared_memory": round(median / base, 1),
                }
            )
        for store in stores.values():
            await store.close()
    await client.aclose()
    return rows


def run(report: dict[str, Any]) -> None:
    """Measure and print the table; store the rows under `report["store"]`."""
    from queueref.runtime.store.redis_server import RedisServer

    server = RedisServer()
    server.start()
    try:
        rows = asyncio.run(_measure(server.url))
    finally:
        server.close()
    report["store"] = rows
    print("\nmulti-node store: admit + release of one server, µs (median [min, max])")
    print(f"{'N':>4}  {'protocol':<14} {'median':>9} {'spread':>20} {'x shared memory':>16}")
    for row in rows:
        spread = f"[{row['min_us']}, {row['max_us']}]"
        print(
            f"{row['servers']:>4}  {row['protocol']:<14} {row['median_us']:>9} "
            f"{spread:>20} {row['vs_shared_memory']:>16}"
        )


if __name__ == "__main__":
    results: dict[str, Any] = {}
    run(results)
    print(json.dumps(results["store"]))
