"""Bugs that need a long queue, and the knobs that reach them (ORC-SIZE-1, ORC-SIZE-2).

The default budget (200 programs of at most 20 calls) keeps queues short, so
it is fast; a bug that appears only beyond 32 or 64 queued requests is out of
its reach. `initial_requests=(50, 500)` (every program starts by adding a
generated batch of 50 to 500 requests) and `max_calls=` reach them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from method_variants import Change, broken_class
from test_oracle import PlainFCFS, PlainPriority, run_program, with_factory

import queueref.config
from queueref import FCFSRequestQueue, PriorityRequestQueue
from queueref.oracle import ConformanceError, check_request_queue
from queueref.oracle.clauses import describe
from queueref.oracle.program_text import batch_keys, batch_keys_literal


@pytest.fixture(autouse=True)
def without_deep_checks() -> Iterator[None]:
    """Whole-structure contracts (on in queueref's tests, off for users) cost O(n) a call;
    with hundreds of requests replayed while shrinking they would dominate."""
    queueref.config.set_deep_checks(False)
    yield
    queueref.config.set_deep_checks(True)


Bounded32 = broken_class(
    PlainFCFS,
    "Bounded32",
    Change(
        "__init__",
        "a deque(maxlen=32): from the 33rd request on, the front is silently dropped",
        "deque()",
        "deque(maxlen=32)",
    ),
    Change(
        "remove_requests",
        "(the rebuilt deque bounded too)",
        "deque(r for r in self._items if r not in gone)",
        "deque((r for r in self._items if r not in gone), maxlen=32)",
    ),
)


HeapBreaksAfter64 = broken_class(
    PlainPriority,
    "HeapBreaksAfter64",
    Change(
        "add_request",
        "an 'optimisation': past 64 entries a request is appended without sifting it up",
        "heapq.heappush(self._heap, (self.key(request), request))",
        "if len(self._heap) >= 64:\n"
        "        self._heap.append((self.key(request), request))\n"
        "    else:\n"
        "        heapq.heappush(self._heap, (self.key(request), request))",
    ),
)


class Counting(FCFSRequestQueue):
    """The reference FCFS queue, counting the programs and the longest queue seen."""

    programs = 0
    longest = 0

    def __init__(self) -> None:
        super().__init__()
        Counting.programs += 1

    def add_request(self, request: Any) -> None:
        super().add_request(request)
        Counting.longest = max(Counting.longest, len(self))


def test_the_default_budget_keeps_programs_short() -> None:
    """ORC-SIZE-1: by default at most 200 programs (plus the other queues they build) of at
    most 20 calls: the queue never reaches 32 requests, so the check stays fast."""
    Counting.programs = Counting.longest = 0
    check_request_queue(Counting, "fcfs")
    assert Counting.longest < 32
    # every program builds q and at most one other queue per call
    assert Counting.programs <= 200 * (1 + 20)


@pytest.mark.parametrize(
    ("queue", "policy"), [(Bounded32, "fcfs"), (HeapBreaksAfter64, "priority")]
)
def test_the_default_budget_cannot_reach_long_queue_bugs(queue: Any, policy: str) -> None:
    """ORC-SIZE-2: why the knobs exist: within 20 calls these bugs do not show."""
    assert check_request_queue(queue, policy) is None


@pytest.mark.parametrize(
    ("queue", "policy", "reference", "batch", "clause"),
    [
        # Its own contract (RequestQueue's) sees the 33rd add not growing the queue.
        (Bounded32, "fcfs", FCFSRequestQueue, (50, 500), "RQ-ALL-1"),
        # Shrinking replays the whole batch hundreds of times: a smaller range is quicker.
        (HeapBreaksAfter64, "priority", PriorityRequestQueue, (50, 100), "RQ-PRI-1"),
    ],
)
def test_a_starting_batch_catches_long_queue_bugs(
    queue: Any, policy: str, reference: Any, batch: tuple[int, int], clause: str
) -> None:
    """ORC-SIZE-2, ORC-CLAUSE-1: programs that start with 50 or more requests catch both bugs.

    The failing program writes the batch as one list `b` and one loop, and it
    reproduces: it fails on the buggy queue and runs clean on the reference.
    """
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(queue, policy, initial_requests=batch, max_examples=30, max_failures=1)
    error = caught.value
    assert error.reports[0].clause == clause
    assert describe(clause) in str(error)
    assert f"initial_requests={batch}" in str(error)
    assert "b = [Request(f'b{i}', priority=p, arrival_time=t) for i, (p, t) in" in error.program
    assert re.search(
        r"^for request in b(\[:\d+\])?:\n    q.add_request\(request\)$", error.program, re.M
    )
    assert run_program(error.program) is not None
    assert run_program(with_factory(error.program, queue.__name__, reference)) is None


class CallCounting(FCFSRequestQueue):
    """Counts, per queue, the calls a rule makes (not the checks after every step)."""

    most = 0

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _count(self) -> None:
        self.calls += 1
        CallCounting.most = max(CallCounting.most, self.calls)

    def add_request(self, request: Any) -> None:
        self._count()
        super().add_request(request)

    def prepend_request(self, request: Any) -> None:
        self._count()
        super().prepend_request(request)

    def pop_request(self) -> Any:
        self._count()
        return super().pop_request()

    def remove_requests(self, requests: Any) -> None:
        self._count()
        super().remove_requests(requests)


@pytest.mark.parametrize("max_calls", [5, 60])
def test_max_calls_bounds_the_calls_of_a_program(max_calls: int) -> None:
    """ORC-SIZE-1: no program makes more than max_calls calls; longer ones are made when asked."""
    CallCounting.most = 0
    check_request_queue(CallCounting, "fcfs", max_calls=max_calls, max_examples=30)
    assert CallCounting.most <= max_calls
    assert CallCounting.most > min(max_calls, 20) // 2


@pytest.mark.guard
@pytest.mark.parametrize(
    "options",
    [
        {"max_calls": 0},
        {"max_failures": 0},
        {"max_examples": 0},
        {"initial_requests": (5, 2)},
        {"initial_requests": -1},
        {"initial_requests": (0, 10_000)},
        {"initial_requests": "50-500"},
        {"ties": "some"},
    ],
)
def test_a_budget_out_of_range_is_rejected_before_anything_runs(options: Any) -> None:
    """ORC-SIZE-3: a bad option raises ValueError naming it; the factory is never called."""
    calls: list[int] = []

    def factory() -> FCFSRequestQueue:
        calls.append(1)
        return FCFSRequestQueue()

    name = next(iter(options))
    with pytest.raises(ValueError, match=name):
        check_request_queue(factory, "fcfs", **options)
    assert calls == []


@pytest.mark.parametrize(
    ("pattern", "size", "literal"),
    [
        ([(0, 0.0)], 64, "[(0, 0.0)] * 64"),
        ([(0, 0.0), (-1, 1.0)], 64, "[(0, 0.0), (-1, 1.0)] * 32"),
        ([(0, 0.0), (-1, 0.0)], 65, "([(0, 0.0), (-1, 0.0)] * 33)[:65]"),
    ],
)
def test_a_batch_is_one_size_and_a_short_pattern_written_in_one_expression(
    pattern: list[tuple[int, float]], size: int, literal: str
) -> None:
    """ORC-SIZE-2, ORC-SIZE-4: the batch's keys are a pattern repeated to a size, and the
    program writes them as one expression that evaluates to exactly those keys."""
    assert batch_keys_literal(pattern, size) == literal
    keys = eval(literal)  # the program's own text, as the pasted test runs it
    assert len(keys) == size
    assert keys == batch_keys(pattern, size)
    assert keys[: len(pattern)] == pattern and keys[-1] == pattern[(size - 1) % len(pattern)]
