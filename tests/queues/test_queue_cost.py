"""The cheap paths of the queues keep their semantics (issue 16).

FCFS iteration reads the deque itself and copies it only when the queue changes
while an iterator is still alive (copy on write); the caller must see exactly
what a copy made by `__iter__` would show. Expected orders are written out by
hand from the spec (RQ-ALL-9, RQ-FCFS-5), never computed by the code under test.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from method_variants import Change, broken_class

from queueref import FCFSRequestQueue, Request


def fcfs(*names: str) -> FCFSRequestQueue:
    queue = FCFSRequestQueue()
    for name in names:
        queue.add_request(Request(name))
    return queue


def other_queue(*names: str) -> FCFSRequestQueue:
    return fcfs(*names)


#: A change made in the middle of an iteration over a queue of a, b, c, d (after the first
#: request was read), and the queue it leaves, front to back.
CHANGES: list[tuple[str, Callable[[FCFSRequestQueue], object], list[str]]] = [
    ("add", lambda q: q.add_request(Request("x")), ["a", "b", "c", "d", "x"]),
    ("prepend", lambda q: q.prepend_request(Request("x")), ["x", "a", "b", "c", "d"]),
    ("pop", lambda q: q.pop_request(), ["b", "c", "d"]),
    (
        "prepend_requests",
        lambda q: q.prepend_requests(other_queue("x", "y")),
        ["y", "x", "a", "b", "c", "d"],
    ),
    ("remove", lambda q: q.remove_request(q.peek_request()), ["b", "c", "d"]),
    ("remove_requests one", lambda q: q.remove_requests([q.peek_request()]), ["b", "c", "d"]),
    ("remove_requests two", lambda q: q.remove_requests(list(q)[1:3]), ["a", "d"]),
]


def iterate_while_changing(
    queue: FCFSRequestQueue, change: Callable[[FCFSRequestQueue], object]
) -> list[str]:
    """The ids an iteration yields when `change` runs after its first request."""
    seen: list[str] = []
    for request in queue:
        seen.append(request.request_id)
        if len(seen) == 1:
            change(queue)
    return seen


@pytest.mark.parametrize("name, change, after", CHANGES, ids=[c[0] for c in CHANGES])
def test_a_change_while_iterating_leaves_the_iteration_as_it_was(
    name: str, change: Callable[[FCFSRequestQueue], object], after: list[str]
) -> None:
    """RQ-ALL-9, RQ-FCFS-5: the iteration yields the queue as it was when it began; the
    change itself takes effect."""
    queue = fcfs("a", "b", "c", "d")
    assert iterate_while_changing(queue, change) == ["a", "b", "c", "d"]
    assert [r.request_id for r in queue] == after


def test_two_iterations_over_the_same_queue_each_keep_their_view() -> None:
    """RQ-ALL-9: an iterator made before a change and one made after it each see their own
    queue."""
    queue = fcfs("a", "b")
    first = iter(queue)
    queue.add_request(Request("c"))
    second = iter(queue)
    queue.pop_request()
    assert [r.request_id for r in first] == ["a", "b"]
    assert [r.request_id for r in second] == ["a", "b", "c"]
    assert [r.request_id for r in queue] == ["b", "c"]


def test_no_copy_when_no_iterator_is_alive() -> None:
    """The copy is paid only by a change made while an iterator is alive: after a finished
    loop the next change works on the same deque."""
    queue = fcfs("a", "b", "c")
    for _ in queue:
        pass
    before = id(queue._items)
    queue.add_request(Request("d"))
    queue.pop_request()
    assert id(queue._items) == before
    live = iter(queue)
    queue.add_request(Request("e"))  # `live` still reads the old deque: now it is copied
    assert id(queue._items) != before
    assert [r.request_id for r in live] == ["b", "c", "d"]


LiveIteration = broken_class(
    FCFSRequestQueue,
    "LiveIteration",
    Change(
        "__iter__",
        "iterates the deque itself and never copies it",
        "self._iterated = True",
        "pass",
    ),
)


def test_the_iteration_check_fails_on_a_queue_that_does_not_copy() -> None:
    """The check above has teeth: on a queue that iterates its live deque, a change during
    the loop breaks the iteration (CPython's deque raises)."""
    queue = LiveIteration()
    for name in ("a", "b", "c", "d"):
        FCFSRequestQueue.add_request(queue, Request(name))
    with pytest.raises(RuntimeError, match="mutated during iteration"):
        iterate_while_changing(queue, lambda q: q.add_request(Request("x")))
