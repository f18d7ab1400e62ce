"""A distillation of vLLM's `Request` and request queues, for the distilled schedulers.

Written by hand from the behaviour of vLLM 0.30.0 and 0.33.0 (the two agree on
everything kept here): `vllm/v1/request.py` (`Request.__lt__`, lines 350-361 in
0.30.0, 357-367 in 0.33.0: priority, then arrival_time, then request_id, then
`id()`) and `vllm/v1/core/sched/request_queue.py` (a deque for FCFS whose
`prepend_requests` is `extendleft`; a binary heap of requests for PRIORITY whose
prepends are pushes and whose iteration pops a copy). Not vLLM's code and not
queueref's: the differential tests (tests/waiting/test_waiting_differential.py) run
`queueref.WaitingQueues` against the schedulers built on these.

Only what the waiting loop reads of a request is kept, plus the few fields the
test's world uses to decide the per-request checks.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Iterator

from queueref.request import RequestStatus


class DistilledRequest:
    """The fields of vLLM's `Request` the waiting loop reads (and the world's knobs)."""

    def __init__(
        self,
        request_id: str,
        priority: int,
        arrival_time: float,
        status: RequestStatus,
        num_tokens: int,
        lora_int_id: int = 0,
        resumable: bool = False,
    ) -> None:
        self.request_id = request_id
        self.priority = priority
        self.arrival_time = arrival_time
        self.status = status
        self.num_tokens = num_tokens
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self.lora_int_id = lora_int_id  # 0: no LoRA adapter
        self.resumable = resumable
        # vLLM: a deque of pending StreamingUpdates (None = the stream ended), resumable only.
        self.streaming_queue: deque[int | None] | None = deque() if resumable else None
        self.grammar_ready = False  # structured_output_request.grammar is compiled

    def __lt__(self, other: DistilledRequest) -> bool:
        if self.priority != other.priority:
            return self.priority < other.priority
        if self.arrival_time != other.arrival_time:
            return self.arrival_time < other.arrival_time
        if self.request_id != other.request_id:
            return self.request_id < other.request_id
        return id(self) < id(other)

    def __repr__(self) -> str:
        return f"<{self.request_id} {self.status.name}>"


class DistilledFCFSQueue:
    """request_queue.py's FCFS queue: a deque; prepend_requests is extendleft."""

    def __init__(self) -> None:
        self._items: deque[DistilledRequest] = deque()

    def add_request(self, request: DistilledRequest) -> None:
        self._items.append(request)

    def pop_request(self) -> DistilledRequest:
        return self._items.popleft()

    def peek_request(self) -> DistilledRequest:
        return self._items[0]

    def prepend_request(self, request: DistilledRequest) -> None:
        self._items.appendleft(request)

    def prepend_requests(self, requests: Iterable[DistilledRequest]) -> None:
        self._items.extendleft(requests)

    def remove_requests(self, requests: Iterable[DistilledRequest]) -> None:
        gone = {id(r) for r in requests}
        self._items = deque(r for r in self._items if id(r) not in gone)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[DistilledRequest]:
        return iter(list(self._items))


class DistilledPriorityQueue:
    """request_queue.py's PRIORITY queue: a heap ordered by `Request.__lt__`."""

    def __init__(self) -> None:
        self._heap: list[DistilledRequest] = []

    def add_request(self, request: DistilledRequest) -> None:
        heapq.heappush(self._heap, request)

    def pop_request(self) -> DistilledRequest:
        return heapq.heappop(self._heap)

    def peek_request(self) -> DistilledRequest:
        return self._heap[0]

    def prepend_request(self, request: DistilledRequest) -> None:
        self.add_request(request)  # the heap has no front: a prepend is an add

    def prepend_requests(self, requests: Iterable[DistilledRequest]) -> None:
        for request in requests:
            self.add_request(request)

    def remove_requests(self, requests: Iterable[DistilledRequest]) -> None:
        gone = {id(r) for r in requests}
        self._heap = [r for r in self._heap if id(r) not in gone]
        heapq.heapify(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[DistilledRequest]:
        copy = self._heap[:]
        while copy:
            yield heapq.heappop(copy)


DistilledQueue = DistilledFCFSQueue | DistilledPriorityQueue


def distilled_queue(policy: str) -> DistilledQueue:
    """request_queue.py's `create_request_queue`."""
    return DistilledFCFSQueue() if policy == "fcfs" else DistilledPriorityQueue()
