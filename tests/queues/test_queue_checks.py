"""Gaps in the tests of queueref.queues.checks, found by `make mutation`.

`queue_checks` holds what the contracts of every `RequestQueue` ask: the clauses of
`_ABC_POST` (RQ-ALL-1 to RQ-ALL-10), the snapshot `_Before` a call's clauses compare
against, and the preconditions of add / prepend (`_add_refusal`, `_may_add`) and of
`prepend_requests` (`_prepend_refusal`). The lean checker that
`RequestQueue.__init_subclass__` puts on every subclass runs them (RQ-COST-2). Each
test here kills mutants that survived the queue tests before:

* A clause's teeth: a broken foreign queue (someone else's `RequestQueue`, list-backed,
  which gets the `_ABC_POST` clauses only) that only that clause catches, the violation
  naming the clause's ID and text; the cheap clauses with deep checks off (RQ-COST-1:
  they must hold alone), the deep one with deep checks on.
* A clause's false alarms: a correct queue must not be refuted (sizes past CPython's
  small-int cache compared with `is`; a request type with value equality and an order,
  named with a member that is no request; a sized one-shot iterable whose class
  compares equal to `list`).
* The preconditions: a clash with the ids already queued is refused in the contract's
  own words (also on a foreign queue, also when the other queue holds a member that is
  no request), a member that is no request is left to the body's RQ-REQ-3 check, a
  plain list of requests can be prepended to a foreign queue, and a copy of a queued
  request is another request with a taken id (RQ-ALL-3), not the queued one (RQ-ALL-2).
* The snapshot of add and prepend reads the one front their clauses compare (RQ-COST-2).

Expected outcomes are written out by hand from the spec, never computed by the code
under test.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import icontract
import pytest
from method_variants import Change, broken_class
from queue_gap_helpers import ListQueue, ids, twin, violation

import queueref.config
from queueref import FCFSRequestQueue, Request, RequestQueue


@dataclass(order=True, unsafe_hash=True)
class OrderedRequest:
    """A foreign request type with value equality and an order (a dataclass with
    `order=True`): a copy of a queued request is equal to it (and neither is smaller),
    yet is another object."""

    request_id: str
    priority: int = 0
    arrival_time: float = 0.0


def failure(call: Callable[[], object]) -> Exception | None:
    """What `call` raises, or None: the tests assert on its type and its words, so another
    error (an AttributeError of a check that cannot read its argument, say) fails an
    assertion rather than the test."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 (which exception is the check)
        return error
    return None


def is_clash_refusal(error: Exception | None, cls: type) -> bool:
    """Whether `error` is the precondition of `prepend_requests` refusing an id already
    queued, worded as icontract words its own (where, then the clause): the body's own
    refusal names the id, without the contract's "in Class.prepend_requests:"."""
    return type(error) is ValueError and str(error).endswith(
        f"in {cls.__name__}.prepend_requests:\n"
        "RQ-ALL-8: no request of the other queue is already in this one"
    )


@pytest.fixture
def deep_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)


@pytest.fixture
def deep_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)


def requests(*names: str) -> list[Request]:
    return [Request(name, 0, float(i)) for i, name in enumerate(names)]


# --- the clauses of `_ABC_POST`: broken foreign queues ---------------------------------


AddsTwice = broken_class(
    ListQueue,
    "AddsTwice",
    Change(
        "add_request",
        "add queues the request twice",
        "self.items.append(request)",
        "self.items += [request, request]",
    ),
)
PrependsTwice = broken_class(
    ListQueue,
    "PrependsTwice",
    Change(
        "prepend_request",
        "prepend puts the request in front twice",
        "self.items.insert(0, request)",
        "self.items[:0] = [request, request]",
    ),
)
PrependsNothing = broken_class(
    ListQueue,
    "PrependsNothing",
    Change(
        "prepend_request",
        "prepend accepts the request and never queues it",
        "self.items.insert(0, request)",
        "pass",
    ),
)
PopKeepsTheFront = broken_class(
    ListQueue,
    "PopKeepsTheFront",
    Change(
        "pop_request",
        "pop returns the front (what peek returned) and leaves it queued",
        "return self.items.pop(0)",
        "return self.items[0]",
    ),
)
PopLosesTheBack = broken_class(
    ListQueue,
    "PopLosesTheBack",
    Change(
        "pop_request",
        "pop returns the front and takes the back out too",
        "return self.items.pop(0)",
        "self.items.pop()\n    return self.items.pop(0)",
    ),
)
PeekGrows = broken_class(
    ListQueue,
    "PeekGrows",
    Change(
        "peek_request",
        "peek returns the front and queues a new request at the back",
        "return self.items[0]",
        "self.items.append(Request('stray', 0, 99.0))\n    return self.items[0]",
    ),
    uses={"Request": Request},
)
PeekPops = broken_class(
    ListQueue,
    "PeekPops",
    Change(
        "peek_request",
        "peek returns the front and takes it out",
        "return self.items[0]",
        "return self.items.pop(0)",
    ),
)
MovesInTwice = broken_class(
    ListQueue,
    "MovesInTwice",
    Change(
        "prepend_requests",
        "prepend_requests puts every request of the other queue in front twice",
        "self.items.insert(0, request)",
        "self.items[:0] = [request, request]",
    ),
)
MovesInAllButTheLast = broken_class(
    ListQueue,
    "MovesInAllButTheLast",
    Change(
        "prepend_requests",
        "prepend_requests leaves out the last request of the other queue",
        "for request in requests:",
        "for request in list(requests)[:-1]:",
    ),
)
GrowsTheOtherQueue = broken_class(
    ListQueue,
    "GrowsTheOtherQueue",
    Change(
        "prepend_requests",
        "prepend_requests moves every request in, then adds one to the other queue",
        "self.items.insert(0, request)",
        "self.items.insert(0, request)\n    requests.items.append(Request('stray', 0, 99.0))",
    ),
    uses={"Request": Request},
)
RemovesNothing = broken_class(
    ListQueue,
    "RemovesNothing",
    Change(
        "remove_request",
        "remove finds the request and leaves it queued",
        "del self.items[position]",
        "pass",
    ),
)
RemovesTheBackToo = broken_class(
    ListQueue,
    "RemovesTheBackToo",
    Change(
        "remove_request",
        "remove takes out the request and the back request",
        "del self.items[position]",
        "del self.items[position]\n            self.items.pop()",
    ),
)
RemoveManyGrows = broken_class(
    ListQueue,
    "RemoveManyGrows",
    Change(
        "remove_requests",
        "remove_requests removes the named requests, then queues a new one",
        "if id(r) not in gone]",
        "if id(r) not in gone]\n    self.items.append(Request('stray', 0, 99.0))",
    ),
    uses={"Request": Request},
)
RemoveManyTakesAnUnnamedOne = broken_class(
    ListQueue,
    "RemoveManyTakesAnUnnamedOne",
    Change(
        "remove_requests",
        "remove_requests removes the named requests and the back one, unnamed",
        "if id(r) not in gone]",
        "if id(r) not in gone]\n    self.items.pop()",
    ),
)


#: (variant, its requests, the call, the clause that alone catches it, deep checks)
BROKEN: list[Any] = [
    pytest.param(
        AddsTwice,
        ["a", "b"],
        lambda q: q.add_request(Request("new", 0, 9.0)),
        "RQ-ALL-1: add grows the queue by one",
        False,
        id="adds-twice",
    ),
    pytest.param(
        PrependsTwice,
        ["a", "b"],
        lambda q: q.prepend_request(Request("new", 0, 9.0)),
        "RQ-ALL-1: prepend grows the queue by one",
        False,
        id="prepends-twice",
    ),
    pytest.param(
        PrependsNothing,
        ["a", "b"],
        lambda q: q.prepend_request(Request("new", 0, 9.0)),
        "RQ-ALL-1: prepend grows the queue by one",
        False,
        id="prepends-nothing",
    ),
    pytest.param(
        PopKeepsTheFront,
        ["a", "b", "c"],
        lambda q: q.pop_request(),
        "RQ-ALL-4: pop shrinks the queue by one",
        False,
        id="pop-keeps-the-front",
    ),
    pytest.param(
        PopLosesTheBack,
        ["a", "b", "c"],
        lambda q: q.pop_request(),
        "RQ-ALL-4: pop shrinks the queue by one",
        False,
        id="pop-loses-the-back",
    ),
    pytest.param(
        PeekGrows,
        ["a", "b"],
        lambda q: q.peek_request(),
        "RQ-ALL-5: peek does not change the queue",
        False,
        id="peek-grows",
    ),
    pytest.param(
        PeekPops,
        ["a", "b"],
        lambda q: q.peek_request(),
        "RQ-ALL-5: peek does not change the queue",
        False,
        id="peek-pops",
    ),
    pytest.param(
        MovesInTwice,
        ["a", "b"],
        lambda q: q.prepend_requests(ListQueue(requests("x", "y"))),
        "RQ-ALL-8: prepend_requests moves in every request of the other queue",
        False,
        id="moves-in-twice",
    ),
    pytest.param(
        MovesInAllButTheLast,
        ["a", "b"],
        lambda q: q.prepend_requests(ListQueue(requests("x", "y"))),
        "RQ-ALL-8: prepend_requests moves in every request of the other queue",
        False,
        id="moves-in-all-but-the-last",
    ),
    pytest.param(
        GrowsTheOtherQueue,
        ["a", "b"],
        lambda q: q.prepend_requests(ListQueue(requests("x", "y"))),
        "RQ-ALL-8: the other queue is left as it was",
        False,
        id="grows-the-other-queue",
    ),
    pytest.param(
        RemovesNothing,
        ["a", "b", "c"],
        lambda q: q.remove_request(q.items[1]),
        "RQ-ALL-6: remove takes out one request",
        False,
        id="removes-nothing",
    ),
    pytest.param(
        RemovesTheBackToo,
        ["a", "b", "c"],
        lambda q: q.remove_request(q.items[0]),
        "RQ-ALL-6: remove takes out one request",
        False,
        id="removes-the-back-too",
    ),
    pytest.param(
        RemoveManyGrows,
        ["a", "b"],
        lambda q: q.remove_requests([Request("absent", 0, 5.0)]),
        "RQ-ALL-7: remove_requests takes out no more requests than it names",
        False,
        id="remove-many-grows",
    ),
    pytest.param(
        RemoveManyTakesAnUnnamedOne,
        ["a", "b", "c"],
        lambda q: q.remove_requests([q.items[0], Request("absent", 0, 5.0)]),
        "RQ-ALL-7: remove_requests takes out exactly the queued requests it names",
        True,
        id="remove-many-takes-an-unnamed-one",
    ),
]


@pytest.mark.contracts
@pytest.mark.parametrize("cls, names, action, clause, deep", BROKEN)
def test_a_broken_foreign_queue_is_caught_by_its_clause(
    monkeypatch: pytest.MonkeyPatch,
    cls: type[ListQueue],
    names: list[str],
    action: Callable[[ListQueue], object],
    clause: str,
    deep: bool,
) -> None:
    """Each clause of `_ABC_POST` has teeth of its own (RQ-ALL-1, RQ-ALL-4, RQ-ALL-5,
    RQ-ALL-6, RQ-ALL-7, RQ-ALL-8): a foreign queue gets those clauses only, and a variant
    that breaks the size a call leaves -- by one too many or one too few, or the other
    queue's size -- slips past every other clause and is caught by this one, named with
    its ID. The cheap clauses are shown with deep checks off (RQ-COST-1: they must hold
    alone; the remove_requests one, which counts what was named, also refutes a queue
    that grows), the deep one (the exact count of the queued requests named) with deep
    checks on: the variant removes no more requests than the call names."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", deep)
    queue = cls(requests(*names))
    with violation(clause):
        action(queue)


@pytest.mark.parametrize("cls", [ListQueue, FCFSRequestQueue])
def test_sizes_past_the_small_int_cache_are_no_violation(
    deep_on: None, cls: type[RequestQueue]
) -> None:
    """RQ-ALL-5, RQ-ALL-8, RQ-ALL-7: the clauses compare sizes as numbers; past CPython's
    small-int cache (256) two equal sizes are different int objects. A correct queue of
    300 requests is peeked, takes in another queue of 300 (its size 600, the other
    queue's still 300) and loses one of them (599 left, counted exactly under deep
    checks), with no violation."""
    queue = cls(requests(*(f"r{i}" for i in range(300))))  # type: ignore[call-arg]
    front = queue.peek_request()
    assert front.request_id == "r0" and len(queue) == 300
    other = cls([Request(f"o{i}", 0, 1000.0 + i) for i in range(300)])  # type: ignore[call-arg]
    queue.prepend_requests(other)
    assert len(queue) == 600 and len(other) == 300
    queue.remove_requests([front])
    assert len(queue) == 599 and front not in list(queue)
    assert ids(queue)[:2] == ["o299", "o298"] and ids(queue)[-1] == "r299"


# --- remove_requests: what the snapshot counts ---------------------------------------


RemovesEqualOnes = broken_class(
    ListQueue,
    "RemovesEqualOnes",
    Change(
        "remove_requests",
        "removes every queued request equal to a named one (RQ-REQ-2: a queue holds "
        "objects, not values), so naming a copy takes out the queued original",
        "self.items = [r for r in self.items if id(r) not in gone]",
        "self.items = [r for r in self.items if all(r != x for x in named)]",
    ),
    Change(
        "remove_requests",
        "(the named requests, read once)",
        "gone = {id(r) for r in requests}",
        "named = list(requests)",
    ),
)


def test_a_member_that_is_no_request_leaves_the_exact_count_right(deep_on: None) -> None:
    """RQ-ALL-7, RQ-REQ-2: under deep checks the snapshot counts the queued requests that
    a remove_requests call names, by identity; a member that is no request (which a
    foreign queue may ignore) sends it the slow way, which must count the same. Named:
    two queued requests, a copy (equal, not smaller, not larger) of a third, and an
    object with no request_id: exactly two are queued, so a correct queue that removes
    those two is no violation."""
    a, b, c = OrderedRequest("a"), OrderedRequest("b"), OrderedRequest("c")
    queue = ListQueue([a, b, c])
    queue.remove_requests([a, c, twin(b), object()])
    assert queue.items == [b] and queue.items[0] is b and len(queue) == 1


@pytest.mark.contracts
def test_a_queue_that_removes_an_equal_copy_is_caught_the_slow_way(deep_on: None) -> None:
    """RQ-ALL-7, RQ-REQ-2: the same call on a queue that also removes the original of the
    copy named (equal, another object) takes out three requests where two of those named
    are queued: caught by the exact count, on the slow path too."""
    a, b, c = OrderedRequest("a"), OrderedRequest("b"), OrderedRequest("c")
    queue = RemovesEqualOnes([a, b, c])
    with violation("RQ-ALL-7: remove_requests takes out exactly the queued requests it names"):
        queue.remove_requests([a, c, twin(b), object()])


RemovesOneTooMany = broken_class(
    ListQueue,
    "RemovesOneTooMany",
    Change(
        "remove_requests",
        "removes the named requests, then the front one, unnamed",
        "if id(r) not in gone]",
        "if id(r) not in gone]\n    if self.items:\n        self.items.pop(0)",
    ),
)


@pytest.mark.contracts
@pytest.mark.parametrize(
    "named",
    [
        pytest.param(lambda r: (r,), id="tuple"),
        pytest.param(lambda r: frozenset([r]), id="frozenset"),
        pytest.param(lambda r: FCFSRequestQueue([r]), id="queue"),
    ],
)
def test_removing_more_than_a_collection_names_is_caught_without_deep_checks(
    deep_off: None, named: Callable[[Any], Iterable[Any]]
) -> None:
    """RQ-ALL-7, RQ-COST-1: the cheap clause counts the requests named in any collection
    (not only a list; an iterator alone is not read, as reading would consume it): one
    request named in a tuple, a set or a queue, and two taken out, is refuted with deep
    checks off."""
    queue = RemovesOneTooMany(requests("a", "b", "c"))
    with violation("RQ-ALL-7: remove_requests takes out no more requests than it names"):
        queue.remove_requests(named(queue.items[2]))


class _ClaimsToBeList(type):
    """A metaclass whose classes compare equal to `list` (as a proxy type might)."""

    def __eq__(cls, other: object) -> bool:
        return other is list or type.__eq__(cls, other)

    def __ne__(cls, other: object) -> bool:
        return not _ClaimsToBeList.__eq__(cls, other)

    __hash__ = type.__hash__


class SizedOneShot(metaclass=_ClaimsToBeList):
    """A sized iterator (it knows how many it will yield) that can be read once: no
    `__contains__`, so not a `Collection`, and its class compares equal to `list`."""

    def __init__(self, items: list[Any]) -> None:
        self._items = iter(items)
        self._left = len(items)

    def __iter__(self) -> SizedOneShot:
        return self

    def __next__(self) -> Any:
        item = next(self._items)
        self._left -= 1
        return item

    def __len__(self) -> int:
        return self._left


def test_a_one_shot_iterable_is_left_to_the_method(deep_on: None) -> None:
    """RQ-ALL-7, RQ-COST-1: the snapshot of remove_requests never reads a one-shot
    iterable (it would consume it, and the method would remove nothing), however its
    class compares: the requests named by a sized iterator whose class claims to be
    `list` are removed, and the correct queue is no violation."""
    assert operator.eq(SizedOneShot, list)  # the premise
    a, b, c = requests("a", "b", "c")
    queue = FCFSRequestQueue([a, b, c])
    queue.remove_requests(SizedOneShot([a, c]))
    assert ids(queue) == ["b"] and len(queue) == 1 and a not in queue and c not in queue


# --- the preconditions ---------------------------------------------------------------


@pytest.mark.contracts
def test_a_copy_of_a_queued_request_is_refused_as_another_request_of_its_id() -> None:
    """RQ-ALL-3, RQ-ALL-2, RQ-REQ-2: the precondition of add and prepend says why it
    refuses, in the contract's words: a value-equal copy of a queued request is another
    request whose id is taken (RQ-ALL-3), not the queued request again (RQ-ALL-2).
    Nothing changes."""
    a = OrderedRequest("a")
    queue = FCFSRequestQueue([a])
    for add in (queue.add_request, queue.prepend_request):
        with pytest.raises(ValueError) as caught:
            add(twin(a))
        assert "RQ-ALL-3: no other queued request has this request_id: 'a' is taken" in str(
            caught.value
        )
        assert "RQ-ALL-2" not in str(caught.value)
        with pytest.raises(ValueError, match="RQ-ALL-2: the request is not already in the queue"):
            add(a)
    assert list(queue) == [a] and len(queue) == 1


class FadingRequest:
    """A request whose `arrival_time` can be read once: the record behind it is gone by
    the second read (a field that vanishes between two reads)."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.priority = 0
        self.reads = 0

    @property
    def arrival_time(self) -> float:
        self.reads += 1
        if self.reads > 1:
            raise AttributeError("arrival_time")
        return 0.0


@pytest.mark.contracts
@pytest.mark.parametrize("method", ["add_request", "prepend_request"])
def test_a_field_gone_by_the_second_read_is_refused_on_a_foreign_queue(
    deep_off: None, method: str
) -> None:
    """RQ-REQ-3, RQ-ALL-1: on a foreign queue the precondition of add and prepend reads
    the three fields again before it looks the id up; a request whose `arrival_time` is
    gone by then is no request: refused with a TypeError naming RQ-REQ-3 (not an
    AttributeError, nor let through to a queue that checks nothing), and nothing
    changes."""
    queue = ListQueue(requests("a"))
    fading = FadingRequest("x")
    error = failure(lambda: getattr(queue, method)(fading))
    assert type(error) is TypeError, repr(error)
    assert str(error).endswith(
        "RQ-REQ-3: the request has request_id, priority and arrival_time: "
        "FadingRequest object lacks one"
    ), repr(error)
    assert ids(queue) == ["a"] and len(queue) == 1


class ContentEqual(ListQueue):
    """A foreign queue that compares by contents (as a dataclass would): two empty queues
    are equal, though they are two queues."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ContentEqual) and self.items == other.items

    __hash__ = ListQueue.__hash__


@pytest.mark.contracts
def test_only_the_queue_itself_is_refused_as_its_own_other_queue() -> None:
    """RQ-ALL-8: the precondition refuses the queue itself (identity), not another queue
    that compares equal to it (two empty foreign queues with `==` by contents)."""
    queue, other = ContentEqual(), ContentEqual()
    assert queue == other and queue is not other  # the premise
    queue.prepend_requests(other)
    assert queue.items == [] and len(queue) == 0
    with pytest.raises(ValueError, match="RQ-ALL-8: a queue cannot be prepended to itself"):
        queue.prepend_requests(queue)


@pytest.mark.contracts
@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda rs: FCFSRequestQueue(rs), id="our-queue"),
        pytest.param(lambda rs: ListQueue(rs), id="foreign-queue"),
        pytest.param(lambda rs: list(rs), id="list"),
    ],
)
def test_a_foreign_queue_refuses_an_id_already_queued(
    deep_on: None, other: Callable[[list[Any]], Iterable[Any]]
) -> None:
    """RQ-ALL-8, RQ-COST-1: under deep checks the precondition of prepend_requests reads a
    foreign queue's ids through its public interface (it has no index), and refuses
    another queue (ours, a foreign one, or a plain list of requests) holding a request
    whose id is queued here, in the contract's words, before the foreign method (which
    checks nothing) moves anything; the same without a clash moves every request in."""
    a, b = requests("a", "b")
    queue = ListQueue([a, b])
    clash = other([Request("new", 0, 5.0), Request("b", 0, 6.0)])
    error = failure(lambda: queue.prepend_requests(clash))
    assert is_clash_refusal(error, ListQueue), repr(error)
    assert queue.items == [a, b] and len(queue) == 2
    x, y = Request("x", 0, 7.0), Request("y", 0, 8.0)
    error = failure(lambda: queue.prepend_requests(other([x, y])))
    assert error is None, repr(error)
    assert queue.items == [y, x, a, b] and len(queue) == 4


@pytest.mark.contracts
def test_a_plain_list_is_checked_as_any_other_queue(deep_on: None) -> None:
    """RQ-ALL-8: the other queue may be any iterable of requests (read through its
    interface): a foreign queue that leaves out one request of a plain list is caught
    by the clause that counts what moves in."""
    queue = MovesInAllButTheLast(requests("a"))
    error = failure(lambda: queue.prepend_requests([Request("x", 0, 5.0), Request("y", 0, 6.0)]))
    assert type(error) is icontract.ViolationError, repr(error)
    assert "RQ-ALL-8: prepend_requests moves in every request of the other queue" in str(error)


def lacking(field: str) -> SimpleNamespace:
    """An object with the request fields but `field`."""
    fields: dict[str, object] = {"request_id": "odd", "priority": 0, "arrival_time": 0.0}
    del fields[field]
    return SimpleNamespace(**fields)


@pytest.mark.contracts
def test_a_member_that_is_no_request_does_not_hide_a_clash(deep_off: None) -> None:
    """RQ-ALL-8: a member of the other queue with no request_id (which a foreign queue may
    hold) sends the precondition the slow way, where it still finds the request whose id
    is queued here, behind it, and refuses in the contract's words; nothing moves."""
    queue = FCFSRequestQueue(requests("a", "b"))
    other = ListQueue([lacking("request_id"), Request("b", 0, 6.0)])
    error = failure(lambda: queue.prepend_requests(other))
    assert is_clash_refusal(error, FCFSRequestQueue), repr(error)
    assert ids(queue) == ["a", "b"] and len(queue) == 2 and len(other) == 2


@pytest.mark.parametrize(
    "bad, missing",
    [
        pytest.param(lacking("request_id"), "request_id", id="no-request-id"),
        pytest.param(
            SimpleNamespace(request_id=["odd"], arrival_time=0.0),
            "priority",
            id="unhashable-id-and-no-priority",
        ),
    ],
)
def test_a_member_that_is_no_request_is_refused_by_the_method(
    deep_off: None, bad: SimpleNamespace, missing: str
) -> None:
    """RQ-REQ-3, RQ-ALL-8: the precondition of prepend_requests looks only for ids already
    queued here; a member of the other queue that is no request (no request_id, or an
    unhashable one on an object with no priority) and no clash is left to the method,
    whose check refuses it with a TypeError naming the missing field (not the
    precondition's AttributeError or "unhashable type", nor a clash it does not have);
    nothing moves."""
    queue = FCFSRequestQueue(requests("a", "b"))
    other = ListQueue([bad, Request("x", 0, 6.0)])
    error = failure(lambda: queue.prepend_requests(other))
    assert type(error) is TypeError, repr(error)
    assert re.search(f"RQ-REQ-3: .* has no '{missing}' attribute", str(error)), repr(error)
    assert ids(queue) == ["a", "b"] and len(queue) == 2 and len(other) == 2


# --- `bool`: the truth value, as icontract compared it -----------------------------------


IntBool = broken_class(
    ListQueue,
    "IntBool",
    Change(
        "__bool__",
        "broken for Python: `__bool__` answers the right truth value as an int (1 or 0)",
        "return bool(self.items)",
        "return 1 if self.items else 0",
    ),
)


def test_bool_compares_the_truth_value_as_icontract_did() -> None:
    """RQ-ALL-10, RQ-COST-2: the lean checker raises the errors icontract would raise, and
    the condition it replaced was `result == (len(self) > 0)`: an answer equal to the
    right truth value is no violation (as under icontract, shown on a function with that
    condition), and the int that is not a bool is Python's to refuse, at every truth
    test, with its own TypeError."""

    @icontract.ensure(lambda result: result == (len("a") > 0), "RQ-ALL-10: as it was")
    def answer_one() -> int:
        return 1

    assert answer_one() == 1  # icontract's checker: no violation
    for queue, truth in ((IntBool(requests("a")), 1), (IntBool(), 0)):
        assert queue.__bool__() == truth
        with pytest.raises(TypeError, match="__bool__ should return bool, returned int"):
            bool(queue)


# --- the snapshot reads what the clauses compare ---------------------------------------


class CountsReads(FCFSRequestQueue):
    """Correct; records which reads of its front the snapshots make (the bodies make none)."""

    reads: list[str] = []

    def _front(self) -> Any:
        CountsReads.reads.append("front")
        return super()._front()

    def _front_two(self) -> Any:
        CountsReads.reads.append("front and second")
        return super()._front_two()


@pytest.mark.contracts
@pytest.mark.parametrize(
    "action, reads",
    [
        pytest.param(lambda q: q.add_request(Request("new", 0, 9.0)), ["front"], id="add"),
        pytest.param(lambda q: q.prepend_request(Request("new", 0, 9.0)), ["front"], id="prepend"),
        pytest.param(lambda q: q.pop_request(), ["front and second"], id="pop"),
    ],
)
def test_the_snapshot_of_add_reads_the_front_only(
    deep_off: None, action: Callable[[FCFSRequestQueue], object], reads: list[str]
) -> None:
    """RQ-COST-2, RQ-FCFS-1, RQ-FCFS-3: add and prepend compare the old front only (it
    stays first, or becomes second), so their snapshot reads the front and not the request
    behind it; pop, whose clauses compare both (RQ-FCFS-2), reads the two."""
    queue = CountsReads(requests("a", "b", "c"))
    CountsReads.reads = []
    action(queue)
    assert CountsReads.reads == reads
