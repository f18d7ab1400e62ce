"""Admission benchmarks (part of `make bench`; `tools/bench.py` calls `run(report)`).

Two tables, measured in one run:

1. `check_admission` cost: one server's check with shared stats over N = 1,
   2, 4, 8, 16, 64 slots of a real `RawArray`, beside the single-server local
   count (no shared stats). The read is O(N): one 8-byte load per slot.
2. The three protocols under the same multi-process load (`run_stress`, N
   real spawned servers, same seed and operation mix): upstream
   check-then-write, write-then-check (`mode="reserve"`), and the exact
   baseline with a `multiprocessing.Lock` around check + registration --
   admission latency, rejection rate, and the in-flight maxima.

Contracts are off for the measurements (`python -O`): when this module runs
with contracts on, it measures in a `python -O` subprocess. Run alone:
`PYTHONPATH=reference python tools/bench_admission.py`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

SERVER_COUNTS = (1, 2, 4, 8, 16, 64)
PROTOCOLS = ("check-then-write", "write-then-check", "locked")


def _check_cost_rows(iterations: int = 20_000, repeats: int = 5) -> list[dict[str, Any]]:
    import multiprocessing

    from queueref.admission import AdmissionController, SharedAdmissionStats
    from queueref.tracker import RequestTracker

    def best_ns(controller: AdmissionController) -> float:
        check = controller.check_admission
        timings = []
        for _ in range(repeats):
            started = time.perf_counter_ns()
            for _ in range(iterations):
                check(1)
            timings.append((time.perf_counter_ns() - started) / iterations)
        return min(timings)

    def best_sum_ns(counters: Any, servers: int) -> float:
        # The floor of any shared read: one Python-level load of counter 0 per slot.
        step = SharedAdmissionStats.COUNTERS_PER_SLOT
        timings = []
        for _ in range(repeats):
            started = time.perf_counter_ns()
            for _ in range(iterations):
                sum(counters[index * step] for index in range(servers))
            timings.append((time.perf_counter_ns() - started) / iterations)
        return min(timings)

    cap = 1 << 40  # never reached: every check admits and nothing is written
    rows: list[dict[str, Any]] = []
    local = AdmissionController(cap)
    rows.append(
        {
            "bench": "admission-check-cost",
            "path": "local count",
            "servers": 1,
            "ns_per_check": round(best_ns(local), 1),
        }
    )
    context = multiprocessing.get_context("spawn")
    for servers in SERVER_COUNTS:
        counters = context.RawArray("q", SharedAdmissionStats.num_counters(servers))
        for index in range(servers):
            counters[index * SharedAdmissionStats.COUNTERS_PER_SLOT] = 1
        stats = SharedAdmissionStats(counters, servers, 0)
        shared = AdmissionController(cap, tracker=RequestTracker(stats), shared_stats=stats)
        rows.append(
            {
                "bench": "admission-check-cost",
                "path": "shared stats",
                "servers": servers,
                "ns_per_check": round(best_ns(shared), 1),
            }
        )
        rows.append(
            {
                "bench": "admission-check-cost",
                "path": "bare sum (upstream get_num_requests style, no check)",
                "servers": servers,
                "ns_per_check": round(best_sum_ns(counters, servers), 1),
            }
        )
    for row in rows:
        row["contracts"] = __debug__
    return rows


def _protocol_rows(
    num_servers: int = 4, cap: int = 8, max_n: int = 2, seconds: float = 1.5, seed: int = 7
) -> list[dict[str, Any]]:
    from queueref.stress import StressConfig, run_stress

    rows: list[dict[str, Any]] = []
    for protocol in PROTOCOLS:
        config = StressConfig(
            num_servers=num_servers,
            max_num_queued_reqs=cap,
            max_n=max_n,
            protocol=protocol,
            seconds=seconds,
            seed=seed,
        )
        result = run_stress(config)
        latencies = sorted(ns for per_server in result.latencies_ns for ns in per_server)
        attempts = result.admitted + result.rejected
        rows.append(
            {
                "bench": "admission-protocols",
                "protocol": protocol,
                "servers": num_servers,
                "cap": cap,
                "max_n": max_n,
                "seconds": seconds,
                "attempts": attempts,
                "admitted_per_s": round(result.admitted / seconds),
                "rejection_rate": round(result.rejection_rate, 3),
                "latency_p50_us": round(latencies[len(latencies) // 2] / 1000, 2),
                "latency_p99_us": round(latencies[int(len(latencies) * 0.99)] / 1000, 2),
                "latency_mean_us": round(statistics.fmean(latencies) / 1000, 2),
                "max_in_flight": result.max_in_flight,
                "max_admitted_in_flight": result.max_admitted_in_flight,
                "bound": config.bound if protocol == "check-then-write" else cap,
                "leaked_slots": sum(result.slots_after),
                "contracts": __debug__,
            }
        )
    return rows


def measure() -> list[dict[str, Any]]:
    """Both tables, in this interpreter (contracts on or off as it runs)."""
    return _check_cost_rows() + _protocol_rows()


def _measure_without_contracts() -> list[dict[str, Any]]:
    """Run `measure` in a `python -O` subprocess (icontract is off under -O)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    env.pop("QUEUEREF_DEEP_CHECKS", None)
    completed = subprocess.run(
        [sys.executable, "-O", os.path.abspath(__file__), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    rows: list[dict[str, Any]] = json.loads(completed.stdout.splitlines()[-1])
    return rows


def run(report: list[dict[str, Any]]) -> None:
    """Append the admission benchmark rows to `report` and print them as Markdown tables."""
    rows = _measure_without_contracts() if __debug__ else measure()
    report.extend(rows)
    print(markdown(rows))


def markdown(rows: list[dict[str, Any]]) -> str:
    """The two tables as Markdown."""
    cost = [row for row in rows if row["bench"] == "admission-check-cost"]
    protocols = [row for row in rows if row["bench"] == "admission-protocols"]
    lines = [
        "### check_admission cost (contracts off)",
        "",
        "| path | servers | ns per check |",
        "|---|---:|---:|",
    ]
    lines += [f"| {r['path']} | {r['servers']} | {r['ns_per_check']} |" for r in cost]
    if protocols:
        first = protocols[0]
        lines += [
            "",
            f"### Protocols under the same load ({first['servers']} processes, "
            f"M={first['cap']}, W={first['max_n']}, {first['seconds']} s each)",
            "",
            "| protocol | attempts | admitted/s | rejection rate | p50 µs | p99 µs "
            "| max in flight | max admitted | cap or bound |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['protocol']} | {r['attempts']} | {r['admitted_per_s']} | "
            f"{r['rejection_rate']} | {r['latency_p50_us']} | {r['latency_p99_us']} | "
            f"{r['max_in_flight']} | {r['max_admitted_in_flight']} | {r['bound']} |"
            for r in protocols
        ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if "--json" in argv:
        print(json.dumps(measure()))
        return 0
    report: list[dict[str, Any]] = []
    run(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
