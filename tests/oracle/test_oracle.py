"""The oracle's queue checks: `check_request_queue` and `check_queue_laws`.

Every seeded bug of the oracle issue is a test here, run with the default
budget (`max_examples=200`): the check must raise `ConformanceError`, the
failing program must reproduce the failure when executed, and the same
program must run clean against the reference queue (so its expectations are
the reference's). The queues below are written the way a vLLM plugin author
would write them: a deque or a heap, vLLM-style, subclassing
`queueref.RequestQueue` (whose contracts then bind them too).
"""

from __future__ import annotations

import heapq
import itertools
import re
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import hypothesis
import pytest
from method_variants import VARIANT_CHANGES, Change, broken_class

from queueref import FCFSRequestQueue, PriorityRequestQueue, Request, RequestQueue
from queueref.oracle import ConformanceError, check_queue_laws, check_request_queue
from queueref.oracle.clauses import describe
from queueref.oracle.errors import ConformanceFailure
from queueref.oracle.failure_report import conformance_error

# --- plain, faithful re-implementations (vLLM-style) ---------------------------


class PlainFCFS(RequestQueue):
    """vLLM's FCFSRequestQueue, on a deque: no id checks (they are preconditions)."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()

    def add_request(self, request: Any) -> None:
        self._items.append(request)

    def pop_request(self) -> Any:
        return self._items.popleft()

    def peek_request(self) -> Any:
        if not self._items:
            raise IndexError("peek from an empty queue")
        return self._items[0]

    def prepend_request(self, request: Any) -> None:
        self._items.appendleft(request)

    def prepend_requests(self, requests: RequestQueue) -> None:
        self._items.extendleft(requests)

    def remove_request(self, request: Any) -> None:
        self._items.remove(request)

    def remove_requests(self, requests: Iterable[Any]) -> None:
        gone = set(requests)
        self._items = deque(r for r in self._items if r not in gone)

    def __bool__(self) -> bool:
        return len(self._items) > 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items))


class PlainPriority(RequestQueue):
    """vLLM's PriorityRequestQueue, on a heap of (key, request)."""

    def __init__(self) -> None:
        self._heap: list[tuple[Any, Any]] = []

    def key(self, request: Any) -> Any:
        return (request.priority, request.arrival_time, request.request_id)

    def add_request(self, request: Any) -> None:
        heapq.heappush(self._heap, (self.key(request), request))

    def pop_request(self) -> Any:
        return heapq.heappop(self._heap)[1]

    def peek_request(self) -> Any:
        if not self._heap:
            raise IndexError("peek from an empty queue")
        return self._heap[0][1]

    def prepend_request(self, request: Any) -> None:
        self.add_request(request)

    def prepend_requests(self, requests: RequestQueue) -> None:
        for request in requests:
            self.add_request(request)

    def remove_request(self, request: Any) -> None:
        for index, (_, queued) in enumerate(self._heap):
            if queued is request:
                del self._heap[index]
                heapq.heapify(self._heap)
                return
        raise ValueError("not in the queue")

    def remove_requests(self, requests: Iterable[Any]) -> None:
        gone = set(requests)
        self._heap = [entry for entry in self._heap if entry[1] not in gone]
        heapq.heapify(self._heap)

    def __bool__(self) -> bool:
        return len(self._heap) > 0

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Any]:
        heap = list(self._heap)
        while heap:
            yield heapq.heappop(heap)[1]


class DuckFCFS:
    """Not a queueref.RequestQueue at all (like vLLM's own class): only the interface."""

    def __init__(self) -> None:
        self._items: list[Any] = []

    def add_request(self, request: Any) -> None:
        self._items.append(request)

    def pop_request(self) -> Any:
        if not self._items:
            raise IndexError("pop from an empty queue")
        return self._items.pop(0)

    def peek_request(self) -> Any:
        if not self._items:
            raise IndexError("peek from an empty queue")
        return self._items[0]

    def prepend_request(self, request: Any) -> None:
        self._items.insert(0, request)

    def prepend_requests(self, requests: Any) -> None:
        for request in requests:
            self._items.insert(0, request)

    def remove_request(self, request: Any) -> None:
        self._items.remove(request)

    def remove_requests(self, requests: Iterable[Any]) -> None:
        gone = list(requests)
        self._items = [r for r in self._items if all(r is not g for g in gone)]

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items))


# --- the seeded bugs of the oracle issue ---------------------------------------


NoReversal = broken_class(
    PlainFCFS,
    "NoReversal",
    Change(
        "prepend_requests",
        "prepend_requests without the reversal",
        "self._items.extendleft(requests)",
        "self._items = deque([*requests, *self._items])",
    ),
)


RemoveRequestsRaises = broken_class(
    PlainFCFS,
    "RemoveRequestsRaises",
    Change(
        "remove_requests",
        "remove_requests raising on an absent member",
        "gone = set(requests)\n    self._items = deque(r for r in self._items if r not in gone)",
        "for request in requests:\n        self._items.remove(request)",
    ),
)


PopFromBack = broken_class(
    PlainFCFS,
    "PopFromBack",
    Change(
        "pop_request",
        "FCFS pop from the back",
        "return self._items.popleft()",
        "return self._items.pop()",
    ),
)


LaterArrivalFirst = broken_class(
    PlainPriority,
    "LaterArrivalFirst",
    Change(
        "key",
        "priority ties broken by later arrival first",
        "request.arrival_time",
        "-request.arrival_time",
    ),
)


PeekMutates = broken_class(
    PlainFCFS,
    "PeekMutates",
    Change(
        "peek_request",
        "a peek_request that mutates (it rotates the deque)",
        "return self._items[0]",
        "request = self._items.popleft()\n    self._items.append(request)\n    return request",
    ),
)


IterDrains = broken_class(
    PlainPriority,
    "IterDrains",
    Change(
        "__iter__",
        "a priority __iter__ that drains the heap",
        "heap = list(self._heap)\n    while heap:\n        yield heapq.heappop(heap)[1]",
        "while self._heap:\n        yield heapq.heappop(self._heap)[1]",
    ),
)


LenWrongAfterRemoveRequests = broken_class(
    PlainFCFS,
    "LenWrongAfterRemoveRequests",
    Change(
        "__init__",
        "a cached length",
        "self._items: deque[Any] = deque()",
        "self._items: deque[Any] = deque()\n    self._count = 0",
    ),
    Change(
        "add_request",
        "(counted)",
        "self._items.append(request)",
        "self._items.append(request)\n    self._count += 1",
    ),
    Change(
        "pop_request",
        "(counted)",
        "return self._items.popleft()",
        "request = self._items.popleft()\n    self._count -= 1\n    return request",
    ),
    Change(
        "prepend_request",
        "(counted)",
        "self._items.appendleft(request)",
        "self._items.appendleft(request)\n    self._count += 1",
    ),
    Change(
        "prepend_requests",
        "(counted)",
        "self._items.extendleft(requests)",
        "incoming = list(requests)\n"
        "    self._items.extendleft(incoming)\n"
        "    self._count += len(incoming)",
    ),
    Change(
        "remove_request",
        "(counted)",
        "self._items.remove(request)",
        "self._items.remove(request)\n    self._count -= 1",
    ),
    Change(
        "remove_requests",
        "that remove_requests decrements by everything named",
        "gone = set(requests)\n    self._items = deque(r for r in self._items if r not in gone)",
        "named = list(requests)\n"
        "    self._items = deque(r for r in self._items if all(r is not x for x in named))\n"
        "    self._count -= len(named)",
    ),
    Change(
        "__len__",
        "(read)",
        "return len(self._items)",
        "return self._count",
    ),
    Change(
        "__bool__",
        "(read)",
        "return len(self._items) > 0",
        "return self._count > 0",
    ),
)


RemoveRemovesMore = broken_class(
    PlainPriority,
    "RemoveRemovesMore",
    Change(
        "remove_request",
        "remove_request removing more than one request (every one with the same key prefix)",
        "for index, (_, queued) in enumerate(self._heap):\n"
        "        if queued is request:\n"
        "            del self._heap[index]\n"
        "            heapq.heapify(self._heap)\n"
        "            return\n"
        '    raise ValueError("not in the queue")',
        "same = (request.priority, request.arrival_time)\n"
        "    kept = [e for e in self._heap if (e[1].priority, e[1].arrival_time) != same]\n"
        "    if len(kept) == len(self._heap):\n"
        '        raise ValueError("not in the queue")\n'
        "    self._heap = kept\n"
        "    heapq.heapify(self._heap)",
    ),
)


@dataclass(frozen=True)
class Seeded:
    queue: type[RequestQueue]
    policy: str
    reference: type[RequestQueue]
    must_mention: str  # a piece of the failing program written out by hand
    clause: str  # the requirement one of the failures must name (ORC-CLAUSE-1)


SEEDED_BUGS = [
    Seeded(NoReversal, "fcfs", FCFSRequestQueue, "q.prepend_requests(other1)", "RQ-FCFS-4"),
    Seeded(RemoveRequestsRaises, "fcfs", FCFSRequestQueue, "q.remove_requests(", "RQ-ALL-7"),
    Seeded(PopFromBack, "fcfs", FCFSRequestQueue, "q.pop_request()", "RQ-FCFS-2"),
    Seeded(LaterArrivalFirst, "priority", PriorityRequestQueue, "arrival_time=1.0", "RQ-PRI-1"),
    Seeded(PeekMutates, "fcfs", FCFSRequestQueue, "q.peek_request()", "RQ-ALL-5"),
    Seeded(IterDrains, "priority", PriorityRequestQueue, "list(", "RQ-ALL-9"),
    Seeded(LenWrongAfterRemoveRequests, "fcfs", FCFSRequestQueue, "q.remove_requests(", "RQ-ALL-7"),
    Seeded(RemoveRemovesMore, "priority", PriorityRequestQueue, "q.remove_request(", "RQ-ALL-6"),
]


def failing_line(program: str) -> int:
    """The 1-based line of the statement marked FAILS."""
    for number, line in enumerate(program.splitlines(), start=1):
        if "# FAILS" in line:
            return number
    raise AssertionError(f"no FAILS line in\n{program}")


def run_program(program: str) -> BaseException | None:
    """Execute a failing program; return what it raised (and check where), or None."""
    code = compile(program, "<failing program>", "exec", optimize=0)  # its asserts under -O too
    try:
        exec(code, {})
    except BaseException as exc:  # AssertionError, pytest's Failed, a contract, ...
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if f.filename == code.co_filename
        ]
        assert frames, "the program failed outside its own statements"
        assert frames[-1].lineno in (failing_line(program), failing_line(program) + 1), (
            f"failed at line {frames[-1].lineno}, not at the FAILS line\n{program}"
        )
        return exc
    return None


def with_factory(program: str, name: str, replacement: type[RequestQueue]) -> str:
    """The same program with the queue class replaced by `replacement`."""
    pattern = re.compile(rf"^from \S+ import {name}$", re.MULTILINE)
    assert pattern.search(program), program
    return pattern.sub(f"from queueref import {replacement.__name__} as {name}", program)


# --- check_request_queue --------------------------------------------------------


@pytest.mark.parametrize("bug", SEEDED_BUGS, ids=lambda bug: bug.queue.__name__)
def test_seeded_bug_is_caught_with_the_default_budget(bug: Seeded) -> None:
    """ORC-CRQ-1, ORC-CRQ-2, ORC-CRQ-3, ORC-SEED-1: each seeded bug of the issue is caught.

    ORC-CLAUSE-1: a failure names the clause the bug breaks; ORC-CRQ-4: the
    message names the Hypothesis version.

    The message holds a program that fails, when executed, at the line marked
    FAILS, and that runs clean with the reference queue in its place
    (RQ-FCFS-2, RQ-FCFS-4, RQ-PRI-1, RQ-ALL-5, RQ-ALL-6, RQ-ALL-7, RQ-ALL-9,
    RQ-ALL-10, RQ-PRI-5).
    """
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(bug.queue, bug.policy, max_failures=2)
    error = caught.value
    assert isinstance(error, AssertionError)
    message = str(error)
    assert f"{bug.queue.__name__} does not behave like queueref's {bug.policy!r}" in message
    assert "Shortest failing sequence (paste it into a test):" in message
    assert error.program in message.replace("\n    ", "\n")
    assert any(bug.must_mention in program for program in error.failures)
    assert f"q = {bug.queue.__name__}()" in error.program
    assert bug.clause in [report.clause for report in error.reports]
    assert describe(bug.clause) in message  # ORC-CLAUSE-1: "RQ-FCFS-4: prepend_requests ..."
    assert f"Found by Hypothesis {hypothesis.__version__}" in message  # ORC-CRQ-4
    for program in error.failures:
        assert run_program(program) is not None
        assert run_program(with_factory(program, bug.queue.__name__, bug.reference)) is None


@pytest.mark.parametrize(
    ("factory", "policy"),
    [(FCFSRequestQueue, "fcfs"), (PriorityRequestQueue, "priority")],
)
def test_reference_passes(factory: Any, policy: str) -> None:
    """ORC-CRQ-1: the reference agrees with itself, also in strict mode.

    (The model tests run the same machine on the reference at the profile's budget.)
    """
    assert check_request_queue(factory, policy, max_examples=50) is None
    assert check_request_queue(factory, policy, strict=True, max_examples=20) is None


@pytest.mark.parametrize(
    ("factory", "policy"),
    [(PlainFCFS, "fcfs"), (PlainPriority, "priority"), (DuckFCFS, "fcfs")],
)
def test_plain_reimplementation_passes(factory: Any, policy: str) -> None:
    """ORC-CRQ-1: a plain faithful re-implementation (even one that is no RequestQueue) passes."""
    assert check_request_queue(factory, policy, max_examples=60) is None


def test_strict_mode_requires_rejecting_precondition_violations() -> None:
    """ORC-CRQ-6, RQ-ALL-2, RQ-ALL-3: vLLM-style queues do not check ids; strict mode says so."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(DuckFCFS, "fcfs", strict=True)
    assert "with pytest.raises(" in caught.value.program
    assert "# FAILS: returns without raising" in caught.value.program


@pytest.mark.guard
def test_unknown_policy_is_rejected_before_anything_runs() -> None:
    """ORC-CRQ-7, RQ-POL-2: a bad policy raises ValueError; the factory is never called."""
    calls: list[int] = []

    def factory() -> RequestQueue:
        calls.append(1)
        return FCFSRequestQueue()

    with pytest.raises(ValueError, match="lifo"):
        check_request_queue(factory, "lifo")
    assert calls == []


def test_the_verdict_is_deterministic() -> None:
    """ORC-CRQ-4: the same queue gets the same message twice (derandomized, no database)."""
    first = second = ""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(NoReversal, "fcfs")
    first = str(caught.value)
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(NoReversal, "fcfs")
    second = str(caught.value)
    assert first == second


EmptyPopKeyError = broken_class(
    PlainFCFS,
    "EmptyPopKeyError",
    Change(
        "pop_request",
        "raises KeyError (not IndexError) on an empty pop",
        "return self._items.popleft()",
        'if not self._items:\n        raise KeyError("empty")\n    return self._items.popleft()',
    ),
)


def test_exception_types_are_compared() -> None:
    """ORC-CRQ-3, RQ-ALL-4: KeyError where the reference raises IndexError is a failure."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(EmptyPopKeyError, "fcfs")
    program = caught.value.program
    assert program.endswith(
        "with pytest.raises(IndexError):  # FAILS: raises KeyError: 'empty'\n    q.pop_request()"
    )


AddForgetsBeyondTwo = broken_class(
    DuckFCFS,
    "AddForgetsBeyondTwo",
    Change(
        "add_request",
        "not a RequestQueue, so no contract helps: the third request is silently dropped",
        "self._items.append(request)",
        "if len(self._items) < 2:\n        self._items.append(request)",
    ),
)


def test_a_queue_without_contracts_is_caught_by_the_comparison() -> None:
    """ORC-CRQ-1, RQ-ALL-1, RQ-FCFS-1: the machine's own comparison, not a contract, catches it."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(AddForgetsBeyondTwo, "fcfs")
    assert "icontract" not in str(caught.value)
    assert "# FAILS" in caught.value.program


@dataclass(eq=False)
class VllmStyleRequest:
    """vLLM's Request as far as the queues see it: `<` on (priority, arrival_time) only."""

    request_id: str
    priority: int
    arrival_time: float

    def __lt__(self, other: VllmStyleRequest) -> bool:
        return (self.priority, self.arrival_time) < (other.priority, other.arrival_time)


def make_request(request_id: str, priority: int, arrival_time: float) -> VllmStyleRequest:
    return VllmStyleRequest(request_id, priority, arrival_time)


def test_request_factory_builds_the_subjects_requests() -> None:
    """ORC-CRQ-1, RQ-REQ-3: other request types are fed to the subject; the program says how."""
    assert (
        check_request_queue(
            PlainPriority, "priority", request_factory=make_request, max_examples=40
        )
        is None
    )
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(LaterArrivalFirst, "priority", request_factory=make_request)
    program = caught.value.program
    assert "from test_oracle import make_request" in program
    assert re.search(r"^r1 = make_request\('r1', -?\d, \d\.0\)$", program, re.MULTILINE)


TwoBugs = broken_class(
    DuckFCFS,
    "TwoBugs",
    Change(
        "pop_request",
        "popping the last request gives None",
        "return self._items.pop(0)",
        "return None if len(self._items) == 1 else self._items.pop(0)",
    ),
    Change(
        "__len__",
        "len is one too many from two requests on",
        "return len(self._items)",
        "count = len(self._items)\n    return count + 1 if count >= 2 else count",
    ),
)


def test_distinct_failures_become_one_error_listing_them() -> None:
    """ORC-CRQ-5, ORC-MANY-1: every distinct failure (operation, clause) is in one error."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(TwoBugs, "fcfs")
    error = caught.value
    text = str(error)
    count = len(error.failures)
    assert count >= 2
    assert f"{count} distinct failures (by operation and clause):" in text
    assert f"--- failure 1 of {count}:" in text and f"--- failure {count} of {count}:" in text
    assert any("q.pop_request() is r1  # FAILS: gives None" in p for p in error.failures)
    assert any("assert len(q) == 2  # FAILS: gives 3" in p for p in error.failures)
    assert "RQ-FCFS-2: pop_request takes the front" in text
    # ORC-CLAUSE-1: a len that disagrees with the iteration is ORC-LAW-3 in both checkers.
    assert "ORC-LAW-3: len(q) is the number of requests iterated" in text
    keys = [(report.operation, report.clause) for report in error.reports]
    assert len(set(keys)) == len(keys) == count
    assert [report.program for report in error.reports] == error.failures
    for program in error.failures:
        assert run_program(program) is not None


TwoIndependentBugs = broken_class(
    PlainFCFS,
    "TwoIndependentBugs",
    *VARIANT_CHANGES[NoReversal],
    *VARIANT_CHANGES[RemoveRequestsRaises],
)


def test_two_independent_bugs_are_both_listed_with_their_clauses() -> None:
    """ORC-MANY-1, ORC-CLAUSE-1: the rounds find the second bug after the first."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(TwoIndependentBugs, "fcfs")
    keys = {(report.operation, report.clause) for report in caught.value.reports}
    assert {("prepend_requests", "RQ-FCFS-4"), ("remove_requests", "RQ-ALL-7")} <= keys
    assert "there may be more" not in str(caught.value)
    for program in caught.value.failures:
        assert run_program(program) is not None


def test_max_failures_stops_the_search_and_says_so() -> None:
    """ORC-MANY-1: with max_failures=1 one failure is listed, and the message says why."""
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(TwoIndependentBugs, "fcfs", max_failures=1)
    assert len(caught.value.failures) == len(caught.value.reports) == 1
    assert "The search stopped at max_failures=1; there may be more." in str(caught.value)


def test_an_exception_group_is_flattened_into_one_error() -> None:
    """ORC-CRQ-5: nested groups and foreign exceptions are all listed, in order."""
    one = ConformanceFailure(
        "call",
        "q = F()\nq.pop_request()  # FAILS: x",
        "pop went wrong",
        operation="pop_request",
        clause="RQ-FCFS-2",
    )
    two = ConformanceFailure(
        "law", "q = F()\nassert len(q) == 0  # FAILS: 1", "len went wrong", operation="len"
    )
    group = ExceptionGroup("two", [one, ExceptionGroup("inner", [two, KeyError("boom")])])
    error = conformance_error(group, "F does not behave.")
    text = str(error)
    assert text.startswith("F does not behave.")
    assert "3 distinct failures (by operation and clause):" in text
    assert text.index("pop went wrong") < text.index("len went wrong") < text.index("KeyError")
    assert "pop went wrong\nRQ-FCFS-2: pop_request takes the front" in text
    assert error.failures == [one.program, two.program]
    assert error.program == one.program


#: What `Nondeterministic` has done in the whole process (the test resets it).
FLAKY = SimpleNamespace(calls=itertools.count(), misbehaved=False)

Nondeterministic = broken_class(
    PlainFCFS,
    "Nondeterministic",
    Change(
        "pop_request",
        "goes wrong once in the whole process (late in the run): a replay does not fail",
        "return self._items.popleft()",
        "if not FLAKY.misbehaved and len(self._items) >= 2 and next(FLAKY.calls) >= 40:\n"
        "        FLAKY.misbehaved = True\n"
        "        return self._items.pop()\n"
        "    return self._items.popleft()",
    ),
    uses={"FLAKY": FLAKY},
)


@pytest.mark.contracts
def test_a_nondeterministic_queue_is_reported_as_such() -> None:
    """ORC-CRQ-5: a failure that does not replay (Hypothesis's FlakyFailure) is still one error."""
    FLAKY.calls = itertools.count()
    FLAKY.misbehaved = False
    with pytest.raises(ConformanceError) as caught:
        check_request_queue(Nondeterministic, "fcfs")
    assert FLAKY.misbehaved
    message = str(caught.value)
    assert "the queue behaves nondeterministically" in message
    assert "The failure as first seen (not shrunk):" in message
    assert "# FAILS: raises icontract.ViolationError: RQ-ALL-4" in caught.value.program


# --- check_queue_laws -------------------------------------------------------------


ShortestJobFirst = broken_class(
    PlainPriority,
    "ShortestJobFirst",
    Change(
        "key",
        "orders by prompt length (carried in `priority` by the request factory below)",
        "request.priority,",
        "request.num_prompt_tokens,",
    ),
)


def sized_request(request_id: str, priority: int, arrival_time: float) -> Request:
    return Request(request_id, arrival_time=arrival_time, num_prompt_tokens=priority + 2)


class RoundRobin:
    """A fair queue: one FCFS lane per priority value, the lanes served in turns."""

    def __init__(self) -> None:
        self._lanes: dict[int, deque[Any]] = {}
        self._turns: list[int] = []  # every lane, the next to serve first

    def _lane(self, request: Any) -> deque[Any]:
        if request.priority not in self._lanes:
            self._lanes[request.priority] = deque()
            self._turns.append(request.priority)
        return self._lanes[request.priority]

    def add_request(self, request: Any) -> None:
        self._lane(request).append(request)

    def prepend_request(self, request: Any) -> None:
        self._lane(request).appendleft(request)

    def prepend_requests(self, requests: Any) -> None:
        for request in list(requests):
            self.prepend_request(request)

    @staticmethod
    def _serve(lanes: dict[int, Any], turns: list[int]) -> Any:
        """Take the head of the first non-empty lane in turn; that lane goes last."""
        for index, key in enumerate(turns):
            if lanes[key]:
                turns.append(turns.pop(index))
                return lanes[key].popleft()
        raise IndexError("pop from an empty queue")

    def pop_request(self) -> Any:
        return self._serve(self._lanes, self._turns)

    def __iter__(self) -> Iterator[Any]:
        lanes = {key: deque(lane) for key, lane in self._lanes.items()}
        turns = list(self._turns)
        return iter([self._serve(lanes, turns) for _ in range(len(self))])

    def peek_request(self) -> Any:
        for request in self:
            return request
        raise IndexError("peek from an empty queue")

    def remove_request(self, request: Any) -> None:
        lane = self._lanes.get(request.priority)
        if lane is None or all(r is not request for r in lane):
            raise ValueError("not in the queue")
        lane.remove(request)

    def remove_requests(self, requests: Iterable[Any]) -> None:
        for request in list(requests):
            lane = self._lanes.get(request.priority)
            if lane is not None and any(r is request for r in lane):
                lane.remove(request)

    def __len__(self) -> int:
        return sum(len(lane) for lane in self._lanes.values())

    def __bool__(self) -> bool:
        return len(self) > 0


def test_queues_with_their_own_order_obey_the_laws() -> None:
    """ORC-LAW-1..6: shortest-job-first and round-robin queues pass the laws, not FCFS."""
    assert (
        check_queue_laws(ShortestJobFirst, request_factory=sized_request, max_examples=60) is None
    )
    assert check_queue_laws(RoundRobin, max_examples=60) is None
    with pytest.raises(ConformanceError):
        check_request_queue(RoundRobin, "fcfs")


ConsumesOther = broken_class(
    PlainFCFS,
    "ConsumesOther",
    Change(
        "prepend_requests",
        "prepend_requests empties the other queue",
        "self._items.extendleft(requests)",
        "while requests:\n        self._items.appendleft(requests.pop_request())",
    ),
)


DropsLast = broken_class(
    PlainFCFS,
    "DropsLast",
    Change(
        "prepend_requests",
        "prepend_requests forgets the last request of the other queue",
        "self._items.extendleft(requests)",
        "self._items.extendleft(list(requests)[:-1])",
    ),
)


BoolAlwaysTrue = broken_class(
    PlainFCFS,
    "BoolAlwaysTrue",
    Change(
        "__bool__",
        "an empty queue that says it is not empty",
        "return len(self._items) > 0",
        "return True",
    ),
)


LAW_BREAKERS: list[tuple[Callable[[], Any], str]] = [
    # ORC-CLAUSE-1: a law that restates one of RQ-ALL-1..10 is named by it, as in
    # check_request_queue; ORC-LAW-1 (pop/peek against the iteration) is the laws' own.
    (BoolAlwaysTrue, "RQ-ALL-10"),
    (IterDrains, "RQ-ALL-9"),
    (PeekMutates, "ORC-LAW-1"),
    (PopFromBack, "ORC-LAW-1"),
    # The whole-structure contracts of RequestQueue (on in these tests) see the count go
    # wrong in remove_requests itself (without them, list() raises on the negative __len__).
    (LenWrongAfterRemoveRequests, "RQ-ALL-7"),
    (RemoveRequestsRaises, "RQ-ALL-7"),
    (RemoveRemovesMore, "RQ-ALL-6"),
    (ConsumesOther, "RQ-ALL-8"),
    (DropsLast, "RQ-ALL-8"),
]


@pytest.mark.contracts
@pytest.mark.parametrize(("factory", "law"), LAW_BREAKERS, ids=lambda x: getattr(x, "__name__", x))
def test_law_breakers_are_caught(factory: Callable[[], Any], law: str) -> None:
    """ORC-LAW-1, ORC-LAW-2, ORC-LAW-3, ORC-LAW-5, ORC-LAW-6: each is caught, by its clause."""
    with pytest.raises(ConformanceError) as caught:
        check_queue_laws(factory, max_failures=1)
    message = str(caught.value)
    assert "breaks a law that every RequestQueue obeys" in message
    assert caught.value.reports[0].clause == law  # ORC-CLAUSE-1
    assert describe(law) in message
    assert run_program(caught.value.program) is not None, law


def test_nothing_lost_or_duplicated() -> None:
    """ORC-LAW-4: a queue that keeps a popped request is caught by the ledger."""

    KeepsPopped = broken_class(
        DuckFCFS,
        "KeepsPopped",
        Change(
            "pop_request",
            "keeps the last request it pops",
            "return self._items.pop(0)",
            "return self._items[0] if len(self._items) == 1 else self._items.pop(0)",
        ),
    )

    with pytest.raises(ConformanceError) as caught:
        check_queue_laws(KeepsPopped)
    assert "# FAILS" in caught.value.program
