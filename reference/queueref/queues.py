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
* Iterating an FCFS queue behaves as iterating a copy (as the priority queue
  does in vLLM), so the caller may change the queue while iterating; the copy
  is made only by a change while an iterator is alive (`_unshare`).
* Bad input never corrupts a queue: an object that is not a request, a
  duplicate, an absent request to remove, or a pop from an empty queue raise
  before anything changes.

Contracts are cheap by default (O(1), or O(k) in the k requests an operation
moves); whole-structure checks run only when `queueref.config.deep_checks()`.

How the contracts are laid out (RQ-COST-1): icontract's price is per contract
(about 1.7 µs each, whatever the condition), so every method has at most one
precondition, one snapshot and one postcondition, all on the abstract class.
The postcondition runs a table of clauses -- the `RequestQueue` clauses, then
the clauses the concrete class lists in `_post_clauses` -- and on a violation
its error names the first clause that fails, with its requirement ID, exactly
as a contract of its own would.
"""

from __future__ import annotations

import abc
import enum
import heapq
import itertools
import operator
import sys
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from operator import attrgetter
from typing import Any, ClassVar, cast

import icontract

from queueref import config
from queueref.config import deep_checks
from queueref.request import RequestLike, check_request_shape, is_request_shaped, request_key


class SchedulingPolicy(enum.Enum):
    """RQ-POL-1: the two orders vLLM's scheduler knows."""

    FCFS = "fcfs"
    PRIORITY = "priority"


# ---------------------------------------------------------------------------
# Helpers the contracts use. On a foreign subclass they only use the public
# interface of a queue, because the contracts on the ABC bind other people's
# subclasses too; on our own queues they may read the id index and the front.


def _queued_ids(queue: RequestQueue) -> Mapping[str, RequestLike] | None:
    """request_id -> request for the queued requests, or None when unknown cheaply.

    RQ-COST-1: our own queues keep an index (O(1)); a foreign subclass is scanned only
    when deep checks are on, so default contracts stay O(1).
    """
    if queue._indexed:
        return cast(_IndexedQueue, queue)._index
    if deep_checks():
        return {r.request_id: r for r in queue}
    return None


def _size(queue: RequestQueue) -> int:
    # Our own queues: the index size is their __len__, read without a call.
    return len(cast(_IndexedQueue, queue)._index) if queue._indexed else len(queue)


def _head_or_none(queue: RequestQueue) -> RequestLike | None:
    """What `peek_request()` would return, or None: our own queues answer without
    going through the contract-checked `peek_request`."""
    if queue._indexed:
        return cast(_IndexedQueue, queue)._front()
    return queue.peek_request() if len(queue) > 0 else None


class _Before:
    """The one snapshot of a call: what its postcondition clauses compare against.

    `head` and `second` are the first two requests in pop order (None when
    there are fewer; `second` only for our FCFS queue, where it is O(1));
    `items` the whole contents under deep checks, else None.
    """

    __slots__ = ("length", "head", "second", "items", "incoming", "present")

    def __init__(self, queue: RequestQueue) -> None:
        if queue._indexed:  # our own queues: no contract-checked call, no ABC isinstance
            own = cast(_IndexedQueue, queue)
            self.length = len(own._index)
            self.head, self.second = own._front_two()
        else:
            self.length = len(queue)
            self.head = _head_or_none(queue)
            self.second = None
        self.items = list(queue) if config.DEEP_CHECKS else None  # RQ-COST-1: O(n), deep only
        self.incoming: list[RequestLike] = []
        self.present: int | None = None

    @staticmethod
    def of_prepend(queue: RequestQueue, requests: RequestQueue) -> _Before:
        before = _Before(queue)
        before.incoming = list(requests)  # O(k): the requests this call moves
        return before

    @staticmethod
    def of_remove(queue: RequestQueue, requests: Iterable[Any]) -> _Before:
        before = _Before(queue)
        if isinstance(requests, Collection):  # an iterator: reading it here would consume it
            before.incoming = list(requests)
            before.present = _count_present(queue, before.incoming)
        return before


def _count_present(queue: RequestQueue, requests: list[Any]) -> int | None:
    """How many distinct queued requests `requests` names, or None if unknown cheaply."""
    ids = _queued_ids(queue)
    if ids is None:
        return None
    try:  # the common case in C-level passes: look each id up, keep the queued objects
        hits = list(map(operator.is_, map(ids.get, map(_ids_of, requests)), requests))
    except (AttributeError, TypeError):  # a member with no request_id, or an unhashable one
        return len({id(r) for r in requests if is_request_shaped(r) and ids.get(r.request_id) is r})
    return len(set(map(id, itertools.compress(requests, hits))))


#: A postcondition clause: "ID: what holds", and a test of (queue, argument, before).
Clause = tuple[str, Callable[[Any, Any, Any], bool]]


class _Deep(tuple[str, Callable[[Any, Any, Any], bool]]):
    """A clause that costs O(n): it runs only under deep checks (RQ-COST-1)."""


def _deep(text: str, holds: Callable[[Any, Any, Any], bool]) -> Clause:
    return _Deep((text, holds))


def _first_failing(clauses: Iterable[Clause], queue: Any, arg: Any, old: Any) -> str | None:
    for clause in clauses:
        text, holds = clause
        if (isinstance(clause, _Deep) and not config.DEEP_CHECKS) or holds(queue, arg, old):
            continue
        return text
    return None


def _first_broken(queue: RequestQueue, method: str, arg: Any, old: _Before) -> str | None:
    """The first clause of `method` that `queue` breaks after the call, or None."""
    for text, holds in queue._cheap_post_clauses[method]:
        if not holds(queue, arg, old):
            return text
    if config.DEEP_CHECKS:
        for text, holds in queue._deep_post_clauses[method]:
            if not holds(queue, arg, old):
                return text
    return None


def _where(queue: object, method: str) -> str:
    return f"File {__file__}, in {type(queue).__name__}.{method}:\n"


def _broken(queue: RequestQueue, method: str, arg: Any, old: _Before) -> icontract.ViolationError:
    """The violation of the first broken clause, worded as icontract words its own."""
    text = _first_broken(queue, method, arg, old)
    return icontract.ViolationError(f"{_where(queue, method)}{text}: the argument was {arg!r}")


# The postconditions every queue keeps (the ABC's clauses), by method.
_ABC_POST: dict[str, tuple[Clause, ...]] = {
    "add_request": (
        ("RQ-ALL-1: add grows the queue by one", lambda q, r, old: _size(q) == old.length + 1),
    ),
    "prepend_request": (
        ("RQ-ALL-1: prepend grows the queue by one", lambda q, r, old: _size(q) == old.length + 1),
    ),
    "pop_request": (
        ("RQ-ALL-4: pop shrinks the queue by one", lambda q, r, old: _size(q) == old.length - 1),
        ("RQ-ALL-4: pop returns what peek returned", lambda q, r, old: r is old.head),
    ),
    "peek_request": (
        ("RQ-ALL-5: peek does not change the queue", lambda q, r, old: _size(q) == old.length),
    ),
    "prepend_requests": (
        (
            "RQ-ALL-8: prepend_requests moves in every request of the other queue",
            lambda q, rs, old: _size(q) == old.length + len(old.incoming),
        ),
        (
            "RQ-ALL-8: the other queue is left as it was",
            lambda q, rs, old: len(rs) == len(old.incoming),
        ),
    ),
    "remove_request": (
        ("RQ-ALL-6: remove takes out one request", lambda q, r, old: _size(q) == old.length - 1),
    ),
    "remove_requests": (
        (
            "RQ-ALL-7: remove_requests takes out exactly the queued requests it names",
            lambda q, rs, old: old.present is None or _size(q) == old.length - old.present,
        ),
    ),
}


def _add_refusal(queue: RequestQueue, request: Any, method: str) -> Exception:
    """RQ-REQ-3, RQ-ALL-2, RQ-ALL-3: why `request` may not be added, or None."""
    if not is_request_shaped(request):
        return TypeError(
            f"{_where(queue, method)}RQ-REQ-3: the request has request_id, priority and "
            f"arrival_time: {type(request).__name__} object lacks one"
        )
    ids = _queued_ids(queue)
    queued = None if ids is None else ids.get(request.request_id)
    if queued is request:
        return ValueError(
            f"{_where(queue, method)}RQ-ALL-2: the request is not already in the queue: "
            f"{request!r} is queued"
        )
    if queued is not None:
        return ValueError(
            f"{_where(queue, method)}RQ-ALL-3: no other queued request has this request_id: "
            f"{request.request_id!r} is taken"
        )
    raise AssertionError("_add_refusal called on an addable request")  # pragma: no cover


def _may_add(self: RequestQueue, request: Any) -> bool:
    """The precondition of add and prepend, in one pass: a request-shaped object with a
    free id. Named `self` so icontract calls it directly, without a lambda around it."""
    try:
        request_id = request.request_id
        request.priority, request.arrival_time  # noqa: B018
    except AttributeError:
        return False
    if self._indexed:  # our own queues: the index, without a call
        return request_id not in cast(_IndexedQueue, self)._index
    ids = _queued_ids(self)
    return ids is None or request_id not in ids


def _prepend_refusal(queue: RequestQueue, requests: RequestQueue) -> ValueError | None:
    """RQ-ALL-8: why `requests` may not be prepended to `queue`, or None (see `_refused`)."""
    if requests is queue:
        return ValueError(
            f"{_where(queue, 'prepend_requests')}RQ-ALL-8: a queue cannot be prepended to itself"
        )
    ids = _queued_ids(queue)
    if ids is None:
        return None
    try:  # the common case in one C-level pass; a clash is looked at again below
        disjoint = ids.keys().isdisjoint(map(_ids_of, requests))
    except (AttributeError, TypeError):  # a member with no request_id, or an unhashable one
        disjoint = False
    if not disjoint and not ids.keys().isdisjoint(
        r.request_id for r in requests if is_request_shaped(r)
    ):
        return ValueError(
            f"{_where(queue, 'prepend_requests')}RQ-ALL-8: no request of the other queue is "
            "already in this one"
        )
    return None


def _refused(error: ValueError | None) -> ValueError:
    assert error is not None, "the precondition failed, so there is a reason"
    return error


# ---------------------------------------------------------------------------


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

        :raises IndexError: the queue is empty (RQ-ALL-4)
        """

    @abc.abstractmethod
    @icontract.snapshot(lambda self: _Before(self), name="before")
    @icontract.ensure(
        lambda self, result, OLD: _first_broken(self, "peek_request", result, OLD.before) is None,
        "RQ-ALL-5, and the clauses of the queue's policy",
        error=lambda self, result, OLD: _broken(self, "peek_request", result, OLD.before),
    )
    def peek_request(self) -> Any:
        """Return the next request without removing it.

        :raises IndexError: the queue is empty (RQ-ALL-5)
        """

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

        :raises ValueError: the request is not in the queue (RQ-ALL-6)
        """

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
        """RQ-ALL-10: whether the queue holds any request."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of queued requests."""

    @abc.abstractmethod
    def __iter__(self) -> Iterator[Any]:
        """RQ-ALL-9: the queued requests in pop order, without changing the queue."""


_ids_of = attrgetter("request_id")


def _checked_ids(requests: list[Any]) -> list[str]:
    """RQ-REQ-3 for a batch: the request ids, after checking every request's shape.

    The common case (exactly vLLM's field types) inline, one plain loop: CPython 3.11
    specialises these attribute reads and `type(x) is T` tests, which makes the loop
    several times faster than `map(attrgetter(...))` passes. Anything else goes through
    `check_request_shape`, which raises naming the first field a queue cannot use.
    """
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
        """RQ-ALL-8: the requests of `requests` (in its order when `ordered`), and id ->
        request for them, the whole batch validated before any of it moves."""
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


# ---------------------------------------------------------------------------
# FCFS


def _fcfs_index_matches(queue: FCFSRequestQueue) -> bool:
    return all(queue._index.get(r.request_id) is r for r in queue._items)


#: RQ-IMPL-1 after every change (and after `__init__`): the cheap half always, the
#: whole comparison under deep checks. A postcondition clause rather than a class
#: invariant, which icontract would check before and after every call, reads included.
_FCFS_STRUCTURE: tuple[Clause, ...] = (
    (
        "RQ-IMPL-1: the id index holds exactly the queued requests",
        lambda q, a, old: len(q._items) == len(q._index),
    ),
    _deep(
        "RQ-IMPL-1: every queued request is indexed by its id",
        lambda q, a, old: _fcfs_index_matches(q),
    ),
)


def _structure_violation(clauses: tuple[Clause, ...], queue: object) -> icontract.ViolationError:
    text = _first_failing(clauses, queue, None, None)
    return icontract.ViolationError(f"{_where(queue, '__init__')}{text}")


def _same_items(queue: RequestQueue, expected: list[Any] | None) -> bool:
    return expected is None or list(queue) == expected


_FCFS_POST: dict[str, tuple[Clause, ...]] = {
    "add_request": (
        ("RQ-FCFS-1: add appends", lambda q, r, old: q._items[-1] is r),
        (
            "RQ-FCFS-1: add leaves the front where it was",
            lambda q, r, old: old.head is None or q._items[0] is old.head,
        ),
        _deep(
            "RQ-FCFS-1: add keeps the order of the queued requests",
            lambda q, r, old: old.items is None or _same_items(q, [*old.items, r]),
        ),
    ),
    "pop_request": (
        (
            "RQ-FCFS-2: pop takes the front; the second request becomes the front",
            lambda q, r, old: old.second is None or q._items[0] is old.second,
        ),
        _deep(
            "RQ-FCFS-2: pop keeps the order of the rest",
            lambda q, r, old: old.items is None or _same_items(q, old.items[1:]),
        ),
    ),
    "peek_request": (
        ("RQ-ALL-5: peek is the front", lambda q, r, old: r is q._items[0]),
        _deep(
            "RQ-ALL-5: peek does not change the queue",
            lambda q, r, old: _same_items(q, old.items),
        ),
    ),
    "prepend_request": (
        ("RQ-FCFS-3: prepend puts it in front", lambda q, r, old: q._items[0] is r),
        (
            "RQ-FCFS-3: the old front is now second",
            lambda q, r, old: old.head is None or q._items[1] is old.head,
        ),
        _deep(
            "RQ-FCFS-3: prepend keeps the order of the queued requests",
            lambda q, r, old: old.items is None or _same_items(q, [r, *old.items]),
        ),
    ),
    "prepend_requests": (
        (
            "RQ-FCFS-4: prepend_requests puts the other queue in front, reversed",
            lambda q, rs, old: (
                list(itertools.islice(q._items, len(old.incoming))) == old.incoming[::-1]
            ),
        ),
        _deep(
            "RQ-FCFS-4: the queued requests follow, in their order",
            lambda q, rs, old: old.items is None or _same_items(q, old.incoming[::-1] + old.items),
        ),
    ),
    "remove_request": (
        ("RQ-ALL-6: the request is gone", lambda q, r, old: r not in q),
        _deep(
            "RQ-ALL-6: the other requests keep their order",
            lambda q, r, old: (
                old.items is None or _same_items(q, [x for x in old.items if x is not r])
            ),
        ),
    ),
    "remove_requests": (
        _deep(
            "RQ-ALL-7: the remaining requests keep their order",
            lambda q, rs, old: (
                old.items is None
                or old.present is None
                or _same_items(q, [r for r in old.items if all(r is not x for x in old.incoming)])
            ),
        ),
    ),
}


class FCFSRequestQueue(_IndexedQueue):
    """First come, first served: a deque, front at the left.

    >>> from queueref import Request
    >>> q = FCFSRequestQueue()
    >>> q.add_request(Request("a")); q.add_request(Request("b"))
    >>> q.prepend_request(Request("p"))
    >>> [r.request_id for r in q]
    ['p', 'a', 'b']
    """

    # The structure first: the other clauses read it. Peek changes nothing here.
    _post_clauses = {
        method: (() if method == "peek_request" else _FCFS_STRUCTURE) + clauses
        for method, clauses in _FCFS_POST.items()
    }

    @icontract.ensure(
        lambda self: _first_failing(_FCFS_STRUCTURE, self, None, None) is None,
        "RQ-IMPL-1: the id index holds exactly the queued requests",
        error=lambda self: _structure_violation(_FCFS_STRUCTURE, self),
    )
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
        """RQ-FCFS-1: append at the back."""
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
        """RQ-FCFS-2: remove and return the front.

        :raises IndexError: the queue is empty (RQ-ALL-4)
        """
        if self._iterated:
            self._unshare()
        try:
            request = self._items.popleft()
        except IndexError:
            raise IndexError("RQ-ALL-4: pop from an empty queue") from None
        del self._index[request.request_id]
        return request

    def peek_request(self) -> Any:
        """RQ-ALL-5: the front, left in place.

        :raises IndexError: the queue is empty (RQ-ALL-5)
        """
        try:
            return self._items[0]
        except IndexError:
            raise IndexError("RQ-ALL-5: peek from an empty queue") from None

    def prepend_request(self, request: RequestLike) -> None:
        """RQ-FCFS-3: insert at the front (a preempted request resumes first)."""
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
        """RQ-FCFS-4: put `requests` in front, in reverse of their iteration order.

        This is vLLM's `deque.extendleft`: each request in turn goes to the
        front, so the last one iterated ends up first. The scheduler relies on
        it: requests skipped in a step are gathered with `prepend_request`
        (which reverses them once), then moved with `prepend_requests` (which
        reverses them back).
        """
        incoming, by_id = self._incoming(requests)
        if self._iterated:
            self._unshare()
        self._items.extendleft(incoming)
        self._index.update(by_id)

    def remove_request(self, request: RequestLike) -> None:
        """RQ-ALL-6: remove one queued request (O(1) to find out it is absent).

        :raises ValueError: the request is not in the queue (RQ-ALL-6)
        """
        self._require_present(request)
        if self._iterated:
            self._unshare()
        # deque.remove compares with ==, which is identity for requests; ids are unique.
        self._items.remove(request)
        del self._index[request.request_id]

    def remove_requests(self, requests: Iterable[RequestLike]) -> None:
        """RQ-ALL-7: remove every named request that is queued; ignore the rest."""
        present = self._present(requests)
        if not present:
            return
        # Both in C-level passes: the ids out of the index, and one pass over the deque
        # that hashes identities (RQ-REQ-2), as vLLM does. A new deque, so an iterator
        # over the old one is left as it was.
        index = self._index
        for request in present:
            del index[request.request_id]
        if len(present) == 1:
            if self._iterated:
                self._unshare()
            self._items.remove(present[0])
        else:
            self._iterated = False
            self._items = deque(itertools.filterfalse(set(present).__contains__, self._items))

    def __iter__(self) -> Iterator[Any]:
        """RQ-FCFS-5, RQ-ALL-9: front to back, over the queue as it is now: a change made
        while iterating copies the deque first (`_unshare`), so the caller may change the
        queue meanwhile."""
        self._iterated = True
        return iter(self._items)


# ---------------------------------------------------------------------------
# PRIORITY

# A heap entry: [key, sequence number, request or _REMOVED]. Keys of live
# entries are distinct; a tombstone may share a key with a live entry, and
# then the sequence number decides, so requests themselves are never compared.
_REMOVED: Any = object()
_Entry = list[Any]


def _heap_ordered(heap: list[_Entry]) -> bool:
    return all(heap[(i - 1) // 2][:2] <= heap[i][:2] for i in range(1, len(heap)))


def _priority_index_matches(queue: PriorityRequestQueue) -> bool:
    live = [e for e in queue._heap if e[2] is not _REMOVED]
    return len(live) == len(queue._index) and all(
        queue._index.get(e[2].request_id) is e[2] for e in live
    )


#: RQ-IMPL-1 and RQ-PRI-6 after every change (see `_FCFS_STRUCTURE`).
_PRIORITY_STRUCTURE: tuple[Clause, ...] = (
    (
        "RQ-IMPL-1: every queued request has a heap entry",
        lambda q, a, old: len(q._heap) >= len(q._index),
    ),
    _deep(
        "RQ-PRI-6: the heap property holds for every entry",
        lambda q, a, old: _heap_ordered(q._heap),
    ),
    _deep(
        "RQ-IMPL-1: the id index holds exactly the live heap entries",
        lambda q, a, old: _priority_index_matches(q),
    ),
)


def _in_key_order(queue: RequestQueue, old: list[Any] | None, new: list[Any]) -> bool:
    return old is None or list(queue) == sorted(old + new, key=request_key)


def _minimum_after_add(queue: PriorityRequestQueue, request: Any, old: _Before) -> bool:
    smaller = old.head is None or request_key(request) < request_key(old.head)
    return queue._front() is (request if smaller else old.head)


_PRIORITY_POST: dict[str, tuple[Clause, ...]] = {
    "add_request": (
        (
            "RQ-PRI-1: the minimum is now the smaller of the old minimum and the new request",
            _minimum_after_add,
        ),
        _deep(
            "RQ-PRI-1: the queue holds the old requests and the new one, in key order",
            lambda q, r, old: _in_key_order(q, old.items, [r]),
        ),
    ),
    "pop_request": (
        (
            "RQ-PRI-2: pop returns a request no larger than any that remains",
            lambda q, r, old: not q._index or request_key(r) < request_key(q._front()),
        ),
        _deep(
            "RQ-PRI-2: pop takes the minimum and leaves the rest",
            lambda q, r, old: old.items is None or _same_items(q, old.items[1:]),
        ),
    ),
    "peek_request": (
        ("RQ-ALL-5: peek is the minimum", lambda q, r, old: r is q._front()),
        _deep(
            "RQ-ALL-5: peek does not change the queue",
            lambda q, r, old: _same_items(q, old.items),
        ),
    ),
    "prepend_request": (
        _deep(
            "RQ-PRI-3: prepend_request is add_request: the request takes its key's place",
            lambda q, r, old: _in_key_order(q, old.items, [r]),
        ),
    ),
    "prepend_requests": (
        (
            "RQ-PRI-4: every request of the other queue is now queued here",
            lambda q, rs, old: all(map(q.__contains__, old.incoming)),
        ),
        _deep(
            "RQ-PRI-4: all of them in key order",
            lambda q, rs, old: _in_key_order(q, old.items, old.incoming),
        ),
    ),
    "remove_request": _FCFS_POST["remove_request"],
    "remove_requests": _FCFS_POST["remove_requests"],
}


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

    # The structure first: the other clauses read it. Even peek may drop tombstones.
    _post_clauses = {
        method: _PRIORITY_STRUCTURE + clauses for method, clauses in _PRIORITY_POST.items()
    }

    @icontract.ensure(
        lambda self: _first_failing(_PRIORITY_STRUCTURE, self, None, None) is None,
        "RQ-IMPL-1, RQ-PRI-6: the index matches the live heap entries; the heap is ordered",
        error=lambda self: _structure_violation(_PRIORITY_STRUCTURE, self),
    )
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
        """RQ-PRI-1: insert by key `(priority, arrival_time, request_id)`."""
        self._push(request, self._fast_new_id(request))

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

    def peek_request(self) -> Any:
        """RQ-ALL-5: the minimum, left in place.

        :raises IndexError: the queue is empty (RQ-ALL-5)
        """
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
        """RQ-PRI-3: a heap has no front, so prepending is adding."""
        self._push(request, self._fast_new_id(request))

    def prepend_requests(self, requests: RequestQueue) -> None:
        """RQ-PRI-4: add each request of `requests`; their order there does not matter."""
        _unordered, by_id = self._incoming(requests, ordered=False)
        for request_id, request in by_id.items():
            self._push(request, request_id)

    def remove_request(self, request: RequestLike) -> None:
        """RQ-ALL-6: remove one queued request, in O(1) amortised (a tombstone).

        :raises ValueError: the request is not in the queue (RQ-ALL-6)
        """
        self._require_present(request)
        self._forget(request)
        self._compact()

    def remove_requests(self, requests: Iterable[RequestLike]) -> None:
        """RQ-ALL-7: remove every named request that is queued; ignore the rest."""
        for request in self._present(requests):
            self._forget(request)
        self._compact()

    def _in_order(self) -> list[RequestLike]:
        live = sorted(e for e in self._heap if e[2] is not _REMOVED)
        return [e[2] for e in live]

    def __iter__(self) -> Iterator[Any]:
        """RQ-PRI-5: ascending key, over a copy; the heap is left as it is."""
        return iter(self._in_order())


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
