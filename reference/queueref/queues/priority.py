"""The priority queue: `PriorityRequestQueue`, a binary heap with lazy removal.

Models vLLM's `PriorityRequestQueue` (`vllm/v1/core/sched/request_queue.py`,
0.30.0 and 0.33.0). The heap orders entries by the key `(priority,
arrival_time, request_id)` rather than by calling the request's `<`; vLLM's
`Request.__lt__` (0.30.0, 0.33.0) compares the same key and then `id()`, so
the two agree. Removal leaves a tombstone that `pop` skips, compacted when
tombstones outnumber live entries, instead of vLLM's `list.remove` +
`heapify`.

The contracts this queue keeps are stated beside it, in
`queueref.queues.clauses` (`_PRIORITY_POST`), and put around its methods by
`queueref.queues.contracts`; this module imports neither.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from queueref.queues.base import RequestQueue, _IndexedQueue
from queueref.request import RequestLike

# A heap entry: [key, sequence number, request or _REMOVED]. Keys of live
# entries are distinct; a tombstone may share a key with a live entry, and
# then the sequence number decides, so requests themselves are never compared.


class _Tombstone:
    """The mark of a removed entry: one object, which copy, deepcopy and pickle keep
    as itself (`__reduce__` names the module's `_REMOVED`)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        # RQ-IMPL-2: a copied object() would be another object, handed out as a request.
        return "_REMOVED"

    def __repr__(self) -> str:
        return "<removed>"


_REMOVED: Any = _Tombstone()
_Entry = list[Any]


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

    #: The order of the other queue in `prepend_requests` does not matter here.
    _ordered_prepend = False

    def __init__(self, requests: Iterable[RequestLike] = ()) -> None:
        self._heap: list[_Entry] = []
        self._index = {}
        self._entries: dict[str, _Entry] = {}
        self._sequence = itertools.count()
        for request in requests:
            self._push(request, self._fast_new_id(request))

    def _push(self, request: RequestLike, request_id: str) -> None:
        entry: _Entry = [
            (request.priority, request.arrival_time, request_id),  # request_key, inlined
            next(self._sequence),
            request,
        ]
        heapq.heappush(self._heap, entry)
        self._index[request_id] = request
        self._entries[request_id] = entry

    def _drop_tombstones(self) -> None:
        # Amortised O(log n): each tombstone is popped once.
        while self._heap and self._heap[0][2] is _REMOVED:
            heapq.heappop(self._heap)

    def _front(self) -> RequestLike | None:
        heap = self._heap
        while heap:
            request: RequestLike = heap[0][2]
            if request is not _REMOVED:
                return request
            heapq.heappop(heap)
        return None

    def _forget(self, request: RequestLike) -> None:
        self._entries.pop(request.request_id)[2] = _REMOVED
        del self._index[request.request_id]

    def _compact(self) -> None:
        # Rebuild once tombstones outnumber live entries: O(n), amortised O(1).
        if len(self._heap) > 2 * len(self._index) + 8:
            self._heap = [e for e in self._heap if e[2] is not _REMOVED]
            heapq.heapify(self._heap)

    def add_request(self, request: RequestLike) -> None:
        """Insert by key `(priority, arrival_time, request_id)`."""
        # Implements RQ-PRI-1.
        self._push(request, self._fast_new_id(request))

    def pop_request(self) -> Any:
        """Remove and return the minimum.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-PRI-2, RQ-ALL-4.
        if not self._index:
            raise IndexError("RQ-ALL-4: pop from an empty queue")
        self._drop_tombstones()
        _key, _seq, request = heapq.heappop(self._heap)
        del self._entries[request.request_id]
        del self._index[request.request_id]
        return request

    def peek_request(self) -> Any:
        """The minimum, left in place.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-ALL-5.
        try:  # the common case inlined: peek is the scheduler's most frequent call
            request = self._heap[0][2]
        except IndexError:
            raise IndexError("RQ-ALL-5: peek from an empty queue") from None
        if request is _REMOVED:  # a tombstone on top: drop them
            request = self._front()
            if request is None:
                raise IndexError("RQ-ALL-5: peek from an empty queue")
        return request

    def prepend_request(self, request: RequestLike) -> None:
        """A heap has no front, so prepending is adding."""
        # Implements RQ-PRI-3.
        self._push(request, self._fast_new_id(request))

    def prepend_requests(self, requests: RequestQueue) -> None:
        """Add each request of `requests`; their order there does not matter."""
        # Implements RQ-PRI-4.
        _unordered, by_id = self._incoming(requests, ordered=False)
        for request_id, request in by_id.items():
            self._push(request, request_id)

    def remove_request(self, request: RequestLike) -> None:
        """Remove one queued request, in O(1) amortised (a tombstone).

        :raises ValueError: the request is not in the queue
        """
        # Implements RQ-ALL-6.
        self._require_present(request)
        self._forget(request)
        self._compact()

    def remove_requests(self, requests: Iterable[RequestLike]) -> None:
        """Remove every named request that is queued; ignore the rest."""
        # Implements RQ-ALL-7.
        for request in self._present(requests).values():
            self._forget(request)
        self._compact()

    def _in_order(self) -> list[RequestLike]:
        live = sorted(e for e in self._heap if e[2] is not _REMOVED)
        return [e[2] for e in live]

    def __iter__(self) -> Iterator[Any]:
        """Ascending key, over a copy; the heap is left as it is."""
        # Implements RQ-PRI-5.
        return iter(self._in_order())
