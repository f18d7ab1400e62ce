"""The global count across nodes over time, per store protocol, with a fault marked (ADM-STORE-11).

Draws what `queueref experiment --nodes K --store redis --plot FILE.png` and
`make faults` (one figure per fault) measured: one panel per store protocol,
the global count from the merged records (check-then-write's in-flight
measure for `slots` and `snapshot`, the admitted measure for `script`:
departures at `t_before`, ADM-EV-5), the cap M, the protocol's bound, the
bound plus the overshoot a fault may add (OB-FAULT-1 .. OB-FAULT-5), and the
fault as a shaded span (or a line, for an instant fault such as a kill) on
the time axis. Needs matplotlib (the `plot` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queueref.trace.events import AdmissionEvent


@dataclass(frozen=True)
class NodesSeries:
    """One protocol's run: its merged records and what to draw beside them."""

    protocol: str
    events: list[AdmissionEvent] = field(repr=False)
    bound: int
    overshoot: int = 0  # the fault's expected overshoot over `bound`
    fault: tuple[str, float, float] | None = None  # name, injected, healed (monotonic s)

    @property
    def admitted_measure(self) -> bool:
        return self.protocol == "script"


def global_counts(
    events: Sequence[AdmissionEvent], admitted_measure: bool, origin: float
) -> tuple[list[float], list[int]]:
    """The global count's step function, seconds from `origin`, by the protocol's measure.

    Admissions count at `t`; departures at `t` (ADM-EV-4), or at `t_before` for the
    admitted measure (ADM-EV-5); at one instant a departure goes first.
    """
    points: list[tuple[float, int, int]] = []
    for event in events:
        if event.event == "admit":
            points.append((event.t, 1, event.n))
        elif event.event in ("finish", "abort"):
            early = admitted_measure
            at = event.t_before if early and event.t_before is not None else event.t
            points.append((at, 0, -event.n))
    points.sort()
    times, levels, level = [], [], 0
    for at, _, delta in points:
        level += delta
        times.append(at - origin)
        levels.append(level)
    return times, levels


def nodes_figure(series: Sequence[NodesSeries], cap: int, title: str) -> Any:
    """One panel per protocol; raises `ImportError` without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(1, len(series))
    figure, panels = plt.subplots(rows, 1, figsize=(11, 2.6 * rows), sharex=True, squeeze=False)
    for axes, one in zip(panels[:, 0], series, strict=False):
        origin = min((e.t for e in one.events), default=0.0)
        times, levels = global_counts(one.events, one.admitted_measure, origin)
        axes.step(times, levels, where="post", label=f"global count (max {max(levels, default=0)})")
        axes.axhline(cap, color="grey", linestyle=":", linewidth=1, label=f"cap M = {cap}")
        axes.axhline(one.bound, color="tab:green", linestyle="--", linewidth=1,
                     label=f"bound = {one.bound}")  # fmt: skip
        if one.overshoot:
            worst = one.bound + one.overshoot
            axes.axhline(worst, color="tab:red", linestyle="-.", linewidth=1,
                         label=f"bound + fault's overshoot = {worst}")  # fmt: skip
        if one.fault is not None:
            name, start, end = one.fault
            if end - start > 0.01:
                axes.axvspan(start - origin, end - origin, color="tab:orange", alpha=0.2,
                             label=f"{name}")  # fmt: skip
            else:
                axes.axvline(start - origin, color="tab:orange", linewidth=2, label=name)
        axes.set_ylabel(f"{one.protocol}\nin flight")
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8)
    panels[-1, 0].set_xlabel("seconds since the run's first record")
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_nodes(series: Sequence[NodesSeries], cap: int, title: str, path: str | Path) -> bool:
    """Write `nodes_figure` to `path`; False without matplotlib."""
    try:
        figure = nodes_figure(series, cap, title)
    except ImportError:
        return False
    import matplotlib.pyplot as plt

    figure.savefig(str(path), dpi=100)
    plt.close(figure)
    return True
