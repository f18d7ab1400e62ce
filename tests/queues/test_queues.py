"""Unit tests of the reference queues: each requirement, bad input, and contracts with teeth.

Expected outcomes are written out by hand from the spec, never computed by the
code under test.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import icontract
import pytest
from method_variants import Change, broken_class

import queueref.config
from queueref import (
    FCFSRequestQueue,
    PriorityRequestQueue,
    Request,
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)
from queueref.request import RequestLike

QUEUE_CLASSES = [FCFSRequestQueue, PriorityRequestQueue]


def ids(queue: RequestQueue) -> list[str]:
    return [r.request_id for r in queue]


def filled(cls: type[RequestQueue], *names: str) -> RequestQueue:
    queue = cls()
    for i, name in enumerate(names):
        queue.add_request(Request(name, priority=0, arrival_time=float(i)))
    return queue


def holding(cls: type[RequestQueue], *requests: RequestLike) -> RequestQueue:
    queue = cls()
    for request in requests:
        queue.add_request(request)
    return queue


# --- requests ---------------------------------------------------------------


def test_request_order_is_priority_then_arrival_then_id() -> None:
    """RQ-REQ-1"""
    assert Request("z", priority=-1, arrival_time=9.0) < Request("a", priority=0, arrival_time=0.0)
    assert Request("z", priority=0, arrival_time=1.0) < Request("a", priority=0, arrival_time=2.0)
    assert Request("a", priority=0, arrival_time=1.0) < Request("b", priority=0, arrival_time=1.0)
    assert not Request("b", priority=0, arrival_time=1.0) < Request(
        "a", priority=0, arrival_time=1.0
    )


def test_request_equality_is_identity() -> None:
    """RQ-REQ-2"""
    a, twin = Request("a"), Request("a")
    assert a != twin and a == a
    assert len({a, twin}) == 2


class VllmShaped:
    """A stand-in for vLLM's own Request: the three fields and `<` on (priority, arrival)."""

    def __init__(self, request_id: str, priority: int, arrival_time: float) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, priority, arrival_time

    def __lt__(self, other: VllmShaped) -> bool:
        return (self.priority, self.arrival_time) < (other.priority, other.arrival_time)


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_queues_accept_vllm_shaped_requests(cls: type[RequestQueue]) -> None:
    """RQ-REQ-3"""
    queue = cls()
    late, early = VllmShaped("late", 0, 2.0), VllmShaped("early", 0, 1.0)
    queue.add_request(late)
    queue.add_request(early)
    expected = ["late", "early"] if cls is FCFSRequestQueue else ["early", "late"]
    assert ids(queue) == expected
    assert queue.pop_request().request_id == expected[0]


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
@pytest.mark.parametrize("missing", ["request_id", "priority", "arrival_time"])
def test_non_request_is_rejected_naming_the_field(cls: type[RequestQueue], missing: str) -> None:
    """RQ-REQ-3: TypeError naming the missing field; the queue is unchanged."""
    queue = filled(cls, "a", "b")
    fields = {"request_id": "x", "priority": 0, "arrival_time": 0.0}
    del fields[missing]
    bogus = type("Bogus", (), fields)()
    for method in (queue.add_request, queue.prepend_request):
        with pytest.raises(TypeError, match="request_id|priority|arrival_time"):
            method(bogus)
    assert ids(queue) == ["a", "b"]


def test_body_check_names_the_missing_field() -> None:
    """RQ-REQ-3: with contracts off the body still names the field."""
    queue = FCFSRequestQueue()
    with pytest.raises(TypeError, match="'priority'"):
        queue._require_new(type("NoPriority", (), {"request_id": "x", "arrival_time": 0.0})())


# --- policies ----------------------------------------------------------------


@pytest.mark.parametrize(
    "policy, cls",
    [
        (SchedulingPolicy.FCFS, FCFSRequestQueue),
        ("fcfs", FCFSRequestQueue),
        (SchedulingPolicy.PRIORITY, PriorityRequestQueue),
        ("priority", PriorityRequestQueue),
    ],
)
def test_factory_accepts_enum_and_string(policy: Any, cls: type) -> None:
    """RQ-POL-1"""
    queue = create_request_queue(policy)
    assert type(queue) is cls and len(queue) == 0
    assert {p.value for p in SchedulingPolicy} == {"fcfs", "priority"}


@pytest.mark.guard
@pytest.mark.parametrize("policy", ["lifo", "FCFS", "", None, 3])
def test_unknown_policy_lists_the_valid_ones(policy: Any) -> None:
    """RQ-POL-2"""
    with pytest.raises(ValueError) as excinfo:
        create_request_queue(policy)
    message = str(excinfo.value)
    assert repr(policy) in message and "'fcfs'" in message and "'priority'" in message


# --- every queue ---------------------------------------------------------------


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_add_and_prepend_grow_by_one(cls: type[RequestQueue]) -> None:
    """RQ-ALL-1"""
    queue = cls()
    a, b = Request("a"), Request("b", arrival_time=1.0)
    queue.add_request(a)
    queue.prepend_request(b)
    assert len(queue) == 2 and a in queue and b in queue


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_duplicate_request_is_rejected_and_queue_unchanged(cls: type[RequestQueue]) -> None:
    """RQ-ALL-2, RQ-ALL-3"""
    queue = filled(cls, "a", "b")
    a = queue.peek_request()
    for method in (queue.add_request, queue.prepend_request):
        with pytest.raises(ValueError, match="RQ-ALL-2"):
            method(a)
        with pytest.raises(ValueError, match="RQ-ALL-3"):
            method(Request("b", arrival_time=5.0))
    assert ids(queue) == ["a", "b"]


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_pop_returns_peek_and_empty_raises(cls: type[RequestQueue]) -> None:
    """RQ-ALL-4, RQ-ALL-5"""
    queue = filled(cls, "a", "b")
    head = queue.peek_request()
    assert len(queue) == 2 and queue.peek_request() is head
    assert queue.pop_request() is head and len(queue) == 1
    queue.pop_request()
    with pytest.raises(IndexError):
        queue.pop_request()
    with pytest.raises(IndexError):
        queue.peek_request()
    assert len(queue) == 0 and not queue


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_remove_request(cls: type[RequestQueue]) -> None:
    """RQ-ALL-6: removes exactly one; absent raises and changes nothing."""
    queue = filled(cls, "a", "b", "c")
    b = list(queue)[1]
    queue.remove_request(b)
    assert ids(queue) == ["a", "c"]
    with pytest.raises(ValueError, match="RQ-ALL-6"):
        queue.remove_request(b)
    with pytest.raises(ValueError, match="RQ-ALL-6"):
        queue.remove_request(Request("a"))  # same id, another object
    assert ids(queue) == ["a", "c"]
    empty = cls()
    with pytest.raises(ValueError, match="RQ-ALL-6"):
        empty.remove_request(b)
    assert len(empty) == 0


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_remove_requests_ignores_absent_and_repeats(cls: type[RequestQueue]) -> None:
    """RQ-ALL-7"""
    queue = filled(cls, "a", "b", "c", "d")
    a, b, c, d = list(queue)
    queue.remove_requests([c, Request("zz"), c, a])
    assert ids(queue) == ["b", "d"]
    queue.remove_requests(iter([d]))  # any iterable, even a one-shot iterator
    assert ids(queue) == ["b"]
    queue.remove_requests([])
    assert ids(queue) == ["b"]


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_remove_requests_with_bad_member_changes_nothing(cls: type[RequestQueue]) -> None:
    """RQ-ALL-7, RQ-REQ-3: validation happens before any removal."""
    queue = filled(cls, "a", "b")
    a = queue.peek_request()
    with pytest.raises(TypeError):
        queue.remove_requests([a, cast(Any, object())])
    assert ids(queue) == ["a", "b"]


@dataclass(eq=True)
class SamePrompt:
    """A request type whose `==` compares the prompt only: two requests with different ids
    can be equal, and (not frozen) it is unhashable."""

    prompt: str
    request_id: str = field(compare=False)
    priority: int = field(default=0, compare=False)
    arrival_time: float = field(default=0.0, compare=False)


@dataclass(eq=True, unsafe_hash=True)
class SamePromptHashable(SamePrompt):
    """The same, hashable: a set or dict of them merges equal requests."""


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
@pytest.mark.parametrize("kind", [SamePrompt, SamePromptHashable])
def test_removal_takes_the_object_named_not_an_equal_one(
    cls: type[RequestQueue], kind: type[SamePrompt]
) -> None:
    """RQ-REQ-2, RQ-ALL-6, RQ-ALL-7: a queue holds objects, not values. With a request type
    whose `==` ignores the id, removing the second of two equal requests removes it (vLLM
    0.30.0's `deque.remove` would take the first), naming both removes both, and the
    queue stays consistent (under `python -O` too, where no contract would notice)."""
    a, b, c = kind("hi", "a"), kind("hi", "b", arrival_time=1.0), kind("x", "c", arrival_time=2.0)
    assert a == b and a is not b
    queue = holding(cls, a, b, c)
    queue.remove_request(b)
    assert ids(queue) == ["a", "c"] and queue.peek_request() is a
    with pytest.raises(ValueError, match="RQ-ALL-6"):
        queue.remove_request(b)
    queue = holding(cls, a, b, c)
    queue.remove_requests([a, b])
    assert ids(queue) == ["c"] and len(queue) == 1
    queue = holding(cls, a, b, c)
    queue.remove_requests([b, c])
    assert ids(queue) == ["a"]
    queue.add_request(b)  # the index and the queue agree: b is free again
    assert ids(queue) == ["a", "b"]


@pytest.mark.guard
@pytest.mark.parametrize(
    ("names", "kept"),
    [
        # (prompts of the queued requests, ids expected after removing the first
        # request of prompt "a" and the first of prompt "c"): copies of the named
        # requests stay. Sizes chosen so that no count of what a set of the named
        # requests would take out can pass for the right one (4 queued, 2 named, 2
        # copies; 6, 2, 1; 5, 2, 2).
        ("a a c c", ["1", "3"]),
        ("a a c x y z", ["1", "3", "4", "5"]),
        ("a a c c x", ["1", "3", "4"]),
    ],
)
def test_remove_requests_keeps_the_equal_copies_of_the_named(names: str, kept: list[str]) -> None:
    """RQ-REQ-2, RQ-ALL-7: with a hashable request type whose `==` ignores the id, a set of
    the named requests also takes out their equal copies; the FCFS queue sees that the
    count is off and removes by identity instead."""
    requests = [
        SamePromptHashable(prompt, str(i), arrival_time=float(i))
        for i, prompt in enumerate(names.split())
    ]
    queue = FCFSRequestQueue(requests)
    first_c = next(r for r in requests if r.prompt == "c")
    queue.remove_requests([requests[0], first_c])
    assert ids(queue) == kept and len(queue) == len(kept)


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_prepend_requests_moves_all_and_leaves_source(cls: type[RequestQueue]) -> None:
    """RQ-ALL-8"""
    queue = filled(cls, "a")
    other = cls()
    other.add_request(Request("x", arrival_time=5.0))
    other.add_request(Request("y", arrival_time=6.0))
    queue.prepend_requests(other)
    assert len(queue) == 3 and ids(other) == ["x", "y"]


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_prepend_requests_bad_input_changes_nothing(cls: type[RequestQueue]) -> None:
    """RQ-ALL-8: itself, or a shared request id, is rejected before anything moves, in
    RQ-ALL-8's words with contracts on (the precondition) and under `python -O` (the
    guard)."""
    queue = filled(cls, "a", "b")
    with pytest.raises(ValueError, match="RQ-ALL-8: a queue cannot be prepended to itself"):
        queue.prepend_requests(queue)
    other = cls()
    other.add_request(Request("new", arrival_time=9.0))
    other.add_request(Request("b", arrival_time=9.0))
    with pytest.raises(
        ValueError, match="RQ-ALL-8: no request of the other queue is already in this one"
    ):
        queue.prepend_requests(other)
    assert ids(queue) == ["a", "b"] and sorted(ids(other)) == ["b", "new"]
    assert len(queue) == 2 and len(other) == 2


@pytest.mark.parametrize("cls", QUEUE_CLASSES)
def test_iteration_is_pop_order_and_does_not_mutate(cls: type[RequestQueue]) -> None:
    """RQ-ALL-9, RQ-ALL-10"""
    queue = cls()
    for name, priority in (("p", 2), ("q", 0), ("r", 1)):
        queue.add_request(Request(name, priority=priority))
    seen = ids(queue)
    assert ids(queue) == seen and len(queue) == 3 and bool(queue)
    popped = [queue.pop_request().request_id for _ in range(3)]
    assert popped == seen
    assert bool(queue) is False and len(queue) == 0


def test_fcfs_iteration_is_a_copy() -> None:
    """RQ-FCFS-5: the queue may change while a caller iterates."""
    queue = filled(FCFSRequestQueue, "a", "b", "c")
    seen = []
    for request in queue:
        seen.append(request.request_id)
        if request.request_id == "a":
            queue.remove_request(request)
    assert seen == ["a", "b", "c"] and ids(queue) == ["b", "c"]


# --- FCFS --------------------------------------------------------------------------


def test_fcfs_order() -> None:
    """RQ-FCFS-1, RQ-FCFS-2, RQ-FCFS-3, RQ-FCFS-5"""
    queue = FCFSRequestQueue()
    queue.add_request(Request("a", priority=9))
    queue.add_request(Request("b", priority=-9))
    queue.prepend_request(Request("p", priority=5))
    assert ids(queue) == ["p", "a", "b"]
    assert queue.pop_request().request_id == "p"
    assert queue.peek_request().request_id == "a"


def test_fcfs_prepend_requests_reverses() -> None:
    """RQ-FCFS-4: vLLM's extendleft -- the other queue lands in front, reversed."""
    queue = filled(FCFSRequestQueue, "a", "b")
    other = filled(FCFSRequestQueue, "x", "y", "z")
    queue.prepend_requests(other)
    assert ids(queue) == ["z", "y", "x", "a", "b"]


def test_fcfs_double_reversal_restores_order() -> None:
    """RQ-FCFS-4: prepend_request one by one, then prepend_requests, keeps the order."""
    skipped = FCFSRequestQueue()
    for name in ("s1", "s2", "s3"):
        skipped.prepend_request(Request(name))
    older = filled(FCFSRequestQueue, "old")
    older.prepend_requests(skipped)
    assert ids(older) == ["s1", "s2", "s3", "old"]


# --- priority ---------------------------------------------------------------------


def test_priority_order_and_prepend_is_add() -> None:
    """RQ-PRI-1, RQ-PRI-2, RQ-PRI-3, RQ-PRI-5"""
    queue = PriorityRequestQueue()
    queue.add_request(Request("b", priority=1, arrival_time=1.0))
    queue.add_request(Request("a", priority=1, arrival_time=1.0))
    queue.prepend_request(Request("late-urgent", priority=0, arrival_time=7.0))
    queue.prepend_request(Request("lazy", priority=3, arrival_time=0.0))
    assert ids(queue) == ["late-urgent", "a", "b", "lazy"]
    assert ids(queue) == ["late-urgent", "a", "b", "lazy"]  # iterating did not drain it
    assert [queue.pop_request().request_id for _ in range(4)] == ["late-urgent", "a", "b", "lazy"]


def test_priority_prepend_requests_adds_each() -> None:
    """RQ-PRI-4"""
    queue = PriorityRequestQueue()
    queue.add_request(Request("m", priority=1))
    other = FCFSRequestQueue()
    other.add_request(Request("z", priority=2))
    other.add_request(Request("a", priority=0))
    queue.prepend_requests(other)
    assert ids(queue) == ["a", "m", "z"]


def test_priority_lazy_removal_keeps_heap_and_index() -> None:
    """RQ-PRI-6, RQ-IMPL-1: tombstones are skipped and compacted."""
    queue = PriorityRequestQueue()
    requests = [Request(f"r{i:03}", priority=i % 7, arrival_time=float(i)) for i in range(200)]
    for request in requests:
        queue.add_request(request)
    queue.remove_requests(requests[::2])
    for request in requests[1:50:2]:
        queue.remove_request(request)
    remaining = sorted(requests[51::2], key=lambda r: (r.priority, r.arrival_time, r.request_id))
    assert ids(queue) == [r.request_id for r in remaining]
    assert len(queue._heap) <= 2 * len(queue) + 8  # compacted
    readded = requests[0]
    queue.add_request(readded)  # a tombstone of it may remain; the live entry wins
    assert readded in queue and len(queue) == len(remaining) + 1


# --- contracts with teeth: broken variants must be refuted -----------------------------


AppendingPrepend = broken_class(
    FCFSRequestQueue,
    "AppendingPrepend",
    Change(
        "prepend_request",
        "prepend puts the request at the back",
        "self._items.appendleft(request)",
        "self._items.append(request)",
    ),
)


NonReversingPrepend = broken_class(
    FCFSRequestQueue,
    "NonReversingPrepend",
    Change(
        "prepend_requests",
        "prepend_requests keeps the other queue's order",
        "self._items.extendleft(incoming)",
        "self._items.extendleft(reversed(incoming))",
    ),
)


BackPop = broken_class(
    FCFSRequestQueue,
    "BackPop",
    Change(
        "pop_request",
        "pop takes the back",
        "request = self._items.popleft()",
        "request = self._items.pop()",
    ),
)


GreedyRemove = broken_class(
    FCFSRequestQueue,
    "GreedyRemove",
    Change(
        "remove_request",
        "remove takes a neighbour with it",
        "del self._index[request.request_id]",
        "del self._index[request.request_id]\n"
        "    if self._items:\n"
        "        gone = self._items.pop()\n"
        "        del self._index[gone.request_id]",
    ),
)


MisindexedAdd = broken_class(
    FCFSRequestQueue,
    "MisindexedAdd",
    Change(
        "add_request",
        "add indexes the request under another id",
        "self._index[request_id] = request",
        "self._index[request_id.upper()] = request",
    ),
)


LateFirstPriority = broken_class(
    PriorityRequestQueue,
    "LateFirstPriority",
    Change(
        "pop_request",
        "pop takes the largest key and breaks the heap",
        "_key, _seq, request = heapq.heappop(self._heap)",
        "latest = max((e for e in self._heap if e[2] is not _REMOVED), key=lambda e: e[0])\n"
        "    self._heap.remove(latest)\n"
        "    request = latest[2]",
    ),
)


TwoPerRemoveMany = broken_class(
    FCFSRequestQueue,
    "TwoPerRemoveMany",
    Change(
        "remove_requests",
        "remove_requests removes one request too many",
        "self._items = _without(self._items, list(present.values()))",
        "self._items = _without(self._items, list(present.values()))\n"
        "    if self._items:\n"
        "        gone = self._items.popleft()\n"
        "        del self._index[gone.request_id]",
    ),
)


@pytest.mark.contracts
@pytest.mark.parametrize(
    "cls, action, requirement",
    [
        (AppendingPrepend, lambda q: q.prepend_request(Request("new")), "RQ-FCFS-3"),
        (
            NonReversingPrepend,
            lambda q: q.prepend_requests(filled(FCFSRequestQueue, "x", "y")),
            "RQ-FCFS-4",
        ),
        (BackPop, lambda q: q.pop_request(), "RQ-ALL-4"),
        (GreedyRemove, lambda q: q.remove_request(q.peek_request()), "RQ-ALL-6"),
        (MisindexedAdd, lambda q: q.add_request(Request("new")), "RQ-IMPL-1"),
        (LateFirstPriority, lambda q: q.pop_request(), "RQ-ALL-4"),
        (TwoPerRemoveMany, lambda q: q.remove_requests([q.peek_request()]), "RQ-ALL-7"),
    ],
)
def test_contracts_refute_broken_variants(cls: type, action: Any, requirement: str) -> None:
    """Each contract has teeth: a broken variant raises a violation naming the requirement."""
    queue = cls()
    correct: Any = cls.__bases__[0]  # fill with the correct parent's add_request
    for i, name in enumerate(("a", "b", "c")):
        correct.add_request(queue, Request(name, priority=i, arrival_time=float(i)))
    with pytest.raises(icontract.ViolationError, match=requirement):
        action(queue)


# Broken variants of the clauses that share one postcondition per method (RQ-COST-1): the
# error still names the clause that fails. Some clauses are cheap (checked by default),
# others whole-structure (checked under deep checks, which tests/conftest.py turns on).


FrontAdd = broken_class(
    FCFSRequestQueue,
    "FrontAdd",
    Change(
        "add_request",
        "add puts the request at the front",
        "self._items.append(request)",
        "self._items.appendleft(request)",
    ),
)


LosingAdd = broken_class(
    FCFSRequestQueue,
    "LosingAdd",
    Change(
        "add_request",
        "add accepts the request and never queues it",
        "self._items.append(request)\n    self._index[request_id] = request",
        "pass",
    ),
)


SecondPeek = broken_class(
    FCFSRequestQueue,
    "SecondPeek",
    Change(
        "peek_request",
        "peek returns the second request",
        "return self._items[0]",
        "return self._items[1]",
    ),
)


UnindexedPop = broken_class(
    FCFSRequestQueue,
    "UnindexedPop",
    Change(
        "pop_request",
        "pop leaves the request in the deque and drops it from the index",
        "request = self._items.popleft()",
        "request = self._items[0]",
    ),
)


SkippingPop = broken_class(
    FCFSRequestQueue,
    "SkippingPop",
    Change(
        "pop_request",
        "pop changes the order of the rest",
        "return request",
        "self._items.rotate(-1)\n    return request",
    ),
)


ShufflingAdd = broken_class(
    FCFSRequestQueue,
    "ShufflingAdd",
    Change(
        "add_request",
        "add swaps the two requests behind the front",
        "self._index[request_id] = request",
        "self._index[request_id] = request\n"
        "    if len(self._items) > 2:\n"
        "        self._items[1], self._items[2] = self._items[2], self._items[1]",
    ),
)


DrainingPrepend = broken_class(
    FCFSRequestQueue,
    "DrainingPrepend",
    Change(
        "prepend_requests",
        "prepend_requests takes a request out of the other queue",
        "self._index.update(by_id)",
        "self._index.update(by_id)\n    requests.pop_request()",
    ),
)


UnsiftedPriority = broken_class(
    PriorityRequestQueue,
    "UnsiftedPriority",
    Change(
        "_push",
        "no sift: the heap property breaks",
        "heapq.heappush(self._heap, entry)",
        "self._heap.append(entry)",
    ),
)


ClampedPriority = broken_class(
    PriorityRequestQueue,
    "ClampedPriority",
    Change(
        "_push",
        "negative priorities are clamped to 0",
        "(request.priority, request.arrival_time, request_id)",
        "(max(request.priority, 0), request.arrival_time, request_id)",
    ),
)


@pytest.mark.contracts
@pytest.mark.parametrize(
    "cls, action, requirement, deep",
    [
        (FrontAdd, lambda q: q.add_request(Request("new", arrival_time=9.0)), "RQ-FCFS-1", False),
        (LosingAdd, lambda q: q.add_request(Request("new", arrival_time=9.0)), "RQ-ALL-1", False),
        (SecondPeek, lambda q: q.peek_request(), "RQ-ALL-5", False),
        (UnindexedPop, lambda q: q.pop_request(), "RQ-IMPL-1", False),
        (SkippingPop, lambda q: q.pop_request(), "RQ-FCFS-2", False),
        (
            ShufflingAdd,
            lambda q: q.add_request(Request("new", arrival_time=9.0)),
            "RQ-FCFS-1",
            True,
        ),
        (
            DrainingPrepend,
            lambda q: q.prepend_requests(filled(FCFSRequestQueue, "x", "y")),
            "RQ-ALL-8",
            False,
        ),
        (
            UnsiftedPriority,  # below b's key, above the minimum: only the heap breaks
            lambda q: q.add_request(Request("new", priority=1, arrival_time=0.5)),
            "RQ-PRI-6",
            True,
        ),
        (
            ClampedPriority,
            lambda q: q.add_request(Request("new", priority=-5, arrival_time=9.0)),
            "RQ-PRI-1",
            False,
        ),
    ],
)
def test_each_clause_of_a_shared_postcondition_is_named(
    cls: type, action: Any, requirement: str, deep: bool
) -> None:
    """RQ-COST-1: cheap clauses catch their bug with deep checks off, deep ones with them on."""
    was = queueref.config.deep_checks()
    try:
        queueref.config.set_deep_checks(deep)
        queue = cls()
        correct: Any = cls.__bases__[0]
        for i, name in enumerate(("a", "b", "c")):
            correct.add_request(queue, Request(name, priority=i, arrival_time=float(i)))
        with pytest.raises(icontract.ViolationError, match=requirement):
            action(queue)
    finally:
        queueref.config.set_deep_checks(was)


def test_deep_clauses_stay_off_by_default() -> None:
    """RQ-COST-1: the whole-structure clause that catches ShufflingAdd runs only under deep
    checks, so without them the broken add passes (and with them it is refuted, above)."""
    was = queueref.config.deep_checks()
    try:
        queueref.config.set_deep_checks(False)
        queue = ShufflingAdd()
        for name in ("a", "b", "c"):
            FCFSRequestQueue.add_request(queue, Request(name))
        queue.add_request(Request("d"))
        assert ids(queue) == ["a", "c", "b", "d"]
    finally:
        queueref.config.set_deep_checks(was)


class ListQueue(RequestQueue):
    """A foreign subclass (no index): the ABC contracts bind it too."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.scans = 0

    def add_request(self, request: Any) -> None:
        self.items.append(request)

    def pop_request(self) -> Any:
        if not self.items:
            raise IndexError("empty")
        return self.items.pop(0)

    def peek_request(self) -> Any:
        if not self.items:
            raise IndexError("empty")
        return self.items[0]

    def prepend_request(self, request: Any) -> None:
        self.items.insert(0, request)

    def prepend_requests(self, requests: RequestQueue) -> None:
        for request in requests:
            self.items.insert(0, request)

    def remove_request(self, request: Any) -> None:
        self.items.remove(request)

    def remove_requests(self, requests: Any) -> None:
        gone = {id(r) for r in requests}
        self.items = [r for r in self.items if id(r) not in gone]

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        self.scans += 1
        return iter(list(self.items))


@pytest.mark.contracts
def test_abc_contracts_bind_foreign_subclasses_only_cheaply_by_default() -> None:
    """RQ-COST-1: without deep checks no default contract scans a foreign queue."""
    was = queueref.config.deep_checks()
    try:
        queueref.config.set_deep_checks(False)
        queue = ListQueue()
        r = Request("a")
        queue.add_request(r)
        queue.add_request(r)  # not detected: detecting needs a scan
        assert queue.scans == 0
        queueref.config.set_deep_checks(True)
        with pytest.raises(ValueError, match="RQ-ALL-2"):
            queue.add_request(r)  # deep checks scan, and catch it
        assert queue.scans > 0
    finally:
        queueref.config.set_deep_checks(was)


@pytest.mark.contracts
def test_foreign_subclass_with_a_lying_bool_is_refuted() -> None:
    """RQ-ALL-10: the ABC's contract on __bool__ binds subclasses."""

    LyingBool = broken_class(
        ListQueue,
        "LyingBool",
        Change("__bool__", "bool is True, empty or not", "return bool(self.items)", "return True"),
    )

    with pytest.raises(icontract.ViolationError, match="RQ-ALL-10"):
        bool(LyingBool())


def test_body_checks_hold_with_contracts_off() -> None:
    """RQ-ALL-2, RQ-ALL-6, RQ-POL-2 under `python -O`: bad input is still rejected."""
    program = """
import icontract
from queueref import FCFSRequestQueue, PriorityRequestQueue, Request, create_request_queue
assert not __debug__
for cls in (FCFSRequestQueue, PriorityRequestQueue):
    q = cls(); r = Request("r"); q.add_request(r)
    for call in (lambda: q.add_request(r), lambda: q.add_request(Request("r")),
                 lambda: q.remove_request(Request("x")), lambda: create_request_queue("x")):
        try:
            call()
        except ValueError:
            pass
        else:
            raise SystemExit("accepted bad input")
    assert len(q) == 1
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-O", "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.guard
@pytest.mark.parametrize("cls", QUEUE_CLASSES)
@pytest.mark.parametrize(
    "fields, error, field",
    [
        ({"request_id": 7, "priority": 0, "arrival_time": 0.0}, TypeError, "request_id"),
        ({"request_id": "x", "priority": "high", "arrival_time": 0.0}, TypeError, "priority"),
        ({"request_id": "x", "priority": 0, "arrival_time": None}, TypeError, "arrival_time"),
        ({"request_id": "x", "priority": 0, "arrival_time": float("nan")}, ValueError, "NaN"),
    ],
)
def test_unorderable_fields_are_rejected_before_the_queue_changes(
    cls: type[RequestQueue], fields: dict[str, Any], error: type, field: str
) -> None:
    """RQ-REQ-3: a key that cannot be ordered never reaches the heap."""
    queue = filled(cls, "a", "b")
    bogus = type("Bogus", (), fields)()
    for method in (queue.add_request, queue.prepend_request):
        with pytest.raises(error, match=field):
            method(bogus)
    other = FCFSRequestQueue()
    other._items.append(bogus)  # smuggled past the checks, as a foreign queue might
    other._index[fields["request_id"]] = bogus
    with pytest.raises(error, match=field):
        queue.prepend_requests(other)
    assert ids(queue) == ["a", "b"] and len(queue) == 2
    assert [queue.pop_request().request_id for _ in range(2)] == ["a", "b"]
    assert list(queue) == [] and not queue


@pytest.mark.guard
@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"request_id": 5}, TypeError),
        ({"request_id": "a", "priority": 1.5}, TypeError),
        ({"request_id": "a", "arrival_time": "now"}, TypeError),
        ({"request_id": "a", "arrival_time": float("nan")}, ValueError),
        ({"request_id": "a", "n": 0}, ValueError),
        ({"request_id": "a", "n": "2"}, ValueError),
        ({"request_id": "a", "num_prompt_tokens": -1}, ValueError),
        ({"request_id": "a", "status": 99}, ValueError),
    ],
)
def test_request_constructor_rejects_bad_fields(kwargs: dict[str, Any], error: type) -> None:
    """RQ-REQ-4: with contracts on; the -O test below covers them off."""
    with pytest.raises(error, match="RQ-REQ-4|RQ-REQ-3|RequestStatus"):
        Request(**kwargs)


def test_request_constructor_checks_hold_with_contracts_off() -> None:
    """RQ-REQ-4 under `python -O`."""
    program = """
from queueref import Request
assert not __debug__
for kwargs, error in [({"request_id": 5}, TypeError), ({"request_id": "a", "n": 0}, ValueError),
                      ({"request_id": "a", "num_prompt_tokens": -1}, ValueError)]:
    try:
        Request(**kwargs)
    except error:
        continue
    raise SystemExit(f"accepted {kwargs}")
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-O", "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
