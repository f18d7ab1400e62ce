"""`make bench` times the installed vLLM: a release that cannot be installed ends the run
with one line naming it, before anything is measured (never a bench without vLLM).

The registry is made unreachable with `PIP_NO_INDEX=1`, the cache is a temporary
folder: no download happens.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.multiprocess


def test_an_uninstallable_vllm_ends_the_bench_with_one_line(tmp_path: Path) -> None:
    cache = tmp_path / "vllm-cache"
    env = {**os.environ, "QUEUEREF_VLLM_CACHE": str(cache), "PIP_NO_INDEX": "1"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("make bench: could not install vllm==0.33.0: "), lines
    assert "round 1/" not in result.stderr  # nothing was measured
