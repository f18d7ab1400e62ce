"""`experiment --render-ms`: vLLM's whole admission path against the reservations (E2E-REN-6).

For each preflight mode in turn (`queueref.runtime.http.render`: vLLM 0.31.0-0.33.0's
`two-check` path and the two reservations at preflight proposed for vLLM issue
#58192), start fresh servers that render every request for `--render-ms`, load them
with the built-in client, stop them and read from the servers' own records: the
requests rendered and then refused (wasted renders, counted by check-trace from the
`preflight` and `reject` records, ADM-EV-7), the refusals at preflight, the 503 rate,
the largest global in-flight count (`check_admission_trace`, the mode's measure)
against the path's bound (`queueref.admission.paths.path_bound`), and the clients'
p50 / p99 latency. The answer to #58192 in numbers is `specs/preflight-reservations.md`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queueref.admission.paths import AdmissionPath, path_bound
from queueref.runtime.experiment import ModeResult, run_mode
from queueref.runtime.http.render import PREFLIGHT_MODES, RenderConfig, RenderTime

#: The largest n of a request the load client sends (its body has no n): W.
LOAD_MAX_N = 1


@dataclass
class RenderRow:
    """One preflight mode's run (E2E-REN-6)."""

    path: AdmissionPath
    render: RenderTime
    result: ModeResult

    @property
    def wasted_renders(self) -> int:
        """Requests rendered, then refused at registration: from the records (E2E-REN-5)."""
        return self.result.trace.counts.get("wasted_render", 0)

    @property
    def refused_at_preflight(self) -> int:
        """Requests refused before rendering (nothing rendered in vain)."""
        return self.result.trace.counts.get("reject", 0) - self.wasted_renders

    @property
    def max_in_flight(self) -> int:
        """The largest global in-flight count, by the mode's measure (ADM-EV-4, ADM-EV-5)."""
        return self.result.max_in_flight

    @property
    def bound(self) -> int:
        """`path_bound` of the path: M for write-then-check, M + (N-1)*min(M, W) else."""
        result = self.result
        return path_bound(self.path, result.num_servers, result.cap, LOAD_MAX_N)

    @property
    def within_bound(self) -> bool:
        """Within the path's bound, and nothing the records forbid (check-trace)."""
        return self.max_in_flight <= self.bound and self.result.trace.ok

    def latency(self, q: float) -> float | None:
        """The clients' q-quantile latency in seconds (200s and 503s alike); None if none."""
        value = self.result.load.percentile(q)
        return None if math.isnan(value) else value

    def to_dict(self) -> dict[str, Any]:
        """One row of `experiment --render-ms --json` (E2E-REN-6)."""
        result = self.result
        return {
            "preflight": self.path.value,
            "render_ms": str(self.render),
            "num_servers": result.num_servers,
            "cap": result.cap,
            "wasted_renders": self.wasted_renders,
            "refused_at_preflight": self.refused_at_preflight,
            "busy_rate": result.load.busy_rate,
            "max_in_flight": self.max_in_flight,
            "measure": result.trace.measure,
            "bound": self.bound,
            "within_bound": self.within_bound,
            "forbidden_decisions": len(result.trace.violations),
            "latency_p50_s": self.latency(0.5),
            "latency_p99_s": self.latency(0.99),
            "final_slots": list(result.final_slots),
            "load": result.load.to_dict(),
        }


def run_render_experiment(
    *,
    num_servers: int,
    cap: int,
    concurrency: int,
    duration: float,
    render: RenderTime,
    paths: Sequence[AdmissionPath] = PREFLIGHT_MODES,
    service_time_ms: float = 200.0,
    port: int = 0,
    trace_dir: str | Path | None = None,
    progress: Callable[[RenderRow], None] | None = None,
) -> list[RenderRow]:
    """Every preflight mode in turn, each on fresh processes (E2E-REN-6)."""
    rows: list[RenderRow] = []
    for path in paths:
        config = RenderConfig(render, path)
        result = run_mode(
            config.protocol,
            num_servers=num_servers,
            cap=cap,
            concurrency=concurrency,
            duration=duration,
            service_time_ms=service_time_ms,
            port=port,
            trace_dir=trace_dir,
            render=config,
        )
        rows.append(RenderRow(path, render, result))
        if progress is not None:
            progress(rows[-1])
    return rows


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_render_table(rows: Sequence[RenderRow]) -> str:
    """The table of `experiment --render-ms`, as Markdown (E2E-REN-6)."""
    lines = [
        "| preflight | wasted renders | refused at preflight | 200 | 503 | 503 rate "
        "| max global in flight | bound | within bound | p50 (s) | p99 (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|",
    ]
    for row in rows:
        load = row.result.load
        lines.append(
            f"| {row.path.value} | {row.wasted_renders} | {row.refused_at_preflight} | "
            f"{load.ok} | {load.busy} | {load.busy_rate:.1%} | {row.max_in_flight} | "
            f"{row.bound} | {'yes' if row.within_bound else 'NO'} | "
            f"{_seconds(row.latency(0.5))} | {_seconds(row.latency(0.99))} |"
        )
    return "\n".join(lines)


def plot_names(rows: Sequence[RenderRow]) -> list[str]:
    """The plot's name of each curve: the preflight mode and its wasted renders."""
    return [f"{row.path.value}, {row.wasted_renders} wasted renders" for row in rows]
