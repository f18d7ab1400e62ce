"""What the queues' contracts ask, and the clause machinery they share.

The contracts on `queueref.queues.base.RequestQueue` bind every subclass,
other people's too, so on a foreign queue these helpers use only the public
interface; on our own queues (`_indexed`) they read the id index and the
front directly. A method's postcondition is a table of clauses ("ID: what
holds", and a test of the queue, the argument and the call's snapshot
`_Before`); the first failing clause names the violation. Clauses marked
`_deep` cost O(n) and run only under `queueref.config.deep_checks()`.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from operator import attrgetter
from pathlib import Path
from typing import Any, ClassVar, Protocol, cast

import icontract

from queueref import config
from queueref.config import deep_checks
from queueref.request import RequestLike, is_request_shaped


class QueueView(Protocol):
    """What the contracts read of any queue: its interface and its class's clause tables.

    `queueref.queues.base.RequestQueue` (the ABC) has all of it; a protocol here
    keeps this module below the ABC that uses it.
    """

    _indexed: ClassVar[bool]
    _ordered_prepend: ClassVar[bool]
    _cheap_post_clauses: ClassVar[Mapping[str, tuple[Clause, ...]]]
    _deep_post_clauses: ClassVar[Mapping[str, tuple[Clause, ...]]]

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]: ...

    def peek_request(self) -> Any: ...


class OwnQueueView(QueueView, Protocol):
    """What the contracts read of our own queues (`queueref.queues.base._IndexedQueue`)."""

    _index: dict[str, RequestLike]

    def _front(self) -> RequestLike | None: ...

    def _front_two(self) -> tuple[RequestLike | None, RequestLike | None]: ...

    def _in_order(self) -> list[RequestLike]: ...


#: The file of the contracts (the ABC's methods), as icontract names it in its own errors.
_CONTRACTS_FILE = str(Path(__file__).with_name("queue_base.py"))

_ids_of = attrgetter("request_id")


# Helpers the contracts use. On a foreign subclass they only use the public
# interface of a queue, because the contracts on the ABC bind other people's
# subclasses too; on our own queues they may read the id index and the front.


def _queued_ids(queue: QueueView) -> Mapping[str, RequestLike] | None:
    """request_id -> request for the queued requests, or None when unknown cheaply.

    Our own queues keep an index (O(1)); a foreign subclass is scanned only
    when deep checks are on, so default contracts stay O(1).
    """
    # Implements RQ-COST-1.
    if queue._indexed:
        return cast(OwnQueueView, queue)._index
    if deep_checks():
        return {r.request_id: r for r in queue}
    return None


def _size(queue: Any) -> int:
    # Our own queues: the index size is their __len__, read without a call (nor a cast:
    # this runs in every postcondition).
    return len(queue._index) if queue._indexed else len(queue)


def _head_or_none(queue: QueueView) -> RequestLike | None:
    """What `peek_request()` would return, or None: our own queues answer without
    going through the contract-checked `peek_request`."""
    if queue._indexed:
        return cast(OwnQueueView, queue)._front()
    return queue.peek_request() if len(queue) > 0 else None


class _Before:
    """The one snapshot of a call: what its postcondition clauses compare against.

    `head` and `second` are the first two requests in pop order (None when
    there are fewer; `second` only for our FCFS queue, where it is O(1)); on our
    own queues they are read only for the methods whose clauses compare against
    them (`fronts`: 2 for pop, 1 for add and prepend, 0 for the rest), a foreign
    queue's head always (through its `peek_request`). `items` is the whole
    contents under deep checks, else None; for the calls that take requests,
    `incoming` the requests moved in, `named` how many requests a
    remove_requests call names and `present` how many of them are queued.
    """

    __slots__ = ("length", "head", "second", "items", "incoming", "named", "present")

    def __init__(self, queue: QueueView, fronts: int = 2) -> None:
        if queue._indexed:  # our own queues: no contract-checked call, no ABC isinstance
            own: OwnQueueView = queue  # type: ignore[assignment]  # a cast is a call
            self.length = len(own._index)
            if fronts == 2:
                self.head, self.second = own._front_two()
            else:
                self.head = own._front() if fronts else None
                self.second = None
        else:
            self.length = len(queue)
            self.head = _head_or_none(queue)
            self.second = None
        self.items = list(queue) if config.DEEP_CHECKS else None  # RQ-COST-1: O(n), deep only
        self.incoming: list[RequestLike] = []
        self.named: int | None = None
        self.present: int | None = None

    @staticmethod
    def of_pop(queue: QueueView, _result: None) -> _Before:
        """pop: the size and the first two requests."""
        return _Before(queue, 2)

    @staticmethod
    def of_add(queue: QueueView, _request: Any) -> _Before:
        """add and prepend: the size and the front."""
        return _Before(queue, 1)

    @staticmethod
    def of_size(queue: QueueView, _arg: Any) -> _Before:
        """peek and remove: the size; no clause of theirs reads the old front."""
        return _Before(queue, 0)

    @staticmethod
    def of_prepend(queue: QueueView, requests: QueueView) -> _Before:
        """O(k): the requests this call moves, in the other queue's order where the
        receiving queue's order depends on it. One of our own queues is read without a
        call to its `__iter__` (a priority queue's sorts)."""
        before = _Before(queue, 0)
        if not getattr(requests, "_indexed", False):  # any iterable: its public interface
            before.incoming = list(requests)
            return before
        other: OwnQueueView = requests  # type: ignore[assignment]  # a cast is a call
        if queue._ordered_prepend:
            before.incoming = other._in_order()
        else:
            before.incoming = list(other._index.values())
        return before

    @staticmethod
    def of_remove(queue: QueueView, requests: Iterable[Any]) -> _Before:
        before = _Before(queue, 0)
        # An iterator is not read: that would consume it. (A list first: the ABC's
        # isinstance costs 0.4 µs.)
        if type(requests) is list or isinstance(requests, Collection):
            before.named = len(requests)
            if config.DEEP_CHECKS:  # RQ-COST-1: O(k) in the requests named, deep only
                before.incoming = list(requests)
                before.present = _count_present(queue, before.incoming)
        return before


def _count_present(queue: QueueView, requests: list[Any]) -> int | None:
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
    """A clause that costs O(n): it runs only under deep checks."""

    # Implements RQ-COST-1.


def _deep(text: str, holds: Callable[[Any, Any, Any], bool]) -> Clause:
    return _Deep((text, holds))


def _first_failing(clauses: Iterable[Clause], queue: Any, arg: Any, old: Any) -> str | None:
    for clause in clauses:
        text, holds = clause
        if (isinstance(clause, _Deep) and not config.DEEP_CHECKS) or holds(queue, arg, old):
            continue
        return text
    return None


def _first_broken(queue: QueueView, method: str, arg: Any, old: _Before | None) -> str | None:
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
    return f"File {_CONTRACTS_FILE}, in {type(queue).__name__}.{method}:\n"


def _broken(
    queue: QueueView, method: str, arg: Any, old: _Before | None
) -> icontract.ViolationError:
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
            "RQ-ALL-7: remove_requests takes out no more requests than it names",
            lambda q, rs, old: old.named is None or 0 <= old.length - _size(q) <= old.named,
        ),
        _deep(
            "RQ-ALL-7: remove_requests takes out exactly the queued requests it names",
            lambda q, rs, old: old.present is None or _size(q) == old.length - old.present,
        ),
    ),
    "__bool__": (("RQ-ALL-10: bool(q) is len(q) > 0", lambda q, r, old: r == (_size(q) > 0)),),
}


def _add_refusal(queue: QueueView, request: Any, method: str) -> Exception:
    """Why `request` may not be added, or None."""
    # Implements RQ-REQ-3, RQ-ALL-2, RQ-ALL-3.
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


def _may_add(self: QueueView, request: Any) -> bool:
    """The precondition of add and prepend, in one pass: a request-shaped object with a
    free id. Named `self` so icontract calls it directly, without a lambda around it."""
    try:
        request_id = request.request_id
        request.priority, request.arrival_time  # noqa: B018
    except AttributeError:
        return False
    if self._indexed:  # our own queues: the index, without a call
        return request_id not in cast(OwnQueueView, self)._index
    ids = _queued_ids(self)
    return ids is None or request_id not in ids


def _prepend_refusal(
    queue: QueueView, requests: QueueView, method: str = "prepend_requests"
) -> ValueError | None:
    """Why `requests` may not be prepended to `queue`, or None (the precondition of
    prepend_requests, called by its checker with the method's name)."""
    # Implements RQ-ALL-8.
    if requests is queue:
        return ValueError(
            f"{_where(queue, 'prepend_requests')}RQ-ALL-8: a queue cannot be prepended to itself"
        )
    # Our own queues are read without `cast`, which is a call: this runs on every call.
    ids = queue._index if queue._indexed else _queued_ids(queue)  # type: ignore[attr-defined]
    if ids is None:
        return None
    if getattr(requests, "_indexed", False):  # one of ours: its index, not its __iter__
        other: OwnQueueView = requests  # type: ignore[assignment]
        if ids.keys().isdisjoint(other._index):
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


def _structure_violation(clauses: tuple[Clause, ...], queue: object) -> icontract.ViolationError:
    text = _first_failing(clauses, queue, None, None)
    return icontract.ViolationError(f"{_where(queue, '__init__')}{text}")


def _same_items(queue: QueueView, expected: list[Any] | None) -> bool:
    return expected is None or list(queue) == expected
