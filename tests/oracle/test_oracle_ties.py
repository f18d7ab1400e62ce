"""Unspecified ties: `ties="any"` (ORC-TIES-1, ORC-TIES-2).

queueref orders requests by (priority, arrival_time, request_id) (RQ-REQ-1);
so do vLLM 0.30.0 and 0.33.0 (`Request.__lt__` in vllm/v1/request.py compares
the request ids after the arrival times). A request type whose `<` compares
only (priority, arrival_time) -- a plugin's own request, say -- leaves ties to
the heap: a heap queue of such requests pops tied requests in an order of its
own. The request class and the queue below are our own, shaped like vLLM's.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from method_variants import Change, broken_class
from test_oracle import PopFromBack, run_program

from queueref.oracle import ConformanceError, check_request_queue


@dataclass(eq=False)
class UntiedRequest:
    """`<` on (priority, arrival_time) only: equal keys are unordered."""

    request_id: str
    priority: int
    arrival_time: float

    def __lt__(self, other: UntiedRequest) -> bool:
        return (self.priority, self.arrival_time) < (other.priority, other.arrival_time)


def untied(request_id: str, priority: int, arrival_time: float) -> UntiedRequest:
    return UntiedRequest(request_id, priority, arrival_time)


class HeapOfRequests:
    """A priority queue on a heap of the requests themselves, ordered by their `<`."""

    def __init__(self) -> None:
        self._heap: list[Any] = []

    def add_request(self, request: Any) -> None:
        heapq.heappush(self._heap, request)

    def pop_request(self) -> Any:
        if not self._heap:
            raise IndexError("pop from empty heap")
        return heapq.heappop(self._heap)

    def peek_request(self) -> Any:
        if not self._heap:
            raise IndexError("peek from empty heap")
        return self._heap[0]

    def prepend_request(self, request: Any) -> None:
        self.add_request(request)

    def prepend_requests(self, requests: Iterable[Any]) -> None:
        for request in requests:
            self.add_request(request)

    def remove_request(self, request: Any) -> None:
        self._heap.remove(request)
        heapq.heapify(self._heap)

    def remove_requests(self, requests: Iterable[Any]) -> None:
        gone = set(requests)
        self._heap = [r for r in self._heap if r not in gone]
        heapq.heapify(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Any]:
        heap = self._heap[:]
        while heap:
            yield heapq.heappop(heap)


@dataclass(eq=False)
class _Later:
    request: Any

    def __lt__(self, other: _Later) -> bool:
        mine, theirs = self.request, other.request
        return (mine.priority, -mine.arrival_time) < (theirs.priority, -theirs.arrival_time)


LaterArrivalFirstHeap = broken_class(
    HeapOfRequests,
    "LaterArrivalFirstHeap",
    Change(
        "add_request",
        "a real bug that ties='any' must not hide: later arrivals first (each request in a "
        "`_Later` entry, ordered so)",
        "heapq.heappush(self._heap, request)",
        "heapq.heappush(self._heap, _Later(request))",
    ),
    Change(
        "pop_request",
        "(the entry's request)",
        "heapq.heappop(self._heap)",
        "heapq.heappop(self._heap).request",
    ),
    Change(
        "peek_request",
        "(the entry's request)",
        "return self._heap[0]",
        "return self._heap[0].request",
    ),
    Change(
        "remove_request",
        "(by the entry's request)",
        "self._heap.remove(request)",
        "kept = [entry for entry in self._heap if entry.request is not request]\n"
        "    if len(kept) == len(self._heap):\n"
        '        raise ValueError("not queued")\n'
        "    self._heap = kept",
    ),
    Change(
        "remove_requests",
        "(by the entries' requests)",
        "gone = set(requests)\n    self._heap = [r for r in self._heap if r not in gone]",
        "gone = {id(r) for r in requests}\n"
        "    self._heap = [entry for entry in self._heap if id(entry.request) not in gone]",
    ),
    Change(
        "__iter__",
        "(the entries' requests)",
        "yield heapq.heappop(heap)",
        "yield heapq.heappop(heap).request",
    ),
    uses={"_Later": _Later},
)


def test_unordered_ties_fail_with_a_message_that_points_at_the_option() -> None:
    """ORC-TIES-2: without ties="any" the queue fails; the message says the requests tie."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(HeapOfRequests, "priority", request_factory=untied, max_failures=1)
    message = str(caught.value)
    assert " tie: both have (priority, arrival_time) = " in message
    assert "pass ties='any'" in message
    assert caught.value.reports[0].hint in message
    assert run_program(caught.value.program) is not None


def test_ties_any_accepts_any_order_among_ties() -> None:
    """ORC-TIES-1: with ties="any" the same queue conforms."""
    assert (
        check_request_queue(HeapOfRequests, "priority", request_factory=untied, ties="any") is None
    )


def test_ties_any_still_checks_everything_else() -> None:
    """ORC-TIES-1: a real order bug (and an FCFS bug) is still caught with ties="any"."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(
            LaterArrivalFirstHeap, "priority", request_factory=untied, ties="any", max_failures=1
        )
    assert "pass ties='any'" not in str(caught.value)
    assert caught.value.reports[0].clause in ("RQ-PRI-1", "RQ-PRI-2", "RQ-PRI-3", "RQ-PRI-4")
    assert run_program(caught.value.program) is not None
    with pytest.raises(ConformanceError):
        check_request_queue(PopFromBack, "fcfs", ties="any", max_failures=1)
