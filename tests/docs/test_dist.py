"""`make dist` builds a wheel and an sdist that install with the oracle extra (issue 27).

queueref is not on the package index, so these files (or a clone) are how it reaches
another project: each is installed into a fresh virtual environment with
`[oracle]`, and the queue oracle runs there on queueref's own FCFS queue.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

ORACLE_RUN = (
    "from queueref import FCFSRequestQueue\n"
    "from queueref.oracle import check_request_queue\n"
    "check_request_queue(FCFSRequestQueue, 'fcfs', max_examples=20)\n"
    "import queueref.cli.main, queueref.runtime.http.group, queueref.verify.search\n"
    "print('oracle ok')\n"
)


def run(command: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_the_wheel_and_the_sdist_install_with_the_oracle_extra(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], tmp_path)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("queueref-*.whl")
    (sdist,) = dist.glob("queueref-*.tar.gz")
    for artefact in (wheel, sdist):
        venv = tmp_path / f"venv-{artefact.suffix.strip('.')}"
        assert run([sys.executable, "-m", "venv", str(venv)], tmp_path).returncode == 0
        python = str(venv / "bin" / "python")
        installed = run([python, "-m", "pip", "install", "-q", f"{artefact}[oracle]"], tmp_path)
        assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
        done = run([python, "-c", ORACLE_RUN], tmp_path)
        assert done.returncode == 0 and done.stdout.strip() == "oracle ok", done.stderr[-3000:]
        # The command is installed with it.
        help_text = run([str(venv / "bin" / "queueref"), "--help"], tmp_path)
        assert help_text.returncode == 0 and "bound-table" in help_text.stdout
