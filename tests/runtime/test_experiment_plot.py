"""The experiment's plot, drawn from hand-made records (E2E-EXP-1, E2E-EXP-4); no process.

Three modes as the experiment sees them: local near N*M, check-then-write and
write-then-check both at M for the whole run (the overlap the issue shows).
`plot_checks.plot_problems` reads the figure; each broken variant of it is
caught for its own reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from plot_checks import plot_problems

from queueref.admission.protocol import Protocol
from queueref.runtime.experiment import ModeResult, plot_figure
from queueref.trace.events import AdmissionEvent

N, CAP = 4, 10
BOUNDS = {"local": 40, "check-then-write": 13, "write-then-check": 10}


@dataclass
class Run:
    """What `plot_figure` reads of a `ModeResult`."""

    mode: str
    max_in_flight: int
    bound: int
    cap: int = CAP
    num_servers: int = N
    events: list[AdmissionEvent] = field(default_factory=list)


def held_at(level: int, seconds: int = 5) -> list[AdmissionEvent]:
    """`level` requests admitted at once and each replaced every 0.2 s for `seconds`."""
    events = []
    for step in range(seconds * 5):
        t = step * 0.2
        for k in range(level):
            if step:
                events.append(AdmissionEvent(t, 0, "finish", f"r{step - 1}-{k}", 1, None, t))
            events.append(AdmissionEvent(t + 0.001, 0, "admit", f"r{step}-{k}", 1, level - 1))
    return events


def figure_of(
    modes: tuple[str, str, str] = (
        Protocol.LOCAL,
        Protocol.CHECK_THEN_WRITE,
        Protocol.WRITE_THEN_CHECK,
    ),
) -> Any:
    runs = [
        Run(modes[0], 40, 40, events=held_at(40)),
        Run(modes[1], 10, 13, events=held_at(10)),
        Run(modes[2], 10, 10, events=held_at(10)),
    ]
    return plot_figure(cast(list[ModeResult], runs))


def close(figure: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(figure)


def test_the_plot_shows_the_cap_every_bound_and_tells_overlapping_modes_apart() -> None:
    """E2E-EXP-4: cap line, dashed bounds, markers and widths, protocol names (Protocols in)."""
    figure = figure_of()
    try:
        assert plot_problems(figure, CAP, BOUNDS) == []
    finally:
        close(figure)


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        ("no cap line", "0 cap lines, not 1"),
        ("no markers", "a mode's curve has no marker"),
        ("one marker", "two modes share a marker"),
        ("one width", "two modes share a line width"),
        ("solid bounds", "no dashed line at check-then-write's bound 13"),
        ("old names", "a mode is named by an old spelling, not its protocol name"),
    ],
)
def test_a_broken_plot_is_caught_for_its_reason(breakage: str, reason: str) -> None:
    """E2E-EXP-4: each way back to the old plot is named by the check."""
    figure = figure_of()
    try:
        (axes,) = figure.axes
        lines = axes.get_lines()
        curves = [line for line in lines if "(max" in str(line.get_label())]
        if breakage == "no cap line":
            next(line for line in lines if str(line.get_label()).startswith("cap")).remove()
        elif breakage == "no markers":
            curves[1].set_marker("None")
        elif breakage == "one marker":
            curves[2].set_marker(curves[1].get_marker())
        elif breakage == "one width":
            curves[2].set_linewidth(curves[1].get_linewidth())
        elif breakage == "solid bounds":
            for line in lines:
                if line.get_linestyle() == "--":
                    line.set_linestyle("-")
        else:
            curves[1].set_label("shared (max 10)")
        assert reason in plot_problems(figure, CAP, BOUNDS)
    finally:
        close(figure)
