"""docs/serving.md's serve -> load -> curl -> check-trace block runs as written (E2E-TRACE-1).

Run with bash from a scratch folder, with two changes only: a free port for
8000 (the machine is shared) and shorter durations, so the test is bounded.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from processes import wait_gone

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "serving.md"


def serve_block() -> str:
    blocks = re.findall(r"```sh\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)
    (block,) = [b for b in blocks if "queueref serve" in b and "check-trace" in b]
    return str(block)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_the_serving_guide_serve_block_runs(tmp_path: Path) -> None:
    """E2E-TRACE-1, E2E-SRV-1: serve in the background, load, curl, check-trace the folder."""
    block = serve_block()
    assert "--trace build/run" in block and "check-trace build/run" in block
    port = str(free_port())
    script = (
        block.replace("8000", port)
        .replace("--duration 60s", "--duration 25s")
        .replace("--duration 10s", "--duration 6s")
    )
    script = "set -e\n" + script + "\nkill %1\nwait\n"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "vllm:num_requests_running" in done.stdout
    # E2E-SRV-3: the curl during the load shows the global count, busy (80 clients, cap 10).
    shown = re.findall(r"^queueref:global_num_requests_running\{[^}]*\} (\d+)$", done.stdout, re.M)
    assert len(shown) == 1 and int(shown[0]) > 0, done.stdout[-3000:]
    # E2E-CLI-5: the banner and the report name the protocol; no deprecation note.
    assert "admission check-then-write, cap 10" in done.stdout
    assert "mode check-then-write" in done.stdout
    assert "deprecated" not in done.stderr
    assert (
        "OK" in done.stdout.splitlines()[-3:]
        or done.stdout.rstrip().endswith("OK")
        or ("no forbidden decision" in done.stdout)
    )
    assert "stopped; slots [0, 0, 0, 0]" in done.stdout
    assert sorted(os.listdir(tmp_path / "build" / "run"))[:4] == [
        f"server-{i}.jsonl" for i in range(4)
    ]
    pids = re.search(r"pids (\[[0-9, ]+\])", done.stdout)
    assert pids is not None
    assert wait_gone([int(p) for p in pids.group(1)[1:-1].split(",")], 10) == []
