"""The interface of the waiting queues, `RequestQueue`, and what our two queues share.

`RequestQueue` is the abstract class vLLM's scheduler codes against
(`vllm/v1/core/sched/request_queue.py`, 0.30.0 and 0.33.0). `_IndexedQueue` is
the base of the two reference queues: the id index that makes membership O(1),
and the input checks, which hold even when contracts are off (`python -O`).

The contracts of the queue operations are not written here: they live beside
the logic, in `queueref.queues.contracts`, which puts them around every
subclass's own methods (other people's too) through `watch_subclasses`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

import icontract

from queueref.request import RequestLike, check_request_shape

#: Called with every subclass of `RequestQueue` as it is made (see `watch_subclasses`).
_subclass_hooks: list[Callable[[type[RequestQueue]], None]] = []


def watch_subclasses(hook: Callable[[type[RequestQueue]], None]) -> None:
    """Call `hook` with every subclass of `RequestQueue`: at once with those made
    already (each once), then with each new one as it is made. So a class is handed
    to `hook` whichever was imported first, it or the hook."""
    _subclass_hooks.append(hook)
    seen: set[type[RequestQueue]] = set()
    todo = RequestQueue.__subclasses__()
    while todo:
        cls = todo.pop(0)
        if cls not in seen:
            seen.add(cls)
            hook(cls)
            todo.extend(cls.__subclasses__())


class RequestQueue(icontract.DBC):
    """The interface of vLLM's waiting queues (`RequestQueue`, an ABC).

    Its contracts (`queueref.queues.contracts`) bind every subclass, including
    other people's: they use only the interface, never our own `__init__`'s state.
    """

    #: True for our own queues (an `_IndexedQueue`): a flag, as an ABC isinstance costs 0.3 µs.
    _indexed: ClassVar[bool] = False
    #: Whether this queue's order after `prepend_requests` depends on the other queue's.
    _ordered_prepend: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for hook in _subclass_hooks:
            hook(cls)

    @abc.abstractmethod
    def add_request(self, request: RequestLike) -> None:
        """Add a request in the queue's order."""
        # Implements RQ-ALL-1 (the postcondition, in `queueref.queues.checks`).

    @abc.abstractmethod
    def pop_request(self) -> Any:
        """Remove and return the next request.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-ALL-4.

    @abc.abstractmethod
    def peek_request(self) -> Any:
        """Return the next request without removing it.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-ALL-5.

    @abc.abstractmethod
    def prepend_request(self, request: RequestLike) -> None:
        """Put a request back at the front (FCFS) or in key order (priority)."""

    @abc.abstractmethod
    def prepend_requests(self, requests: RequestQueue) -> None:
        """Put every request of another queue in front (FCFS, reversed) or in order."""

    @abc.abstractmethod
    def remove_request(self, request: RequestLike) -> None:
        """Remove one queued request.

        :raises ValueError: the request is not in the queue
        """
        # Implements RQ-ALL-6.

    @abc.abstractmethod
    def remove_requests(self, requests: Iterable[RequestLike]) -> None:
        """Remove every named request that is queued; absent ones are ignored."""

    @abc.abstractmethod
    def __bool__(self) -> bool:
        """Whether the queue holds any request."""
        # Implements RQ-ALL-10 (the postcondition, in `queueref.queues.checks`).

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of queued requests."""

    @abc.abstractmethod
    def __iter__(self) -> Iterator[Any]:
        """The queued requests in pop order, without changing the queue."""
        # Implements RQ-ALL-9.


def _checked_by_id(requests: list[Any]) -> dict[str, RequestLike]:
    """request id -> request for a batch, after checking every request's shape.

    The common case (exactly vLLM's field types) inline, one plain loop that fills the
    dict as it goes: CPython 3.11 specialises these attribute reads and `type(x) is T`
    tests, which makes the loop several times faster than `map(attrgetter(...))` passes.
    Anything else goes through `check_request_shape`, which raises naming the first field
    a queue cannot use. Two requests with one id leave the dict shorter than the batch.
    """
    # Implements RQ-REQ-3.
    by_id: dict[str, RequestLike] = {}
    for request in requests:
        try:
            request_id = request.request_id
            arrival_time = request.arrival_time
            fast = (
                type(request_id) is str
                and type(request.priority) is int
                and type(arrival_time) is float
                and arrival_time == arrival_time  # not NaN
            )
        except AttributeError:
            fast = False
        if not fast:
            check_request_shape(request)
            request_id = request.request_id
        by_id[request_id] = request
    return by_id


class _IndexedQueue(RequestQueue):
    """What both reference queues share: the id index and the input checks.

    The checks in the method bodies hold even when contracts are off
    (`python -O`); with contracts on, the preconditions fire first.
    """

    _index: dict[str, RequestLike]
    _indexed = True

    @abc.abstractmethod
    def _front(self) -> RequestLike | None:
        """What `peek_request` returns, or None on an empty queue (no contracts)."""

    def _front_two(self) -> tuple[RequestLike | None, RequestLike | None]:
        """The front and, where it is O(1) to know, the request after it (else None)."""
        return self._front(), None

    @abc.abstractmethod
    def _in_order(self) -> list[RequestLike]:
        """The queued requests in pop order, as a new list (no contracts)."""

    def _require_new(self, request: RequestLike) -> None:
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

    def _fast_new_id(self, request: RequestLike) -> str:
        """`request.request_id` once the request passes `_require_new` (inlined common case)."""
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
        return request_id

    def _require_present(self, request: RequestLike) -> None:
        # RQ-ALL-6: removing an absent request is an error, and changes nothing.
        check_request_shape(request)
        if self._index.get(request.request_id) is not request:
            raise ValueError(f"RQ-ALL-6: {request!r} is not in this queue")

    def _present(self, requests: Iterable[RequestLike]) -> dict[str, RequestLike]:
        # RQ-ALL-7: the distinct queued requests among `requests`, by id, all checked first.
        # Look each id up, keep the requests that are the queued object itself, and drop
        # repeats by id: a queued request is the only one with its id (RQ-ALL-3), whatever
        # its type's `==` says (RQ-REQ-2: a queue holds objects, not values). A queued
        # request had its shape checked when it came in, so only the others are checked.
        index = self._index
        present: dict[str, RequestLike] = {}
        for request in requests:  # a plain loop: see `_checked_by_id`
            try:
                request_id = request.request_id
                queued = index.get(request_id) is request
            except (AttributeError, TypeError):  # no request_id, or an unhashable one
                queued = False
            if queued:
                present[request_id] = request
            else:
                check_request_shape(request)
        return present

    def _incoming(
        self, requests: RequestQueue, ordered: bool = True
    ) -> tuple[list[RequestLike], Mapping[str, RequestLike]]:
        """The requests of `requests` (in its order when `ordered`), and id ->
        request for them, the whole batch validated before any of it moves."""
        # Implements RQ-ALL-8.
        if requests is self:
            raise ValueError("RQ-ALL-8: a queue cannot be prepended to itself")
        if requests._indexed:  # one of ours: its requests without a call to __iter__
            other: _IndexedQueue = requests  # type: ignore[assignment]  # a cast is a call
            incoming = other._in_order() if ordered else list(other._index.values())
        else:
            incoming = list(requests)
        by_id = _checked_by_id(incoming)
        if len(by_id) != len(incoming) or not self._index.keys().isdisjoint(by_id):
            seen: set[str] = set()
            for request in incoming:  # the first offending request, named
                check_request_shape(request)
                request_id = request.request_id
                if request_id in self._index:  # the precondition's words, under -O too
                    raise ValueError(
                        "RQ-ALL-8: no request of the other queue is already in this one: "
                        f"request_id {request_id!r} is"
                    )
                if request_id in seen:
                    raise ValueError(
                        f"RQ-ALL-3: two requests of the other queue have request_id {request_id!r}"
                    )
                seen.add(request_id)
        return incoming, by_id

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
