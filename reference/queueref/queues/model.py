"""The obviously correct request queue: a Python list, front at index 0.

This is the model the reference queues are tested against (and the source of
the expected values in the test vectors): the semantics of
`specs/request-queue.md` written as plainly as possible, with no index, no
heap and no cleverness, so that it can be checked by reading it.

* FCFS: `add_request` appends, `prepend_request` inserts at index 0,
  `prepend_requests(q)` inserts each request of `q` at index 0 in turn (so
  they end up in the reverse of `q`'s iteration order, like vLLM 0.30.0's
  `deque.extendleft`).
* PRIORITY: the list is kept sorted by `(priority, arrival_time, request_id)`;
  `add_request` and `prepend_request` insert after every smaller key, and
  `prepend_requests(q)` adds each request of `q`.
* Errors, all raised before anything changes: a pop or peek of an empty queue
  raises `IndexError`; an object a queue cannot use raises what the reference
  queues raise, through the same `queueref.request.check_request_shape`
  (`TypeError` naming the field, `ValueError` for a NaN arrival time); a
  request already queued, a request whose id is taken, a queue prepended to
  itself and a removal of an absent request raise `ValueError`.
  `remove_requests` ignores absent requests and repeats.

Models `vllm/v1/core/sched/request_queue.py` (vLLM 0.30.0 and 0.33.0) as the
spec reads it. It is not a `queueref.RequestQueue` (it has no contracts): it is
what the contracts and the state machines compare with.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from queueref.queues.factory import SchedulingPolicy
from queueref.request import RequestKey, RequestLike, check_request_shape


def model_key(request: RequestLike) -> RequestKey:
    """RQ-REQ-1: the ordering key, read from the three fields."""
    return (request.priority, request.arrival_time, request.request_id)


class ListQueueModel:
    """A request queue as a list (front at index 0), for either policy.

    >>> from queueref import Request
    >>> q = ListQueueModel("fcfs")
    >>> q.add_request(Request("a")); q.add_request(Request("b"))
    >>> other = ListQueueModel("fcfs")
    >>> other.add_request(Request("x")); other.add_request(Request("y"))
    >>> q.prepend_requests(other)
    >>> [r.request_id for r in q]
    ['y', 'x', 'a', 'b']
    """

    def __init__(self, policy: SchedulingPolicy | str, items: Iterable[RequestLike] = ()) -> None:
        """`items` (front first) is taken as the queue's contents, trusted to be in order."""
        self.policy = SchedulingPolicy(policy)
        self.items: list[RequestLike] = list(items)

    # -- checks, made before any change -------------------------------------

    def _position(self, request: object) -> int | None:
        """RQ-REQ-2: where this very object is queued (identity, not equality), or None."""
        for index, queued in enumerate(self.items):
            if queued is request:
                return index
        return None

    def _require_new(self, request: Any, also: Iterable[Any] = ()) -> None:
        """RQ-ALL-2, RQ-ALL-3: `request` is not queued and its id is free."""
        check_request_shape(request)
        for queued in [*self.items, *also]:
            if queued is request:
                raise ValueError(f"{request!r} is already queued")
            if queued.request_id == request.request_id:
                raise ValueError(f"request_id {request.request_id!r} is already queued")

    # -- insertion -----------------------------------------------------------

    def _insert_sorted(self, request: RequestLike) -> None:
        """RQ-PRI-1: insert before the first request with a larger key."""
        key = model_key(request)
        index = 0
        while index < len(self.items) and model_key(self.items[index]) < key:
            index += 1
        self.items.insert(index, request)

    def add_request(self, request: Any) -> None:
        """RQ-FCFS-1: append; RQ-PRI-1: insert by key."""
        self._require_new(request)
        if self.policy is SchedulingPolicy.FCFS:
            self.items.append(request)
        else:
            self._insert_sorted(request)

    def prepend_request(self, request: Any) -> None:
        """RQ-FCFS-3: insert at index 0; RQ-PRI-3: the same as add_request."""
        self._require_new(request)
        if self.policy is SchedulingPolicy.FCFS:
            self.items.insert(0, request)
        else:
            self._insert_sorted(request)

    def prepend_requests(self, requests: Any) -> None:
        """RQ-ALL-8, RQ-FCFS-4 (each to index 0 in turn: reversed), RQ-PRI-4 (add each)."""
        if requests is self:
            raise ValueError("a queue cannot be prepended to itself")
        incoming = list(requests)
        for position, request in enumerate(incoming):
            self._require_new(request, also=incoming[:position])
        for request in incoming:
            if self.policy is SchedulingPolicy.FCFS:
                self.items.insert(0, request)
            else:
                self._insert_sorted(request)

    # -- removal -------------------------------------------------------------

    def pop_request(self) -> RequestLike:
        """RQ-ALL-4: remove and return index 0; empty -> IndexError."""
        if not self.items:
            raise IndexError("pop from an empty queue")
        return self.items.pop(0)

    def peek_request(self) -> RequestLike:
        """RQ-ALL-5: index 0, left in place; empty -> IndexError."""
        if not self.items:
            raise IndexError("peek from an empty queue")
        return self.items[0]

    def remove_request(self, request: Any) -> None:
        """RQ-ALL-6: remove this very object; absent -> ValueError."""
        check_request_shape(request)
        index = self._position(request)
        if index is None:
            raise ValueError(f"{request!r} is not queued")
        del self.items[index]

    def remove_requests(self, requests: Iterable[Any]) -> None:
        """RQ-ALL-7: keep every request that is not (by identity) among `requests`."""
        named = list(requests)
        for request in named:
            check_request_shape(request)
        self.items = [r for r in self.items if all(r is not x for x in named)]

    # -- observation ---------------------------------------------------------

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        """RQ-ALL-10."""
        return len(self.items) > 0

    def __iter__(self) -> Iterator[RequestLike]:
        """RQ-ALL-9, RQ-FCFS-5, RQ-PRI-5: index 0 onwards, over a copy."""
        return iter(list(self.items))

    def __repr__(self) -> str:
        return f"ListQueueModel({self.policy.value!r}, items={self.items!r})"
