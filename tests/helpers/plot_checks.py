"""What the experiment's plot must show (E2E-EXP-1, E2E-EXP-4), read off the figure."""

from __future__ import annotations

from typing import Any

#: The names a plot must not show any more (E2E-CLI-5).
OLD_NAMES = ("shared", "reserve")


def plot_problems(figure: Any, cap: int, bounds: dict[str, int]) -> list[str]:
    """Each way the figure fails E2E-EXP-1 / E2E-EXP-4, one line each; [] when it is right.

    `bounds` maps each mode's protocol name to its bound.
    """
    (axes,) = figure.axes
    lines = axes.get_lines()
    problems = []
    caps = [line for line in lines if str(line.get_label()).startswith("cap M")]
    if len(caps) != 1:
        problems.append(f"{len(caps)} cap lines, not 1")
    elif caps[0].get_linestyle() != "-" or list(caps[0].get_ydata()) != [cap, cap]:
        problems.append("the cap line is not solid at M")
    curves = {
        name: line
        for line in lines
        for name in bounds
        if str(line.get_label()).startswith(f"{name} (max")
    }
    if set(curves) != set(bounds):
        problems.append(f"curves for {sorted(curves)}, not {sorted(bounds)}")
    markers = [line.get_marker() for line in curves.values()]
    if any(marker in ("None", "", " ", None) for marker in markers):
        problems.append("a mode's curve has no marker")
    if len(set(markers)) != len(markers):
        problems.append("two modes share a marker")
    if len({line.get_linewidth() for line in curves.values()}) != len(curves):
        problems.append("two modes share a line width")
    for name, bound in bounds.items():
        dashed = [
            line
            for line in lines
            if line.get_linestyle() == "--" and str(line.get_label()).startswith(f"{name} bound")
        ]
        if len(dashed) != 1 or list(dashed[0].get_ydata()) != [bound, bound]:
            problems.append(f"no dashed line at {name}'s bound {bound}")
        elif name in curves and dashed[0].get_color() != curves[name].get_color():
            problems.append(f"{name}'s bound is not in its colour")
    words = {word for line in lines for word in str(line.get_label()).split()}
    if words & set(OLD_NAMES):
        problems.append("a mode is named by an old spelling, not its protocol name")
    return problems
