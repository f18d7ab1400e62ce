"""The scheduler's waiting queues: `RequestQueue`, FCFS (deque) and priority (heap).

Models `vllm/v1/core/sched/request_queue.py`. The semantics, clause by clause,
are in `specs/request-queue.md`; every contract below names the clause it
enforces. Deliberate divergences from vLLM (0.30.0 and 0.33.0 alike):

* A request may be queued once, and request ids are unique within a queue
  (preconditions RQ-ALL-2 and RQ-ALL-3). vLLM does not check; with the check
  the priority order is total, so equal queues pop in equal order.
* An id index makes membership O(1): removing an absent request fails at
  once, and the priority queue removes lazily (a tombstone that `pop` skips,
  compacted when tombstones outnumber live entries) instead of vLLM's
  `list.remove` + `heapify`.
* The priority heap orders entries by the key `(priority, arrival_time,
  request_id)` rather than by calling the request's `<`; vLLM's `Request.__lt__`
  (0.30.0, 0.33.0) compares the same key and then `id()`, so the two agree.
* Iterating an FCFS queue iterates a copy (as the priority queue does in
  vLLM), so the caller may change the queue while iterating.
* Bad input never corrupts a queue: an object that is not a request, a
  duplicate, an absent request to remove, or a pop from an empty queue raise
  before anything changes.

Contracts are cheap by default (O(1), or O(k) in the k requests an operation
moves); whole-structure checks run only when `queueref.config.deep_checks()`.
"""

from __future__ import annotations

import abc
import enum
import heapq
import itertools
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

import icontract

from queueref.config import deep_checks
from queueref.request import REQUEST_FIELDS, check_request_shape, request_key


class SchedulingPolicy(enum.Enum):
    """RQ-POL-1: the two orders vLLM's scheduler knows."""

    FCFS = "fcfs"
    PRIORITY = "priority"


# ---------------------------------------------------------------------------
# Helpers the contracts use. They only use the public interface of a queue,
# because the contracts on the ABC also bind other people's subclasses.


def _is_request_shaped(request: object) -> bool:
    return all(hasattr(request, field) for field in REQUEST_FIELDS)


def _queued_ids(queue: RequestQueue) -> Mapping[str, Any] | None:
    """request_id -> request for the queued requests, or None when unknown cheaply.

    RQ-COST-1: our own queues keep an index (O(1)); a foreign subclass is scanned only
    when deep checks are on, so default contracts stay O(1).
    """
    index = queue.__dict__.get("_index") if isinstance(queue, _IndexedQueue) else None
    if index is not None:
        return index  # type: ignore[no-any-return]
    if deep_checks():
        return {r.request_id: r for r in queue}
    return None


def _not_queued(queue: RequestQueue, request: Any) -> bool:
    # A malformed request is left to the RQ-REQ-3 precondition to report.
    ids = _queued_ids(queue) if _is_request_shaped(request) else None
    return ids is None or ids.get(request.request_id) is not request


def _id_free(queue: RequestQueue, request: Any) -> bool:
    ids = _queued_ids(queue) if _is_request_shaped(request) else None
    return ids is None or ids.get(request.request_id, request) is request


def _all_new(queue: RequestQueue, requests: Iterable[Any]) -> bool:
    ids = _queued_ids(queue)
    return ids is None or all(
        not _is_request_shaped(r) or r.request_id not in ids for r in requests
    )


def _count_present(queue: RequestQueue, requests: Iterable[Any]) -> int | None:
    """How many distinct queued requests `requests` names, or None if unknown cheaply."""
    if not isinstance(requests, Collection):
        return None  # an iterator: counting it here would consume it
    ids = _queued_ids(queue)
    if ids is None:
        return None
    return len({id(r) for r in requests if _is_request_shaped(r) and ids.get(r.request_id) is r})


def _head_or_none(queue: RequestQueue) -> Any:
    return queue.peek_request() if len(queue) > 0 else None


def _contents(queue: RequestQueue) -> list[Any] | None:
    """RQ-COST-1: the whole contents in order, only under deep checks (O(n))."""
    return list(queue) if deep_checks() else None


# ---------------------------------------------------------------------------


class RequestQueue(icontract.DBC):
    """The interface of vLLM's waiting queues (`RequestQueue`, an ABC).

    The contracts here bind every subclass, including other people's: they
    use only the interface, never our own `__init__`'s state.
    """

    @abc.abstractmethod
    @icontract.require(
        lambda request: _is_request_shaped(request),
        "RQ-REQ-3: the request has request_id, priority and arrival_time",
        error=TypeError,
    )
    @icontract.require(
        lambda self, request: _not_queued(self, request),
        "RQ-ALL-2: the request is not already in the queue",
        error=ValueError,
    )
    @icontract.require(
        lambda self, request: _id_free(self, request),
        "RQ-ALL-3: no other queued request has this request_id",
        error=ValueError,
    )
    @icontract.snapshot(lambda self: len(self), name="length")
    @icontract.ensure(
        lambda self, OLD: len(self) == OLD.length + 1, "RQ-ALL-1: add grows the queue by one"
    )
    def add_request(self, request: Any) -> None:
        """Add a request in the queue's order."""

    @abc.abstractmethod
    @icontract.snapshot(lambda self: len(self), name="length")
    @icontract.snapshot(lambda self: _head_or_none(self), name="head")
    @icontract.ensure(
        lambda self, OLD: len(self) == OLD.length - 1, "RQ-ALL-4: pop shrinks the queue by one"
    )
    @icontract.ensure(
        lambda result, OLD: result is OLD.head, "RQ-ALL-4: pop returns what peek returned"
    )
    def pop_request(self) -> Any:
        """Remove and return the next request.

        :raises IndexError: the queue is empty (RQ-ALL-4)
        """

    @abc.abstractmethod
    @icontract.snapshot(lambda self: len(self), name="length")
    @icontract.ensure(
        lambda self, OLD: len(self) == OLD.length, "RQ-ALL-5: peek does not change the queue"
    )
    def peek_request(self) -> Any:
        """Return the next request without removing it.

        :raises IndexError: the queue is empty (RQ-ALL-5)
        """

    @abc.abstractmethod
    @icontract.require(
        lambda request: _is_request_shaped(request),
        "RQ-REQ-3: the request has request_id, priority and arrival_time",
        error=TypeError,
    )
    @icontract.require(
        lambda self, request: _not_queued(self, request),
        "RQ-ALL-2: the request is not already in the queue",
        error=ValueError,
    )
    @icontract.require(
        lambda self, request: _id_free(self, request),
        "RQ-ALL-3: no other queued request has this request_id",
        error=ValueError,
    )
    @icontract.snapshot(lambda self: len(self), name="length")
    @icontract.ensure(
        lambda self, OLD: len(self) == OLD.length + 1, "RQ-ALL-1: prepend grows the queue by one"
    )
    def prepend_request(self, request: Any) -> None:
        """Put a request back at the front (FCFS) or in key order (priority)."""

    @abc.abstractmethod
    @icontract.require(
        lambda self, requests: requests is not self,
        "RQ-ALL-8: a queue cannot be prepended to itself",
        error=ValueError,
    )
    @icontract.require(
        lambda self, requests: _all_new(self, requests),
        "RQ-ALL-8: no request of the other queue is already in this one",
        error=ValueError,
    )
    @icontract.snapshot(lambda self: len(self), name="length")
    @icontract.snapshot(lambda requests: len(requests), name="other_length")
    @icontract.ensure(
        lambda self, requests, OLD: len(self) == OLD.length + OLD.other_length,
        "RQ-ALL-8: prepend_requests moves in every request of the other queue",
    )
    @icontract.ensure(
        lambda requests, OLD: len(requests) == OLD.other_length,
        "RQ-ALL-8: the other queue is left as it was",
    )
    def prepend_requests(self, requests: RequestQueue) -> None:
        """Put every request of another queue in front (FCFS, reversed) or in order."""

    @abc.abstractmethod
    @icontract.snapshot(lambda self: len(self), name="length")
    @icontract.ensure(
        lambda self, OLD: len(self) == OLD.length - 1, "RQ-ALL-6: remove takes out one request"
    )
    def remove_request(self, request: Any) -> None:
        """Remove one queued request.

        :raises ValueError: the request is not in the queue (RQ-ALL-6)
        """

    @abc.abstractmethod
    @icontract.snapshot(lambda self: len(self), name="length")
    @icontract.snapshot(lambda self, requests: _count_present(self, requests), name="present")
    @icontract.ensure(
        lambda self, OLD: OLD.present is None or len(self) == OLD.length - OLD.present,
        "RQ-ALL-7: remove_requests takes out exactly the queued requests it names",
    )
    def remove_requests(self, requests: Iterable[Any]) -> None:
        """Remove every named request that is queued; absent ones are ignored."""

    @abc.abstractmethod
    @icontract.ensure(
        lambda self, result: result == (len(self) > 0), "RQ-ALL-10: bool(q) is len(q) > 0"
    )
    def __bool__(self) -> bool:
        """RQ-ALL-10: whether the queue holds any request."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of queued requests."""

    @abc.abstractmethod
    def __iter__(self) -> Iterator[Any]:
        """RQ-ALL-9: the queued requests in pop order, without changing the queue."""


class _IndexedQueue(RequestQueue):
    """What both reference queues share: the id index and the input checks.

    The checks in the method bodies hold even when contracts are off
    (`python -O`); with contracts on, the preconditions fire first.
    """

    _index: dict[str, Any]

    def _require_new(self, request: Any) -> None:
        # RQ-REQ-3, RQ-ALL-2, RQ-ALL-3: reject before anything changes, so a
        # key that cannot be ordered never reaches the heap.
        check_request_shape(request)
        queued = self._index.get(request.request_id)
        if queued is request:
            raise ValueError(f"RQ-ALL-2: {request!r} is already in this queue")
        if queued is not None:
            raise ValueError(
                f"RQ-ALL-3: another request with request_id {request.request_id!r} "
                "is already in this queue"
            )

    def _require_present(self, request: Any) -> None:
        # RQ-ALL-6: removing an absent request is an error, and changes nothing.
        check_request_shape(request)
        if self._index.get(request.request_id) is not request:
            raise ValueError(f"RQ-ALL-6: {request!r} is not in this queue")

    def _present(self, requests: Iterable[Any]) -> list[Any]:
        # RQ-ALL-7: the distinct queued requests among `requests`, checked first.
        wanted = list(requests)
        for request in wanted:
            check_request_shape(request)
        present: dict[int, Any] = {}
        for request in wanted:
            if self._index.get(request.request_id) is request:
                present[id(request)] = request
        return list(present.values())

    def _incoming(self, requests: RequestQueue) -> list[Any]:
        # RQ-ALL-8: validate the whole batch before moving any of it.
        if requests is self:
            raise ValueError("RQ-ALL-8: a queue cannot be prepended to itself")
        incoming = list(requests)
        for request in incoming:
            self._require_new(request)
        return incoming

    def __contains__(self, request: object) -> bool:
        """Whether this very request is queued (O(1))."""
        request_id = getattr(request, "request_id", None)
        return request_id is not None and self._index.get(request_id) is request

    def __bool__(self) -> bool:
        return bool(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


# ---------------------------------------------------------------------------
# FCFS


def _fcfs_index_matches(queue: FCFSRequestQueue) -> bool:
    return not deep_checks() or (
        len(queue._index) == len(queue._items)
        and all(queue._index.get(r.request_id) is r for r in queue._items)
    )


@icontract.invariant(
    lambda self: len(self._items) == len(self._index),
    "RQ-IMPL-1: the id index holds exactly the queued requests",
)
@icontract.invariant(
    lambda self: _fcfs_index_matches(self), "RQ-IMPL-1: every queued request is indexed by its id"
)
class FCFSRequestQueue(_IndexedQueue):
    """First come, first served: a deque, front at the left.

    >>> from queueref import Request
    >>> q = FCFSRequestQueue()
    >>> q.add_request(Request("a")); q.add_request(Request("b"))
    >>> q.prepend_request(Request("p"))
    >>> [r.request_id for r in q]
    ['p', 'a', 'b']
    """

    def __init__(self, requests: Iterable[Any] = ()) -> None:
        self._items: deque[Any] = deque()
        self._index = {}
        for request in requests:
            self._append(request)

    def _append(self, request: Any) -> None:
        self._require_new(request)
        self._items.append(request)
        self._index[request.request_id] = request

    @icontract.snapshot(lambda self: _head_or_none(self), name="head")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(lambda self, request: self._items[-1] is request, "RQ-FCFS-1: add appends")
    @icontract.ensure(
        lambda self, OLD: OLD.head is None or self._items[0] is OLD.head,
        "RQ-FCFS-1: add leaves the front where it was",
    )
    @icontract.ensure(
        lambda self, request, OLD: OLD.items is None or list(self) == OLD.items + [request],
        "RQ-FCFS-1: add keeps the order of the queued requests",
    )
    def add_request(self, request: Any) -> None:
        """RQ-FCFS-1: append at the back."""
        self._append(request)

    @icontract.snapshot(lambda self: self._items[1] if len(self._items) > 1 else None, name="next")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, OLD: OLD.next is None or self._items[0] is OLD.next,
        "RQ-FCFS-2: pop takes the front; the second request becomes the front",
    )
    @icontract.ensure(
        lambda self, OLD: OLD.items is None or list(self) == OLD.items[1:],
        "RQ-FCFS-2: pop keeps the order of the rest",
    )
    def pop_request(self) -> Any:
        """RQ-FCFS-2: remove and return the front.

        :raises IndexError: the queue is empty (RQ-ALL-4)
        """
        try:
            request = self._items.popleft()
        except IndexError:
            raise IndexError("RQ-ALL-4: pop from an empty queue") from None
        del self._index[request.request_id]
        return request

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(lambda self, result: result is self._items[0], "RQ-ALL-5: peek is the front")
    @icontract.ensure(
        lambda self, OLD: OLD.items is None or list(self) == OLD.items,
        "RQ-ALL-5: peek does not change the queue",
    )
    def peek_request(self) -> Any:
        """RQ-ALL-5: the front, left in place.

        :raises IndexError: the queue is empty (RQ-ALL-5)
        """
        if not self._items:
            raise IndexError("RQ-ALL-5: peek from an empty queue")
        return self._items[0]

    @icontract.snapshot(lambda self: _head_or_none(self), name="head")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request: self._items[0] is request, "RQ-FCFS-3: prepend puts it in front"
    )
    @icontract.ensure(
        lambda self, OLD: OLD.head is None or self._items[1] is OLD.head,
        "RQ-FCFS-3: the old front is now second",
    )
    @icontract.ensure(
        lambda self, request, OLD: OLD.items is None or list(self) == [request] + OLD.items,
        "RQ-FCFS-3: prepend keeps the order of the queued requests",
    )
    def prepend_request(self, request: Any) -> None:
        """RQ-FCFS-3: insert at the front (a preempted request resumes first)."""
        self._require_new(request)
        self._items.appendleft(request)
        self._index[request.request_id] = request

    @icontract.snapshot(lambda requests: list(requests), name="incoming")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, OLD: (
            list(itertools.islice(self._items, len(OLD.incoming))) == OLD.incoming[::-1]
        ),
        "RQ-FCFS-4: prepend_requests puts the other queue in front, reversed",
    )
    @icontract.ensure(
        lambda self, OLD: OLD.items is None or list(self) == OLD.incoming[::-1] + OLD.items,
        "RQ-FCFS-4: the queued requests follow, in their order",
    )
    def prepend_requests(self, requests: RequestQueue) -> None:
        """RQ-FCFS-4: put `requests` in front, in reverse of their iteration order.

        This is vLLM's `deque.extendleft`: each request in turn goes to the
        front, so the last one iterated ends up first. The scheduler relies on
        it: requests skipped in a step are gathered with `prepend_request`
        (which reverses them once), then moved with `prepend_requests` (which
        reverses them back).
        """
        incoming = self._incoming(requests)
        self._items.extendleft(incoming)
        for request in incoming:
            self._index[request.request_id] = request

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(lambda self, request: request not in self, "RQ-ALL-6: the request is gone")
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None or list(self) == [r for r in OLD.items if r is not request]
        ),
        "RQ-ALL-6: the other requests keep their order",
    )
    def remove_request(self, request: Any) -> None:
        """RQ-ALL-6: remove one queued request (O(1) to find out it is absent).

        :raises ValueError: the request is not in the queue (RQ-ALL-6)
        """
        self._require_present(request)
        # deque.remove compares with ==, which is identity for requests; ids are unique.
        self._items.remove(request)
        del self._index[request.request_id]

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.snapshot(
        lambda requests: list(requests) if isinstance(requests, Collection) else None,
        name="named",
    )
    @icontract.ensure(
        lambda self, OLD: (
            OLD.items is None
            or OLD.named is None
            or list(self) == [r for r in OLD.items if all(r is not x for x in OLD.named)]
        ),
        "RQ-ALL-7: the remaining requests keep their order",
    )
    def remove_requests(self, requests: Iterable[Any]) -> None:
        """RQ-ALL-7: remove every named request that is queued; ignore the rest."""
        present = self._present(requests)
        if not present:
            return
        for request in present:
            del self._index[request.request_id]
        if len(present) == 1:
            self._items.remove(present[0])
        else:
            # One pass instead of len(present) scans.
            self._items = deque(r for r in self._items if r.request_id in self._index)

    def __iter__(self) -> Iterator[Any]:
        """RQ-FCFS-5, RQ-ALL-9: front to back, over a copy (the queue may change meanwhile)."""
        return iter(list(self._items))


# ---------------------------------------------------------------------------
# PRIORITY

# A heap entry: [key, sequence number, request or _REMOVED]. Keys of live
# entries are distinct; a tombstone may share a key with a live entry, and
# then the sequence number decides, so requests themselves are never compared.
_REMOVED = object()
_Entry = list[Any]


def _heap_ordered(heap: list[_Entry]) -> bool:
    return all(heap[(i - 1) // 2][:2] <= heap[i][:2] for i in range(1, len(heap)))


def _priority_index_matches(queue: PriorityRequestQueue) -> bool:
    live = [e for e in queue._heap if e[2] is not _REMOVED]
    return len(live) == len(queue._index) and all(
        queue._index.get(e[2].request_id) is e[2] for e in live
    )


@icontract.invariant(
    lambda self: len(self._heap) >= len(self._index),
    "RQ-IMPL-1: every queued request has a heap entry",
)
@icontract.invariant(
    lambda self: not deep_checks() or _heap_ordered(self._heap),
    "RQ-PRI-6: the heap property holds for every entry",
)
@icontract.invariant(
    lambda self: not deep_checks() or _priority_index_matches(self),
    "RQ-IMPL-1: the id index holds exactly the live heap entries",
)
class PriorityRequestQueue(_IndexedQueue):
    """Smallest `(priority, arrival_time, request_id)` first: a binary heap.

    >>> from queueref import Request
    >>> q = PriorityRequestQueue()
    >>> q.add_request(Request("late", priority=0, arrival_time=2.0))
    >>> q.add_request(Request("urgent", priority=-1, arrival_time=3.0))
    >>> q.add_request(Request("early", priority=0, arrival_time=1.0))
    >>> [r.request_id for r in q]
    ['urgent', 'early', 'late']
    """

    def __init__(self, requests: Iterable[Any] = ()) -> None:
        self._heap: list[_Entry] = []
        self._index = {}
        self._entries: dict[str, _Entry] = {}
        self._sequence = itertools.count()
        for request in requests:
            self._require_new(request)
            self._push(request)

    def _push(self, request: Any) -> None:
        entry: _Entry = [request_key(request), next(self._sequence), request]
        heapq.heappush(self._heap, entry)
        self._index[request.request_id] = request
        self._entries[request.request_id] = entry

    def _drop_tombstones(self) -> None:
        # Amortised O(log n): each tombstone is popped once.
        while self._heap and self._heap[0][2] is _REMOVED:
            heapq.heappop(self._heap)

    def _head(self) -> Any:
        self._drop_tombstones()
        return self._heap[0][2]

    def _forget(self, request: Any) -> None:
        self._entries.pop(request.request_id)[2] = _REMOVED
        del self._index[request.request_id]

    def _compact(self) -> None:
        # Rebuild once tombstones outnumber live entries: O(n), amortised O(1).
        if len(self._heap) > 2 * len(self._index) + 8:
            self._heap = [e for e in self._heap if e[2] is not _REMOVED]
            heapq.heapify(self._heap)

    @icontract.snapshot(lambda self: _head_or_none(self), name="head")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, OLD: (
            self._head() is request
            if OLD.head is None or request_key(request) < request_key(OLD.head)
            else self._head() is OLD.head
        ),
        "RQ-PRI-1: the minimum is now the smaller of the old minimum and the new request",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None or list(self) == sorted(OLD.items + [request], key=request_key)
        ),
        "RQ-PRI-1: the queue holds the old requests and the new one, in key order",
    )
    def add_request(self, request: Any) -> None:
        """RQ-PRI-1: insert by key `(priority, arrival_time, request_id)`."""
        self._require_new(request)
        self._push(request)

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, result: not self or request_key(result) < request_key(self._head()),
        "RQ-PRI-2: pop returns a request no larger than any that remains",
    )
    @icontract.ensure(
        lambda self, OLD: OLD.items is None or list(self) == OLD.items[1:],
        "RQ-PRI-2: pop takes the minimum and leaves the rest",
    )
    def pop_request(self) -> Any:
        """RQ-PRI-2: remove and return the minimum.

        :raises IndexError: the queue is empty (RQ-ALL-4)
        """
        if not self._index:
            raise IndexError("RQ-ALL-4: pop from an empty queue")
        self._drop_tombstones()
        _key, _seq, request = heapq.heappop(self._heap)
        del self._entries[request.request_id]
        del self._index[request.request_id]
        return request

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(lambda self, result: result is self._head(), "RQ-ALL-5: peek is the minimum")
    @icontract.ensure(
        lambda self, OLD: OLD.items is None or list(self) == OLD.items,
        "RQ-ALL-5: peek does not change the queue",
    )
    def peek_request(self) -> Any:
        """RQ-ALL-5: the minimum, left in place.

        :raises IndexError: the queue is empty (RQ-ALL-5)
        """
        if not self._index:
            raise IndexError("RQ-ALL-5: peek from an empty queue")
        return self._head()

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None or list(self) == sorted(OLD.items + [request], key=request_key)
        ),
        "RQ-PRI-3: prepend_request is add_request: the request takes its key's place",
    )
    def prepend_request(self, request: Any) -> None:
        """RQ-PRI-3: a heap has no front, so prepending is adding."""
        self._require_new(request)
        self._push(request)

    @icontract.snapshot(lambda requests: list(requests), name="incoming")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, OLD: all(r in self for r in OLD.incoming),
        "RQ-PRI-4: every request of the other queue is now queued here",
    )
    @icontract.ensure(
        lambda self, OLD: (
            OLD.items is None or list(self) == sorted(OLD.items + OLD.incoming, key=request_key)
        ),
        "RQ-PRI-4: all of them in key order",
    )
    def prepend_requests(self, requests: RequestQueue) -> None:
        """RQ-PRI-4: add each request of `requests`; their order there does not matter."""
        for request in self._incoming(requests):
            self._push(request)

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(lambda self, request: request not in self, "RQ-ALL-6: the request is gone")
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None or list(self) == [r for r in OLD.items if r is not request]
        ),
        "RQ-ALL-6: the other requests keep their order",
    )
    def remove_request(self, request: Any) -> None:
        """RQ-ALL-6: remove one queued request, in O(1) amortised (a tombstone).

        :raises ValueError: the request is not in the queue (RQ-ALL-6)
        """
        self._require_present(request)
        self._forget(request)
        self._compact()

    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.snapshot(
        lambda requests: list(requests) if isinstance(requests, Collection) else None,
        name="named",
    )
    @icontract.ensure(
        lambda self, OLD: (
            OLD.items is None
            or OLD.named is None
            or list(self) == [r for r in OLD.items if all(r is not x for x in OLD.named)]
        ),
        "RQ-ALL-7: the remaining requests keep their order",
    )
    def remove_requests(self, requests: Iterable[Any]) -> None:
        """RQ-ALL-7: remove every named request that is queued; ignore the rest."""
        for request in self._present(requests):
            self._forget(request)
        self._compact()

    def __iter__(self) -> Iterator[Any]:
        """RQ-PRI-5: ascending key, over a copy; the heap is left as it is."""
        live = sorted(e for e in self._heap if e[2] is not _REMOVED)
        return iter([e[2] for e in live])


# ---------------------------------------------------------------------------


def create_request_queue(policy: SchedulingPolicy | str) -> RequestQueue:
    """RQ-POL-1: the queue for a policy, given as the enum or its string value.

    >>> type(create_request_queue("priority")).__name__
    'PriorityRequestQueue'

    :raises ValueError: an unknown policy; the message lists the valid ones (RQ-POL-2)
    """
    try:
        policy = SchedulingPolicy(policy)
    except ValueError:
        valid = ", ".join(repr(p.value) for p in SchedulingPolicy)
        raise ValueError(
            f"RQ-POL-2: unknown scheduling policy {policy!r}; valid policies are {valid}"
        ) from None
    if policy is SchedulingPolicy.FCFS:
        return FCFSRequestQueue()
    return PriorityRequestQueue()
