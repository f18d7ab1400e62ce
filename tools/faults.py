"""`make faults`: each fault under load across `serve --store` nodes; build/faults-report.json.

For every fault (partition, redis-restart, failover, node-kill, pause, tokens) and
every store protocol (slots, snapshot, script), `queueref.runtime.faults.runs` starts its
own Redis (loopback; a network namespace of its own for the partition; a
Sentinel with one replica for the failover), two `serve --store` nodes in
their own process groups, a bounded load, the fault and its heal, and judges
the merged trace (E2E-FAULT-1..4). It also measures what WAIT costs a write
(ADM-FAULT-3). Writes `build/faults-report.json`, prints one line per
scenario as it goes, and exits 1 when a scenario fails or anything it started
(a process, a namespace, a link) is left behind. Needs root (namespaces).

    python tools/faults.py [--faults partition,pause] [--protocols slots] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "reference"))

from queueref.runtime.faults.parts import (  # noqa: E402
    SentinelRedis,
    leftovers,
    ports_in_use,
    still_running,
)
from queueref.runtime.faults.runs import FAULTS, Sizes, run_fault  # noqa: E402
from queueref.runtime.nodes_plot import NodesSeries, plot_nodes  # noqa: E402
from queueref.runtime.store.redis_config import StoreConfig, StoreProtocol  # noqa: E402
from queueref.runtime.store.redis_store import RedisAdmissionStore  # noqa: E402


def wait_latency(writes: int = 200) -> dict[str, Any]:
    """ADM-FAULT-3: the time of one absolute write, without WAIT and with WAIT 1 (ms)."""
    redis = SentinelRedis()
    try:
        redis.start()

        async def measure(replicas: int) -> list[float]:
            config = StoreConfig(
                redis.url, "latency", 1, 0, sentinel_master=SentinelRedis.MASTER, replicas=replicas
            )
            store = RedisAdmissionStore(config, 1)
            await store.start()
            times = []
            for _ in range(writes):
                began = time.perf_counter()
                assert await store.heartbeat()
                times.append((time.perf_counter() - began) * 1000)
            await store.close()
            return times

        result: dict[str, Any] = {"writes": writes}
        for replicas in (0, 1):
            times = sorted(asyncio.run(measure(replicas)))
            result[f"replicas_{replicas}"] = {
                "p50_ms": round(statistics.median(times), 3),
                "p99_ms": round(times[int(0.99 * (len(times) - 1))], 3),
            }
        return result
    finally:
        redis.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults")
    parser.add_argument(
        "--protocols", default=",".join(p.value for p in StoreProtocol), help="store protocols"
    )
    parser.add_argument("--out", default=str(ROOT / "build" / "faults-report.json"))
    args = parser.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        print(f"faults: unknown fault(s) {unknown}; known: {list(FAULTS)}", file=sys.stderr)
        return 2
    try:
        protocols = [StoreProtocol(p) for p in args.protocols.split(",") if p]
    except ValueError as error:
        print(f"faults: {error}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("faults: needs root (it makes network namespaces): run `make faults` as root",
              file=sys.stderr)  # fmt: skip
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    scenarios = []
    failed = False
    plots = []
    for fault in faults:
        series: list[NodesSeries] = []
        for protocol in protocols:
            scenario = run_fault(fault, protocol)
            scenarios.append(scenario.to_json())
            if scenario.series is not None:
                series.append(scenario.series)
            failed |= not scenario.passed
            print(
                f"faults: {scenario.name:26} max {scenario.max_in_flight} bound {scenario.bound} "
                f"+ overshoot {scenario.expected_overshoot}: "
                f"{'within' if scenario.within_bound else 'BROKEN'}; records lost "
                f"{scenario.records_lost}; recovered {scenario.recovered}; "
                f"{scenario.seconds:.1f} s",
                flush=True,
            )
        # ADM-STORE-11: the global count per protocol, the fault marked on the time axis.
        picture = out.parent / f"faults-{fault}.png"
        title = f"{fault}: 2 serve --store nodes, one Redis, the global count per protocol"
        if plot_nodes(series, Sizes().cap, title, picture):
            plots.append(str(picture))
    latency = wait_latency()
    print(f"faults: one write {latency['replicas_0']} without WAIT, {latency['replicas_1']} "
          "with WAIT 1", flush=True)  # fmt: skip
    left = {
        "processes": still_running(),
        "namespaces_and_links": leftovers(),
        "ports": ports_in_use(),
    }
    report = {
        "scenarios": scenarios,
        "wait_latency": latency,
        "left_behind": left,
        "plots": plots,
        "seconds": round(time.monotonic() - began, 1),
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    if any(left.values()):
        print(f"faults: LEFT BEHIND {left}", file=sys.stderr)
        failed = True
    verdict = "FAILED" if failed else "all within their bounds, recovered, no record lost"
    print(f"faults: {len(scenarios)} scenarios in {report['seconds']} s; report {out}; "
          f"{verdict}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
