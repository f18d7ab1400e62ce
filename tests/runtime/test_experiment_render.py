"""experiment --render-ms (E2E-REN-6): wasted renders per preflight mode, from real runs.

The expected values are the issue's claims (vLLM issue #58192, `specs/preflight-reservations.md`):
vLLM's two-check path renders requests it then refuses under a burst; the write-then-check
reservation refuses before rendering and never holds more than M. A few seconds of load.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from queueref.cli import main as cli

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]


def test_e2e_ren_6_wasted_renders_above_0_for_vllm_and_0_for_the_reservation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-REN-6: 16 clients start at once against M = 4 with 100 ms of rendering: on vLLM's
    path all pass preflight before any registers, so at least 12 render in vain; the
    write-then-check reservation wastes none and stays at most M = 4."""
    plot = tmp_path / "render.png"
    argv = ["experiment", "--render-ms", "100", "--json", "--servers", "2", "--cap", "4",
            "--concurrency", "16", "--duration", "1.5s", "--plot", str(plot), "--quiet",
            "--preflight-modes", "two-check,reserve-write-then-check"]  # fmt: skip
    assert cli.main(argv) == 0
    rows = {row["preflight"]: row for row in json.loads(capsys.readouterr().out)}
    assert list(rows) == ["two-check", "reserve-write-then-check"]
    vllm, reserve = rows["two-check"], rows["reserve-write-then-check"]
    assert [key for key in vllm if "wasted" in key] == ["wasted_renders"]
    assert vllm["wasted_renders"] >= 12
    assert reserve["wasted_renders"] == 0
    assert reserve["max_in_flight"] <= 4 == reserve["bound"]
    assert vllm["bound"] == 4 + (2 - 1) * 1  # M + (N-1)*min(M, W), W = 1
    for row in rows.values():
        assert row["within_bound"] and row["forbidden_decisions"] == 0
        assert row["latency_p50_s"] <= row["latency_p99_s"]
        assert 0 < row["busy_rate"] < 1 and row["final_slots"] == [0, 0]
    assert plot.stat().st_size > 0
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["--render-ms", "nan"], "--render-ms"),
        (["--render-ms", "-1"], "--render-ms"),
        (["--render-ms", "100", "--preflight-modes", "two-check,bogus"], "--preflight-modes"),
        (["--render-ms", "100", "--max-num-queued-tokens", "5"], "--max-num-queued-tokens"),
    ],
)
def test_e2e_ren_6_bad_input_is_one_line_exit_2(
    argv: list[str], word: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """E2E-REN-6, E2E-REN-1: one line naming the flag, exit 2, nothing started."""
    assert cli.main(["experiment", "--duration", "1s", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("queueref experiment:") and word in lines[0]
    assert multiprocessing.active_children() == []
