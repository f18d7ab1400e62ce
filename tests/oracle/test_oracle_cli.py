"""`queueref check-queue MODULE:QUEUE` (ORC-CLI-1, ORC-CLI-2), run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from environment import clean_environment

QUEUES = """
from queueref import FCFSRequestQueue


class Good(FCFSRequestQueue):
    pass


class Lifo(FCFSRequestQueue):
    def pop_request(self):
        request = list(self)[-1]
        self.remove_request(request)
        return request


def make(request_id, priority, arrival_time):
    from queueref import Request
    return Request(request_id, priority=priority, arrival_time=arrival_time)
"""


def check_queue(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "myqueues.py").write_text(QUEUES, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "queueref.cli.main", "check-queue", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**clean_environment(tmp_path), "PYTHONPATH": ""},
        cwd=tmp_path,
    )


def test_a_conforming_queue_exits_0(tmp_path: Path) -> None:
    """ORC-CLI-1: exit 0, one line per check; the module is found from the current directory."""
    done = check_queue(
        tmp_path,
        "myqueues:Good",
        "--policy",
        "fcfs",
        "--laws",
        "--request-factory",
        "myqueues:make",
        "--max-examples",
        "20",
        "--max-calls",
        "10",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("myqueues:Good behaves like queueref's 'fcfs' reference queue")
    assert lines[1].startswith("myqueues:Good obeys the laws of RequestQueue")


def test_a_failing_queue_exits_1_with_its_programs(tmp_path: Path) -> None:
    """ORC-CLI-1, ORC-CLAUSE-1: exit 1; the failing program and its clause, also as JSON."""
    done = check_queue(tmp_path, "myqueues:Lifo", "--policy", "fcfs", "--max-failures", "1")
    assert done.returncode == 1, done.stderr
    assert "Lifo does not behave like queueref's 'fcfs' reference queue." in done.stdout
    assert "RQ-FCFS-2: pop_request takes the front" in done.stdout
    assert "from myqueues import Lifo" in done.stdout
    as_json = check_queue(
        tmp_path, "myqueues:Lifo", "--policy", "fcfs", "--max-failures", "1", "--json"
    )
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    assert document["ok"] is False and document["target"] == "myqueues:Lifo"
    (check,) = document["checks"]
    assert check["check"] == "conformance" and check["policy"] == "fcfs"
    assert [f["clause"] for f in check["failures"]] == ["RQ-FCFS-2"]
    assert "# FAILS" in check["failures"][0]["program"]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["nosuchmodule:Q", "--policy", "fcfs"], "cannot import nosuchmodule: ModuleNotFoundError"),
        (["myqueues:Missing", "--policy", "fcfs"], "myqueues has no attribute 'Missing'"),
        (["myqueues", "--policy", "fcfs"], "the queue must be MODULE:NAME"),
        (["myqueues:QUEUES_TEXT_IS_NOT_HERE", "--laws"], "has no attribute"),
        (["myqueues:Good"], "say what to check"),
        (["myqueues:Good", "--laws", "--initial-requests", "9-3"], "initial_requests"),
        (["myqueues:Good", "--policy", "fcfs", "--request-factory", "x"], "--request-factory"),
    ],
)
def test_a_usage_error_exits_2_with_one_line(tmp_path: Path, args: list[str], problem: str) -> None:
    """ORC-CLI-2: one line on stderr naming the problem, no traceback, nothing on stdout."""
    done = check_queue(tmp_path, *args)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("queueref check-queue: ") and problem in line
