"""The queues' contracts, put around every `RequestQueue` subclass: ours and other people's.

The seven methods that change or read a queue (add, pop, peek, prepend,
prepend_requests, remove, remove_requests) each have one precondition (where
they have one), one snapshot and one postcondition, checked by one small
wrapper per method (`_checked`) around every subclass's own definition. It
does what icontract's checker does -- precondition, snapshot, call,
postcondition, and the same errors -- at a fraction of its fixed price per call
(several µs per contract, whatever the condition), and, like icontract's, it
is off under `python -O`. The postcondition runs a table of clauses -- the
`RequestQueue` clauses (`queueref.queues.checks`), then those of the concrete
class (`queueref.queues.clauses` for ours) -- and on a violation its error
names the first clause that fails, with its requirement ID, worded as
icontract words its own. As in icontract, a function called again while its
own check is in progress runs unchecked. `__bool__` is checked by the same
wrapper, and our queues' own `__init__` the same lean way (`_checked_init`: its
structure clauses after the call): vLLM 0.30.0's scheduler asks `bool` of its
waiting queues at every turn of its scheduling loop and makes a queue on every
step (`step_skipped_waiting` in `Scheduler.schedule`), where icontract's
checker cost about 9 and 19 µs.

Where they bind: `queueref.queues` imports this module before any other of
its own, and this module hands `_bind` to `watch_subclasses`, which calls it
with every subclass made already and with each one made later. The logic
modules (`base`, `fcfs`, `priority`) never import it.
"""

# RQ-COST-1: the contract layout above keeps default contracts O(1) per call.

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Mapping
from typing import Any

from queueref import config
from queueref.queues.base import RequestQueue, watch_subclasses
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
from queueref.queues.clauses import (
    _FCFS_CLAUSES,
    _FCFS_STRUCTURE,
    _PRIORITY_CLAUSES,
    _PRIORITY_STRUCTURE,
)
from queueref.queues.fcfs import FCFSRequestQueue
from queueref.queues.priority import PriorityRequestQueue

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


def _bind(cls: type[RequestQueue]) -> None:
    """Give `cls` its clause tables -- the ABC's clauses followed by the class's own
    (`_post_clauses`, inherited), per method, split into the cheap ones and the deep
    ones -- and put the checks around its own methods (not under `python -O`)."""
    own: Mapping[str, tuple[Clause, ...]] = getattr(cls, "_post_clauses", {})
    every = {m: clauses + own.get(m, ()) for m, clauses in _ABC_POST.items()}
    cls._cheap_post_clauses = {  # type: ignore[attr-defined]
        m: tuple(c for c in clauses if not isinstance(c, _Deep)) for m, clauses in every.items()
    }
    cls._deep_post_clauses = {  # type: ignore[attr-defined]
        m: tuple(c for c in clauses if isinstance(c, _Deep)) for m, clauses in every.items()
    }
    if __debug__:  # off under `python -O`, as icontract's contracts are
        for method in _CHECKERS:
            _checked(cls, method)


def _promise(
    cls: type[RequestQueue],
    clauses: Mapping[str, tuple[Clause, ...]],
    structure: tuple[Clause, ...],
) -> None:
    """What one of our queues adds: `clauses` after the ABC's in each method's
    postcondition (its subclasses inherit them), and `structure` after its `__init__`."""
    cls._post_clauses = clauses  # type: ignore[attr-defined]
    cls.__init__ = _checked_init(structure)(cls.__dict__["__init__"])  # type: ignore[method-assign]


_promise(FCFSRequestQueue, _FCFS_CLAUSES, _FCFS_STRUCTURE)
_promise(PriorityRequestQueue, _PRIORITY_CLAUSES, _PRIORITY_STRUCTURE)
watch_subclasses(_bind)
