"""The README's quick start runs as written on a clone, top to bottom, and ends by itself.

The block is run by bash from the project's root exactly as the README shows it
(`make setup` finds the venv already made by `make test`). Only the output is
read: each step must say what the README says it shows.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


def quick_start() -> str:
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return str(block)


def test_the_quick_start_is_short_and_uses_the_venv() -> None:
    block = quick_start()
    assert block.startswith("make setup")
    assert "queueref experiment" in block and "check_request_queue" in block
    assert "queueref bound " in block
    # every command after set-up is called through .venv/bin: nothing to activate first
    commands = [line for line in block.splitlines() if line and not line.startswith((" ", "make"))]
    assert all(line.startswith(".venv/bin/") or not line[0].isalpha() for line in commands[:-2])


def test_the_quick_start_runs_as_written() -> None:
    done = subprocess.run(
        ["bash", "-e", "-c", quick_start()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "usage: queueref" in output
    # The deployment's bound: 4 servers, cap 10, W = 1 -> 10 + 3 * 1.
    assert "worst global count 13 = M + (N - 1) * min(M, W)" in output
    # The bound table: N = 3, M = 2, W = 2 reaches M + (N-1)*min(M, W) = 6.
    assert re.search(r"^\s+3\s+2\s+2\s+6\s+6\s", output, re.M), output[-4000:]
    # The experiment's table: local reaches N*M = 40; write-then-check never exceeds M = 10.
    rows = {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(
            r"^\| (local|check-then-write|write-then-check) \| (\d+) \| (\d+) \|", output, re.M
        )
    }
    assert set(rows) == {"local", "check-then-write", "write-then-check"}, output[-4000:]
    assert rows["write-then-check"][0] <= 10 and rows["write-then-check"][1] == 10
    assert rows["check-then-write"][1] == 13 and rows["check-then-write"][0] <= 13
    assert rows["local"][1] == 40
    assert (ROOT / "build" / "experiment.png").stat().st_size > 0
    assert "FCFSRequestQueue agrees with the reference" in output
