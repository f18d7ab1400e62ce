"""Gaps in the tests of queueref.queues.priority, found by `make mutation`.

Five kinds of test, each killing mutants that survived the queue tests before:

* A clause's teeth: a broken `PriorityRequestQueue` subclass (the lean checker of
  `RequestQueue.__init_subclass__` wraps its methods, and `_checked_init` the constructor
  it inherits) that only that clause of `_PRIORITY_POST` / `_PRIORITY_STRUCTURE` catches,
  the violation naming the clause's ID and text. Several clauses compare requests by
  identity (`is`): a queue holds objects, not values (RQ-REQ-2), and it MUST accept any
  object with the three fields (RQ-REQ-3), a request type with value equality among them;
  a queue that keeps a *copy* of such a request (equal, yet another object) is broken in
  a way only `is` sees.
* A clause's false alarms: a correct queue must not be refuted (sizes past CPython's
  small-int cache compared with `is`; a tombstone tied with its request's new entry; a
  request type whose `==` is duck-typed).
* Tombstones: a removed request leaves a tombstone in the heap, which pop and peek skip
  (also without the contracts, whose snapshot drops the tombstones on top itself); the
  heap is rebuilt only once the tombstones outnumber the live entries by more than 8; a
  request is told from a tombstone by identity, never by its `==`.
* The constructor queues the requests it is given.
* Cost: `prepend_requests` reads another of our queues through its id index; the order
  of that queue does not matter here (RQ-PRI-4), so nothing sorts it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from method_variants import Change, broken_class
from queue_gap_helpers import ValueRequest, ids, violation

import queueref.config
from queueref import PriorityRequestQueue, Request
from queueref.queues.priority import _REMOVED
from queueref.request import RequestLike, request_key


@dataclass(eq=False)
class KeyOrderedRequest:
    """A foreign request type ordered by its key among its kind, with all four comparisons
    (so `<=` holds between two requests of one key), and unordered against any other object
    (every comparison False). Equal only to itself (RQ-REQ-2)."""

    request_id: str
    priority: int = 0
    arrival_time: float = 0.0

    def __lt__(self, other: object) -> bool:
        return isinstance(other, KeyOrderedRequest) and request_key(self) < request_key(other)

    def __le__(self, other: object) -> bool:
        return isinstance(other, KeyOrderedRequest) and request_key(self) <= request_key(other)

    def __gt__(self, other: object) -> bool:
        return isinstance(other, KeyOrderedRequest) and request_key(self) > request_key(other)

    def __ge__(self, other: object) -> bool:
        return isinstance(other, KeyOrderedRequest) and request_key(self) >= request_key(other)


@dataclass(eq=False)
class DuckRequest:
    """A foreign request type whose `==` is duck-typed: equal when the prompts are, a
    missing prompt read as None. A request without a prompt so equals every object that has
    none -- the queue's tombstone marker among them."""

    request_id: str
    priority: int = 0
    arrival_time: float = 0.0
    prompt: str | None = None

    def __eq__(self, other: object) -> bool:
        return self.prompt == getattr(other, "prompt", None)

    __hash__ = object.__hash__


@dataclass(eq=False)
class WatchedRequest:
    """A request that records every `==` (and `!=`) asked of it in `log`, and answers as
    identity would."""

    request_id: str
    priority: int
    arrival_time: float
    log: list[str] = field(repr=False)

    def __eq__(self, other: object) -> bool:
        self.log.append(f"{self.request_id} == {other!r}")
        return NotImplemented

    __hash__ = object.__hash__


def twin(request: Any) -> Any:
    """Another object with the same fields (a copy)."""
    other = copy.copy(request)
    assert other is not request and request_key(other) == request_key(request)
    return other


def without_contracts(method: Callable[..., Any]) -> Callable[..., Any]:
    """The method's own body, without the lean checker around it (as under `python -O`)."""
    body: Callable[..., Any] = inspect.unwrap(method)
    return body


remove_body = without_contracts(PriorityRequestQueue.remove_request)
remove_many_body = without_contracts(PriorityRequestQueue.remove_requests)
pop_body = without_contracts(PriorityRequestQueue.pop_request)
peek_body = without_contracts(PriorityRequestQueue.peek_request)


def values() -> list[Any]:
    return [ValueRequest(name, 2 * i, float(i)) for i, name in enumerate("abc")]


def key_ordered() -> list[Any]:
    return [KeyOrderedRequest(name, 2 * i, float(i)) for i, name in enumerate("abc")]


def plain(*names: str) -> list[Any]:
    return [Request(name, 2 * i, float(i)) for i, name in enumerate(names)]


# --- broken variants: each is caught by one clause only --------------------------------


IndexesACopy = broken_class(
    PriorityRequestQueue,
    "IndexesACopy",
    Change(
        "add_request",
        "queues the request in the heap but indexes a copy of it",
        "self._push(request, self._fast_new_id(request))",
        "request_id = self._fast_new_id(request)\n"
        "    self._push(request, request_id)\n"
        "    self._index[request_id] = twin(request)",
    ),
    uses={"twin": twin},
)


QueuesACopy = broken_class(
    PriorityRequestQueue,
    "QueuesACopy",
    Change(
        "add_request",
        "queues (heap and index) a copy of the request, not the request",
        "self._push(request, self._fast_new_id(request))",
        "self._push(twin(request), self._fast_new_id(request))",
    ),
    uses={"twin": twin},
)


PrependsACopy = broken_class(
    PriorityRequestQueue,
    "PrependsACopy",
    Change(
        "prepend_request",
        "prepend_request queues a copy of the request, not the request",
        "self._push(request, self._fast_new_id(request))",
        "self._push(twin(request), self._fast_new_id(request))",
    ),
    uses={"twin": twin},
)


PeeksACopy = broken_class(
    PriorityRequestQueue,
    "PeeksACopy",
    Change(
        "peek_request",
        "peek returns a copy of the minimum",
        "return request",
        "return twin(request)",
    ),
    uses={"twin": twin},
)


LeavesThePoppedEntryLive = broken_class(
    PriorityRequestQueue,
    "LeavesThePoppedEntryLive",
    Change(
        "pop_request",
        "pop returns the minimum and unindexes it, but its heap entry stays live",
        "_key, _seq, request = heapq.heappop(self._heap)",
        "request = self._front()",
    ),
)


PopsTheFrontOffTheList = broken_class(
    PriorityRequestQueue,
    "PopsTheFrontOffTheList",
    Change(
        "pop_request",
        "pop takes the first list element with `list.pop(0)`, which shifts every entry by one "
        "place: the heap is no longer a heap, and the next pop returns the old second entry, not "
        "the minimum",
        "heapq.heappop(self._heap)",
        "self._heap.pop(0)",
    ),
)


SwapsTwoOnPop = broken_class(
    PriorityRequestQueue,
    "SwapsTwoOnPop",
    Change(
        "pop_request",
        "pops the minimum, then swaps the requests of the first two heap entries (each keeps its "
        "key, the heap stays ordered by the keys it holds)",
        "del self._index[request.request_id]",
        "del self._index[request.request_id]\n"
        "    heap = self._heap\n"
        "    heap[0][2], heap[1][2] = heap[1][2], heap[0][2]",
    ),
)


PutsTheReturningRequestAboveItsTombstone = broken_class(
    PriorityRequestQueue,
    "PutsTheReturningRequestAboveItsTombstone",
    Change(
        "add_request",
        "a request added back while its tombstone is still in the heap swaps places with that "
        "tombstone; their keys tie, their sequence numbers are then out of heap order",
        "self._push(request, self._fast_new_id(request))",
        "self._push(request, self._fast_new_id(request))\n"
        "    heap = self._heap\n"
        "    new = next(i for i, e in enumerate(heap) if e[2] is request)\n"
        "    old = next(\n"
        "        i for i, e in enumerate(heap) if e[2] is _REMOVED and e[0] == heap[new][0]\n"
        "    )\n"
        "    heap[new], heap[old] = heap[old], heap[new]",
    ),
)


#: (variant, its queue's requests, a step that must pass, the call the clause alone
#: catches, the clause, deep checks)
BROKEN: list[Any] = [
    pytest.param(
        IndexesACopy,
        values,
        None,
        lambda q, rs: q.add_request(ValueRequest("new", 3, 9.0)),
        "RQ-IMPL-1: the id index holds exactly the live heap entries",
        True,
        id="indexes-a-copy",
    ),
    pytest.param(
        QueuesACopy,
        values,
        None,
        lambda q, rs: q.add_request(ValueRequest("new", -1, 9.0)),  # the new minimum
        "RQ-PRI-1: the minimum is now the smaller of the old minimum and the new request",
        False,
        id="queues-a-copy-of-the-new-minimum",
    ),
    pytest.param(
        QueuesACopy,
        key_ordered,
        None,
        lambda q, rs: q.add_request(KeyOrderedRequest("new", 3, 9.0)),  # between b and c
        "RQ-PRI-1: the queue holds the old requests and the new one, in key order",
        True,
        id="queues-a-copy-in-the-middle",
    ),
    pytest.param(
        PrependsACopy,
        key_ordered,
        None,
        lambda q, rs: q.prepend_request(KeyOrderedRequest("new", 3, 9.0)),
        "RQ-PRI-3: prepend_request is add_request: the request takes its key's place",
        True,
        id="prepends-a-copy",
    ),
    pytest.param(
        PeeksACopy,
        values,
        None,
        lambda q, rs: q.peek_request(),
        "RQ-ALL-5: peek is the minimum",
        False,
        id="peeks-a-copy",
    ),
    pytest.param(
        LeavesThePoppedEntryLive,
        lambda: plain("a", "b", "c"),
        None,
        lambda q, rs: q.pop_request(),
        "RQ-PRI-2: pop returns a request no larger than any that remains",
        False,
        id="leaves-the-popped-entry-live",
    ),
    pytest.param(
        PopsTheFrontOffTheList,
        # b's priority is 4, c's 2: pushed in this order, the heap is [a, b, c]
        lambda: [Request("a", 0, 0.0), Request("b", 4, 1.0), Request("c", 2, 2.0)],
        lambda q, rs: q.pop_request(),  # takes a; the list [b, c] is no heap, b on top
        lambda q, rs: q.pop_request(),  # takes b (what peek returned), c remains
        "RQ-PRI-2: pop returns a request no larger than any that remains",
        False,
        id="pops-the-front-off-the-list",
    ),
    pytest.param(
        SwapsTwoOnPop,
        lambda: plain("a", "b", "c", "d"),
        None,
        lambda q, rs: q.pop_request(),
        "RQ-PRI-2: pop takes the minimum and leaves the rest",
        True,
        id="swaps-two-on-pop",
    ),
    pytest.param(
        PutsTheReturningRequestAboveItsTombstone,
        lambda: plain("z", "a", "b"),
        lambda q, rs: q.remove_request(rs[1]),  # a's tombstone under z, above nothing
        lambda q, rs: q.add_request(rs[1]),  # a's new entry lands under its tombstone
        "RQ-PRI-6: the heap property holds for every entry",
        True,
        id="puts-the-returning-request-above-its-tombstone",
    ),
]


@pytest.mark.contracts
@pytest.mark.parametrize("cls, requests, before, action, clause, deep", BROKEN)
def test_a_broken_priority_queue_is_caught_by_its_clause(
    monkeypatch: pytest.MonkeyPatch,
    cls: type[PriorityRequestQueue],
    requests: Callable[[], list[Any]],
    before: Callable[[PriorityRequestQueue, list[Any]], object] | None,
    action: Callable[[PriorityRequestQueue, list[Any]], object],
    clause: str,
    deep: bool,
) -> None:
    """Each clause of `_PRIORITY_POST` / `_PRIORITY_STRUCTURE` has teeth of its own: the
    broken variant slips past every other clause and is caught by this one, named with its
    ID (RQ-IMPL-1, RQ-PRI-1, RQ-PRI-3, RQ-ALL-5, RQ-PRI-2, RQ-PRI-6). The variants that keep
    a copy of a request (another object) break RQ-REQ-2, "a queue holds objects, not
    values": only an identity test sees them when the copy compares equal, and only an
    equality test (not `>=`, `<=`) sees them when it merely ties in the order. The cheap
    clauses are shown with deep checks off (RQ-COST-1: they must hold alone), the deep ones
    with deep checks on. The same steps on the correct queue raise nothing."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", deep)
    given = requests()
    correct = PriorityRequestQueue(given)
    if before is not None:
        before(correct, given)
    action(correct, given)
    given = requests()
    queue = cls(given)
    if before is not None:
        before(queue, given)
    with violation(clause):
        action(queue, given)


@pytest.mark.contracts
def test_the_index_holding_a_copy_hides_the_queued_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """RQ-IMPL-1, RQ-REQ-2: what the clause "the id index holds exactly the live heap
    entries" guards against, seen through the public interface: with an equal copy in the
    index the queued request is no longer `in` the queue, and it cannot be removed."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    queue = IndexesACopy()
    new = ValueRequest("new", 0, 0.0)
    with violation("RQ-IMPL-1: the id index holds exactly the live heap entries"):
        queue.add_request(new)
    assert ids(queue) == ["new"] and len(queue) == 1
    assert new not in queue
    with pytest.raises(ValueError, match="RQ-ALL-6"):
        remove_body(queue, new)


FilesEachRequestTwice = broken_class(
    PriorityRequestQueue,
    "FilesEachRequestTwice",
    Change(
        "_push",
        "every push makes two live heap entries of the request",
        "heapq.heappush(self._heap, entry)",
        "heapq.heappush(self._heap, entry)\n"
        "    second = [(request.priority, request.arrival_time, request_id), -1, request]\n"
        "    heapq.heappush(self._heap, second)",
    ),
)


FilesTombstones = broken_class(
    PriorityRequestQueue,
    "FilesTombstones",
    Change(
        "_push",
        "every push indexes the request but leaves a tombstone in the heap",
        "self._entries[request_id] = entry",
        "self._entries[request_id] = entry\n    entry[2] = _REMOVED",
    ),
)


@pytest.mark.contracts
@pytest.mark.parametrize("cls", [FilesEachRequestTwice, FilesTombstones])
def test_a_constructor_whose_heap_and_index_disagree_is_caught(
    monkeypatch: pytest.MonkeyPatch, cls: type[PriorityRequestQueue]
) -> None:
    """RQ-IMPL-1, RQ-COST-2: the index holds exactly the live heap entries, as many as
    there are. A heap with more live entries than the index (each request twice) or fewer
    (tombstones only) passes the cheap half (the heap is at least as long as the index) and
    the heap property; only the deep clause counts the live entries, after `__init__` too
    (`_checked_init` binds the constructor a subclass inherits)."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    with violation(
        f"in {cls.__name__}.__init__:\nRQ-IMPL-1: the id index holds exactly the live heap entries"
    ):
        cls(plain("a", "b"))


# --- clauses that must not refute a correct queue --------------------------------------


def test_a_queue_of_more_than_256_requests_is_consistent(monkeypatch: pytest.MonkeyPatch) -> None:
    """RQ-IMPL-1: the number of live heap entries and the size of the index are compared as
    numbers; past CPython's small-int cache (256) two equal sizes are different int objects,
    and a correct queue of 300 requests, made and changed, is no violation."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    requests = [Request(f"r{i:03}", 1, float(i)) for i in range(300)]
    queue = PriorityRequestQueue(requests)
    urgent = Request("urgent", 0, 500.0)
    queue.add_request(urgent)
    queue.remove_request(requests[150])
    assert queue.pop_request() is urgent
    assert queue.pop_request() is requests[0]
    assert len(queue) == 298
    assert ids(queue) == [f"r{i:03}" for i in range(1, 300) if i != 150]


UnnumberedPriorityQueue = broken_class(
    PriorityRequestQueue,
    "UnnumberedPriorityQueue",
    Change(
        "_push",
        "numbers no entry (every sequence number is 0): correct for a request type that is "
        "unordered against other objects, as the keys of live requests are distinct",
        "next(self._sequence),",
        "0,",
    ),
    label="VARIANT",
)


@pytest.mark.contracts
def test_a_tombstone_tied_with_its_requests_new_entry_keeps_the_heap_property(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RQ-PRI-6: the heap property is `parent <= child` on (key, sequence number): a parent
    that ties with its child is in order. A queue that numbers no entry re-adds a removed
    request right under its tombstone, the two tied, and behaves correctly: no violation
    (a strict `<`, or a comparison of more than the two fields, would refute it)."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    z, a, b = (KeyOrderedRequest(name, i, float(i)) for i, name in enumerate("zab"))
    queue = UnnumberedPriorityQueue([z, a, b])
    queue.remove_request(a)
    queue.add_request(a)
    heap = queue._heap
    assert heap[1][2] is _REMOVED and heap[3][2] is a  # the premise: a parent and its child
    assert heap[1][:2] == heap[3][:2]  # tie on (key, sequence number)
    assert ids(queue) == ["z", "a", "b"] and len(queue) == 3
    assert queue.pop_request() is z
    assert queue.pop_request() is a
    assert queue.pop_request() is b
    assert not queue


@pytest.mark.contracts
def test_the_index_clause_tells_a_request_from_a_tombstone_by_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RQ-IMPL-1, RQ-REQ-3: a live entry is one whose request is not the tombstone marker
    itself; a request type whose `==` holds with the marker (duck-typed) is queued like any
    other, and the deep index clause counts it as live: no violation."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    duck = DuckRequest("duck", 0, 0.0)
    assert duck == _REMOVED  # the premise
    queue = PriorityRequestQueue([duck])
    later = Request("later", 1, 1.0)
    queue.add_request(later)
    assert ids(queue) == ["duck", "later"] and len(queue) == 2
    assert queue.peek_request() is duck
    assert queue.pop_request() is duck
    assert queue.pop_request() is later


# --- tombstones ------------------------------------------------------------------------


def test_pop_without_the_contracts_skips_the_tombstones_on_top() -> None:
    """RQ-PRI-2, RQ-ALL-6: removing the two smallest requests leaves their tombstones on
    top of the heap, and pop skips them and returns the minimum of the live requests. The
    contract's snapshot of pop reads the front through `_front`, which drops the tombstones
    on top itself, so only the body alone (as under `python -O`) shows pop doing it."""
    a, b, c, d = plain("a", "b", "c", "d")
    queue = PriorityRequestQueue([a, b, c, d])
    remove_body(queue, a)
    remove_body(queue, b)
    assert queue._heap[0][2] is _REMOVED  # the premise: a tombstone on top
    assert pop_body(queue) is c
    assert pop_body(queue) is d
    assert len(queue) == 0 and not queue._heap


def test_pop_and_peek_tell_a_request_from_a_tombstone_by_identity() -> None:
    """RQ-PRI-2, RQ-ALL-5, RQ-REQ-3: a request whose `==` holds with the tombstone marker
    (a duck-typed request type) is still a request: peek, after dropping the tombstone on
    top, returns it, and pop returns it rather than skipping it (the bodies alone: the
    snapshot of the contracts would drop tombstones itself)."""
    first, duck, last = Request("first", 0, 0.0), DuckRequest("duck", 1, 1.0), Request("last", 2)
    assert duck == _REMOVED  # the premise
    queue = PriorityRequestQueue([first, duck, last])
    remove_body(queue, first)
    assert queue._heap[0][2] is _REMOVED  # a tombstone on top, the duck under it
    assert peek_body(queue) is duck
    assert pop_body(queue) is duck
    assert pop_body(queue) is last
    assert len(queue) == 0


def test_iteration_tells_a_request_from_a_tombstone_by_identity() -> None:
    """RQ-PRI-5, RQ-ALL-9, RQ-REQ-3: iteration yields every queued request, a duck-typed
    one whose `==` holds with the tombstone marker included."""
    duck, other = DuckRequest("duck", 0, 0.0), Request("other", 1, 1.0)
    queue = PriorityRequestQueue([duck, other])
    assert ids(queue) == ["duck", "other"]
    assert [r is duck for r in queue] == [True, False]


def test_compaction_keeps_a_request_that_equals_a_tombstone() -> None:
    """RQ-IMPL-1, RQ-ALL-7, RQ-REQ-3: the heap rebuilt once tombstones outnumber the live
    entries keeps every live entry, a duck-typed request whose `==` holds with the tombstone
    marker included (the bodies alone)."""
    duck = DuckRequest("duck", 0, 0.0)
    others = [Request(f"r{i:02}", 1, float(i)) for i in range(19)]
    queue = PriorityRequestQueue([duck, *others])
    remove_many_body(queue, others[:15])  # 15 tombstones, 5 live: 20 > 2 * 5 + 8
    assert ids(queue) == ["duck", "r15", "r16", "r17", "r18"]
    assert pop_body(queue) is duck
    assert len(queue._heap) == 4 and len(queue) == 4  # it was rebuilt: no tombstone left


def test_the_queue_never_asks_a_requests_eq(monkeypatch: pytest.MonkeyPatch) -> None:
    """RQ-REQ-2, RQ-REQ-3: a queue holds objects, not values: it tells a request from a
    tombstone, and one request from another, by identity, and never asks a request's `==`
    (or `!=`), whatever that does -- contracts, deep checks and every operation included:
    peek with a request on top and with a tombstone on top, pop, prepend_requests,
    remove_requests, iteration and the rebuild of the heap."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    log: list[str] = []
    a, b, c, d = (WatchedRequest(name, i, float(i), log) for i, name in enumerate("abcd"))
    queue = PriorityRequestQueue([b, c])
    queue.add_request(a)
    assert queue.peek_request() is a  # a request on top
    queue.remove_request(a)
    assert queue.peek_request() is b  # a tombstone on top
    queue.prepend_requests(PriorityRequestQueue([d]))
    assert [r.request_id for r in queue] == ["b", "c", "d"]
    queue.remove_requests([c, d])
    assert queue.pop_request() is b
    many = [WatchedRequest(f"m{i:02}", 5, float(i), log) for i in range(20)]
    queue = PriorityRequestQueue(many)
    queue.remove_requests(many[:15])  # rebuilt: 20 entries, 5 live
    assert len(queue._heap) == 5 and queue.pop_request() is many[15]
    assert log == []


@pytest.mark.parametrize(
    "size, rebuilt_at, kept",
    [
        # 20 entries: after 14 removals 14 tombstones, 6 live: 14 <= 6 + 8, kept;
        # after 15, 15 tombstones, 5 live: 15 > 5 + 8, rebuilt with the 5.
        (20, 15, 5),
        # 21 entries: after 14 removals 14 tombstones, 7 live: 14 <= 7 + 8, kept;
        # after 15, 15 tombstones, 6 live: 15 > 6 + 8, rebuilt with the 6.
        (21, 15, 6),
    ],
)
def test_a_removal_leaves_a_tombstone_until_they_outnumber_the_live_entries(
    size: int, rebuilt_at: int, kept: int
) -> None:
    """RQ-ALL-6, RQ-IMPL-1 (spec "Why the queues look like this": the priority queue
    removes in O(1) amortised by leaving a tombstone): a removal marks the request's entry
    and leaves the heap as it is, the same list, one tombstone more; once the tombstones
    outnumber the live entries by more than 8 the heap is rebuilt, once, from the live
    entries alone. Never before (an O(n) rebuild on every removal), never later (the
    tombstones pile up). The counts are written out by hand above."""
    requests = [Request(f"r{i:02}", 0, float(i)) for i in range(size)]
    queue = PriorityRequestQueue(requests)
    heap = queue._heap
    for removed, request in enumerate(requests, start=1):
        queue.remove_request(request)
        if removed < rebuilt_at:
            assert queue._heap is heap and len(heap) == size, removed
        elif removed == rebuilt_at:
            assert queue._heap is not heap, removed
            heap = queue._heap
            assert len(heap) == kept and all(e[2] is not _REMOVED for e in heap)
        else:  # a handful of tombstones in a small heap: kept
            assert queue._heap is heap and len(heap) == kept, removed
    assert len(queue) == 0


def test_remove_requests_rebuilds_the_heap_at_the_same_point() -> None:
    """RQ-ALL-7, RQ-IMPL-1: a batch removal is judged as one: 14 of 20 removed at once
    leave 14 tombstones beside 6 live entries (kept); one more, 15 beside 5, and the heap
    is rebuilt from the 5 live entries."""
    requests = [Request(f"r{i:02}", 0, float(i)) for i in range(20)]
    queue = PriorityRequestQueue(requests)
    heap = queue._heap
    queue.remove_requests(requests[:14])
    assert queue._heap is heap and len(heap) == 20
    queue.remove_requests(requests[14:15])
    assert len(queue._heap) == 5 and ids(queue) == [f"r{i}" for i in range(15, 20)]


# --- the constructor ---------------------------------------------------------------


def test_the_constructor_queues_the_requests_it_is_given_in_key_order() -> None:
    """RQ-PRI-1, RQ-PRI-5: `PriorityRequestQueue(requests)` holds those requests, each
    indexed, in key order whatever their order in the argument."""
    late, urgent, early = Request("late", 0, 2.0), Request("urgent", -1, 3.0), Request("early")
    queue = PriorityRequestQueue([late, urgent, early])
    assert ids(queue) == ["urgent", "early", "late"] and len(queue) == 3 and bool(queue)
    assert late in queue and urgent in queue and early in queue
    assert queue.pop_request() is urgent and queue.peek_request() is early


# --- cost: the other queue of prepend_requests is read through its index ---------------


class CountsSorts(PriorityRequestQueue):
    """Correct; counts the calls of `_in_order`, the sort of its live entries behind its
    iteration (O(k log k), and a pass over its tombstones)."""

    sorts: ClassVar[int] = 0

    def _in_order(self) -> list[RequestLike]:
        CountsSorts.sorts += 1
        return super()._in_order()


@pytest.mark.parametrize("deep", [False, True])
def test_prepend_requests_reads_the_other_queue_through_its_index(
    monkeypatch: pytest.MonkeyPatch, deep: bool
) -> None:
    """RQ-PRI-4, RQ-COST-1: the order of the other queue does not matter to a priority
    queue, so `prepend_requests` reads another of our queues through its id index (O(k),
    spec "Implementation and cost"): neither the body nor the snapshot of its contract sorts
    the other queue in pop order. The requests all arrive, the other queue is unchanged."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", deep)
    z, x = Request("z", 2, 0.0), Request("x", 0, 1.0)
    other = CountsSorts([z, x])
    queue = PriorityRequestQueue([Request("y", 1, 2.0)])
    CountsSorts.sorts = 0
    queue.prepend_requests(other)
    assert CountsSorts.sorts == 0
    assert ids(queue) == ["x", "y", "z"] and len(queue) == 3
    assert len(other) == 2 and z in other and x in other
