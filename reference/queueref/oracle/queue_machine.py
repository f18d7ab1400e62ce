"""One state machine for every request-queue check: the model tests and the oracle.

`QueueMachine` drives a queue under test (the *subject*, built by a factory)
through every operation of `RequestQueue`, side by side with an *expected*
queue (built by a second factory), and after every step compares the whole
contents. It ships inside the package, zarr-python style: the constructor
takes the thing under test, so any queue runs it in one line.

* queueref's own tests run it with the reference queues as the subject and
  the plain list model (`queueref.queues.model.ListQueueModel`) as the
  expected side;
* `check_request_queue` runs it with somebody else's queue as the subject and
  queueref's reference queue as the expected side (ORC-MACH-1);
* `check_queue_laws` runs it with no expected side at all: then only the
  policy-independent laws are checked (ORC-LAW-1 to ORC-LAW-6), against a
  ledger of what must be in the queue.

The two sides never share request objects: each generated request is built
twice, once by the subject's request factory and once as a `queueref.Request`,
and the machine maps results back to the request they stand for by identity.
Every call made to the subject is recorded as a Python statement; a failure
raises `ConformanceFailure` whose `program` replays it, ending with the
statement that failed and a comment saying what the subject did instead, and
whose `clause` names the requirement broken (`queueref.oracle.clauses`).

Calls that break a precondition of the spec (a request queued twice, a taken
request id, a non-request, a queue prepended to itself or sharing a request)
are only made when `strict=True`: vLLM leaves them undefined, queueref rejects
them with `ValueError` / `TypeError` (RQ-ALL-2, RQ-ALL-3, RQ-ALL-8, RQ-REQ-3).

Models no vLLM file; it exercises the interface of
`vllm/v1/core/sched/request_queue.py`.
"""

from __future__ import annotations

import functools
import keyword
import reprlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, NoReturn

import icontract
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

import queueref
from queueref.oracle.clauses import (
    Policy,
    common_clause,
    effect_clause,
    law_or,
    length_clause,
)
from queueref.oracle.errors import ConformanceFailure, FailureKey
from queueref.request import Request

QueueFactory = Callable[[], Any]
RequestFactory = Callable[[str, int, float], Any]
ResultKind = Literal["none", "request", "value"]
Ties = Literal["exact", "any"]

#: Few distinct values, so that keys tie often and ids decide (RQ-REQ-1).
PRIORITIES = st.integers(min_value=-1, max_value=1)
ARRIVAL_TIMES = st.sampled_from([0.0, 1.0, 2.0])

#: The exceptions whose type the machine compares; any other exception is a failure.
COMPARED_ERRORS: tuple[type[Exception], ...] = (IndexError, ValueError, TypeError)

#: The name of the list that holds the requests of a starting batch (ORC-SIZE-2).
BATCH = "b"

__all__ = ["ConformanceFailure", "QueueMachine", "StrictQueueMachine", "queue_machine"]

_short = reprlib.Repr()
_short.maxstring = 120
_short.maxother = 120


class _KnownFailure(Exception):
    """A failure already reported in an earlier round (ORC-MANY-1): stop this program."""


@dataclass(eq=False)
class Handle:
    """One generated request, as both sides see it: `subject` and its twin `expected`."""

    name: str
    request_id: str
    priority: int
    arrival_time: float
    subject: Any
    expected: Any
    batch_index: int | None = None  # its index in the starting batch `b`, if it is in it

    @property
    def tie_key(self) -> tuple[int, float]:
        """What a request type that leaves ties unordered compares (ORC-TIES-1)."""
        return (self.priority, self.arrival_time)


@dataclass(frozen=True)
class Outcome:
    """What a call did: returned `value`, or raised an exception named `error`."""

    value: Any = None
    error: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class Unknown:
    """A value the subject returned that is none of the requests it was given."""

    text: str


def error_name(exc: BaseException) -> str:
    """ORC-CRQ-3: how an exception is compared: one of the compared types, or its own name."""
    if isinstance(exc, icontract.ViolationError):
        return "icontract.ViolationError"
    for kind in COMPARED_ERRORS:
        if isinstance(exc, kind):
            return kind.__name__
    return type(exc).__name__


def error_detail(exc: BaseException, limit: int = 160) -> str:
    """One line saying what an exception says; for a contract, its description."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, icontract.ViolationError) and len(lines) > 1:
        lines = lines[1:]  # the first line is "File ..., line ... in ...:"
    text = lines[0].rstrip(":") if lines else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call(function: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=function())
    except Exception as exc:  # every exception is an outcome to compare (ORC-CRQ-3)
        return Outcome(error=error_name(exc), detail=error_detail(exc))


def _is_identifier(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def python_name(obj: object, fallback: str) -> tuple[str, str | None]:
    """The name under which `obj` appears in a failing program, and an import line for it."""
    name = getattr(obj, "__name__", None)
    if not _is_identifier(name):
        return fallback, None
    assert isinstance(name, str)
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if (
        isinstance(module, str)
        and module not in ("__main__", "builtins")
        and qualname == name
        and all(_is_identifier(part) for part in module.split("."))
    ):
        if module.startswith("queueref.") and getattr(queueref, name, None) is obj:
            module = "queueref"  # a public name: import it as the docs do
        return name, f"from {module} import {name}"
    return name, None


def equal_up_to_ties(actual: Any, expected: Any) -> bool:
    """ORC-TIES-1: the same requests, in the same order except among equal (priority, arrival).

    Two requests, or two sequences of requests whose keys run in the same order
    and whose every run of equal keys holds the same requests.
    """
    if isinstance(actual, Handle) and isinstance(expected, Handle):
        return actual.tie_key == expected.tie_key
    if not (isinstance(actual, tuple) and isinstance(expected, tuple)):
        return False
    if len(actual) != len(expected):
        return False
    if not all(isinstance(h, Handle) for h in (*actual, *expected)):
        return False
    if [h.tie_key for h in actual] != [h.tie_key for h in expected]:
        return False
    start = 0
    for end in range(1, len(actual) + 1):
        if end == len(actual) or actual[end].tie_key != actual[start].tie_key:
            if {id(h) for h in actual[start:end]} != {id(h) for h in expected[start:end]}:
                return False
            start = end
    return True


def _first_difference(actual: Any, expected: Any) -> tuple[Handle, Handle] | None:
    """The two requests where `actual` and `expected` part (for the tie hint)."""
    if isinstance(actual, Handle) and isinstance(expected, Handle):
        return actual, expected
    if isinstance(actual, tuple) and isinstance(expected, tuple):
        for mine, theirs in zip(actual, expected, strict=False):
            if mine is not theirs and isinstance(mine, Handle) and isinstance(theirs, Handle):
                return mine, theirs
    return None


def _keys_literal(keys: Sequence[tuple[int, float]]) -> str:
    """`[(0, 0.0)] * 64 + [(-1, 0.0)]`: the keys of a batch, run-length encoded."""
    parts: list[str] = []
    index = 0
    while index < len(keys):
        end = index
        while end < len(keys) and keys[end] == keys[index]:
            end += 1
        run = end - index
        parts.append(f"[{keys[index]!r}]" + (f" * {run}" if run > 1 else ""))
        index = end
    return " + ".join(parts) if parts else "[]"


def _stoppable(*, returns_requests: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """ORC-MANY-1: once a known failure is met, the rest of the program does nothing.

    A failure found in an earlier round is not reported again; the program
    that meets it cannot go on (the two sides disagree from there on), so its
    remaining steps are no-ops and the search goes on with the next program.
    """

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def run(self: QueueMachine, *args: Any, **kwargs: Any) -> Any:
            if not self.stopped:
                try:
                    return function(self, *args, **kwargs)
                except _KnownFailure:
                    self.stopped = True
            return multiple() if returns_requests else None

        return run

    return wrap


class QueueMachine(RuleBasedStateMachine):
    """Drive a subject queue and an expected queue side by side (ORC-MACH-1).

    :param subject_factory: builds an empty queue under test (called for `q`
        and for every other queue handed to `prepend_requests`).
    :param expected_factory: builds an empty queue with the expected
        behaviour, or None to check only the policy-independent laws.
    :param request_factory: `request_factory(request_id, priority, arrival_time)`
        builds the requests given to the subject (default `queueref.Request`).
    :param policy: the policy the expected side follows, which decides the
        clause each failure names (ORC-CLAUSE-1); by default read from the
        expected queue (its `policy`, or its class); None without one.
    :param ties: "any" accepts any order among requests with equal
        (priority, arrival_time) in a priority queue (ORC-TIES-1).
    :param known: failures, by (operation, clause), found before: a program
        that meets one stops there, unreported (ORC-MANY-1).
    :param initial_requests: (low, high): `LongQueueMachine` starts every
        program by adding a batch of between low and high requests (ORC-SIZE-2).

    `StrictQueueMachine` also makes the calls that break a precondition of
    the spec and requires the subject to reject them as the expected side does.
    """

    #: Whether the calls that break a precondition are made (see StrictQueueMachine).
    strict = False

    requests = Bundle("requests")

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
    ) -> None:
        super().__init__()
        self.subject_factory = subject_factory
        self.expected_factory = expected_factory
        self.request_factory: RequestFactory = (
            request_factory if request_factory is not None else Request
        )
        self.known = frozenset(known)
        self.initial_requests = initial_requests
        self.stopped = False  # a known failure was met: the rest of the program is no-ops
        self.lines: list[str] = []
        self.failure: ConformanceFailure | None = None  # set when this run failed
        self.last_call = ""  # the last call recorded, for the summary of a failure after it
        self.last_operation = "factory"  # ... and the operation it made (ORC-CLAUSE-1)
        self.handles: list[Handle] = []
        self.ledger: list[Handle] = []  # what must be queued in q (ORC-LAW-4)
        self.last: tuple[Any, ...] = ()  # q's contents, as checked after the last step
        self.others = 0
        self._subject_of: dict[int, Handle] = {}
        self._expected_of: dict[int, Handle] = {}
        self.queue_name, queue_import = python_name(subject_factory, "factory")
        self.request_name, request_import = python_name(self.request_factory, "request_factory")
        self.imports = [line for line in (request_import, queue_import) if line is not None]
        self.e = expected_factory() if expected_factory is not None else None
        self.policy: Policy = _policy_of(self.e, policy)
        self.ties_unordered = ties == "any" and self.policy == "priority"
        try:
            self.q = self._make_queue("q")
        except _KnownFailure:  # the factory fails, as found before: nothing to run
            self.q = None
            self.stopped = True

    # ------------------------------------------------------------------
    # The failing program

    def _record(self, text: str) -> None:
        self.lines.append(text)
        note(text)

    def program(self, failing: Sequence[str] = ()) -> str:
        """The statements so far (and the failing ones), as a pasteable test body."""
        body = [*self.lines, *failing]
        header = list(self.imports)
        if any("pytest.raises" in line for line in body):
            header.insert(0, "import pytest")
        if self.queue_name == "factory":
            header.append("# factory: the queue factory given to the checker")
        if self.request_name == "request_factory":
            header.append("# request_factory: the request factory given to the checker")
        return "\n".join([*header, "", *body] if header else body)

    def _fail(
        self, kind: str, summary: str, failing: Sequence[str], operation: str, clause: str
    ) -> NoReturn:
        """ORC-CLAUSE-1, ORC-MANY-1: raise the failure, naming its clause; a known one stops."""
        if (operation, clause) in self.known:
            raise _KnownFailure(operation, clause)
        hint = self._tie_hint(clause)
        self.failure = ConformanceFailure(
            kind,
            self.program(failing),
            summary,
            operation=operation,
            clause=clause,
            hint=hint,
        )
        raise self.failure

    def _fail_call(
        self, summary: str, failing: Sequence[str], operation: str, clause: str
    ) -> NoReturn:
        self._fail("call", summary, failing, operation, clause)

    def _fail_law(
        self, summary: str, failing: Sequence[str], operation: str, clause: str
    ) -> NoReturn:
        self._fail("law", summary, failing, operation, clause)

    # ------------------------------------------------------------------
    # Ties (ORC-TIES-1, ORC-TIES-2)

    def _same(self, actual: Any, expected: Any) -> bool:
        """Equal; with ties="any" in a priority queue, equal up to the order of ties."""
        if actual == expected:
            return True
        return self.ties_unordered and equal_up_to_ties(actual, expected)

    def _tie_hint(self, clause: str) -> str:
        """ORC-TIES-2: the line that says the failing requests tie and points at ties="any"."""
        parted = self._parting
        if self.policy != "priority" or self.ties_unordered or parted is None:
            return ""
        mine, theirs = parted
        return (
            f"{mine.name} and {theirs.name} tie: both have (priority, arrival_time) = "
            f"{mine.tie_key!r}, and the reference orders them by request_id (RQ-REQ-1). "
            "If your request type leaves such ties unordered (its `<` compares only "
            "priority and arrival_time), pass ties='any'."
        )

    _parting: tuple[Handle, Handle] | None = None  # set by a comparison that failed on a tie

    def _note_parting(self, actual: Any, expected: Any) -> None:
        """Remember where two results part, when they part only on a tie (ORC-TIES-2)."""
        self._parting = None
        if equal_up_to_ties(actual, expected):
            self._parting = _first_difference(actual, expected)

    # ------------------------------------------------------------------
    # Requests and values

    def _make_queue(self, name: str) -> Any:
        outcome = _call(self.subject_factory)
        statement = f"{name} = {self.queue_name}()"
        if outcome.error is not None:
            self._fail_call(
                f"{self.queue_name}() raised {outcome.error}",
                [f"{statement}  # FAILS: raises {outcome.error}: {outcome.detail}"],
                "factory",
                "ORC-MACH-1",
            )
        self._record(statement)
        return outcome.value

    def _request_text(self, request_id: str, priority: int, arrival_time: float) -> str:
        if self.request_name == "Request" and self.request_factory is Request:
            return f"Request({request_id!r}, priority={priority!r}, arrival_time={arrival_time!r})"
        return f"{self.request_name}({request_id!r}, {priority!r}, {arrival_time!r})"

    def _handle(
        self,
        name: str,
        request_id: str,
        priority: int,
        arrival_time: float,
        failing_statement: Callable[[Outcome], str],
        batch_index: int | None = None,
    ) -> Handle:
        made = _call(lambda: self.request_factory(request_id, priority, arrival_time))
        if made.error is not None:
            self._fail_call(
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

    def _new_request(self, priority: int, arrival_time: float, request_id: str = "") -> Handle:
        name = f"r{len(self.handles) + 1}"
        request_id = request_id or name
        text = self._request_text(request_id, priority, arrival_time)
        handle = self._handle(
            name,
            request_id,
            priority,
            arrival_time,
            lambda made: f"{name} = {text}  # FAILS: raises {made.error}: {made.detail}",
        )
        self._record(f"{name} = {text}")
        return handle

    def _view(self, value: Any, side: dict[int, Handle]) -> Any:
        """A result in comparable form: requests become their handles (identity)."""
        if isinstance(value, (list, tuple)):
            return tuple(self._view(item, side) for item in value)
        if isinstance(value, (bool, int, float, str)) or value is None:
            return value
        handle = side.get(id(value))
        if handle is not None and (handle.subject is value or handle.expected is value):
            return handle
        return Unknown(_short.repr(value))

    def _render(self, view: Any) -> str:
        if isinstance(view, Handle):
            return view.name
        if isinstance(view, Unknown):
            return f"{view.text} (not one of the requests it was given)"
        if isinstance(view, tuple):
            return "[" + ", ".join(self._render_items(view)) + "]"
        return repr(view)

    def _render_items(self, items: tuple[Any, ...]) -> list[str]:
        """The items of a list; consecutive requests of the batch as `*b[i:j]` (ORC-SIZE-2)."""
        parts: list[str] = []
        index = 0
        while index < len(items):
            first = items[index]
            end = index + 1
            if isinstance(first, Handle) and first.batch_index is not None:
                while (
                    end < len(items)
                    and isinstance(items[end], Handle)
                    and items[end].batch_index == first.batch_index + (end - index)
                ):
                    end += 1
            if end - index > 2:
                start = first.batch_index
                parts.append(f"*{BATCH}[{start}:{start + end - index}]")
            else:
                parts.extend(self._render(item) for item in items[index:end])
            index = end
        return parts

    def _conflict(self, handle: Handle) -> str | None:
        """Why adding `handle` to q breaks a precondition (RQ-ALL-2, RQ-ALL-3), or None."""
        if any(queued is handle for queued in self.ledger):
            return "RQ-ALL-2"
        if any(queued.request_id == handle.request_id for queued in self.ledger):
            return "RQ-ALL-3"
        return None

    # ------------------------------------------------------------------
    # One call, on both sides

    def _expectation(self, call: str, kind: ResultKind, expected: Outcome) -> list[str]:
        if expected.error is not None:
            return [f"with pytest.raises({expected.error}):", f"    {call}"]
        view = expected.value
        if kind == "none":
            return [call]
        if kind == "request":
            return [f"assert {call} is {self._render(view)}"]
        if view is True or view is False:
            return [f"assert {call}" if view else f"assert not {call}"]
        return [f"assert {call} == {self._render(view)}"]

    def _describe(self, outcome: Outcome, kind: ResultKind) -> str:
        if outcome.error is not None:
            return f"raises {outcome.error}: {outcome.detail}" if outcome.detail else outcome.error
        if kind == "none":
            return "returns without raising"
        return f"gives {self._render(outcome.value)}"

    def _step(
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
        raw = _call(subject_call)
        actual = Outcome(self._view(raw.value, self._subject_of), raw.error, raw.detail)
        if expected_call is not None:
            raw_expected = _call(expected_call)
            expected = Outcome(
                self._view(raw_expected.value, self._expected_of),
                raw_expected.error,
                raw_expected.detail,
            )
        else:
            expected = predicted
        lines = self._expectation(call, kind, expected)
        agree = actual.error == expected.error and (
            kind == "none" or expected.error is not None or self._same(actual.value, expected.value)
        )
        if not agree:
            self._note_parting(actual.value, expected.value)
            lines[0] += f"  # FAILS: {self._describe(actual, kind)}"
            summary = f"{call} {self._describe(actual, kind)}"
            if kind == "value":
                # An observation (list, len, bool) that differs is a contents failure.
                self._fail_law(summary, lines, operation, clause)
            self._fail_call(summary, lines, operation, clause)
        if kind == "request" and actual.value is not expected.value:
            lines = self._expectation(call, kind, actual)  # a tie, taken the subject's way
        for line in lines:
            self._record(line)
        self.last_call = call
        self.last_operation = operation
        if expected.error is not None:
            self._require_unchanged(call, operation, clause)
        return actual, expected

    def _require_unchanged(self, call: str, operation: str, clause: str) -> None:
        """RQ-ALL-2, RQ-ALL-6, RQ-ALL-8: a rejected call leaves the queue as it was."""
        after = self._contents()
        if after != self.last:
            self._fail_law(
                f"{call} raised but changed the queue",
                [
                    f"assert list(q) == {self._render(self.last)}"
                    f"  # FAILS: the rejected call left {self._render(after)}"
                ],
                operation,
                clause,
            )

    def _contents(self, queue_name: str = "q", queue: Any = None) -> tuple[Any, ...]:
        """What `queue` (default q) iterates, as handles; an exception is a failure."""
        target = self.q if queue is None else queue
        outcome = _call(lambda: list(target))
        if outcome.error is not None:
            self._fail_law(
                f"iterating {queue_name} raised {outcome.error}",
                [f"list({queue_name})  # FAILS: raises {outcome.error}: {outcome.detail}"],
                "iter",
                law_or(self.policy, "RQ-ALL-9", "ORC-LAW-2"),
            )
        view = self._view(outcome.value, self._subject_of)
        assert isinstance(view, tuple)
        return view

    def _stable_contents(self, queue_name: str = "q", queue: Any = None) -> tuple[Any, ...]:
        """RQ-ALL-9 (ORC-LAW-2): iterate twice; iteration must not change the queue.

        Every iteration the failing program does not show is checked this way
        first, so the program still reproduces the failure.
        """
        first = self._contents(queue_name, queue)
        second = self._contents(queue_name, queue)
        if second != first:
            self._fail_law(
                f"iterating {queue_name} changed it",
                [
                    f"assert list({queue_name}) == list({queue_name})"
                    f"  # FAILS: the first iteration gives {self._render(first)}, "
                    f"the second {self._render(second)}"
                ],
                "iter",
                law_or(self.policy, "RQ-ALL-9", "ORC-LAW-2"),
            )
        return first

    def _expected_contents(self) -> tuple[Any, ...]:
        if self.e is None:
            return tuple(self.ledger)
        view = self._view(list(self.e), self._expected_of)
        assert isinstance(view, tuple)
        return view

    def _head(self) -> Outcome:
        """ORC-LAW-1: what pop and peek must give, by the laws alone."""
        if not self.ledger:
            return Outcome(error="IndexError")
        return Outcome(value=self.last[0] if self.last else None)

    # ------------------------------------------------------------------
    # Rules: adding

    def _insert(self, method: str, handle: Handle) -> None:
        conflict = self._conflict(handle)
        predicted = Outcome(error="ValueError") if conflict else Outcome()
        e = self.e
        self._step(
            f"q.{method}({handle.name})",
            lambda: getattr(self.q, method)(handle.subject),
            None if e is None else lambda: getattr(e, method)(handle.expected),
            predicted,
            operation=method,
            clause=law_or(self.policy, conflict, "ORC-LAW-4")
            if conflict
            else common_clause(self.policy, method),
        )
        if conflict is None:
            self.ledger.append(handle)

    @rule(target=requests, priority=PRIORITIES, arrival_time=ARRIVAL_TIMES)
    @_stoppable(returns_requests=True)
    def add_request(self, priority: int, arrival_time: float) -> Handle:
        """RQ-ALL-1, RQ-FCFS-1, RQ-PRI-1: add a new request."""
        handle = self._new_request(priority, arrival_time)
        self._insert("add_request", handle)
        return handle

    @rule(target=requests, priority=PRIORITIES, arrival_time=ARRIVAL_TIMES)
    @_stoppable(returns_requests=True)
    def prepend_request(self, priority: int, arrival_time: float) -> Handle:
        """RQ-ALL-1, RQ-FCFS-3, RQ-PRI-3: prepend a new request."""
        handle = self._new_request(priority, arrival_time)
        self._insert("prepend_request", handle)
        return handle

    @rule(request=requests, method=st.sampled_from(["add_request", "prepend_request"]))
    @_stoppable(returns_requests=False)
    def add_request_again(self, request: Handle, method: str) -> None:
        """RQ-ALL-1 for a request seen before (popped, removed); RQ-ALL-2 when it is queued."""
        if self._conflict(request) is not None and not self.strict:
            return  # a precondition violation: only made in strict mode
        self._insert(method, request)

    @rule(
        target=requests,
        members=st.lists(
            st.one_of(requests, st.tuples(PRIORITIES, ARRIVAL_TIMES)), min_size=0, max_size=3
        ),
    )
    @_stoppable(returns_requests=True)
    def prepend_requests(self, members: list[Handle | tuple[int, float]]) -> Any:
        """RQ-ALL-8, RQ-FCFS-4, RQ-PRI-4: prepend another queue (new and old requests)."""
        self.others += 1
        name = f"other{self.others}"
        other = self._make_queue(name)
        other_e = self.expected_factory() if self.expected_factory is not None else None
        chosen: list[Handle] = []
        new: list[Handle] = []
        for member in members:
            if isinstance(member, tuple):
                handle = self._new_request(*member)
                new.append(handle)
            else:
                handle = member
                if any(h is handle or h.request_id == handle.request_id for h in chosen):
                    continue
                if self._conflict(handle) is not None and not self.strict:
                    continue
            chosen.append(handle)
            self._step(
                f"{name}.add_request({handle.name})",
                partial(other.add_request, handle.subject),
                None if other_e is None else partial(other_e.add_request, handle.expected),
                Outcome(),
                operation="add_request",
                clause=common_clause(self.policy, "add_request"),
            )
        incoming = self._stable_contents(name, other)
        if other_e is not None:
            self._step(
                f"list({name})",
                lambda: list(other),
                lambda: list(other_e),
                Outcome(value=incoming),
                "value",
                operation="iter",
                clause=effect_clause(self.policy, "iter"),
            )
        conflict = any(self._conflict(handle) is not None for handle in chosen)
        e = self.e
        self._step(
            f"q.prepend_requests({name})",
            lambda: self.q.prepend_requests(other),
            None if e is None else lambda: e.prepend_requests(other_e),
            Outcome(error="ValueError") if conflict else Outcome(),
            operation="prepend_requests",
            clause=common_clause(self.policy, "prepend_requests"),
        )
        if not conflict:
            self.ledger.extend(chosen)
        left = self._contents(name, other)
        if left != incoming:
            self._fail_law(
                f"q.prepend_requests({name}) changed {name}",
                [
                    f"assert list({name}) == {self._render(incoming)}"
                    f"  # FAILS: RQ-ALL-8: {name} was left as {self._render(left)}"
                ],
                "prepend_requests",
                law_or(self.policy, "RQ-ALL-8", "ORC-LAW-6"),
            )
        return multiple(*new)

    # ------------------------------------------------------------------
    # Rules: taking out

    @rule()
    @_stoppable(returns_requests=False)
    def pop_request(self) -> None:
        """RQ-ALL-4, RQ-FCFS-2, RQ-PRI-2 (ORC-LAW-1): pop; empty -> IndexError."""
        e = self.e
        empty = not self.ledger
        actual, expected = self._step(
            "q.pop_request()",
            self.q.pop_request,
            None if e is None else e.pop_request,
            self._head(),
            "request",
            operation="pop_request",
            clause=law_or(
                self.policy,
                "RQ-ALL-4" if empty else effect_clause(self.policy, "pop_request"),
                "ORC-LAW-1",
            ),
        )
        if actual.error is not None:
            return
        popped = actual.value
        if e is not None and popped is not expected.value:
            # ORC-TIES-1: the subject took another of the tied requests; so does e.
            e.remove_request(popped.expected)
            e.add_request(expected.value.expected)
        self.ledger = [h for h in self.ledger if h is not popped]
        after = self._contents()
        if after != self.last[1:]:
            self._fail_law(
                "after pop_request() the queue is not the rest of its iteration",
                [
                    f"assert list(q) == {self._render(self.last[1:])}"
                    f"  # FAILS: ORC-LAW-2: the queue holds {self._render(after)}"
                ],
                "pop_request",
                law_or(self.policy, "RQ-ALL-9", "ORC-LAW-2"),
            )

    @rule()
    @_stoppable(returns_requests=False)
    def peek_request(self) -> None:
        """RQ-ALL-5 (ORC-LAW-1): peek; empty -> IndexError."""
        e = self.e
        self._step(
            "q.peek_request()",
            self.q.peek_request,
            None if e is None else e.peek_request,
            self._head(),
            "request",
            operation="peek_request",
            clause=common_clause(self.policy, "peek_request"),
        )
        after = self._contents()
        if after != self.last:
            self._fail_law(
                "peek_request() changed the queue",
                [
                    f"assert list(q) == {self._render(self.last)}"
                    f"  # FAILS: RQ-ALL-5: after the peek the queue holds {self._render(after)}"
                ],
                "peek_request",
                common_clause(self.policy, "peek_request"),
            )

    @rule(request=requests)
    @_stoppable(returns_requests=False)
    def remove_request(self, request: Handle) -> None:
        """RQ-ALL-6 (ORC-LAW-5): remove a queued request; an absent one -> ValueError."""
        present = any(h is request for h in self.ledger)
        e = self.e
        self._step(
            f"q.remove_request({request.name})",
            lambda: self.q.remove_request(request.subject),
            None if e is None else lambda: e.remove_request(request.expected),
            Outcome() if present else Outcome(error="ValueError"),
            operation="remove_request",
            clause=common_clause(self.policy, "remove_request"),
        )
        if present:
            self.ledger = [h for h in self.ledger if h is not request]

    @rule(named=st.lists(requests, max_size=4), as_iterator=st.booleans())
    @_stoppable(returns_requests=False)
    def remove_requests(self, named: list[Handle], as_iterator: bool) -> None:
        """RQ-ALL-7 (ORC-LAW-5): remove the queued ones among present, absent and repeated."""
        listed = "[" + ", ".join(h.name for h in named) + "]"
        argument = f"iter({listed})" if as_iterator else listed

        def wrap(items: list[Any]) -> Iterable[Any]:
            return iter(items) if as_iterator else items

        e = self.e
        self._step(
            f"q.remove_requests({argument})",
            lambda: self.q.remove_requests(wrap([h.subject for h in named])),
            None if e is None else lambda: e.remove_requests(wrap([h.expected for h in named])),
            Outcome(),
            operation="remove_requests",
            clause=common_clause(self.policy, "remove_requests"),
        )
        self.ledger = [h for h in self.ledger if all(h is not x for x in named)]

    # ------------------------------------------------------------------
    # Rules: looking

    @rule()
    @_stoppable(returns_requests=False)
    def iterate(self) -> None:
        """RQ-ALL-9, RQ-FCFS-5, RQ-PRI-5 (ORC-LAW-2): iterate."""
        e = self.e
        self._step(
            "list(q)",
            lambda: list(self.q),
            None if e is None else lambda: list(e),
            Outcome(value=self.last),
            "value",
            operation="iter",
            clause=effect_clause(self.policy, "iter"),
        )

    @rule()
    @_stoppable(returns_requests=False)
    def length(self) -> None:
        """RQ-ALL-1, RQ-ALL-4 (ORC-LAW-3, ORC-LAW-4): len."""
        e = self.e
        self._step(
            "len(q)",
            lambda: len(self.q),
            None if e is None else lambda: len(e),
            Outcome(value=len(self.ledger)),
            "value",
            operation="len",
            clause=length_clause(self.policy, self.last_operation),
        )

    @rule()
    @_stoppable(returns_requests=False)
    def truth(self) -> None:
        """RQ-ALL-10 (ORC-LAW-3): bool."""
        e = self.e
        self._step(
            "bool(q)",
            lambda: bool(self.q),
            None if e is None else lambda: bool(e),
            Outcome(value=bool(self.ledger)),
            "value",
            operation="bool",
            clause=common_clause(self.policy, "bool"),
        )

    # ------------------------------------------------------------------
    # After every step

    @invariant()
    @_stoppable(returns_requests=False)
    def check_queue(self) -> None:
        """Compare the whole contents and check the laws after every step.

        RQ-ALL-9 (ORC-LAW-2): iterating twice gives the same, so iteration
        does not change the queue; the contents equal the expected side's
        (RQ-FCFS-1..5, RQ-PRI-1..5; with ties="any" up to the order of ties,
        ORC-TIES-1) or, without one, hold exactly the requests that must be
        queued, each once (ORC-LAW-4); RQ-ALL-10 (ORC-LAW-3): `len` and
        `bool` agree with the iteration. (The peek and pop rules check
        ORC-LAW-1 and ORC-LAW-2 against the contents checked here.) A failure
        names the clause of the last operation (ORC-CLAUSE-1).
        """
        first = self._stable_contents()
        expected = self._expected_contents()
        operation = self.last_operation
        after = f" after {self.last_call}" if self.last_call else ""
        if self.e is not None:
            if not self._same(first, expected):
                self._note_parting(first, expected)
                self._fail_law(
                    f"the contents differ{after}",
                    [
                        f"assert list(q) == {self._render(expected)}"
                        f"  # FAILS: the queue holds {self._render(first)}"
                    ],
                    operation,
                    effect_clause(self.policy, operation),
                )
        elif sorted(map(id, first)) != sorted(map(id, expected)):
            wanted = sorted(h.request_id for h in expected)
            held = [h.request_id if isinstance(h, Handle) else self._render(h) for h in first]
            self._fail_law(
                f"requests were lost, duplicated or invented{after}",
                [
                    f"assert sorted(r.request_id for r in q) == {wanted!r}"
                    f"  # FAILS: the queue holds {sorted(held)!r}"
                ],
                operation,
                "ORC-LAW-4",
            )
        self.last = first
        length = _call(lambda: len(self.q))
        if length.error is not None or length.value != len(first):
            self._fail_law(
                f"len(q) disagrees with the iteration{after}",
                [f"assert len(q) == {len(first)}  # FAILS: {self._describe(length, 'value')}"],
                operation,
                length_clause(self.policy, operation),
            )
        truth = _call(lambda: bool(self.q))
        if truth.error is not None or truth.value != (len(first) > 0):
            statement = "assert q" if first else "assert not q"
            self._fail_law(
                f"bool(q) disagrees with len(q){after}",
                [f"{statement}  # FAILS: bool(q) {self._describe(truth, 'value')}"],
                operation,
                common_clause(self.policy, "bool"),
            )


def _policy_of(expected: Any, policy: str | None) -> Policy:
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


class StrictQueueMachine(QueueMachine):
    """QueueMachine plus the calls that break a precondition of the spec (ORC-CRQ-6).

    A request queued twice (RQ-ALL-2), a different request with a taken id
    (RQ-ALL-3), an object that is no request (RQ-REQ-3), a queue prepended to
    itself or sharing a request (RQ-ALL-8): the subject must raise what the
    expected side raises, and change nothing.
    """

    strict = True

    @precondition(lambda self: bool(self.ledger))
    @rule(
        target=QueueMachine.requests,
        data=st.data(),
        priority=PRIORITIES,
        arrival_time=ARRIVAL_TIMES,
        method=st.sampled_from(["add_request", "prepend_request"]),
    )
    @_stoppable(returns_requests=True)
    def add_request_with_taken_id(
        self, data: st.DataObject, priority: int, arrival_time: float, method: str
    ) -> Handle:
        """RQ-ALL-3: a different request whose id is queued is rejected with ValueError."""
        queued = data.draw(st.sampled_from(self.ledger), label="queued")
        twin = self._new_request(priority, arrival_time, request_id=queued.request_id)
        self._insert(method, twin)
        return twin

    @rule(method=st.sampled_from(["add_request", "prepend_request"]))
    @_stoppable(returns_requests=False)
    def add_non_request(self, method: str) -> None:
        """RQ-REQ-3: an object without the request fields is rejected with TypeError."""
        e = self.e
        self._step(
            f"q.{method}('r0')",
            lambda: getattr(self.q, method)("r0"),
            None if e is None else lambda: getattr(e, method)("r0"),
            Outcome(error="TypeError"),
            operation=method,
            clause="RQ-REQ-3",
        )

    @rule()
    @_stoppable(returns_requests=False)
    def prepend_requests_to_itself(self) -> None:
        """RQ-ALL-8: a queue prepended to itself is rejected with ValueError."""
        e = self.e
        self._step(
            "q.prepend_requests(q)",
            lambda: self.q.prepend_requests(self.q),
            None if e is None else lambda: e.prepend_requests(e),
            Outcome(error="ValueError"),
            operation="prepend_requests",
            clause="RQ-ALL-8",
        )


def _add_batch(self: QueueMachine, data: st.DataObject) -> Any:
    """ORC-SIZE-2: start the program with a batch of `initial_requests` requests.

    The batch is the list `b` (ids 'b0', 'b1', ...), added in order by
    `add_request`; the program writes it as one list and one loop.
    """
    low, high = self.initial_requests
    keys = data.draw(
        st.lists(st.tuples(PRIORITIES, ARRIVAL_TIMES), min_size=low, max_size=high),
        label="batch",
    )
    if not keys:
        return multiple()
    if self.request_name == "Request" and self.request_factory is Request:
        make = f"Request(f'{BATCH}{{i}}', priority=p, arrival_time=t)"
    else:
        make = f"{self.request_name}(f'{BATCH}{{i}}', p, t)"
    creation = f"{BATCH} = [{make} for i, (p, t) in enumerate({_keys_literal(keys)})]"
    handles = [
        self._handle(
            f"{BATCH}[{index}]",
            f"{BATCH}{index}",
            priority,
            arrival_time,
            lambda made: f"{creation}  # FAILS: raises {made.error}: {made.detail}",
            batch_index=index,
        )
        for index, (priority, arrival_time) in enumerate(keys)
    ]
    self._record(creation)
    e = self.e
    for index, handle in enumerate(handles):
        actual = _call(partial(self.q.add_request, handle.subject))
        expected = Outcome() if e is None else _call(partial(e.add_request, handle.expected))
        if actual.error != expected.error:
            loop = [f"for request in {BATCH}[:{index}]:", "    q.add_request(request)"]
            failing = self._expectation(f"q.add_request({handle.name})", "none", expected)
            failing[0] += f"  # FAILS: {self._describe(actual, 'none')}"
            self._fail_call(
                f"q.add_request({handle.name}) {self._describe(actual, 'none')}",
                [*(loop if index else []), *failing],
                "add_request",
                common_clause(self.policy, "add_request"),
            )
        self.ledger.append(handle)
    self._record(f"for request in {BATCH}:")
    self._record("    q.add_request(request)")
    self.last_call = f"adding the {len(handles)} requests of {BATCH}"
    self.last_operation = "add_request"
    return multiple(*handles)


_starting_batch = initialize(target=QueueMachine.requests, data=st.data())(
    _stoppable(returns_requests=True)(_add_batch)
)


class LongQueueMachine(QueueMachine):
    """QueueMachine whose programs start with a batch of requests (ORC-SIZE-2)."""

    add_batch = _starting_batch


class StrictLongQueueMachine(StrictQueueMachine):
    """StrictQueueMachine whose programs start with a batch of requests (ORC-SIZE-2)."""

    add_batch = _starting_batch


def queue_machine(
    subject_factory: QueueFactory,
    expected_factory: QueueFactory | None = None,
    *,
    request_factory: RequestFactory | None = None,
    strict: bool = False,
    policy: str | None = None,
    ties: Ties = "exact",
    known: Iterable[FailureKey] = (),
    initial_requests: tuple[int, int] = (0, 0),
) -> QueueMachine:
    """ORC-MACH-1: the machine for a subject and an expected side (strict or not, long or not)."""
    long = initial_requests[1] > 0
    if strict:
        cls: type[QueueMachine] = StrictLongQueueMachine if long else StrictQueueMachine
    else:
        cls = LongQueueMachine if long else QueueMachine
    return cls(
        subject_factory,
        expected_factory,
        request_factory=request_factory,
        policy=policy,
        ties=ties,
        known=known,
        initial_requests=initial_requests,
    )
