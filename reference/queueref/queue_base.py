"""The interface of the waiting queues, `RequestQueue`, and what our two queues share.

`RequestQueue` is the abstract class vLLM's scheduler codes against; its
contracts (built from `queueref.queue_checks`) bind every subclass, other
people's included. `_IndexedQueue` is the base of the two reference queues:
the id index that makes membership O(1), and the input checks, which hold
even when contracts are off (`python -O`).

How the contracts are laid out: icontract's price is per contract (about
1.7 µs each, whatever the condition), so every method has at most one
precondition, one snapshot and one postcondition, all on the abstract class.
The postcondition runs a table of clauses -- the `RequestQueue` clauses, then
the clauses the concrete class lists in `_post_clauses` -- and on a violation
its error names the first clause that fails, with its requirement ID, exactly
as a contract of its own would.
"""

# RQ-COST-1: the contract layout above keeps default contracts O(1) per call.

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar, cast

import icontract

from queueref.queue_checks import (
    _ABC_POST,
    Clause,
    _add_refusal,
    _Before,
    _broken,
    _Deep,
    _first_broken,
    _may_add,
    _prepend_refusal,
    _refused,
)
from queueref.request import RequestLike, check_request_shape


class RequestQueue(icontract.DBC):
    """The interface of vLLM's waiting queues (`RequestQueue`, an ABC).

    The contracts here bind every subclass, including other people's: they
    use only the interface, never our own `__init__`'s state.
    """

    #: Clauses a concrete queue adds to the postcondition of a method (see the module doc).
    _post_clauses: ClassVar[Mapping[str, tuple[Clause, ...]]] = {}
    #: True for our own queues (an `_IndexedQueue`): a flag, as an ABC isinstance costs 0.3 µs.
    _indexed: ClassVar[bool] = False
    #: The ABC's clauses followed by the class's own, per method, split into the
    #: cheap ones and the deep ones (made once per class, in `__init_subclass__`).
    _cheap_post_clauses: ClassVar[Mapping[str, tuple[Clause, ...]]] = _ABC_POST
    _deep_post_clauses: ClassVar[Mapping[str, tuple[Clause, ...]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        every = {m: clauses + cls._post_clauses.get(m, ()) for m, clauses in _ABC_POST.items()}
        cls._cheap_post_clauses = {
            m: tuple(c for c in clauses if not isinstance(c, _Deep)) for m, clauses in every.items()
        }
        cls._deep_post_clauses = {
            m: tuple(c for c in clauses if isinstance(c, _Deep)) for m, clauses in every.items()
        }

    @abc.abstractmethod
    @icontract.require(
        _may_add,
        "RQ-REQ-3, RQ-ALL-2, RQ-ALL-3: a request-shaped object, not queued, with a free id",
        error=lambda self, request: _add_refusal(self, request, "add_request"),
    )
    @icontract.snapshot(lambda self: _Before(self), name="before")
    @icontract.ensure(
        lambda self, request, OLD: _first_broken(self, "add_request", request, OLD.before) is None,
        "RQ-ALL-1, and the clauses of the queue's policy",
        error=lambda self, request, OLD: _broken(self, "add_request", request, OLD.before),
    )
    def add_request(self, request: RequestLike) -> None:
        """Add a request in the queue's order."""

    @abc.abstractmethod
    @icontract.snapshot(lambda self: _Before(self), name="before")
    @icontract.ensure(
        lambda self, result, OLD: _first_broken(self, "pop_request", result, OLD.before) is None,
        "RQ-ALL-4, and the clauses of the queue's policy",
        error=lambda self, result, OLD: _broken(self, "pop_request", result, OLD.before),
    )
    def pop_request(self) -> Any:
        """Remove and return the next request.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-ALL-4.

    @abc.abstractmethod
    @icontract.snapshot(lambda self: _Before(self), name="before")
    @icontract.ensure(
        lambda self, result, OLD: _first_broken(self, "peek_request", result, OLD.before) is None,
        "RQ-ALL-5, and the clauses of the queue's policy",
        error=lambda self, result, OLD: _broken(self, "peek_request", result, OLD.before),
    )
    def peek_request(self) -> Any:
        """Return the next request without removing it.

        :raises IndexError: the queue is empty
        """
        # Implements RQ-ALL-5.

    @abc.abstractmethod
    @icontract.require(
        _may_add,
        "RQ-REQ-3, RQ-ALL-2, RQ-ALL-3: a request-shaped object, not queued, with a free id",
        error=lambda self, request: _add_refusal(self, request, "prepend_request"),
    )
    @icontract.snapshot(lambda self: _Before(self), name="before")
    @icontract.ensure(
        lambda self, request, OLD: (
            _first_broken(self, "prepend_request", request, OLD.before) is None
        ),
        "RQ-ALL-1, and the clauses of the queue's policy",
        error=lambda self, request, OLD: _broken(self, "prepend_request", request, OLD.before),
    )
    def prepend_request(self, request: RequestLike) -> None:
        """Put a request back at the front (FCFS) or in key order (priority)."""

    @abc.abstractmethod
    @icontract.require(
        lambda self, requests: _prepend_refusal(self, requests) is None,
        "RQ-ALL-8: not the queue itself, and none of its requests already queued here",
        error=lambda self, requests: _refused(_prepend_refusal(self, requests)),
    )
    @icontract.snapshot(lambda self, requests: _Before.of_prepend(self, requests), name="before")
    @icontract.ensure(
        lambda self, requests, OLD: (
            _first_broken(self, "prepend_requests", requests, OLD.before) is None
        ),
        "RQ-ALL-8, and the clauses of the queue's policy",
        error=lambda self, requests, OLD: _broken(self, "prepend_requests", requests, OLD.before),
    )
    def prepend_requests(self, requests: RequestQueue) -> None:
        """Put every request of another queue in front (FCFS, reversed) or in order."""

    @abc.abstractmethod
    @icontract.snapshot(lambda self: _Before(self), name="before")
    @icontract.ensure(
        lambda self, request, OLD: (
            _first_broken(self, "remove_request", request, OLD.before) is None
        ),
        "RQ-ALL-6, and the clauses of the queue's policy",
        error=lambda self, request, OLD: _broken(self, "remove_request", request, OLD.before),
    )
    def remove_request(self, request: RequestLike) -> None:
        """Remove one queued request.

        :raises ValueError: the request is not in the queue
        """
        # Implements RQ-ALL-6.

    @abc.abstractmethod
    @icontract.snapshot(lambda self, requests: _Before.of_remove(self, requests), name="before")
    @icontract.ensure(
        lambda self, requests, OLD: (
            _first_broken(self, "remove_requests", requests, OLD.before) is None
        ),
        "RQ-ALL-7, and the clauses of the queue's policy",
        error=lambda self, requests, OLD: _broken(self, "remove_requests", requests, OLD.before),
    )
    def remove_requests(self, requests: Iterable[RequestLike]) -> None:
        """Remove every named request that is queued; absent ones are ignored."""

    @abc.abstractmethod
    @icontract.ensure(
        lambda self, result: result == (len(self) > 0), "RQ-ALL-10: bool(q) is len(q) > 0"
    )
    def __bool__(self) -> bool:
        """Whether the queue holds any request."""
        # Implements RQ-ALL-10.

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of queued requests."""

    @abc.abstractmethod
    def __iter__(self) -> Iterator[Any]:
        """The queued requests in pop order, without changing the queue."""
        # Implements RQ-ALL-9.


def _checked_ids(requests: list[Any]) -> list[str]:
    """The request ids of a batch, after checking every request's shape.

    The common case (exactly vLLM's field types) inline, one plain loop: CPython 3.11
    specialises these attribute reads and `type(x) is T` tests, which makes the loop
    several times faster than `map(attrgetter(...))` passes. Anything else goes through
    `check_request_shape`, which raises naming the first field a queue cannot use.
    """
    # Implements RQ-REQ-3.
    ids: list[str] = []
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
        ids.append(request_id)
    return ids


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

    def _present(self, requests: Iterable[RequestLike]) -> list[RequestLike]:
        # RQ-ALL-7: the distinct queued requests among `requests`, all checked first.
        # Look each id up, keep the requests that are the queued object itself, and drop
        # repeats (dict keys hash identities, RQ-REQ-2). A queued request had its shape
        # checked when it came in, so only the others are checked here.
        index = self._index
        present: dict[RequestLike, None] = {}
        for request in requests:  # a plain loop: see `_checked_ids`
            try:
                queued = index.get(request.request_id) is request
            except (AttributeError, TypeError):  # no request_id, or an unhashable one
                queued = False
            if queued:
                present[request] = None
            else:
                check_request_shape(request)
        return list(present)

    def _incoming(
        self, requests: RequestQueue, ordered: bool = True
    ) -> tuple[list[RequestLike], Mapping[str, RequestLike]]:
        """The requests of `requests` (in its order when `ordered`), and id ->
        request for them, the whole batch validated before any of it moves."""
        # Implements RQ-ALL-8.
        if requests is self:
            raise ValueError("RQ-ALL-8: a queue cannot be prepended to itself")
        if requests._indexed:  # one of ours: its requests without a call to __iter__
            other = cast(_IndexedQueue, requests)
            incoming = other._in_order() if ordered else list(other._index.values())
        else:
            incoming = list(requests)
        ids = _checked_ids(incoming)
        if len(set(ids)) != len(ids) or not self._index.keys().isdisjoint(ids):
            seen: set[str] = set()
            for request, request_id in zip(incoming, ids, strict=True):
                self._require_new(request)  # RQ-ALL-2 / RQ-ALL-3 against this queue
                if request_id in seen:
                    raise ValueError(
                        f"RQ-ALL-3: two requests of the other queue have request_id {request_id!r}"
                    )
                seen.add(request_id)
        return incoming, dict(zip(ids, incoming, strict=True))

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
