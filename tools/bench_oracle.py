"""`make bench`, the oracle section: what each knob of `check_request_queue` costs (ORC-SIZE-4).

For each knob, the wall seconds of one check on a conforming queue (what a
passing CI run pays) and on the seeded bug that knob is for (what it takes
to get the verdict), deep checks off as for a user. The queues are written
out here (no test imports): a FCFS queue on a `deque(maxlen=32)` and a heap
that stops sifting after 64 entries. Standalone: `python tools/bench_oracle.py`.

A benchmark, not a test: it measures and reports, it asserts nothing.
"""

from __future__ import annotations

import heapq
import json
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "reference"))

import queueref.config  # noqa: E402
from queueref import FCFSRequestQueue, PriorityRequestQueue  # noqa: E402
from queueref.oracle import ConformanceError, check_request_queue  # noqa: E402


class Bounded32:
    """FCFS on a deque(maxlen=32): from the 33rd request on the front is dropped."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque(maxlen=32)

    def add_request(self, request: Any) -> None:
        self._items.append(request)

    def pop_request(self) -> Any:
        if not self._items:
            raise IndexError("pop from an empty queue")
        return self._items.popleft()

    def peek_request(self) -> Any:
        if not self._items:
            raise IndexError("peek from an empty queue")
        return self._items[0]

    def prepend_request(self, request: Any) -> None:
        self._items.appendleft(request)

    def prepend_requests(self, requests: Iterable[Any]) -> None:
        self._items.extendleft(list(requests))

    def remove_request(self, request: Any) -> None:
        self._items.remove(request)

    def remove_requests(self, requests: Iterable[Any]) -> None:
        gone = {id(r) for r in requests}
        self._items = deque((r for r in self._items if id(r) not in gone), maxlen=32)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items))


class PopsFromBack(Bounded32):
    """A bug the default budget catches: FCFS pop from the back."""

    def __init__(self) -> None:
        self._items = deque()

    def pop_request(self) -> Any:
        if not self._items:
            raise IndexError("pop from an empty queue")
        return self._items.pop()


class HeapBreaksAfter64(Bounded32):
    """A priority heap that stops sifting new entries after 64."""

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int, Any]] = []

    def add_request(self, request: Any) -> None:
        entry = ((request.priority, request.arrival_time, request.request_id), id(request), request)
        if len(self._heap) >= 64:
            self._heap.append(entry)
        else:
            heapq.heappush(self._heap, entry)

    def prepend_request(self, request: Any) -> None:
        self.add_request(request)

    def prepend_requests(self, requests: Iterable[Any]) -> None:
        for request in list(requests):
            self.add_request(request)

    def pop_request(self) -> Any:
        if not self._heap:
            raise IndexError("pop from an empty queue")
        return heapq.heappop(self._heap)[2]

    def peek_request(self) -> Any:
        if not self._heap:
            raise IndexError("peek from an empty queue")
        return self._heap[0][2]

    def remove_request(self, request: Any) -> None:
        kept = [e for e in self._heap if e[2] is not request]
        if len(kept) == len(self._heap):
            raise ValueError("not queued")
        self._heap = kept
        heapq.heapify(self._heap)

    def remove_requests(self, requests: Iterable[Any]) -> None:
        gone = {id(r) for r in requests}
        self._heap = [e for e in self._heap if id(e[2]) not in gone]
        heapq.heapify(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Any]:
        heap = list(self._heap)
        while heap:
            yield heapq.heappop(heap)[2]


#: (knob, options, policy, conforming queue, the bug it is for or None)
KNOBS: list[tuple[str, dict[str, Any], str, Any, Any]] = [
    ("default", {}, "fcfs", FCFSRequestQueue, PopsFromBack),
    ("max_examples=1000", {"max_examples": 1000}, "fcfs", FCFSRequestQueue, None),
    ("max_calls=200", {"max_calls": 200}, "fcfs", FCFSRequestQueue, Bounded32),
    ("initial_requests=(50, 100)", {"initial_requests": (50, 100)}, "fcfs", FCFSRequestQueue,
     Bounded32),
    ("initial_requests=(50, 500)", {"initial_requests": (50, 500)}, "fcfs", FCFSRequestQueue,
     Bounded32),
    ("initial_requests=(50, 100), priority", {"initial_requests": (50, 100)}, "priority",
     PriorityRequestQueue, HeapBreaksAfter64),
    ("strict=True", {"strict": True}, "fcfs", FCFSRequestQueue, None),
]  # fmt: skip


def _timed(queue: Any, policy: str, options: dict[str, Any]) -> tuple[float, str]:
    began = time.monotonic()
    try:
        check_request_queue(queue, policy, **options)
        verdict = "passes"
    except ConformanceError as error:
        clauses = ", ".join(sorted({report.clause for report in error.reports}))
        verdict = f"{len(error.reports)} failure(s): {clauses}"
    return time.monotonic() - began, verdict


def run(results: dict[str, Any]) -> None:
    """Time every knob on its conforming queue and its bug; print a table, fill `results`."""
    queueref.config.set_deep_checks(False)
    rows: list[dict[str, Any]] = []
    lines = [
        "### Oracle, seconds per check (wall, deep checks off)",
        "",
        "| knob | conforming queue | bug | seconds to verdict | verdict |",
        "|---|---:|---|---:|---|",
    ]
    for knob, options, policy, good, bad in KNOBS:
        passing, _ = _timed(good, policy, options)
        row: dict[str, Any] = {"knob": knob, "policy": policy, "conforming_seconds": passing}
        bug, failing, verdict = "", "", ""
        if bad is not None:
            seconds, verdict = _timed(bad, policy, options)
            bug, failing = bad.__name__, f"{seconds:.1f}"
            row.update(bug=bug, bug_seconds=seconds, verdict=verdict)
        rows.append(row)
        lines.append(f"| {knob} | {passing:.1f} | {bug} | {failing} | {verdict} |")
    print("\n" + "\n".join(lines), flush=True)
    results["oracle"] = rows


if __name__ == "__main__":
    found: dict[str, Any] = {}
    run(found)
    print(json.dumps(found, indent=1))
