"""The interface of the waiting queues, `RequestQueue`, and what our two queues share.

`RequestQueue` is the abstract class vLLM's scheduler codes against; its
contracts (built from `queueref.queues.checks`) bind every subclass, other
people's included. `_IndexedQueue` is the base of the two reference queues:
the id index that makes membership O(1), and the input checks, which hold
even when contracts are off (`python -O`).

How the contracts are checked: the seven methods that change or read the
queue (add, pop, peek, prepend, prepend_requests, remove, remove_requests)
each have one precondition (where they have one), one snapshot and one
postcondition, stated here and checked by one small wrapper per method
(`_checked`) that `RequestQueue.__init_subclass__` puts around every
subclass's own definition, other people's too. It does what icontract's
checker does -- precondition, snapshot, call, postcondition, and the same
errors -- at a fraction of its fixed price per call (several µs per
contract, whatever the condition), and, like icontract's, it is off under
`python -O`. The postcondition runs a table of clauses -- the `RequestQueue`
clauses, then the clauses the concrete class lists in `_post_clauses` -- and
on a violation its error names the first clause that fails, with its
requirement ID, worded as icontract words its own. As in icontract, a
function called again while its own check is in progress runs unchecked.
`__bool__` is checked by the same wrapper, and a queue's own
`__init__` the same lean way (`_checked_init`: its structure clauses after
the call): vLLM 0.30.0's scheduler asks `bool` of its waiting queues at every
turn of its scheduling loop and makes a queue on every step
(`step_skipped_waiting` in `Scheduler.schedule`), where icontract's checker
cost about 9 and 19 µs.
"""

# RQ-COST-1: the contract layout above keeps default contracts O(1) per call.

from __future__ import annotations

import abc
import contextvars
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

import icontract

from queueref import config
from queueref.queues.checks import (
    _ABC_POST,
    Clause,
    _add_refusal,
    _Before,
    _broken,
    _Deep,
    _first_failing,
    _may_add,
    _prepend_refusal,
    _structure_violation,
)
from queueref.request import RequestLike, check_request_shape

#: The functions whose check is in progress in this context. As in icontract's checker, a
#: function called again while its own check runs (a foreign queue's `peek_request`, read
#: by its own snapshot) runs unchecked; any other call is checked.
_IN_PROGRESS: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar(
    "queue_contracts_in_progress", default=None
)

_Method = Callable[..., Any]


def _running() -> set[int]:
    running = _IN_PROGRESS.get()
    if running is None:  # the first check in this context
        running = set()
        _IN_PROGRESS.set(running)
    return running


_Refusal = Callable[[Any, Any, str], "Exception | None"]
_Snapshot = Callable[[Any, Any], "_Before | None"]


def _no_snapshot(queue: Any, _arg: Any) -> None:
    """`__bool__`: its clause compares the result with the queue's size after the call."""
    return None


def _checker(
    argument: str | None, refusal: _Refusal | None, snapshot: _Snapshot
) -> Callable[[str, _Method], _Method]:
    """The checker of a queue method: its precondition (`refusal`: the error, or None),
    its snapshot, the call, then the postcondition's clauses. The clauses read the
    method's `argument` (by position or by name), or its result when `argument` is None.
    Everything a call runs is in `checked` or in the condition functions themselves:
    at a few hundred ns per Python call on a loaded machine, each level counts."""

    def wrap(method: str, func: _Method) -> _Method:
        key = id(func)

        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            running = _IN_PROGRESS.get()
            if running is None:
                running = _running()
            if key in running:
                return func(self, *args, **kwargs)
            if argument is None:
                arg = None
            elif args:
                arg = args[0]
            elif argument in kwargs:
                arg = kwargs[argument]
            else:  # no argument: the method's own TypeError
                return func(self, *args, **kwargs)
            running.add(key)
            try:
                if refusal is not None:
                    error = refusal(self, arg, method)
                    if error is not None:
                        raise error
                before = snapshot(self, arg)
                result = func(self, *args, **kwargs)
                if argument is None:  # pop / peek: the clauses read the result
                    arg = result
                for _text, holds in self._cheap_post_clauses[method]:
                    if not holds(self, arg, before):
                        raise _broken(self, method, arg, before)
                if config.DEEP_CHECKS:
                    for _text, holds in self._deep_post_clauses[method]:
                        if not holds(self, arg, before):
                            raise _broken(self, method, arg, before)
                return result
            finally:
                running.discard(key)

        return checked

    return wrap


def _add_refusal_or_none(queue: Any, request: Any, method: str) -> Exception | None:
    """The precondition of add and prepend in one pass: a request-shaped object with a
    free id (see `_may_add`), else the error naming what is wrong."""
    # Implements RQ-REQ-3, RQ-ALL-2, RQ-ALL-3 (the precondition of add and prepend).
    try:
        request_id = request.request_id
        request.priority, request.arrival_time  # noqa: B018
    except AttributeError:
        return _add_refusal(queue, request, method)
    if queue._indexed:  # our own queues: the index, without a call
        if request_id not in queue._index:
            return None
    elif _may_add(queue, request):
        return None
    return _add_refusal(queue, request, method)


_checked_add = _checker("request", _add_refusal_or_none, _Before.of_add)


#: The checker of each contracted method (see the module doc).
_CHECKERS: dict[str, Callable[[str, _Method], _Method]] = {
    "add_request": _checked_add,
    "prepend_request": _checked_add,
    "pop_request": _checker(None, None, _Before.of_pop),
    "peek_request": _checker(None, None, _Before.of_size),
    "remove_request": _checker("request", None, _Before.of_size),
    "prepend_requests": _checker("requests", _prepend_refusal, _Before.of_prepend),
    "remove_requests": _checker("requests", None, _Before.of_remove),
    # The scheduler asks `while self.waiting or self.skipped_waiting` at every turn of its
    # loop (vLLM 0.30.0), so bool is checked as lean as the seven operations.
    "__bool__": _checker(None, None, _no_snapshot),
}


def _checked_init(structure: tuple[Clause, ...]) -> Callable[[_Method], _Method]:
    """The postcondition of a queue's own `__init__`: its `structure` clauses hold after
    the call (the cheap ones always, the deep ones under deep checks), else the violation
    naming the first that fails. As icontract's `ensure` on `__init__` did, it binds this
    `__init__` and the subclasses that inherit it, not one that overrides it, and it is
    off under `python -O`."""
    # Implements RQ-COST-2 (for the constructor).

    cheap = tuple(clause for clause in structure if not isinstance(clause, _Deep))

    def wrap(func: _Method) -> _Method:
        if not __debug__:
            return func

        @functools.wraps(func)
        def checked(self: Any, *args: Any, **kwargs: Any) -> None:
            func(self, *args, **kwargs)
            for _text, holds in cheap:
                if not holds(self, None, None):
                    raise _structure_violation(structure, self)
            if config.DEEP_CHECKS and _first_failing(structure, self, None, None) is not None:
                raise _structure_violation(structure, self)

        return checked

    return wrap


def _checked(cls: type, method: str) -> None:
    """Put the contracts of `method` around `cls`'s own definition of it, once."""
    # Implements RQ-COST-2.
    func = cls.__dict__.get(method)
    if (
        not callable(func)
        or getattr(func, "__isabstractmethod__", False)
        or getattr(func, "_queue_contracts", False)  # already checked (an alias of one)
    ):
        return
    checked = _CHECKERS[method](method, func)
    functools.update_wrapper(checked, func, updated=())
    checked._queue_contracts = True  # type: ignore[attr-defined]
    setattr(cls, method, checked)


class RequestQueue(icontract.DBC):
    """The interface of vLLM's waiting queues (`RequestQueue`, an ABC).

    The contracts here bind every subclass, including other people's: they
    use only the interface, never our own `__init__`'s state.
    """

    #: Clauses a concrete queue adds to the postcondition of a method (see the module doc).
    _post_clauses: ClassVar[Mapping[str, tuple[Clause, ...]]] = {}
    #: True for our own queues (an `_IndexedQueue`): a flag, as an ABC isinstance costs 0.3 µs.
    _indexed: ClassVar[bool] = False
    #: Whether this queue's order after `prepend_requests` depends on the other queue's.
    _ordered_prepend: ClassVar[bool] = True
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
        if __debug__:  # off under `python -O`, as icontract's contracts are
            for method in _CHECKERS:
                _checked(cls, method)

    @abc.abstractmethod
    def add_request(self, request: RequestLike) -> None:
        """Add a request in the queue's order."""
        # Implements RQ-ALL-1 (the postcondition, in `_CONTRACTS`).

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
        # Implements RQ-ALL-10 (the postcondition, in `_ABC_POST`).

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
