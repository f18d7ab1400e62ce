"""Gaps in the tests of queueref.queues.base, found by `make mutation`.

`queue_base` holds the `RequestQueue` ABC, the lean contract checker that
`RequestQueue.__init_subclass__` puts around every subclass's queue operations (RQ-COST-2:
icontract's semantics and errors, at a fraction of its cost), the constructor's check,
and `_IndexedQueue`, the id index and input checks both reference queues share. Each test
here kills mutants that survived the queue tests before:

* The checker: it reads the request a call names (not a further argument), leaves a
  method it already wraps as it is (an alias: checked once, its re-entrant calls
  unchecked), and leaves an abstract method abstract. The constructor's check keeps the
  constructor's name and signature, and its cheap clause bites without deep checks.
* The ABCs: a subclass that leaves out an operation (or, below `_IndexedQueue`, the
  front or the order the contracts read) cannot be made.
* The guards kept for `python -O` (marked `guard`): the constructors, `add_request` /
  `prepend_request` and `prepend_requests` refuse a request they cannot use -- a field
  whose class only claims vLLM's type, a missing field, a copy of a queued request, two
  requests of one id in the other queue, an id already queued -- with the error naming
  it, and nothing changes. A request type with value equality (a frozen dataclass, say)
  is a request (RQ-REQ-3), and a queue holds objects, not values (RQ-REQ-2): the checks
  compare by identity.

Expected outcomes are written out by hand from the spec, never computed by the code
under test.
"""

from __future__ import annotations

import abc
import inspect
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
from method_variants import Change, broken_class
from queue_gap_helpers import (
    ListQueue,
    NotAFloat,
    NotAnInt,
    NotAStr,
    ValueRequest,
    ids,
    twin,
    violation,
)

import queueref.config
from queueref import FCFSRequestQueue, PriorityRequestQueue, Request, RequestQueue
from queueref.queues.base import _IndexedQueue
from queueref.request import RequestLike

QUEUE_CLASSES = [FCFSRequestQueue, PriorityRequestQueue]


@pytest.fixture
def deep_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)


# --- the checker: what it reads, what it wraps --------------------------------------------


class TaggingFCFS(FCFSRequestQueue):
    """Correct: its add takes an optional tag after the request (a wider signature than
    the ABC's, as a subclass may have), and keeps the tags."""

    def add_request(self, request: RequestLike, tag: str = "") -> None:
        super().add_request(request)
        self.tags = [*getattr(self, "tags", []), tag]


def test_the_checks_read_the_request_named_not_a_further_argument() -> None:
    """RQ-COST-2, RQ-ALL-1, RQ-ALL-2: the checker binds the method's own argument, the
    request (as icontract binds a condition's argument by name): a correct add called
    with a tag after the request is accepted and checked on the request (the precondition
    refuses that request queued twice, RQ-ALL-2), the tag is never taken for it."""
    a, b = Request("a"), Request("b")
    queue = TaggingFCFS([a])
    queue.add_request(b, "urgent")
    assert ids(queue) == ["a", "b"] and queue.tags == ["urgent"]
    with pytest.raises(ValueError, match="RQ-ALL-2"):
        queue.add_request(b, "again")
    assert ids(queue) == ["a", "b"] and queue.tags == ["urgent"]


class PrependIsAdd(ListQueue):
    """Correct: prepending is adding here (as in a heap): the parent's add, already
    checked, under a second name."""

    prepend_request = ListQueue.add_request


@pytest.mark.contracts
def test_an_alias_of_a_checked_method_is_checked_once() -> None:
    """RQ-COST-2: a subclass whose operation is another (already checked) operation of its
    parent is not wrapped a second time: one check per call, and a call made again by
    the check itself (the snapshot's peek, and that peek's own snapshot's) runs unchecked,
    as under icontract: two peeks per prepend, as per add (a second wrapper would check
    the call again, with its own snapshot: four)."""
    queue = PrependIsAdd([Request("a")])
    queue.prepend_request(Request("b"))
    assert queue.peeks == 2
    queue.add_request(Request("c"))
    assert queue.peeks == 4
    assert ids(queue) == ["a", "b", "c"]


class AbstractAdd(ListQueue):
    """An intermediate class that declares add abstract again: its subclasses must say
    how they add."""

    @abc.abstractmethod
    def add_request(self, request: Any) -> None:
        """Every concrete subclass defines its own add."""


class ConcreteAdd(AbstractAdd):
    def add_request(self, request: Any) -> None:
        self.items.append(request)


def test_an_abstract_operation_stays_abstract() -> None:
    """RQ-COST-2: the checker wraps a subclass's own definitions, never an abstract one
    (a wrapper would not be abstract, and the class could be made with no add at all);
    the concrete subclass below it can be made and adds."""
    with pytest.raises(TypeError, match="abstract method '?add_request'?$"):
        AbstractAdd()  # type: ignore[abstract]  # what the test shows refused
    queue = ConcreteAdd()
    queue.add_request(Request("a"))
    assert ids(queue) == ["a"] and bool(queue)


# --- the constructor's check ----------------------------------------------------------


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_the_constructor_check_keeps_the_constructors_name_and_signature(cls: type) -> None:
    """RQ-COST-2: the constructor's check wraps `__init__` as icontract's checker does
    (`functools.update_wrapper`): its name, its qualified name and its signature, the one
    optional `requests`, are the constructor's own, for `help()` and `inspect`."""
    init = vars(cls)["__init__"]
    assert init.__name__ == "__init__"
    assert init.__qualname__ == f"{cls.__name__}.__init__"
    (requests,) = inspect.signature(cls).parameters.values()
    assert requests.name == "requests" and requests.default == ()
    assert requests.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


GhostIndexConstructor = broken_class(
    FCFSRequestQueue,
    "GhostIndexConstructor",
    Change(
        "_fast_new_id",
        "its (inherited, checked) constructor indexes each request under a second, ghost id too; "
        "every queued request is still indexed under its own id",
        "return request_id",
        "self._index[f'ghost-{request_id}'] = request\n    return request_id",
    ),
)


@pytest.mark.contracts
def test_the_constructor_check_runs_its_cheap_clause_without_deep_checks(
    deep_off: None,
) -> None:
    """RQ-IMPL-1, RQ-COST-1, RQ-COST-2: the cheap structure clause (the sizes agree) runs
    after `__init__` by default; it alone sees an index with an entry more than the queue
    (the deep clause, every queued request indexed by its id, holds here)."""
    with violation("RQ-IMPL-1: the id index holds exactly the queued requests"):
        GhostIndexConstructor([Request("a")])


# --- the ABCs: a subclass without an operation cannot be made --------------------------

#: The operations of vLLM's `RequestQueue` ABC, written out by hand.
OPERATIONS = [
    "add_request",
    "pop_request",
    "peek_request",
    "prepend_request",
    "prepend_requests",
    "remove_request",
    "remove_requests",
    "__bool__",
    "__len__",
    "__iter__",
]


@pytest.mark.parametrize("missing", OPERATIONS)
def test_a_queue_without_an_operation_cannot_be_made(missing: str) -> None:
    """RQ-COST-2: `RequestQueue` is an ABC (as vLLM's): a subclass that leaves out one of
    its operations (those RQ-ALL-1 to RQ-ALL-10 state) cannot be instantiated (TypeError
    naming it), rather than being made and answering None. With all of them it can."""
    methods = {name: inspect.unwrap(ListQueue.__dict__[name]) for name in [*OPERATIONS, "__init__"]}
    complete = type("Complete", (RequestQueue,), methods)
    assert len(complete()) == 0
    without = {name: method for name, method in methods.items() if name != missing}
    cls = type(f"Without{missing.strip('_')}", (RequestQueue,), without)
    with pytest.raises(TypeError, match=f"abstract method '?{re.escape(missing)}'?$"):
        cls()


@pytest.mark.parametrize("missing", ["_front", "_in_order"])
def test_an_indexed_queue_without_its_front_or_order_cannot_be_made(missing: str) -> None:
    """RQ-ALL-4, RQ-ALL-8, RQ-COST-2: a queue built on the shared index must say what its
    front is (the contracts' snapshot reads it instead of a checked peek) and its order
    (what `prepend_requests` moves): a subclass of `_IndexedQueue` without one cannot be
    made. FCFS's own methods make a complete one."""
    names = [*OPERATIONS[:7], "__iter__", "__init__", "_front", "_in_order"]
    methods = {name: FCFSRequestQueue.__dict__[name] for name in names}
    complete = type("Complete", (_IndexedQueue,), methods)
    assert ids(complete([Request("a")])) == ["a"]
    without = {name: method for name, method in methods.items() if name != missing}
    cls = type(f"Without{missing}", (_IndexedQueue,), without)
    with pytest.raises(TypeError, match=f"abstract method '?{missing}'?$"):
        cls()


# --- the guards: add, prepend and the constructors ----------------------------------------


#: (a field, an object whose class claims that field's type, what the error says it must be)
FAKES = [
    pytest.param("request_id", NotAStr, "a str", id="request_id"),
    pytest.param("priority", NotAnInt, "an int (not a bool)", id="priority"),
    pytest.param("arrival_time", NotAFloat, "a real number (not a bool)", id="arrival_time"),
]


def faked(field: str, fake: type) -> SimpleNamespace:
    """A request-shaped object whose `field` is an instance of `fake`."""
    assert fake == fake.claims  # type: ignore[attr-defined]  # the premise: `==` is fooled
    fields: dict[str, object] = {"request_id": "x", "priority": 0, "arrival_time": 0.0}
    fields[field] = fake()
    return SimpleNamespace(**fields)


def lacking(field: str) -> SimpleNamespace:
    """An object with two of the three request fields."""
    fields: dict[str, object] = {"request_id": "x", "priority": 0, "arrival_time": 0.0}
    del fields[field]
    return SimpleNamespace(**fields)


@pytest.mark.guard
@pytest.mark.parametrize("field, fake, wanted", FAKES)
def test_a_constructor_refuses_a_field_whose_class_claims_the_right_type(
    field: str, fake: type, wanted: str
) -> None:
    """RQ-REQ-3: the constructors take a request on their fast path only when its fields
    are exactly of vLLM's types (an identity test of the type): a field whose class
    compares equal to `str` / `int` / `float` is refused, naming the field."""
    for cls in QUEUE_CLASSES:
        with pytest.raises(TypeError, match=re.escape(f"RQ-REQ-3: {field} must be {wanted}")):
            cls([Request("a"), faked(field, fake)])


@pytest.mark.guard
@pytest.mark.parametrize("method", ["add_request", "prepend_request"])
@pytest.mark.parametrize("field, fake, wanted", FAKES)
def test_the_priority_queue_refuses_a_field_whose_class_claims_the_right_type(
    method: str, field: str, fake: type, wanted: str
) -> None:
    """RQ-REQ-3: the same for the priority queue's add and prepend (the precondition asks
    only that the fields exist: the body's check is the one that refuses), and the queue
    is unchanged."""
    queue = PriorityRequestQueue()
    with pytest.raises(TypeError, match=re.escape(f"RQ-REQ-3: {field} must be {wanted}")):
        getattr(queue, method)(faked(field, fake))
    assert list(queue) == [] and len(queue) == 0 and not queue


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_a_copy_of_a_queued_request_is_refused_as_another_request_of_its_id(
    cls: type[FCFSRequestQueue] | type[PriorityRequestQueue],
) -> None:
    """RQ-ALL-3, RQ-ALL-2, RQ-REQ-2: a value-equal copy of a queued request is another
    request with a taken id (RQ-ALL-3), not the queued request again (RQ-ALL-2): the
    constructor and the body of add and prepend (the checks kept for `python -O`) say so,
    and the queue is unchanged."""
    a = ValueRequest("a")
    with pytest.raises(ValueError, match="RQ-ALL-3: another request with request_id 'a'"):
        cls([a, twin(a)])
    queue = cls([a])
    for method in ("add_request", "prepend_request"):
        body = inspect.unwrap(getattr(cls, method))
        with pytest.raises(ValueError, match="RQ-ALL-3: another request with request_id 'a'"):
            body(queue, twin(a))
        with pytest.raises(ValueError, match="RQ-ALL-2: .* is already in this queue"):
            body(queue, a)
    assert list(queue) == [a] and len(queue) == 1


# --- the guards of prepend_requests --------------------------------------------------------


@pytest.mark.guard
@pytest.mark.parametrize("field, fake, wanted", FAKES)
def test_prepend_requests_refuses_a_field_whose_class_claims_the_right_type(
    field: str, fake: type, wanted: str
) -> None:
    """RQ-REQ-3, RQ-ALL-8: the requests of another queue (here a foreign one, which
    checks nothing) take the fast path only with exactly vLLM's field types: a field whose
    class only compares equal to the type is refused, naming it, before anything moves."""
    queue = FCFSRequestQueue([Request("a")])
    bad = faked(field, fake)
    other = ListQueue([Request("p"), bad])
    with pytest.raises(TypeError, match=re.escape(f"RQ-REQ-3: {field} must be {wanted}")):
        queue.prepend_requests(other)
    assert ids(queue) == ["a"] and len(queue) == 1
    assert other.items[1] is bad and len(other) == 2


@pytest.mark.guard
@pytest.mark.parametrize("missing", ["request_id", "priority", "arrival_time"])
def test_prepend_requests_refuses_a_request_without_a_field(missing: str) -> None:
    """RQ-REQ-3, RQ-ALL-8: a member of the other queue that lacks a request field is
    refused with a TypeError naming that field (not an AttributeError, nor taken in
    unchecked), before anything moves."""
    queue = FCFSRequestQueue([Request("a")])
    bad = lacking(missing)
    other = ListQueue([Request("p"), bad])
    with pytest.raises(Exception) as caught:  # noqa: B017 (which exception is the check)
        queue.prepend_requests(other)
    assert type(caught.value) is TypeError, repr(caught.value)
    assert re.search(f"RQ-REQ-3: .* has no '{missing}' attribute", str(caught.value))
    assert ids(queue) == ["a"] and len(queue) == 1
    assert other.items[1] is bad and len(other) == 2


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_prepend_requests_refuses_two_requests_of_one_id(
    cls: type[FCFSRequestQueue] | type[PriorityRequestQueue],
) -> None:
    """RQ-ALL-3, RQ-ALL-8: another queue (a foreign one, which checks nothing) holding two
    requests of one id is refused with the error naming that id, whatever comes before
    them; the precondition (ids already queued here) does not look for it, so the body's
    check is what refuses it, without the contracts (as under `python -O`) and with them.
    Nothing moves."""
    queue = cls([Request("a"), Request("b", arrival_time=1.0)])
    first, second = Request("x", arrival_time=5.0), Request("x", arrival_time=6.0)
    other = ListQueue([Request("p", arrival_time=4.0), first, second])
    duplicate = re.escape("RQ-ALL-3: two requests of the other queue have request_id 'x'")
    calls: list[Callable[..., None]] = [inspect.unwrap(cls.prepend_requests), cls.prepend_requests]
    for prepend in calls:
        with pytest.raises(ValueError, match=duplicate):
            prepend(queue, other)
        assert ids(queue) == ["a", "b"] and len(queue) == 2
        assert ids(other) == ["p", "x", "x"] and other.items[1] is first


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_the_body_of_prepend_requests_refuses_an_id_already_queued(
    cls: type[FCFSRequestQueue] | type[PriorityRequestQueue],
) -> None:
    """RQ-ALL-8: without the contracts (as under `python -O`) the body of prepend_requests
    refuses another queue holding a request whose id is queued here, in the
    precondition's words and naming that id, and nothing moves."""
    queue = cls([Request("a"), Request("b", arrival_time=1.0)])
    other = cls([Request("new", arrival_time=5.0), Request("b", arrival_time=6.0)])
    body = inspect.unwrap(cls.prepend_requests)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "RQ-ALL-8: no request of the other queue is already in this one: request_id 'b' is"
        ),
    ):
        body(queue, other)
    assert ids(queue) == ["a", "b"] and len(queue) == 2
    assert sorted(ids(other)) == ["b", "new"] and len(other) == 2


class ContentEqual(ListQueue):
    """A foreign queue that compares by contents (as a dataclass would): two empty
    queues are equal, though they are two queues."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RequestQueue) and list(self) == list(other)

    __hash__ = ListQueue.__hash__


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_a_queue_equal_to_this_one_is_not_this_one(
    cls: type[FCFSRequestQueue] | type[PriorityRequestQueue],
) -> None:
    """RQ-ALL-8: only the queue itself may not be prepended to itself (identity): another
    queue that compares equal to it (a foreign queue with `==` by contents, both empty)
    is prepended as any other, then one that holds a request."""
    queue = cls()
    other = ContentEqual()
    assert other == queue and other is not cast(RequestQueue, queue)  # the premise
    queue.prepend_requests(other)
    assert list(queue) == [] and len(queue) == 0
    x = Request("x")
    queue.prepend_requests(ContentEqual([x]))
    assert list(queue) == [x]
