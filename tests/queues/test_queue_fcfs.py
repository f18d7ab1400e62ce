"""Gaps in the tests of queueref.queues.fcfs, found by `make mutation`.

Four kinds of test, each killing mutants that survived the queue tests before:

* A clause's teeth: a broken `FCFSRequestQueue` subclass (the lean checker of
  `RequestQueue.__init_subclass__` wraps it too) that only that clause of `_FCFS_POST` /
  `_FCFS_STRUCTURE` catches, the violation naming the clause's ID and text. Many of these
  clauses compare requests by identity (`is`): a queue holds objects, not values
  (RQ-REQ-2). Requests of vLLM's shape compare by identity, so `==` would do there; but a
  queue MUST accept any object with the three fields (RQ-REQ-3), a frozen-dataclass-like
  request type with value equality among them, and a queue that keeps a *copy* of such a
  request (equal, yet another object) is broken in a way only `is` sees.
* A clause's false alarms: a correct queue must not be refuted (ints past CPython's
  small-int cache compared with `is`; requests that compare equal but are other objects).
* A guard's: the checks `add_request` and `prepend_request` keep in their bodies for
  `python -O` refuse bad input with a clear error, changing nothing.
* The copy on write of iteration (RQ-ALL-9, RQ-FCFS-5): a change made while an iterator
  is alive leaves that iterator's view as it was, and a change made when none is alive
  copies nothing.
"""

from __future__ import annotations

import inspect
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from method_variants import Change, broken_class
from queue_gap_helpers import (
    NotAFloat,
    NotAnInt,
    NotAStr,
    ValueRequest,
    ids,
    twin,
    violation,
)

import queueref.config
from queueref import FCFSRequestQueue, Request
from queueref.request import RequestLike


@dataclass(unsafe_hash=True)
class PromptRequest:
    """A foreign request type that compares by content (its prompt): two requests with
    different ids compare equal when their prompts do."""

    prompt: str
    request_id: str = field(compare=False)
    priority: int = field(default=0, compare=False)
    arrival_time: float = field(default=0.0, compare=False)


def filled(cls: type[FCFSRequestQueue], *requests: RequestLike) -> FCFSRequestQueue:
    """A queue of `cls` holding `requests`, front first, filled by the correct (checked) add."""
    queue = cls()
    for request in requests:
        FCFSRequestQueue.add_request(queue, request)
    return queue


def values(*names: str) -> list[ValueRequest]:
    return [ValueRequest(name, 0, float(i)) for i, name in enumerate(names)]


# --- broken variants: each is caught by one clause only --------------------------------


IndexesACopy = broken_class(
    FCFSRequestQueue,
    "IndexesACopy",
    Change(
        "add_request",
        "queues the request but indexes a copy of it",
        "self._index[request_id] = request",
        "self._index[request_id] = twin(request)",
    ),
    uses={"twin": twin},
)


AppendsACopy = broken_class(
    FCFSRequestQueue,
    "AppendsACopy",
    Change(
        "add_request",
        "queues (and indexes) a copy of the request, not the request",
        "self._items.append(request)\n    self._index[request_id] = request",
        "kept = twin(request)\n    self._items.append(kept)\n    self._index[request_id] = kept",
    ),
    uses={"twin": twin},
)


CopiesTheFrontOnAdd = broken_class(
    FCFSRequestQueue,
    "CopiesTheFrontOnAdd",
    Change(
        "add_request",
        "an add that puts a copy of the front in the front's place",
        "self._items.append(request)",
        "front = twin(self._items[0])\n"
        "    self._items[0] = front\n"
        "    self._index[front.request_id] = front\n"
        "    self._items.append(request)",
    ),
    uses={"twin": twin},
)


CopiesTheNewFrontOnPop = broken_class(
    FCFSRequestQueue,
    "CopiesTheNewFrontOnPop",
    Change(
        "pop_request",
        "a pop after which a copy of the second request is the front",
        "del self._index[request.request_id]",
        "del self._index[request.request_id]\n"
        "    front = twin(self._items[0])\n"
        "    self._items[0] = front\n"
        "    self._index[front.request_id] = front",
    ),
    uses={"twin": twin},
)


SwapsBehindTheNewFrontOnPop = broken_class(
    FCFSRequestQueue,
    "SwapsBehindTheNewFrontOnPop",
    Change(
        "pop_request",
        "a pop that swaps the two requests behind the new front",
        "del self._index[request.request_id]",
        "del self._index[request.request_id]\n"
        "    self._items[1], self._items[2] = self._items[2], self._items[1]",
    ),
)


PopsTheBackOutOfTheDeque = broken_class(
    FCFSRequestQueue,
    "PopsTheBackOutOfTheDeque",
    Change(
        "pop_request",
        "returns (and unindexes) the front but takes the back out of the deque",
        "request = self._items.popleft()",
        "request = self._items[0]\n        self._items.pop()",
    ),
)


PeeksACopy = broken_class(
    FCFSRequestQueue,
    "PeeksACopy",
    Change(
        "peek_request",
        "peek returns a copy of the front",
        "return self._items[0]",
        "return twin(self._items[0])",
    ),
    uses={"twin": twin},
)


PrependsACopy = broken_class(
    FCFSRequestQueue,
    "PrependsACopy",
    Change(
        "prepend_request",
        "puts (and indexes) a copy of the request in front",
        "self._items.appendleft(request)\n    self._index[request_id] = request",
        "kept = twin(request)\n"
        "    self._items.appendleft(kept)\n"
        "    self._index[request_id] = kept",
    ),
    uses={"twin": twin},
)


CopiesTheOldFrontOnPrepend = broken_class(
    FCFSRequestQueue,
    "CopiesTheOldFrontOnPrepend",
    Change(
        "prepend_request",
        "a prepend after which a copy of the old front is second",
        "self._items.appendleft(request)",
        "front = twin(self._items[0])\n"
        "    self._items[0] = front\n"
        "    self._index[front.request_id] = front\n"
        "    self._items.appendleft(request)",
    ),
    uses={"twin": twin},
)


SwapsBehindOnPrepend = broken_class(
    FCFSRequestQueue,
    "SwapsBehindOnPrepend",
    Change(
        "prepend_request",
        "a prepend that swaps the two requests behind the old front",
        "self._index[request_id] = request",
        "self._index[request_id] = request\n"
        "    self._items[2], self._items[3] = self._items[3], self._items[2]",
    ),
)


NonReversingPrepend = broken_class(
    FCFSRequestQueue,
    "NonReversingPrepend",
    Change(
        "prepend_requests",
        "prepend_requests keeps the other queue's order (no `extendleft` reversal)",
        "self._items.extendleft(incoming)",
        "self._items.extendleft(reversed(incoming))",
    ),
)


ShufflesTheQueuedOnPrependRequests = broken_class(
    FCFSRequestQueue,
    "ShufflesTheQueuedOnPrependRequests",
    Change(
        "prepend_requests",
        "prepend_requests right in front, but the last two queued requests swapped",
        "self._index.update(by_id)",
        "self._index.update(by_id)\n"
        "    self._items[-1], self._items[-2] = self._items[-2], self._items[-1]",
    ),
)


ShufflesOnRemove = broken_class(
    FCFSRequestQueue,
    "ShufflesOnRemove",
    Change(
        "remove_request",
        "removes the request, then swaps the first two of the rest",
        "del self._index[request.request_id]",
        "del self._index[request.request_id]\n"
        "    self._items[0], self._items[1] = self._items[1], self._items[0]",
    ),
)


LosesTheBackOnRemove = broken_class(
    FCFSRequestQueue,
    "LosesTheBackOnRemove",
    Change(
        "remove_request",
        "removes the request, and the back request leaves the deque (not the index)",
        "del self._index[request.request_id]",
        "del self._index[request.request_id]\n    self._items.pop()",
    ),
)


ShufflesOnRemoveMany = broken_class(
    FCFSRequestQueue,
    "ShufflesOnRemoveMany",
    Change(
        "remove_requests",
        "removes the named queued requests, then swaps the first two of the rest",
        "self._items = _without(self._items, list(present.values()))",
        "self._items = _without(self._items, list(present.values()))\n"
        "    self._items[0], self._items[1] = self._items[1], self._items[0]",
    ),
)


def _queue_ab() -> FCFSRequestQueue:
    return filled(FCFSRequestQueue, *values("x", "y"))


#: (variant, its queue's requests, the call, the clause that alone catches it, deep checks)
BROKEN: list[Any] = [
    pytest.param(
        IndexesACopy,
        values("a", "b", "c"),
        lambda q: q.add_request(ValueRequest("new", 0, 9.0)),
        "RQ-IMPL-1: every queued request is indexed by its id",
        True,
        id="indexes-a-copy",
    ),
    pytest.param(
        AppendsACopy,
        values("a", "b", "c"),
        lambda q: q.add_request(ValueRequest("new", 0, 9.0)),
        "RQ-FCFS-1: add appends",
        True,
        id="appends-a-copy",
    ),
    pytest.param(
        CopiesTheFrontOnAdd,
        values("a", "b", "c"),
        lambda q: q.add_request(ValueRequest("new", 0, 9.0)),
        "RQ-FCFS-1: add leaves the front where it was",
        True,
        id="copies-the-front-on-add",
    ),
    pytest.param(
        CopiesTheNewFrontOnPop,
        values("a", "b", "c"),
        lambda q: q.pop_request(),
        "RQ-FCFS-2: pop takes the front; the second request becomes the front",
        True,
        id="copies-the-new-front-on-pop",
    ),
    pytest.param(
        SwapsBehindTheNewFrontOnPop,
        values("a", "b", "c", "d"),
        lambda q: q.pop_request(),
        "RQ-FCFS-2: pop keeps the order of the rest",
        True,
        id="swaps-behind-the-new-front-on-pop",
    ),
    pytest.param(
        PopsTheBackOutOfTheDeque,
        values("a", "b"),  # two requests: the snapshot's `second` is the back one
        lambda q: q.pop_request(),
        "RQ-FCFS-2: pop takes the front; the second request becomes the front",
        False,
        id="pops-the-back-out-of-a-deque-of-two",
    ),
    pytest.param(
        PeeksACopy,
        values("a", "b", "c"),
        lambda q: q.peek_request(),
        "RQ-ALL-5: peek is the front",
        True,
        id="peeks-a-copy",
    ),
    pytest.param(
        PrependsACopy,
        values("a", "b", "c"),
        lambda q: q.prepend_request(ValueRequest("new", 0, 9.0)),
        "RQ-FCFS-3: prepend puts it in front",
        True,
        id="prepends-a-copy",
    ),
    pytest.param(
        CopiesTheOldFrontOnPrepend,
        values("a", "b", "c"),
        lambda q: q.prepend_request(ValueRequest("new", 0, 9.0)),
        "RQ-FCFS-3: the old front is now second",
        True,
        id="copies-the-old-front-on-prepend",
    ),
    pytest.param(
        SwapsBehindOnPrepend,
        values("a", "b", "c"),
        lambda q: q.prepend_request(ValueRequest("new", 0, 9.0)),
        "RQ-FCFS-3: prepend keeps the order of the queued requests",
        True,
        id="swaps-behind-on-prepend",
    ),
    pytest.param(
        NonReversingPrepend,
        values("a", "b", "c"),
        lambda q: q.prepend_requests(_queue_ab()),
        "RQ-FCFS-4: prepend_requests puts the other queue in front, reversed",
        False,
        id="non-reversing-prepend",
    ),
    pytest.param(
        ShufflesTheQueuedOnPrependRequests,
        values("a", "b", "c"),
        lambda q: q.prepend_requests(_queue_ab()),
        "RQ-FCFS-4: the queued requests follow, in their order",
        True,
        id="shuffles-the-queued-on-prepend-requests",
    ),
    pytest.param(
        ShufflesOnRemove,
        values("a", "b", "c"),
        lambda q: q.remove_request(q._items[2]),
        "RQ-ALL-6: the other requests keep their order",
        True,
        id="shuffles-on-remove",
    ),
    pytest.param(
        LosesTheBackOnRemove,
        values("a", "b", "c"),
        lambda q: q.remove_request(q._items[0]),
        "RQ-IMPL-1: the id index holds exactly the queued requests",
        False,
        id="loses-the-back-on-remove",
    ),
    pytest.param(
        ShufflesOnRemoveMany,
        values("a", "b", "c", "d"),
        lambda q: q.remove_requests([q._items[3]]),
        "RQ-ALL-7: the remaining requests keep their order",
        True,
        id="shuffles-on-remove-many",
    ),
]


@pytest.mark.contracts
@pytest.mark.parametrize("cls, requests, action, clause, deep", BROKEN)
def test_a_broken_fcfs_queue_is_caught_by_its_clause(
    monkeypatch: pytest.MonkeyPatch,
    cls: type[FCFSRequestQueue],
    requests: list[ValueRequest],
    action: Callable[[FCFSRequestQueue], object],
    clause: str,
    deep: bool,
) -> None:
    """Each clause of `_FCFS_POST` / `_FCFS_STRUCTURE` has teeth of its own: the broken
    variant slips past every other clause and is caught by this one, named with its ID
    (RQ-IMPL-1, RQ-FCFS-1, RQ-FCFS-2, RQ-ALL-5, RQ-FCFS-3, RQ-FCFS-4, RQ-ALL-6, RQ-ALL-7).
    The variants that keep a copy of a request (equal to it, another object) break
    RQ-REQ-2, "a queue holds objects, not values": only an identity test sees them. The
    cheap clauses are shown with deep checks off (RQ-COST-1: they must hold alone), the
    deep ones with deep checks on."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", deep)
    queue = filled(cls, *requests)
    with violation(clause):
        action(queue)


@pytest.mark.contracts
def test_a_copy_in_the_index_hides_the_queued_request() -> None:
    """RQ-IMPL-1, RQ-REQ-2: what the clause "every queued request is indexed by its id"
    guards against, seen through the public interface: with a copy in the index the queued
    request is no longer `in` the queue, and it cannot be removed."""
    (a,) = values("a")
    queue = IndexesACopy()
    with violation("RQ-IMPL-1: every queued request is indexed by its id"):
        queue.add_request(a)
    assert ids(queue) == ["a"] and len(queue) == 1
    assert a not in queue
    with pytest.raises(ValueError, match="RQ-ALL-6"):
        FCFSRequestQueue.remove_request(queue, a)


# --- clauses that must not refute a correct queue --------------------------------------


def test_a_queue_of_more_than_256_requests_is_consistent() -> None:
    """RQ-IMPL-1: the sizes of the deque and of the index are compared as numbers; past
    CPython's small-int cache (256) two equal sizes are different int objects, and a
    correct queue of 300 requests, made and changed, is no violation."""
    requests = [Request(f"r{i}", 0, float(i)) for i in range(300)]
    queue = FCFSRequestQueue(requests)
    queue.add_request(Request("r300", 0, 300.0))
    queue.prepend_request(Request("p", 0, -1.0))
    assert queue.pop_request().request_id == "p"
    queue.remove_request(requests[150])
    assert len(queue) == 300
    assert ids(queue) == [f"r{i}" for i in range(301) if i != 150]


def test_removing_one_of_two_requests_that_compare_equal_keeps_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RQ-ALL-6, RQ-REQ-2, RQ-REQ-3: a request type that compares by content (two requests
    of one prompt are equal) is accepted; removing the first of two equal requests removes
    that object and nothing else, and the order clause compares objects, not values:
    it must not count the other, equal request as removed."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    first, second = PromptRequest("hello", "a"), PromptRequest("hello", "b")
    last = PromptRequest("bye", "c")
    assert first == second and first is not second
    queue = FCFSRequestQueue([first, second, last])
    queue.remove_request(first)
    assert ids(queue) == ["b", "c"] and len(queue) == 2
    assert queue.peek_request() is second and first not in queue


def test_remove_requests_naming_a_copy_of_a_queued_request_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RQ-ALL-7, RQ-REQ-2: remove_requests ignores a request that is not queued, also a
    copy equal to a queued one (a value-equal request type, RQ-REQ-3); the order clause
    compares objects, so the queued original, kept, is no violation."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    a, b, c = values("a", "b", "c")
    queue = FCFSRequestQueue([a, b, c])
    queue.remove_requests([twin(a), b])
    assert ids(queue) == ["a", "c"] and len(queue) == 2
    assert queue.peek_request() is a and a in queue and b not in queue


# --- the constructor ---------------------------------------------------------------


def test_the_constructor_queues_the_requests_it_is_given_in_order() -> None:
    """RQ-FCFS-1, RQ-FCFS-5: `FCFSRequestQueue(requests)` holds those requests in their
    order, front first (as vLLM's deque-based queue does), each indexed."""
    a, b, c = Request("a"), Request("b"), Request("c")
    queue = FCFSRequestQueue([a, b, c])
    assert ids(queue) == ["a", "b", "c"] and len(queue) == 3 and bool(queue)
    assert a in queue and b in queue and c in queue
    assert queue.pop_request() is a and queue.peek_request() is b


@pytest.mark.guard
def test_the_constructor_refuses_what_add_refuses() -> None:
    """RQ-ALL-2, RQ-ALL-3, RQ-REQ-3: the constructor makes the checks of add_request: a
    request twice, two requests of one id, or an object that is no request are refused."""
    a = Request("a")
    with pytest.raises(ValueError, match="RQ-ALL-2"):
        FCFSRequestQueue([a, a])
    with pytest.raises(ValueError, match="RQ-ALL-3"):
        FCFSRequestQueue([a, Request("a")])
    with pytest.raises(TypeError, match="RQ-REQ-3: .* has no 'priority' attribute"):
        FCFSRequestQueue([a, SimpleNamespace(request_id="b", arrival_time=0.0)])


CollapsingConstructor = broken_class(
    FCFSRequestQueue,
    "CollapsingConstructor",
    Change(
        "_fast_new_id",
        "its constructor indexes every request under one id",
        "return request_id",
        "return 'same'",
    ),
)


@pytest.mark.contracts
def test_a_constructor_that_breaks_the_index_is_caught() -> None:
    """RQ-IMPL-1, RQ-COST-2: the structure clauses bind `__init__` (and a subclass that
    inherits it): a constructor that indexes two requests under one id is caught."""
    with violation("RQ-IMPL-1: the id index holds exactly the queued requests"):
        CollapsingConstructor([Request("a"), Request("b")])


# --- pop on an empty queue -------------------------------------------------------------


def test_pop_of_an_empty_queue_says_why() -> None:
    """RQ-ALL-4: a pop on an empty queue (also one emptied by pops) raises the queue's own
    IndexError naming RQ-ALL-4; the contract's snapshot of the front two reads nothing."""
    queue = FCFSRequestQueue()
    with pytest.raises(IndexError, match="RQ-ALL-4: pop from an empty queue"):
        queue.pop_request()
    queue.add_request(Request("a"))
    assert queue.pop_request().request_id == "a"
    with pytest.raises(IndexError, match="RQ-ALL-4: pop from an empty queue"):
        queue.pop_request()
    assert len(queue) == 0 and not queue


# --- the guards of add and prepend (kept for python -O) ---------------------------------


@pytest.mark.guard
@pytest.mark.parametrize("method", ["add_request", "prepend_request"])
@pytest.mark.parametrize(
    "fake, field_name, wanted",
    [
        (NotAStr, "request_id", "a str"),
        (NotAnInt, "priority", "an int (not a bool)"),
        (NotAFloat, "arrival_time", "a real number (not a bool)"),
    ],
)
def test_a_field_whose_class_claims_the_right_type_is_refused(
    method: str, fake: type, field_name: str, wanted: str
) -> None:
    """RQ-REQ-3: the fast path of add and prepend takes a request only when its fields are
    exactly of vLLM's types (an identity test of the type): a field whose class compares
    equal to `str` / `int` / `float` goes through the full check and is refused, naming
    the field, and the queue is unchanged."""
    assert fake == fake.claims  # type: ignore[attr-defined]  # the premise: `==` is fooled
    fields: dict[str, object] = {"request_id": "x", "priority": 0, "arrival_time": 0.0}
    fields[field_name] = fake()
    queue = FCFSRequestQueue([Request("a")])
    with pytest.raises(TypeError, match=re.escape(f"RQ-REQ-3: {field_name} must be {wanted}")):
        getattr(queue, method)(SimpleNamespace(**fields))
    assert ids(queue) == ["a"] and len(queue) == 1


@pytest.mark.guard
@pytest.mark.parametrize("method", ["add_request", "prepend_request"])
@pytest.mark.parametrize("missing", ["request_id", "priority", "arrival_time"])
def test_the_body_refuses_a_request_without_a_field(method: str, missing: str) -> None:
    """RQ-REQ-3: without the contracts (as under `python -O`), add and prepend refuse an
    object that lacks a request field with a TypeError naming it (not an AttributeError,
    nor a request queued unchecked), and the queue is unchanged."""
    fields: dict[str, object] = {"request_id": "x", "priority": 0, "arrival_time": 0.0}
    del fields[missing]
    queue = FCFSRequestQueue([Request("a")])
    body = inspect.unwrap(getattr(FCFSRequestQueue, method))
    with pytest.raises(Exception) as caught:  # noqa: B017 (which exception is the check)
        body(queue, SimpleNamespace(**fields))
    assert type(caught.value) is TypeError, repr(caught.value)
    assert re.search(f"RQ-REQ-3: .* has no '{missing}' attribute", str(caught.value))
    assert ids(queue) == ["a"] and len(queue) == 1 and list(queue._index) == ["a"]


# --- copy on write of iteration ---------------------------------------------------------


def _four() -> FCFSRequestQueue:
    return FCFSRequestQueue([Request(name) for name in ("a", "b", "c", "d")])


#: A change and the queue it leaves, front to back, from a, b, c, d.
CHANGES: list[Any] = [
    pytest.param(lambda q: q.add_request(Request("x")), ["a", "b", "c", "d", "x"], id="add"),
    pytest.param(lambda q: q.pop_request(), ["b", "c", "d"], id="pop"),
    pytest.param(
        lambda q: q.prepend_request(Request("x")), ["x", "a", "b", "c", "d"], id="prepend"
    ),
    pytest.param(
        lambda q: q.prepend_requests(FCFSRequestQueue([Request("x"), Request("y")])),
        ["y", "x", "a", "b", "c", "d"],
        id="prepend_requests",
    ),
    pytest.param(lambda q: q.remove_request(q.peek_request()), ["b", "c", "d"], id="remove"),
    pytest.param(
        lambda q: q.remove_requests([q.peek_request()]), ["b", "c", "d"], id="remove_requests-one"
    ),
]


@pytest.mark.parametrize("change, after", CHANGES)
def test_a_change_during_an_iteration_leaves_the_iterator_as_it_was(
    change: Callable[[FCFSRequestQueue], object], after: list[str]
) -> None:
    """RQ-ALL-9, RQ-FCFS-5: an iterator taken before a change goes on over the queue as it
    was (the deque is copied first, not changed under it), and the change takes effect."""
    queue = _four()
    iterator = iter(queue)
    assert next(iterator).request_id == "a"
    change(queue)
    assert [r.request_id for r in iterator] == ["b", "c", "d"]
    assert ids(queue) == after


@pytest.mark.parametrize("change, after", CHANGES)
def test_a_change_after_a_finished_iteration_copies_nothing(
    change: Callable[[FCFSRequestQueue], object], after: list[str]
) -> None:
    """RQ-ALL-9, RQ-FCFS-5: the deque is copied only by a change made while an iterator
    over it is alive (spec "Implementation and cost"): after a finished loop, whose
    iterator is gone, the change works on the same deque (an O(1) add or pop stays
    O(1); one request named to remove_requests is removed in place, not by rebuilding
    the deque), and its result is the same."""
    queue = _four()
    assert ids(queue) == ["a", "b", "c", "d"]  # an iteration, finished: its iterator is gone
    items = weakref.ref(queue._items)
    change(queue)
    assert queue._items is items()
    assert ids(queue) == after
