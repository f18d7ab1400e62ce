"""A pytest plugin: which lines of one module each test executes, and how long it takes.

Loaded once per module by `tools/mutation.py` on the unmutated code
(`pytest -p mutation_coverage`, with `tools/` on PYTHONPATH):

    MUTATION_COVERAGE_TARGET=/abs/path/module.py MUTATION_COVERAGE_OUT=map.json

writes `{"module": ..., "import_lines": [...], "tests": {node id: {"seconds": s,
"lines": [...]}}}`. Lines run outside any test (the module's import, at collection) are
`import_lines`. A fixture shared by several tests is counted for the first test that runs
it; `tools/mutation_select.py` widens a mutant's lines to its whole statement, and the
survivors are run again on the module's whole test list (`--whole`) to make sure.

The tracer is `sys.settrace` (Python 3.11 has no `sys.monitoring`), installed when this
plugin is imported, before the package under test is.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

TARGET = os.environ.get("MUTATION_COVERAGE_TARGET", "")
OUT = os.environ.get("MUTATION_COVERAGE_OUT", "")


class LineRecorder:
    """Records the lines of one file, per current test."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.current: set[int] | None = None  # the running test's lines, None between tests
        self.import_lines: set[int] = set()
        self.tests: dict[str, dict[str, Any]] = {}

    def global_trace(self, frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename != self.target:
            return None
        return self.local_trace

    def local_trace(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "line":
            lines = self.import_lines if self.current is None else self.current
            lines.add(frame.f_lineno)
        return self.local_trace

    def start(self) -> None:
        sys.settrace(self.global_trace)
        threading.settrace(self.global_trace)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)


RECORDER = LineRecorder(os.path.realpath(TARGET)) if TARGET else None
if RECORDER is not None:
    RECORDER.start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    if RECORDER is None:
        yield
        return
    lines: set[int] = set()
    RECORDER.current = lines
    began = time.perf_counter()
    yield
    RECORDER.current = None
    entry = {"seconds": round(time.perf_counter() - began, 4), "lines": sorted(lines)}
    RECORDER.tests[item.nodeid] = entry


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if RECORDER is None or not OUT:
        return
    RECORDER.stop()
    if not RECORDER.import_lines:
        raise RuntimeError(f"{TARGET} was imported before the tracer started: no import lines")
    found = {
        "module": TARGET,
        "import_lines": sorted(RECORDER.import_lines),
        "tests": RECORDER.tests,
    }
    Path(OUT).write_text(json.dumps(found) + "\n")
