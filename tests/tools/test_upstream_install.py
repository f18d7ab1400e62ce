"""`make upstream`'s installer: what cannot be installed fails with one line naming it.

The registry is made unreachable with `PIP_NO_INDEX=1` (pip then looks at no
index at all), the cache is a temporary folder: no download happens.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.multiprocess


def install_only(cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUEUEREF_VLLM_CACHE": str(cache), "PIP_NO_INDEX": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "upstream.py"), "--install-only"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_an_unreachable_registry_fails_with_one_line_naming_the_release(tmp_path: Path) -> None:
    cache = tmp_path / "vllm-cache"
    result = install_only(cache)
    assert result.returncode == 1
    lines = error_lines(result)
    assert len(lines) == 1, lines
    assert lines[0].startswith("make upstream: could not install vllm==0.33.0: "), lines
    assert not (cache / "venv" / ".installed-vllm-0.33.0").exists()


def test_a_missing_older_wheel_fails_with_one_line_naming_it(tmp_path: Path) -> None:
    # A venv marked as holding 0.33.0: the next install is the first --no-deps
    # release, which the registry cannot give.
    cache = tmp_path / "vllm-cache"
    subprocess.run([sys.executable, "-m", "venv", str(cache / "venv")], check=True, timeout=120)
    (cache / "venv" / ".installed-vllm-0.33.0").touch()
    result = install_only(cache)
    assert result.returncode == 1
    lines = error_lines(result)
    assert len(lines) == 1, lines
    assert lines[0].startswith("make upstream: could not install vllm==0.30.0: "), lines
    assert not (cache / "0.30.0" / ".installed").exists()
