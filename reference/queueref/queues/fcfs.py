"""The first-come-first-served queue: `FCFSRequestQueue`, a deque, front at the left.

Models vLLM's `FCFSRequestQueue` (`vllm/v1/core/sched/request_queue.py`,
0.30.0 and 0.33.0): add appends, prepend puts a request back in front, and
`prepend_requests` is `deque.extendleft`. Iterating behaves as iterating a
copy, so the caller may change the queue while iterating; the copy is made
only by a change while an iterator is alive (`_unshare`). Divergence: removal
takes the object named even when the request type's `==` says another queued
request equals it (vLLM 0.30.0 removes with `deque.remove` and a set of the
requests, which then take the wrong one).

The contracts this queue keeps are stated beside it, in
`queueref.queues.clauses` (`_FCFS_POST`), and put around its methods by
`queueref.queues.contracts`; this module imports neither.
"""

from __future__ import annotations

import itertools
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from queueref.queues.base import RequestQueue, _IndexedQueue
from queueref.request import RequestLike


def _by_identity(kind: type) -> bool:
    """Whether objects of `kind` compare and hash by identity (vLLM's `Request`, ours)."""
    equality: object = kind.__eq__  # read from the class: the methods are unbound
    hashing: object = kind.__hash__
    return equality is object.__eq__ and hashing is object.__hash__


def _without(items: deque[RequestLike], present: list[RequestLike]) -> deque[RequestLike]:
    """A new deque of `items` without the objects of `present` (all queued, distinct)."""
    # RQ-REQ-2: by identity. When the named requests compare and hash by identity, a set
    # of them finds each of them, in one C-level pass. A queued request of another type
    # may raise there, or be taken too (its `==` lies): the pass is then dropped (it raised,
    # or kept too few) for the pass over ids, which asks no request anything.
    if all(map(_by_identity, set(map(type, present)))):
        try:
            kept = deque(itertools.filterfalse(set(present).__contains__, items))
            if len(kept) == len(items) - len(present):
                return kept
        except Exception:  # noqa: BLE001 - a request type's own hash or ==, not ours
            pass
    gone = {id(request) for request in present}
    return deque(request for request in items if id(request) not in gone)


class FCFSRequestQueue(_IndexedQueue):
    """First come, first served: a deque, front at the left.

    >>> from queueref import Request
    >>> q = FCFSRequestQueue()
    >>> q.add_request(Request("a")); q.add_request(Request("b"))
    >>> q.prepend_request(Request("p"))
    >>> [r.request_id for r in q]
    ['p', 'a', 'b']
    """

    def __init__(self, requests: Iterable[RequestLike] = ()) -> None:
        self._items: deque[RequestLike] = deque()
        self._index = {}
        # RQ-FCFS-5: set by __iter__, whose iterator reads the deque itself; the next change
        # copies the deque first if that iterator is still alive (copy on write).
        self._iterated = False
        for request in requests:  # the checks of add_request, without its contracts
            request_id = self._fast_new_id(request)
            self._items.append(request)
            self._index[request_id] = request

    def _unshare(self) -> None:
        """Before a change after `__iter__`: copy the deque if an iterator still reads it, so
        that iterator goes on over the queue as it was (as if `__iter__` had copied it)."""
        self._iterated = False
        if sys.getrefcount(self._items) > 2:  # more than our attribute and this argument
            self._items = self._items.copy()

    def _front(self) -> RequestLike | None:
        return self._items[0] if self._items else None

    def _front_two(self) -> tuple[RequestLike | None, RequestLike | None]:
        items = self._items
        size = len(items)
        return (items[0] if size else None), (items[1] if size > 1 else None)

    def _in_order(self) -> list[RequestLike]:
        return list(self._items)

    # add_request and prepend_request inline the common case of `_require_new` (exactly
    # vLLM's field types, a free id): at this size a call costs as much as the check.

    def add_request(self, request: RequestLike) -> None:
        """Append at the back."""
        # Implements RQ-FCFS-1.
        try:
            request_id = request.request_id
            arrival_time = request.arrival_time
            fast = (
                type(request_id) is str
                and type(request.priority) is int
                and type(arrival_time) is float
                and arrival_time == arrival_time  # not NaN
                and request_id not in self._index
            )
        except AttributeError:
            fast = False
        if not fast:
            self._require_new(request)
            request_id = request.request_id
        if self._iterated:
            self._unshare()
        self._items.append(request)
        self._index[request_id] = request

    def pop_request(self) -> Any:
        """Remove and return the front.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-FCFS-2, RQ-ALL-4.
        if self._iterated:
            self._unshare()
        try:
            request = self._items.popleft()
        except IndexError:
            raise IndexError("RQ-ALL-4: pop from an empty queue") from None
        del self._index[request.request_id]
        return request

    def peek_request(self) -> Any:
        """The front, left in place.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-ALL-5.
        try:
            return self._items[0]
        except IndexError:
            raise IndexError("RQ-ALL-5: peek from an empty queue") from None

    def prepend_request(self, request: RequestLike) -> None:
        """Insert at the front (a preempted request resumes first)."""
        # Implements RQ-FCFS-3.
        try:
            request_id = request.request_id
            arrival_time = request.arrival_time
            fast = (
                type(request_id) is str
                and type(request.priority) is int
                and type(arrival_time) is float
                and arrival_time == arrival_time  # not NaN
                and request_id not in self._index
            )
        except AttributeError:
            fast = False
        if not fast:
            self._require_new(request)
            request_id = request.request_id
        if self._iterated:
            self._unshare()
        self._items.appendleft(request)
        self._index[request_id] = request

    def prepend_requests(self, requests: RequestQueue) -> None:
        """Put `requests` in front, in reverse of their iteration order.

        This is vLLM's `deque.extendleft`: each request in turn goes to the
        front, so the last one iterated ends up first. The scheduler relies on
        it: requests skipped in a step are gathered with `prepend_request`
        (which reverses them once), then moved with `prepend_requests` (which
        reverses them back).
        """
        # Implements RQ-FCFS-4.
        incoming, by_id = self._incoming(requests)
        if self._iterated:
            self._unshare()
        self._items.extendleft(incoming)
        self._index.update(by_id)

    def remove_request(self, request: RequestLike) -> None:
        """Remove one queued request (O(1) to find out it is absent).

        :raises ValueError: the request is not in the queue
        """
        # Implements RQ-ALL-6.
        self._require_present(request)
        if self._iterated:
            self._unshare()
        self._remove_object(request)
        del self._index[request.request_id]

    def _remove_object(self, request: RequestLike) -> None:
        # RQ-REQ-2: remove this object. `deque.index` finds the first request that is it
        # or `==` it: the same unless the request type's `==` holds between requests with
        # different ids (vLLM 0.30.0's `deque.remove` would then take the wrong one) or
        # raises (RQ-REQ-3: any object with the three fields); then search by identity.
        items = self._items
        try:
            position = items.index(request)
        except Exception:  # noqa: BLE001 - the request type's own ==, not ours
            position = -1
        if position < 0 or items[position] is not request:
            position = next(i for i, queued in enumerate(items) if queued is request)
        del items[position]

    def remove_requests(self, requests: Iterable[RequestLike]) -> None:
        """Remove every named request that is queued; ignore the rest."""
        # Implements RQ-ALL-7.
        present = self._present(requests)
        if not present:
            return
        # Both in C-level passes: the ids out of the index, and one pass over the deque
        # that hashes identities (RQ-REQ-2), as vLLM does. A new deque, so an iterator
        # over the old one is left as it was.
        index = self._index
        for request_id in present:
            del index[request_id]
        if len(present) == 1:
            if self._iterated:
                self._unshare()
            self._remove_object(*present.values())
        else:
            self._iterated = False
            self._items = _without(self._items, list(present.values()))

    def __iter__(self) -> Iterator[Any]:
        """Front to back, over the queue as it is now: a change made
        while iterating copies the deque first (`_unshare`), so the caller may change the
        queue meanwhile."""
        # Implements RQ-FCFS-5, RQ-ALL-9.
        self._iterated = True
        return iter(self._items)
