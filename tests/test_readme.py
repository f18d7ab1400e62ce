"""The README's Python examples run as written (the oracle section, ORC-CRQ-1, ORC-LAW-1)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    # The pytest-fixture example imports the reader's own package.
    return [b for b in blocks if "mypackage" not in b]


def run(block: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {"__name__": "readme_example"})
    return out.getvalue()


def test_readme_has_the_oracle_examples() -> None:
    assert len(python_blocks()) >= 3


def test_readme_conformance_example_prints_the_failing_program() -> None:
    """ORC-CRQ-1: the example's buggy queue is caught, with a pasteable program."""
    block = next(b for b in python_blocks() if "check_request_queue(MyQueue" in b)
    printed = run(block)
    assert "Shortest failing sequence" in printed
    assert "q.prepend_requests(" in printed and "# FAILS" in printed


def test_readme_laws_and_trace_examples_run() -> None:
    """ORC-LAW-1: the laws example passes; the trace example prints what its comment says."""
    laws = next(b for b in python_blocks() if "check_queue_laws(" in b)
    assert run(laws) == ""
    trace = next(b for b in python_blocks() if "check_admission_trace(" in b)
    assert run(trace).split() == ["2", "2", "True"]
