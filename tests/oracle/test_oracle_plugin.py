"""queueref used the way another project uses it: installed, through its entry points.

A throwaway project is written to a temporary directory -- its own package
with its own `RequestQueue` subclasses, its own pyproject and its own tests
that use the `queueref_conformance` / `queueref_laws` fixtures -- and pytest
runs it in a fresh process with the same interpreter. Nothing of queueref is
put on the path: the fixtures must come from the installed distribution's
`pytest11` entry point (`make setup` installs queueref into the venv).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

from environment import clean_environment

PACKAGE = '''
"""A vLLM plugin's queues: one faithful, one with a seeded bug."""
from collections import deque

from queueref import RequestQueue


class MyQueue(RequestQueue):
    def __init__(self):
        self._items = deque()

    def add_request(self, request):
        self._items.append(request)

    def pop_request(self):
        return self._items.popleft()

    def peek_request(self):
        if not self._items:
            raise IndexError("peek from an empty queue")
        return self._items[0]

    def prepend_request(self, request):
        self._items.appendleft(request)

    def prepend_requests(self, requests):
        self._items.extendleft(requests)

    def remove_request(self, request):
        self._items.remove(request)

    def remove_requests(self, requests):
        gone = set(requests)
        self._items = deque(r for r in self._items if r not in gone)

    def __bool__(self):
        return bool(self._items)

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(list(self._items))


class MyBuggyQueue(MyQueue):
    def prepend_requests(self, requests):
        self._items = deque([*requests, *self._items])
'''

TESTS = """
from myqueues import MyBuggyQueue, MyQueue


def test_mine(queueref_conformance):
    queueref_conformance(MyQueue, "fcfs", max_examples=30)


def test_my_laws(queueref_laws):
    queueref_laws(MyQueue, max_examples=30)


def test_my_buggy_queue(queueref_conformance):
    queueref_conformance(MyBuggyQueue, "fcfs")
"""

PYPROJECT = """
[project]
name = "myqueues"
version = "0.0.1"
dependencies = ["queueref"]
"""


def write_project(root: Path) -> None:
    (root / "myqueues").mkdir()
    (root / "myqueues" / "__init__.py").write_text(textwrap.dedent(PACKAGE), encoding="utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "test_myqueues.py").write_text(textwrap.dedent(TESTS), encoding="utf-8")
    (root / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT), encoding="utf-8")


def test_the_plugin_is_registered_by_entry_point() -> None:
    """ORC-PLUG-1: the installed distribution declares the pytest11 entry point."""
    points = [
        point
        for point in importlib.metadata.entry_points(group="pytest11")
        if point.name == "queueref"
    ]
    assert [point.value for point in points] == ["queueref.oracle.pytest_plugin"], (
        "queueref is not installed in this interpreter (run `make setup`)"
    )


def test_loading_the_plugin_does_not_import_hypothesis(tmp_path: Path) -> None:
    """ORC-PLUG-2: importing the plugin (and queueref.oracle) leaves Hypothesis unloaded."""
    probe = (
        "import sys\n"
        "import queueref.oracle.pytest_plugin, queueref.oracle\n"
        "from queueref.oracle import ConformanceError, TraceFormatError\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hypothesis'))\n"
        "from queueref.oracle import check_request_queue\n"
        "print('hypothesis' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_environment(tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "True"]


def test_a_throwaway_project_uses_the_fixtures(tmp_path: Path) -> None:
    """ORC-PLUG-1, ORC-CRQ-1, ORC-CRQ-2: a foreign project's queue, checked in a foreign run.

    The faithful queue passes both fixtures; the buggy one fails its test with
    the ConformanceError and the failing program in pytest's report.
    """
    write_project(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "tests"],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_environment(tmp_path),
        cwd=tmp_path,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "1 failed, 2 passed" in output
    assert "FAILED tests/test_myqueues.py::test_my_buggy_queue" in output
    assert "ConformanceError: MyBuggyQueue does not behave like queueref's 'fcfs'" in output
    assert "from myqueues import MyBuggyQueue" in output
    assert "q.prepend_requests(other1)" in output
    assert "fixture 'queueref_conformance' not found" not in output
