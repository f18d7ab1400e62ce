"""The plumbing of the queue machine: one call on both sides, compared and recorded (ORC-MACH-1).

`MachineCore` holds the subject queue `q`, the expected side `e` (or None:
only the laws), the handles of the requests made so far, the ledger of what
must be queued, and the program written so far. `step` makes one call on
both sides, compares what they did (ORC-CRQ-3) and records it; a
disagreement raises `ConformanceFailure` naming its clause (ORC-CLAUSE-1).
The rules that choose the calls are in `queueref.oracle.rules`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, NoReturn

from hypothesis import note
from hypothesis.stateful import RuleBasedStateMachine, multiple

from queueref.oracle.clauses import Policy, common_clause
from queueref.oracle.errors import ConformanceFailure, FailureKey
from queueref.oracle.handles import Handle, Outcome, Unknown, call_outcome, python_name
from queueref.oracle.program_text import (
    ResultKind,
    assemble_program,
    describe_outcome,
    expectation,
    render,
    short_repr,
)
from queueref.oracle.search_budget import WorkMeter
from queueref.oracle.ties import equal_up_to_ties, tie_hint, tie_parting
from queueref.request import Request

QueueFactory = Callable[[], Any]
RequestFactory = Callable[[str, int, float], Any]
Ties = Literal["exact", "any"]


class KnownFailure(Exception):
    """A failure already reported in an earlier round (ORC-MANY-1): stop this program."""


def stoppable(*, returns_requests: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """ORC-MANY-1: once a known failure is met, the rest of the program does nothing.

    A failure found in an earlier round is not reported again; the program
    that meets it cannot go on (the two sides disagree from there on), so its
    remaining steps are no-ops and the search goes on with the next program.
    """

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def run(self: MachineCore, *args: Any, **kwargs: Any) -> Any:
            if not self.stopped:
                try:
                    return function(self, *args, **kwargs)
                except KnownFailure:
                    self.stopped = True
            return multiple() if returns_requests else None

        return run

    return wrap


def policy_of(expected: Any, policy: str | None) -> Policy:
    """The policy whose clauses a failure names: given, or read from the expected side."""
    if expected is None:
        return None
    if policy is None:
        found = getattr(expected, "policy", None)
        policy = getattr(found, "value", found)
    if policy is None:
        kind = type(expected).__name__.lower()
        policy = "priority" if "priority" in kind else "fcfs" if "fcfs" in kind else None
    if policy == "fcfs":
        return "fcfs"
    if policy == "priority":
        return "priority"
    return None


class MachineCore(RuleBasedStateMachine):
    """A subject queue and an expected queue, and how one call is made on both (ORC-MACH-1)."""

    #: Whether the calls that break a precondition are made (see StrictQueueMachine).
    strict = False

    def __init__(
        self,
        subject_factory: QueueFactory,
        expected_factory: QueueFactory | None = None,
        *,
        request_factory: RequestFactory | None = None,
        policy: str | None = None,
        ties: Ties = "exact",
        known: Iterable[FailureKey] = (),
        initial_requests: tuple[int, int] = (0, 0),
        meter: WorkMeter | None = None,
    ) -> None:
        super().__init__()
        self.subject_factory = subject_factory
        self.expected_factory = expected_factory
        self.request_factory: RequestFactory = (
            request_factory if request_factory is not None else Request
        )
        self.known = frozenset(known)
        self.initial_requests = initial_requests
        self.meter = meter  # counts the calls (ORC-SIZE-4); None: no limit
        self.calls = 0  # calls made to the subject in this program
        self.stopped = False  # a known failure was met: the rest of the program is no-ops
        self.lines: list[str] = []
        self.failure: ConformanceFailure | None = None  # set when this run failed
        self.last_call = ""  # the last call recorded, for the summary of a failure after it
        self.last_operation = "factory"  # ... and the operation it made (ORC-CLAUSE-1)
        self.handles: list[Handle] = []
        self.ledger: list[Handle] = []  # what must be queued in q (ORC-LAW-4)
        self.last: tuple[Any, ...] = ()  # q's contents, as checked after the last step
        self.others = 0
        self._parting: tuple[Handle, Handle] | None = None  # a failed comparison on a tie
        self._subject_of: dict[int, Handle] = {}
        self._expected_of: dict[int, Handle] = {}
        self.queue_name, queue_import = python_name(subject_factory, "factory")
        self.request_name, request_import = python_name(self.request_factory, "request_factory")
        self.imports = [line for line in (request_import, queue_import) if line is not None]
        self.e = expected_factory() if expected_factory is not None else None
        self.policy: Policy = policy_of(self.e, policy)
        self.ties_unordered = ties == "any" and self.policy == "priority"
        if meter is not None:
            meter.program_started()
        try:
            self.q = self.make_queue("q")
        except KnownFailure:  # the factory fails, as found before: nothing to run
            self.q = None
            self.stopped = True

    # ------------------------------------------------------------------
    # The failing program

    def record(self, text: str) -> None:
        self.lines.append(text)
        note(text)

    def program(self, failing: Sequence[str] = ()) -> str:
        """The statements so far (and the failing ones), as a pasteable test body."""
        body = [*self.lines, *failing]
        return assemble_program(self.imports, self.queue_name, self.request_name, body)

    def spend(self, calls: int = 1) -> None:
        """ORC-SIZE-4: count calls made to the subject; the meter may end the round."""
        self.calls += calls
        if self.meter is not None:
            self.meter.spend(calls)

    def fail(
        self, kind: str, summary: str, failing: Sequence[str], operation: str, clause: str
    ) -> NoReturn:
        """ORC-CLAUSE-1, ORC-MANY-1: raise the failure, naming its clause; a known one stops."""
        if (operation, clause) in self.known:
            raise KnownFailure(operation, clause)
        hint = self._tie_hint()
        self.failure = ConformanceFailure(
            kind,
            self.program(failing),
            summary,
            operation=operation,
            clause=clause,
            hint=hint,
            tie_only=bool(hint),
        )
        if self.meter is not None:
            self.meter.failure_seen()
        raise self.failure

    def fail_call(
        self, summary: str, failing: Sequence[str], operation: str, clause: str
    ) -> NoReturn:
        self.fail("call", summary, failing, operation, clause)

    def fail_law(
        self, summary: str, failing: Sequence[str], operation: str, clause: str
    ) -> NoReturn:
        self.fail("law", summary, failing, operation, clause)

    # ------------------------------------------------------------------
    # Ties (ORC-TIES-1, ORC-TIES-2)

    def same(self, actual: Any, expected: Any) -> bool:
        """Equal; with ties="any" in a priority queue, equal up to the order of ties."""
        if actual == expected:
            return True
        return self.ties_unordered and equal_up_to_ties(actual, expected)

    def _tie_hint(self) -> str:
        """ORC-TIES-2: the tie line, when the failing comparison parted on a tie."""
        parted = self._parting
        if self.policy != "priority" or self.ties_unordered or parted is None:
            return ""
        mine, theirs = parted
        order = {id(h): index for index, h in enumerate(self.handles)}
        later = theirs if order.get(id(theirs), 0) > order.get(id(mine), 0) else mine
        return tie_hint(mine, theirs, later)

    def note_parting(self, actual: Any, expected: Any) -> None:
        """Remember where two results part, when they part only on a tie (ORC-TIES-2)."""
        self._parting = tie_parting(actual, expected)

    # ------------------------------------------------------------------
    # Requests and values

    def make_queue(self, name: str) -> Any:
        outcome = call_outcome(self.subject_factory)
        statement = f"{name} = {self.queue_name}()"
        if outcome.error is not None:
            self.fail_call(
                f"{self.queue_name}() raised {outcome.error}",
                [f"{statement}  # FAILS: raises {outcome.error}: {outcome.detail}"],
                "factory",
                "ORC-MACH-1",
            )
        self.record(statement)
        return outcome.value

    def request_text(self, request_id: str, priority: int, arrival_time: float) -> str:
        if self.request_name == "Request" and self.request_factory is Request:
            return f"Request({request_id!r}, priority={priority!r}, arrival_time={arrival_time!r})"
        return f"{self.request_name}({request_id!r}, {priority!r}, {arrival_time!r})"

    def handle(
        self,
        name: str,
        request_id: str,
        priority: int,
        arrival_time: float,
        failing_statement: Callable[[Outcome], str],
        batch_index: int | None = None,
    ) -> Handle:
        made = call_outcome(lambda: self.request_factory(request_id, priority, arrival_time))
        if made.error is not None:
            self.fail_call(
                f"the request factory raised {made.error}",
                [failing_statement(made)],
                "request_factory",
                "ORC-MACH-1",
            )
        handle = Handle(
            name,
            request_id,
            priority,
            arrival_time,
            made.value,
            Request(request_id, priority=priority, arrival_time=arrival_time),
            batch_index,
        )
        self.handles.append(handle)
        self._subject_of[id(handle.subject)] = handle
        self._expected_of[id(handle.expected)] = handle
        return handle

    def new_request(self, priority: int, arrival_time: float, request_id: str = "") -> Handle:
        name = f"r{len(self.handles) + 1}"
        request_id = request_id or name
        text = self.request_text(request_id, priority, arrival_time)
        handle = self.handle(
            name,
            request_id,
            priority,
            arrival_time,
            lambda made: f"{name} = {text}  # FAILS: raises {made.error}: {made.detail}",
        )
        self.record(f"{name} = {text}")
        return handle

    def view(self, value: Any, side: dict[int, Handle]) -> Any:
        """A result in comparable form: requests become their handles (identity)."""
        if isinstance(value, (list, tuple)):
            return tuple(self.view(item, side) for item in value)
        if isinstance(value, (bool, int, float, str)) or value is None:
            return value
        handle = side.get(id(value))
        if handle is not None and (handle.subject is value or handle.expected is value):
            return handle
        return Unknown(short_repr.repr(value))

    def conflict(self, handle: Handle) -> str | None:
        """Why adding `handle` to q breaks a precondition (RQ-ALL-2, RQ-ALL-3), or None."""
        if any(queued is handle for queued in self.ledger):
            return "RQ-ALL-2"
        if any(queued.request_id == handle.request_id for queued in self.ledger):
            return "RQ-ALL-3"
        return None

    # ------------------------------------------------------------------
    # One call, on both sides

    def step(
        self,
        call: str,
        subject_call: Callable[[], Any],
        expected_call: Callable[[], Any] | None,
        predicted: Outcome,
        kind: ResultKind = "none",
        *,
        operation: str,
        clause: str,
    ) -> tuple[Outcome, Outcome]:
        """ORC-CRQ-3: make one call on both sides and compare results and exception types.

        `predicted` is what the laws require; it is the expectation when there
        is no expected side (ORC-LAW-1 to ORC-LAW-6). A disagreement names
        `clause` (ORC-CLAUSE-1). Returns what the subject and the expected side did.
        """
        self.spend()
        raw = call_outcome(subject_call)
        actual = Outcome(self.view(raw.value, self._subject_of), raw.error, raw.detail)
        if expected_call is not None:
            raw_expected = call_outcome(expected_call)
            expected = Outcome(
                self.view(raw_expected.value, self._expected_of),
                raw_expected.error,
                raw_expected.detail,
            )
        else:
            expected = predicted
        lines = expectation(call, kind, expected)
        agree = actual.error == expected.error and (
            kind == "none" or expected.error is not None or self.same(actual.value, expected.value)
        )
        if not agree:
            self.note_parting(actual.value, expected.value)
            lines[0] += f"  # FAILS: {describe_outcome(actual, kind)}"
            summary = f"{call} {describe_outcome(actual, kind)}"
            if kind == "value":
                # An observation (list, len, bool) that differs is a contents failure.
                self.fail_law(summary, lines, operation, clause)
            self.fail_call(summary, lines, operation, clause)
        if kind == "request" and actual.value is not expected.value:
            lines = expectation(call, kind, actual)  # a tie, taken the subject's way
        for line in lines:
            self.record(line)
        self.last_call = call
        self.last_operation = operation
        if expected.error is not None:
            self.require_unchanged(call, operation, clause)
        return actual, expected

    def require_unchanged(self, call: str, operation: str, clause: str) -> None:
        """RQ-ALL-2, RQ-ALL-6, RQ-ALL-8: a rejected call leaves the queue as it was."""
        after = self.contents()
        if after != self.last:
            self.fail_law(
                f"{call} raised but changed the queue",
                [
                    f"assert list(q) == {render(self.last)}"
                    f"  # FAILS: the rejected call left {render(after)}"
                ],
                operation,
                clause,
            )

    def contents(self, queue_name: str = "q", queue: Any = None) -> tuple[Any, ...]:
        """What `queue` (default q) iterates, as handles; an exception is a failure."""
        target = self.q if queue is None else queue
        outcome = call_outcome(lambda: list(target))
        if outcome.error is not None:
            self.fail_law(
                f"iterating {queue_name} raised {outcome.error}",
                [f"list({queue_name})  # FAILS: raises {outcome.error}: {outcome.detail}"],
                "iter",
                common_clause(self.policy, "iter"),
            )
        view = self.view(outcome.value, self._subject_of)
        assert isinstance(view, tuple)
        return view

    def stable_contents(self, queue_name: str = "q", queue: Any = None) -> tuple[Any, ...]:
        """RQ-ALL-9: iterate twice; iteration must not change the queue.

        Every iteration the failing program does not show is checked this way
        first, so the program still reproduces the failure.
        """
        first = self.contents(queue_name, queue)
        second = self.contents(queue_name, queue)
        if second != first:
            self.fail_law(
                f"iterating {queue_name} changed it",
                [
                    f"assert list({queue_name}) == list({queue_name})"
                    f"  # FAILS: the first iteration gives {render(first)}, "
                    f"the second {render(second)}"
                ],
                "iter",
                common_clause(self.policy, "iter"),
            )
        return first

    def expected_contents(self) -> tuple[Any, ...]:
        if self.e is None:
            return tuple(self.ledger)
        view = self.view(list(self.e), self._expected_of)
        assert isinstance(view, tuple)
        return view

    def head(self) -> Outcome:
        """ORC-LAW-1: what pop and peek must give, by the laws alone."""
        if not self.ledger:
            return Outcome(error="IndexError")
        return Outcome(value=self.last[0] if self.last else None)

    def insert(self, method: str, handle: Handle) -> None:
        """Add or prepend `handle` to q (and its twin to e); RQ-ALL-2, RQ-ALL-3 when queued."""
        conflict = self.conflict(handle)
        predicted = Outcome(error="ValueError") if conflict else Outcome()
        e = self.e
        self.step(
            f"q.{method}({handle.name})",
            lambda: getattr(self.q, method)(handle.subject),
            None if e is None else lambda: getattr(e, method)(handle.expected),
            predicted,
            operation=method,
            clause=conflict or common_clause(self.policy, method),
        )
        if conflict is None:
            self.ledger.append(handle)


__all__ = ["KnownFailure", "MachineCore", "QueueFactory", "RequestFactory", "Ties", "stoppable"]
