"""The interface laws of `RequestQueue`, on both reference queues.

Two kinds of test. Property tests build a queue from a random sequence of
operations and then check one law each, written out here from
specs/request-queue.md: peek is the next pop, iteration is the successive
pops, len matches iteration, a removed request is absent. And the laws-only
state machine (`QueueMachine` without an expected side, what
`check_queue_laws` runs) on both reference queues.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given
from hypothesis.stateful import run_state_machine_as_test

from queueref import FCFSRequestQueue, PriorityRequestQueue, Request, RequestQueue
from queueref.oracle.variants import StrictQueueMachine

QUEUES = [FCFSRequestQueue, PriorityRequestQueue]

# One operation: ("add" | "prepend", priority, arrival) or ("pop", 0, 0.0).
OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["add", "prepend", "pop"]),
        st.integers(min_value=-1, max_value=1),
        st.sampled_from([0.0, 1.0, 2.0]),
    ),
    max_size=12,
)


def build(cls: type[RequestQueue], operations: list[tuple[str, int, float]]) -> RequestQueue:
    """A queue after `operations`; each added request gets a fresh id."""
    queue = cls()
    for number, (op, priority, arrival_time) in enumerate(operations):
        if op == "pop":
            if queue:
                queue.pop_request()
            continue
        request = Request(f"r{number}", priority=priority, arrival_time=arrival_time)
        if op == "add":
            queue.add_request(request)
        else:
            queue.prepend_request(request)
    return queue


@pytest.mark.parametrize("cls", QUEUES)
@given(operations=OPERATIONS)
def test_peek_is_the_next_pop(cls: type[RequestQueue], operations: Any) -> None:
    """RQ-ALL-4, RQ-ALL-5: peek_request() is what pop_request() returns; empty -> IndexError."""
    queue = build(cls, operations)
    while queue:
        peeked = queue.peek_request()
        assert queue.pop_request() is peeked
    with pytest.raises(IndexError):
        queue.peek_request()
    with pytest.raises(IndexError):
        queue.pop_request()


@pytest.mark.parametrize("cls", QUEUES)
@given(operations=OPERATIONS)
def test_iteration_is_the_successive_pops(cls: type[RequestQueue], operations: Any) -> None:
    """RQ-ALL-9: iterating yields the pop order and leaves the queue as it was."""
    queue = build(cls, operations)
    iterated = list(queue)
    assert list(queue) == iterated
    popped = [queue.pop_request() for _ in range(len(iterated))]
    assert popped == iterated
    assert not queue


@pytest.mark.parametrize("cls", QUEUES)
@given(operations=OPERATIONS)
def test_len_and_bool_match_iteration(cls: type[RequestQueue], operations: Any) -> None:
    """RQ-ALL-10, RQ-ALL-1, RQ-ALL-4: len is the number iterated; bool is len > 0."""
    queue = build(cls, operations)
    added = sum(1 for op, _, _ in operations if op != "pop")
    assert len(queue) == len(list(queue)) <= added
    assert bool(queue) == (len(queue) > 0)


@pytest.mark.parametrize("cls", QUEUES)
@given(operations=OPERATIONS, data=st.data())
def test_a_removed_request_is_absent(cls: type[RequestQueue], operations: Any, data: Any) -> None:
    """RQ-ALL-6, RQ-ALL-7: a removed request is gone, the rest keep their order."""
    queue = build(cls, operations)
    before = list(queue)
    if not before:
        with pytest.raises(ValueError):
            queue.remove_request(Request("absent"))
        return
    victim = data.draw(st.sampled_from(before))
    queue.remove_request(victim)
    assert victim not in list(queue)
    assert list(queue) == [r for r in before if r is not victim]
    with pytest.raises(ValueError):
        queue.remove_request(victim)
    queue.remove_requests([victim, Request(victim.request_id)])  # absent ones are ignored
    assert list(queue) == [r for r in before if r is not victim]


@pytest.mark.parametrize("cls", QUEUES)
def test_reference_queue_obeys_the_laws_machine(cls: type[RequestQueue]) -> None:
    """RQ-ALL-1..10 through the laws-only machine (no expected order), strict mode.

    Peek is the next pop and pop leaves the rest of the iteration (RQ-ALL-4,
    RQ-ALL-5, RQ-ALL-9); len and bool agree (RQ-ALL-10); nothing lost or
    duplicated; remove and remove_requests (RQ-ALL-6, RQ-ALL-7);
    prepend_requests moves every request and leaves the other queue
    (RQ-ALL-8); duplicates and taken ids rejected (RQ-ALL-2, RQ-ALL-3).
    """
    run_state_machine_as_test(lambda: StrictQueueMachine(cls, None))  # type: ignore[arg-type]
