"""The nodes plot (ADM-STORE-11): the global count per store protocol, cap, bounds, a fault.

matplotlib comes with the `plot` extra, which `make setup` installs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from queueref.runtime.nodes_plot import NodesSeries, global_counts, nodes_figure
from queueref.trace.events import AdmissionEvent

EVENTS = [
    AdmissionEvent(10.0, 0, "admit", "a", 1, view=0),
    AdmissionEvent(10.5, 1, "admit", "b", 2, view=1),
    AdmissionEvent(12.0, 0, "finish", "a", 1, t_before=11.0),
]


def test_ADM_STORE_11_the_global_count_by_each_protocols_measure() -> None:
    """ADM-STORE-11: slots/snapshot count a departure at `t` (in flight), the script at
    `t_before` (admitted, ADM-EV-5); times are seconds from the given origin."""
    assert global_counts(EVENTS, False, 10.0) == ([0.0, 0.5, 2.0], [1, 3, 2])
    assert global_counts(EVENTS, True, 10.0) == ([0.0, 0.5, 1.0], [1, 3, 2])


def test_ADM_STORE_11_one_panel_per_protocol_with_cap_bounds_and_the_fault() -> None:
    """ADM-STORE-11: a panel per protocol holds the count, the cap, the bound, the bound
    plus the fault's overshoot, and the fault: a span when it lasts, a line when instant."""
    import matplotlib.pyplot as plt

    series = [
        NodesSeries("slots", EVENTS, 4, 2, ("partition", 10.2, 11.2)),
        NodesSeries("script", EVENTS, 3, 0, ("node-kill", 10.7, 10.7)),
    ]
    figure = nodes_figure(series, 3, "title")
    try:
        panels = figure.axes
        assert len(panels) == 2
        first = [t.get_text() for t in panels[0].get_legend().get_texts()]
        assert first == [
            "global count (max 3)",
            "cap M = 3",
            "bound = 4",
            "bound + fault's overshoot = 6",
            "partition",
        ]
        assert len(panels[0].patches) == 1  # the partition's span
        second = [t.get_text() for t in panels[1].get_legend().get_texts()]
        assert second == ["global count (max 3)", "cap M = 3", "bound = 3", "node-kill"]
        assert not panels[1].patches  # an instant fault is a line, not a span
    finally:
        plt.close(figure)


@pytest.mark.multiprocess
@pytest.mark.e2e
def test_ADM_STORE_11_experiment_nodes_plot_writes_the_png(tmp_path: Path) -> None:
    """ADM-STORE-11: `experiment --nodes 2 --store redis --plot FILE.png` writes the plot;
    an unwritable --plot is one line and exit 2 before anything starts."""
    target = tmp_path / "nodes.png"
    done = subprocess.run(
        [sys.executable, "-m", "queueref", "experiment", "--nodes", "2", "--store", "redis",
         "--servers", "1", "--cap", "2", "--concurrency", "6", "--duration", "1s",
         "--service-time-ms", "60", "--plot", str(target), "--quiet"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {target}" in done.stdout
    (tmp_path / "folder.png").mkdir()
    bad = subprocess.run(
        [sys.executable, "-m", "queueref", "experiment", "--nodes", "2", "--store", "redis",
         "--plot", str(tmp_path / "folder.png")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "cannot write" in bad.stderr
