"""The oracle guide's Python examples run as written (docs/oracle.md).

Plain blocks run in this process; the blocks that are pytest files (they
define `test_` functions that use the fixtures) run under pytest in a fresh
process. The vLLM example imports `vllm`: it runs against a package of our own
written to a temporary directory, shaped like vLLM 0.30.0 / 0.33.0 as the
queues see it (`vllm.v1.request.Request`, `vllm.SamplingParams`,
`vllm.v1.core.sched.request_queue`), never vLLM's code.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

from environment import clean_environment

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "oracle.md"


def all_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)


def python_blocks() -> list[str]:
    """The blocks that run as scripts (the pytest files are run by pytest below)."""
    return [b for b in all_blocks() if "def test_" not in b]


def pytest_block(marker: str) -> str:
    return next(b for b in all_blocks() if "def test_" in b and marker in b)


def run(block: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(GUIDE), "exec"), {"__name__": "readme_example"})
    return out.getvalue()


def run_pytest(root: Path, test_file: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", test_file],
        capture_output=True,
        text=True,
        timeout=600,
        env=clean_environment(root),
        cwd=root,
    )
    return done.stdout + done.stderr


def test_guide_has_the_oracle_examples() -> None:
    assert len(python_blocks()) >= 3
    assert len(all_blocks()) >= 5


def test_guide_conformance_example_prints_the_failing_program() -> None:
    """ORC-CRQ-1, ORC-CLAUSE-1: the example's buggy queue is caught, with its clause."""
    block = next(b for b in python_blocks() if "check_request_queue(MyQueue" in b)
    printed = run(block)
    assert "Shortest failing sequence" in printed
    assert "q.prepend_requests(" in printed and "# FAILS" in printed
    assert "RQ-FCFS-4: prepend_requests puts the other queue's requests in front" in printed
    assert printed.rstrip().splitlines()[-1].startswith("Found by Hypothesis ")


def test_guide_laws_and_trace_examples_run() -> None:
    """ORC-LAW-1: the laws example passes; the trace example prints what its comment says."""
    laws = next(b for b in python_blocks() if "check_queue_laws(" in b)
    assert run(laws) == ""
    trace = next(b for b in python_blocks() if "check_admission_trace(" in b)
    assert run(trace).split() == ["2", "2", "True"]


def test_guide_fixture_example_lists_both_planted_bugs(tmp_path: Path) -> None:
    """ORC-PLUG-1, ORC-MANY-1, ORC-CLAUSE-1: the fixture example, run by pytest as written."""
    (tmp_path / "test_my_queues.py").write_text(pytest_block("MyBuggyQueue"), encoding="utf-8")
    output = run_pytest(tmp_path, "test_my_queues.py")
    assert "1 failed, 2 passed" in output, output
    assert "FAILED test_my_queues.py::test_my_buggy_queue_is_fcfs" in output
    assert "RQ-FCFS-4: prepend_requests puts the other queue's requests in front" in output
    assert "RQ-ALL-7: remove_requests removes the queued requests named" in output


VLLM_SHAPED = {
    "vllm/__init__.py": """
class SamplingParams:
    def __init__(self, max_tokens=16):
        self.max_tokens = max_tokens
""",
    "vllm/v1/__init__.py": "",
    "vllm/v1/core/__init__.py": "",
    "vllm/v1/core/sched/__init__.py": "",
    "vllm/v1/request.py": '''
class Request:
    """The fields the queues use, and vLLM's order: priority, arrival, id, identity."""

    def __init__(self, request_id, prompt_token_ids, sampling_params, pooling_params,
                 arrival_time=None, priority=0):
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.sampling_params = sampling_params
        self.arrival_time = 0.0 if arrival_time is None else arrival_time
        self.priority = priority

    def __lt__(self, other):
        mine = (self.priority, self.arrival_time, self.request_id, id(self))
        return mine < (other.priority, other.arrival_time, other.request_id, id(other))
''',
    "vllm/v1/core/sched/request_queue.py": '''
import heapq
from collections import deque


class FCFSRequestQueue:
    """Front to back; prepend_requests puts the other queue in front, reversed."""

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
        for request in requests:
            self._items.appendleft(request)

    def remove_request(self, request):
        self._items.remove(request)

    def remove_requests(self, requests):
        gone = set(requests)
        self._items = deque(r for r in self._items if r not in gone)

    def __bool__(self):
        return len(self._items) > 0

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(list(self._items))


class PriorityRequestQueue:
    """A heap of the requests, ordered by their own `<`."""

    def __init__(self):
        self._heap = []

    def add_request(self, request):
        heapq.heappush(self._heap, request)

    def pop_request(self):
        if not self._heap:
            raise IndexError("pop from an empty heap")
        return heapq.heappop(self._heap)

    def peek_request(self):
        if not self._heap:
            raise IndexError("peek at an empty heap")
        return self._heap[0]

    def prepend_request(self, request):
        self.add_request(request)

    def prepend_requests(self, requests):
        for request in requests:
            self.add_request(request)

    def remove_request(self, request):
        self._heap.remove(request)
        heapq.heapify(self._heap)

    def remove_requests(self, requests):
        gone = set(requests)
        self._heap = [r for r in self._heap if r not in gone]
        heapq.heapify(self._heap)

    def __bool__(self):
        return len(self._heap) > 0

    def __len__(self):
        return len(self._heap)

    def __iter__(self):
        heap = list(self._heap)
        while heap:
            yield heapq.heappop(heap)
''',
}


def write_vllm_shaped(root: Path, broken: bool = False) -> None:
    for name, text in VLLM_SHAPED.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if broken and name.endswith("request_queue.py"):
            text = text.replace(
                "        for request in requests:\n            self._items.appendleft(request)",
                "        self._items = deque([*requests, *self._items])",
            )
            assert "[*requests, *self._items]" in text
        path.write_text(text, encoding="utf-8")


def test_guide_vllm_example_runs_in_a_vllm_shaped_suite(tmp_path: Path) -> None:
    """ORC-PLUG-1, ORC-CRQ-1: the vLLM worked example passes on vLLM-shaped queues..."""
    write_vllm_shaped(tmp_path)
    (tmp_path / "test_request_queue_oracle.py").write_text(
        pytest_block("from vllm"), encoding="utf-8"
    )
    output = run_pytest(tmp_path, "test_request_queue_oracle.py")
    assert "3 passed" in output and "failed" not in output, output


def test_guide_vllm_example_catches_a_broken_vllm_queue(tmp_path: Path) -> None:
    """ORC-CLAUSE-1: ...and fails, naming RQ-FCFS-4, when vLLM's FCFS queue loses the reversal."""
    write_vllm_shaped(tmp_path, broken=True)
    (tmp_path / "test_request_queue_oracle.py").write_text(
        pytest_block("from vllm"), encoding="utf-8"
    )
    output = run_pytest(tmp_path, "test_request_queue_oracle.py")
    assert "2 failed, 1 passed" in output, output
    assert "RQ-FCFS-4: prepend_requests puts the other queue's requests in front" in output
