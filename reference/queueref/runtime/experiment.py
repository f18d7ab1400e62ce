"""The seed pull request's test plan, reproduced: serve + load for each admission mode.

Models the test plan of vLLM PR #54746: 4 API servers with
`--max_num_queued_reqs 10`, 80 concurrent clients, and the number of running
requests -- 40 before the change (each server capped itself), 10 after. For
each mode, `run_experiment` starts the real HTTP servers
(`queueref.runtime.http.group`), drives them with the built-in load client
(`queueref.runtime.loadgen`), stops them and computes the exact maximum global
in-flight count from the servers' own admit/finish records
(`queueref.oracle.trace_check.check_admission_trace`, over the sweeps of
`queueref.trace.events`), never from sampling.

Deliberate divergences from vLLM: the test plan of vLLM PR #54746 measured by watching
`vllm:num_requests_running` (sampling); queueref computes the maximum from
monotonic event stamps (ADM-EV-4, ADM-EV-5), so a short peak is not missed.
"""

from __future__ import annotations

import asyncio
import bisect
import errno
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queueref.admission.controller import TokenRuleName
from queueref.admission.protocol import Protocol, parse_protocol
from queueref.oracle.trace_check import check_admission_trace
from queueref.oracle.trace_report import TraceReport
from queueref.runtime.http.group import HttpServers
from queueref.runtime.http.render import RenderConfig
from queueref.runtime.http.worker import SERVE_PROTOCOLS, ServeMode
from queueref.runtime.loadgen import LoadReport, run_builtin
from queueref.trace.events import AdmissionEvent

#: The requests of a token-limit run (E2E-EXP-3): (n, prompt tokens), mixed lengths, n 1..4.
TOKEN_REQUESTS: tuple[tuple[int, int], ...] = ((1, 8), (2, 16), (3, 4), (4, 12))

#: The largest n of a token-limit run: the W of its request bound.
TOKEN_MAX_N = max(n for n, _ in TOKEN_REQUESTS)


def token_body(n: int, prompt_tokens: int) -> bytes:
    """A completion body of `n` samples of a prompt of `prompt_tokens` token ids."""
    record = {
        "model": "queueref-simulated",
        "prompt_token_ids": list(range(prompt_tokens)),
        "n": n,
        "max_tokens": 16,
    }
    return json.dumps(record).encode()


def merge_loads(reports: Sequence[LoadReport], concurrency: int) -> LoadReport:
    """One report of several clients run side by side for the same duration."""
    merged = LoadReport(reports[0].client, concurrency, reports[0].duration)
    for report in reports:
        merged.sent += report.sent
        merged.errors += report.errors
        merged.bad_busy_bodies += report.bad_busy_bodies
        merged.latencies.extend(report.latencies)
        for status, count in report.status.items():
            merged.status[status] = merged.status.get(status, 0) + count
    return merged


async def _mixed_load(url: str, concurrency: int, duration: float) -> LoadReport:
    """The clients split over `TOKEN_REQUESTS`, one body each, all at once (E2E-EXP-3)."""
    kinds = len(TOKEN_REQUESTS)
    shares = [concurrency // kinds + (1 if k < concurrency % kinds else 0) for k in range(kinds)]
    runs = [
        run_builtin(url, share, duration, body=token_body(n, p))
        for share, (n, p) in zip(shares, TOKEN_REQUESTS, strict=True)
        if share > 0
    ]
    return merge_loads(await asyncio.gather(*runs), concurrency)


@dataclass
class ModeResult:
    """One mode's run: the load seen by the clients and the servers' records (E2E-EXP-1)."""

    mode: ServeMode
    num_servers: int
    cap: int
    load: LoadReport
    trace: TraceReport
    events: list[AdmissionEvent]
    final_slots: list[int]
    crashed: list[tuple[int, int | None]]
    port: int
    pids: list[int] = field(default_factory=list)

    @property
    def max_in_flight(self) -> int:
        """The exact maximum global in-flight count, by the mode's measure (E2E-EXP-1)."""
        return self.trace.max_in_flight

    @property
    def bound(self) -> int:
        """local: N*M; check-then-write: M + (N-1)*min(M, W); write-then-check: M (E2E-EXP-1)."""
        return self.trace.bound

    @property
    def max_queued_tokens(self) -> int | None:
        """The exact maximum global queued prompt tokens (E2E-EXP-3); None without Mt."""
        return self.trace.max_queued_tokens

    @property
    def token_bound(self) -> int | None:
        """The bound of the queued tokens (ORC-TR-14); None without a token limit."""
        return self.trace.token_bound

    @property
    def within_bound(self) -> bool:
        """The maximum respects the mode's bound, and the tokens theirs (E2E-EXP-1, E2E-EXP-3)."""
        return self.max_in_flight <= self.bound and self.trace.token_bound_holds

    def to_dict(self) -> dict[str, Any]:
        """One row of `experiment --json` (E2E-EXP-2)."""
        return {
            "mode": self.mode,
            "num_servers": self.num_servers,
            "cap": self.cap,
            "max_in_flight": self.max_in_flight,
            "measure": self.trace.measure,
            "bound": self.bound,
            "within_bound": self.within_bound,
            "max_num_queued_tokens": self.trace.max_num_queued_tokens,
            "token_rule": self.trace.token_rule,
            "max_queued_tokens": self.max_queued_tokens,
            "max_request_tokens": self.trace.max_request_tokens,
            "token_bound": self.token_bound,
            "forbidden_decisions": len(self.trace.violations),
            "admitted": self.admitted,
            "departed": self.departed,
            "final_slots": list(self.final_slots),
            "crashed": [list(crash) for crash in self.crashed],
            "load": self.load.to_dict(),
        }

    @property
    def admitted(self) -> int:
        """Slots admitted, from the records."""
        return sum(e.n for e in self.events if e.event == "admit")

    @property
    def departed(self) -> int:
        """Slots finished or aborted, from the records."""
        return sum(e.n for e in self.events if e.event in ("finish", "abort"))


def timeline(events: Sequence[AdmissionEvent], mode: str) -> tuple[list[float], list[int]]:
    """The global in-flight step function (times from the first event), by the mode's measure.

    Admissions count at `t`; departures at `t` (local, check-then-write: ADM-EV-4) or
    at `t_before` (write-then-check: ADM-EV-5), with the same tie rules as the sweeps.
    """
    reserve = parse_protocol(mode) is Protocol.WRITE_THEN_CHECK
    points: list[tuple[float, int, int]] = []
    for event in events:
        if event.event == "admit":
            points.append((event.t, 1 if reserve else 0, event.n))
        elif event.event in ("finish", "abort"):
            at = event.t_before if reserve and event.t_before is not None else event.t
            points.append((at, 0 if reserve else 1, -event.n))
    points.sort(key=lambda point: (point[0], point[1]))
    if not points:
        return [], []
    origin = points[0][0]
    times: list[float] = []
    levels: list[int] = []
    level = 0
    for at, _rank, delta in points:
        level += delta
        times.append(at - origin)
        levels.append(level)
    return times, levels


def run_mode(
    mode: ServeMode,
    *,
    num_servers: int,
    cap: int,
    concurrency: int,
    duration: float,
    service_time_ms: float = 200.0,
    port: int = 0,
    trace_dir: str | Path | None = None,
    max_num_queued_tokens: int | None = None,
    token_rule: TokenRuleName = "ge",
    render: RenderConfig | None = None,
) -> ModeResult:
    """Serve + load + stop for one mode; check the merged records (E2E-EXP-1).

    With `max_num_queued_tokens` the servers also cap their queued prompt
    tokens and the clients send the mixed `TOKEN_REQUESTS` (E2E-EXP-3). With
    `render` they render first (E2E-REN-6); the records go to `<trace_dir>/<path>`.
    """
    tokens = max_num_queued_tokens is not None
    rule = token_rule
    label = render.path.value if render is not None else str(mode)
    with tempfile.TemporaryDirectory(prefix=f"queueref-{label}-") as scratch:
        where = Path(trace_dir) / label if trace_dir is not None else Path(scratch)
        servers = HttpServers(
            num_servers,
            cap,
            mode,
            port=port,
            service_time_ms=service_time_ms,
            trace_dir=where,
            max_num_queued_tokens=max_num_queued_tokens,
            token_rule=rule,
            render=render,
        )
        with servers:
            pids = servers.pids()
            if tokens:
                load = asyncio.run(_mixed_load(servers.url, concurrency, duration))
            else:
                load = asyncio.run(run_builtin(servers.url, concurrency, duration))
        result = servers.result
        events = servers.read_events()
        trace = check_admission_trace(
            events,
            num_servers,
            cap,
            TOKEN_MAX_N if tokens else 1,
            mode=mode,
            max_num_queued_tokens=max_num_queued_tokens,
            token_rule=rule,
        )
        return ModeResult(
            mode,
            num_servers,
            cap,
            load,
            trace,
            events,
            result.final_slots,
            result.crashed,
            result.port,
            pids,
        )


def run_experiment(
    *,
    num_servers: int,
    cap: int,
    concurrency: int,
    duration: float,
    service_time_ms: float = 200.0,
    modes: Sequence[ServeMode] = SERVE_PROTOCOLS,
    port: int = 0,
    trace_dir: str | Path | None = None,
    progress: Callable[[ModeResult], None] | None = None,
    max_num_queued_tokens: int | None = None,
    token_rule: TokenRuleName = "ge",
) -> list[ModeResult]:
    """Every mode in turn, each on fresh processes (E2E-EXP-1); `progress` after each."""
    results: list[ModeResult] = []
    for mode in modes:
        result = run_mode(
            mode,
            num_servers=num_servers,
            cap=cap,
            concurrency=concurrency,
            duration=duration,
            service_time_ms=service_time_ms,
            port=port,
            trace_dir=trace_dir,
            max_num_queued_tokens=max_num_queued_tokens,
            token_rule=token_rule,
        )
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def format_table(results: Sequence[ModeResult]) -> str:
    """The results table, as Markdown (E2E-EXP-1)."""
    header = (
        "| mode | max global in flight | bound | within bound | 200 | 503 | 503 rate "
        "| throughput (req/s) |"
    )
    rule = "|---|---:|---:|:---:|---:|---:|---:|---:|"
    tokens = any(r.token_bound is not None for r in results)
    if tokens:  # E2E-EXP-3: the queued tokens against their bound
        header += " max global queued tokens | token bound | tokens within |"
        rule += "---:|---:|:---:|"
    lines = [header, rule]
    for r in results:
        row = (
            f"| {r.mode} | {r.max_in_flight} | {r.bound} | "
            f"{'yes' if r.max_in_flight <= r.bound else 'NO'} | {r.load.ok} | {r.load.busy} | "
            f"{r.load.busy_rate:.1%} | {r.load.throughput:.1f} |"
        )
        if tokens:
            row += (
                f" {r.max_queued_tokens} | {r.token_bound} | "
                f"{'yes' if r.trace.token_bound_holds else 'NO'} |"
            )
        lines.append(row)
    return "\n".join(lines)


def check_output_path(path: str | Path) -> Path:
    """E2E-EXP-2: a file path that can be written, checked before any server starts.

    Creates the missing parent folders; raises `OSError` naming the path.
    """
    target = Path(path)
    if not str(path).strip() or target.is_dir():
        raise IsADirectoryError(f"{path!r} is a folder, not a file")
    for folder in target.parents:
        if folder.exists():
            if not folder.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(folder))
            break
    target.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(target.parent, os.W_OK) or (
        target.exists() and not os.access(target, os.W_OK)
    ):
        raise PermissionError(f"{path} is not writable")
    return target


#: Per mode, in drawing order: its marker and its line width. The first drawn is the
#: widest, so a curve drawn over it leaves its edges in sight (E2E-EXP-4).
PLOT_STYLES: tuple[tuple[str, float], ...] = (("o", 2.8), ("s", 1.9), ("^", 1.1))


def _marker_points(times: Sequence[float], position: int, count: int = 24) -> list[int]:
    """Indices of `count` points evenly spaced in time, shifted per mode so markers alternate."""
    if not times:
        return []
    span = times[-1] - times[0]
    step = span / count if span > 0 else 1.0
    shift = step * (0.2 + 0.3 * (position % len(PLOT_STYLES)))
    wanted = [times[0] + shift + k * step for k in range(count)]
    return sorted({max(0, bisect.bisect_right(times, t) - 1) for t in wanted})


def plot_figure(results: Sequence[ModeResult], names: Sequence[str] = ()) -> Any:
    """The matplotlib figure of `plot` (E2E-EXP-1, E2E-EXP-4); `ImportError` without matplotlib.

    The cap M is a line of its own (solid, grey, wide, under the curves);
    every mode's bound is a dashed line in the mode's colour (local N*M,
    check-then-write M + (N-1)*min(M, W), write-then-check M). Modes that
    overlap stay apart: each has its own marker, placed at staggered
    intervals, and its own line width, and its maximum is marked. Modes are
    named by their protocol names (or `names`, one per result); the legend sits outside
    the axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(11, 4.5))
    cap = results[0].cap if results else 0
    axes.axhline(
        cap, color="0.55", linestyle="-", linewidth=5, alpha=0.5, zorder=1, label=f"cap M = {cap}"
    )
    axes.annotate(
        f"M = {cap}",
        xy=(1.0, cap),
        xycoords=("axes fraction", "data"),
        xytext=(4, 0),
        textcoords="offset points",
        va="center",
        color="0.35",
    )
    for position, result in enumerate(results):
        name = names[position] if names else parse_protocol(result.mode).value
        marker, width = PLOT_STYLES[position % len(PLOT_STYLES)]
        times, levels = timeline(result.events, result.mode)
        (line,) = axes.step(
            times,
            levels,
            where="post",
            linewidth=width,
            marker=marker,
            markersize=7,
            markerfacecolor="white",
            markevery=_marker_points(times, position),
            zorder=3 + position,
            label=f"{name} (max {result.max_in_flight})",
        )
        if levels:
            peak = levels.index(max(levels))
            axes.plot(
                [times[peak]],
                [levels[peak]],
                linestyle="none",
                marker=marker,
                markersize=11,
                color=line.get_color(),
                markerfacecolor="none",
                markeredgecolor=line.get_color(),
                markeredgewidth=2,
                zorder=10,
            )
        axes.axhline(
            result.bound,
            color=line.get_color(),
            linestyle="--",
            linewidth=1.2,
            zorder=2,
            label=f"{name} bound = {result.bound}",
        )
    axes.set_xlabel("seconds since the first admission")
    axes.set_ylabel("global requests in flight")
    axes.set_title(
        f"{results[0].num_servers if results else 0} API servers, cap M = {cap}: "
        "global in-flight per admission protocol (a ring marks each maximum)"
    )
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.tight_layout()
    return figure


def plot(results: Sequence[ModeResult], path: str | Path, names: Sequence[str] = ()) -> bool:
    """Write `plot_figure` to `path` (E2E-EXP-1); False without matplotlib."""
    try:
        figure = plot_figure(results, names)
    except ImportError:
        return False
    import matplotlib.pyplot as plt

    figure.savefig(str(path), dpi=100)
    plt.close(figure)
    return True
