"""Admission protocols under load (part of `make bench`; `tools/bench.py` calls `run(report)`).

The three protocols under the same multi-process load (`run_stress`, N real
spawned servers, same seed and operation mix): upstream check-then-write,
write-then-check (`mode="write-then-check"`), and the exact baseline with a
`multiprocessing.Lock` around check + registration -- admission latency,
rejection rate, and the in-flight maxima. The cost of one `check_admission`
beside the installed vLLM's (0.33.0) is measured by `tools/bench.py` itself.

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
from typing import Any

PROTOCOLS = ("check-then-write", "write-then-check", "locked")


def _protocol_rows(
    num_servers: int = 4, cap: int = 8, max_n: int = 2, seconds: float = 1.5, seed: int = 7
) -> list[dict[str, Any]]:
    from queueref.runtime.stress import StressConfig, run_stress

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
    """The protocol table, in this interpreter (contracts on or off as it runs)."""
    return _protocol_rows()


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
    """The protocol table as Markdown."""
    protocols = [row for row in rows if row["bench"] == "admission-protocols"]
    lines: list[str] = []
    if protocols:
        first = protocols[0]
        lines += [
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
