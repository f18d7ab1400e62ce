"""`check_request_queue` and `check_queue_laws`: queueref as an oracle for other queues.

Both run `queueref.oracle.queue_machine.QueueMachine` under fixed Hypothesis
settings (derandomized, no example database, no deadline), so a verdict does
not depend on the caller's Hypothesis profile and the same queue always gets
the same verdict and the same failing programs from the same Hypothesis
version (ORC-CRQ-4), which every failure prints.

The search runs in rounds (ORC-MANY-1): each round is one Hypothesis run of
at most `max_examples` programs that stops at the first failure and shrinks
it; the next round leaves out the failures found so far (a program that meets
one stops there), until `max_failures` distinct failures -- distinct by
operation and clause -- are found or a round finds nothing new. All of them
become one `ConformanceError` (an `AssertionError`) whose message holds each
failure's clause and program, rewritten as Python statements that paste into
a test (ORC-CRQ-2).

Models no vLLM file: this is how a vLLM plugin's `RequestQueue` subclass can be
compared with `vllm/v1/core/sched/request_queue.py` as queueref reads it.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.errors import Flaky, Unsatisfiable
from hypothesis.stateful import run_state_machine_as_test

from queueref.oracle.clauses import describe
from queueref.oracle.errors import ConformanceError, FailureKey
from queueref.oracle.queue_machine import (
    ConformanceFailure,
    QueueFactory,
    QueueMachine,
    RequestFactory,
    Ties,
    python_name,
    queue_machine,
)
from queueref.queues.factory import SchedulingPolicy, create_request_queue
from queueref.validators import is_int, is_int_at_least

#: The default number of calls per program (ORC-SIZE-1).
STEPS_PER_EXAMPLE = 20
#: The default number of distinct failures to look for (ORC-MANY-1).
MAX_FAILURES = 5
#: The largest starting batch (Hypothesis's choice buffer holds a few thousand draws).
MAX_INITIAL_REQUESTS = 1000


@dataclass(frozen=True)
class Budget:
    """What one check may spend, validated (ORC-SIZE-1, ORC-SIZE-2, ORC-MANY-1, ORC-TIES-1)."""

    max_examples: int = 200
    max_calls: int = STEPS_PER_EXAMPLE
    initial_requests: tuple[int, int] = (0, 0)
    max_failures: int = MAX_FAILURES
    ties: Ties = "exact"

    @classmethod
    def of(
        cls,
        *,
        max_examples: int,
        max_calls: int,
        initial_requests: int | tuple[int, int],
        max_failures: int,
        ties: str,
    ) -> Budget:
        """ORC-SIZE-3: the budget, or ValueError naming the option that is out of range."""
        for name, value in (
            ("max_examples", max_examples),
            ("max_calls", max_calls),
            ("max_failures", max_failures),
        ):
            if not is_int_at_least(value, 1):
                raise ValueError(f"{name} must be an int of at least 1, got {value!r}")
        if is_int(initial_requests):
            low = high = initial_requests
        elif (
            isinstance(initial_requests, tuple)
            and len(initial_requests) == 2
            and all(is_int(n) for n in initial_requests)
        ):
            low, high = initial_requests
        else:
            raise ValueError(
                f"initial_requests must be an int or a (low, high) pair, got {initial_requests!r}"
            )
        if not 0 <= low <= high <= MAX_INITIAL_REQUESTS:
            raise ValueError(
                f"initial_requests must satisfy 0 <= low <= high <= {MAX_INITIAL_REQUESTS}, "
                f"got {initial_requests!r}"
            )
        if ties not in ("exact", "any"):
            raise ValueError(f"ties must be 'exact' or 'any', got {ties!r}")
        return cls(max_examples, max_calls, (low, high), max_failures, cast(Ties, ties))

    def describe(self) -> str:
        batch = ""
        if self.initial_requests[1]:
            low, high = self.initial_requests
            batch = f", initial_requests=({low}, {high})"
        return f"max_examples={self.max_examples}, max_calls={self.max_calls}{batch}"


def oracle_settings(max_examples: int, max_calls: int = STEPS_PER_EXAMPLE) -> settings:
    """ORC-CRQ-4: the fixed settings every oracle run uses, whatever the caller's profile.

    One failure per run (`report_multiple_bugs=False`): Hypothesis's own search
    for more bugs stops on a clock, the rounds of `run_queue_machine` do not.
    """
    if max_examples < 1:
        raise ValueError(f"ORC-CRQ-4: max_examples must be at least 1, got {max_examples!r}")
    return settings(
        settings.get_profile("default"),
        max_examples=max_examples,
        stateful_step_count=max_calls,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in text.splitlines())


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(_leaves(inner))
        return found
    return [exc]


def _version_line(budget: Budget | None) -> str:
    """ORC-CRQ-4: the Hypothesis version (and budget) the verdict holds for."""
    spent = f", {budget.describe()}" if budget is not None else ""
    return (
        f"Found by Hypothesis {hypothesis.__version__}{spent}. The same queue gets the "
        "same verdict and programs on every run with this Hypothesis version."
    )


def _describe_failure(leaf: BaseException) -> list[str]:
    """The paragraphs of one failure: summary, clause, hint, program (or traceback)."""
    if isinstance(leaf, ConformanceFailure):
        parts = [f"{leaf.summary}\n{describe(leaf.clause)}"]
        if leaf.hint:
            parts.append(leaf.hint)
        parts.append("Shortest failing sequence (paste it into a test):")
        parts.append(_indent(leaf.program))
        return parts
    if isinstance(leaf, Flaky) and not isinstance(leaf, BaseExceptionGroup):
        return [f"Hypothesis reports {type(leaf).__name__}", _indent(str(leaf))]
    text = "".join(traceback.format_exception(leaf)).rstrip()
    return [f"the check itself failed with {type(leaf).__name__}", _indent(text)]


def conformance_error(
    found: BaseException | Sequence[BaseException],
    title: str,
    first_seen: ConformanceFailure | None = None,
    budget: Budget | None = None,
) -> ConformanceError:
    """ORC-CRQ-2, ORC-CRQ-5, ORC-MANY-1: one ConformanceError for every failure found.

    `found` is what the rounds raised (an exception group is flattened). One
    failure gives its clause and program; several are numbered. Hypothesis's
    `Flaky` errors (the subject did not fail, or did not draw, the same way
    when replayed) say that the subject behaves nondeterministically, and show
    `first_seen`, the failure as it was first seen (not shrunk, since it did
    not reproduce). Every message ends with the Hypothesis version (ORC-CRQ-4).
    """
    leaves = (
        _leaves(found)
        if isinstance(found, BaseException)
        else [leaf for exc in found for leaf in _leaves(exc)]
    )
    parts = [title]
    if any(isinstance(leaf, Flaky) for leaf in leaves):
        parts.append(
            "A failure did not reproduce when replayed: the queue behaves "
            "nondeterministically (it depends on something besides the calls made)."
        )
        if first_seen is not None:  # show it as first seen instead of Hypothesis's report
            leaves = [leaf for leaf in leaves if not isinstance(leaf, Flaky)] + [first_seen]
    if len(leaves) > 1:
        parts.append(f"{len(leaves)} distinct failures (by operation and clause):")
    for number, leaf in enumerate(leaves, start=1):
        paragraphs = _describe_failure(leaf)
        if leaf is first_seen:
            paragraphs[-2] = "The failure as first seen (not shrunk):"
        if len(leaves) > 1:
            paragraphs[0] = f"--- failure {number} of {len(leaves)}: {paragraphs[0]}"
        parts.extend(paragraphs)
    return _error(parts, leaves, budget)


def _error(
    parts: list[str], leaves: Sequence[BaseException], budget: Budget | None
) -> ConformanceError:
    reports = [leaf for leaf in leaves if isinstance(leaf, ConformanceFailure)]
    if budget is not None and len(reports) >= budget.max_failures:
        parts.append(
            f"The search stopped at max_failures={budget.max_failures}; there may be more."
        )
    parts.append(_version_line(budget))
    programs = [report.program for report in reports]
    return ConformanceError(
        "\n\n".join(parts),
        program=programs[0] if programs else "",
        failures=programs,
        reports=reports,
        hypothesis_version=hypothesis.__version__,
    )


def _one_round(
    make: Any, run_settings: settings
) -> tuple[BaseException | None, ConformanceFailure | None]:
    """One Hypothesis run: what it raised (None: no new failure) and the first failure seen."""
    first_seen: list[ConformanceFailure] = []
    machines: list[QueueMachine] = []

    def machine() -> QueueMachine:
        # Keep the first failure seen: when it does not replay, it is all there is.
        if not first_seen and machines and machines[-1].failure is not None:
            first_seen.append(machines[-1].failure)
        made: QueueMachine = make()
        machines[:] = [made]
        return made

    try:
        # Hypothesis accepts any callable that makes a machine (zarr-python passes a lambda).
        run_state_machine_as_test(cast(Any, machine), settings=run_settings)
    except Unsatisfiable:
        return None, None  # every program met a known failure: nothing new to find
    except (Exception, BaseExceptionGroup) as exc:
        if not first_seen and machines and machines[-1].failure is not None:
            first_seen.append(machines[-1].failure)
        return exc, first_seen[0] if first_seen else None
    return None, None


def run_queue_machine(
    factory: QueueFactory,
    expected_factory: QueueFactory | None,
    *,
    request_factory: RequestFactory | None,
    strict: bool,
    budget: Budget,
    title: str,
    policy: str | None = None,
) -> None:
    """ORC-MACH-1, ORC-MANY-1: run the machine in rounds; every failure -> one ConformanceError."""
    __tracebackhide__ = True  # pytest: show the caller's line, not the oracle's internals
    long = budget.initial_requests[1] > 0
    run_settings = oracle_settings(budget.max_examples, budget.max_calls + (1 if long else 0))
    known: set[FailureKey] = set()
    found: list[BaseException] = []
    first_seen: ConformanceFailure | None = None
    while len(found) < budget.max_failures:
        make = partial(
            queue_machine,
            factory,
            expected_factory,
            request_factory=request_factory,
            strict=strict,
            policy=policy,
            ties=budget.ties,
            known=frozenset(known),
            initial_requests=budget.initial_requests,
        )
        raised, first_seen = _one_round(
            make,
            run_settings,
        )
        if raised is None:
            break
        new = [
            leaf
            for leaf in _leaves(raised)
            if not (isinstance(leaf, ConformanceFailure) and leaf.key in known)
        ]
        found.extend(new)
        known.update(leaf.key for leaf in new if isinstance(leaf, ConformanceFailure))
        if not new or not all(isinstance(leaf, ConformanceFailure) for leaf in new):
            break  # a crash of the check or a flaky failure: it cannot be left out
    if found:
        raise conformance_error(found, title, first_seen, budget) from None


def check_request_queue(
    factory: QueueFactory,
    policy: SchedulingPolicy | str,
    *,
    request_factory: RequestFactory | None = None,
    max_examples: int = 200,
    max_calls: int = STEPS_PER_EXAMPLE,
    initial_requests: int | tuple[int, int] = 0,
    max_failures: int = MAX_FAILURES,
    ties: str = "exact",
    strict: bool = False,
) -> None:
    """Check that `factory()` queues behave like queueref's reference for `policy`.

    ORC-CRQ-1: drives `factory()` and `create_request_queue(policy)` side by
    side through `QueueMachine`; returns None when they agree on every
    generated program, else raises `ConformanceError` (ORC-CRQ-2) holding
    the shortest failing program of each distinct failure and the clause it
    breaks (ORC-CLAUSE-1, ORC-MANY-1). Results and exception types
    (IndexError, ValueError, TypeError) are compared; an
    `icontract.ViolationError` or any other exception from the subject is a
    failure (ORC-CRQ-3).

    The budget: `max_examples` programs (per round) of at most `max_calls`
    calls (ORC-SIZE-1), each starting, with `initial_requests=(low, high)`,
    by adding a batch of low to high requests (ORC-SIZE-2); the search goes
    on after a failure until `max_failures` distinct ones are found or a
    round finds nothing new (ORC-MANY-1). ORC-SEED-1: the default budget
    catches each seeded bug listed in specs/oracle.md.

    `ties="any"` accepts any order among requests with equal (priority,
    arrival_time) in a priority queue, for request types whose `<` leaves
    them unordered (ORC-TIES-1).

    ORC-CRQ-6: with `strict=True` the calls that break a precondition of the
    spec (a request queued twice, a taken id, a non-request, a queue
    prepended to itself or sharing a request) are made too, and the subject
    must reject them as the reference does. vLLM leaves them undefined, so
    they are off by default.

    >>> from queueref import FCFSRequestQueue
    >>> check_request_queue(FCFSRequestQueue, "fcfs", max_examples=5)

    :raises ValueError: an unknown policy (RQ-POL-2, ORC-CRQ-7) or an option
        out of range, before anything runs
    """
    __tracebackhide__ = True
    create_request_queue(policy)  # ORC-CRQ-7: an unknown policy raises ValueError (RQ-POL-2)
    reference = SchedulingPolicy(policy)
    budget = Budget.of(
        max_examples=max_examples,
        max_calls=max_calls,
        initial_requests=initial_requests,
        max_failures=max_failures,
        ties=ties,
    )
    name, _ = python_name(factory, "factory")
    run_queue_machine(
        factory,
        lambda: create_request_queue(reference),
        request_factory=request_factory,
        strict=strict,
        budget=budget,
        policy=reference.value,
        title=f"{name} does not behave like queueref's {reference.value!r} reference queue.",
    )


def check_queue_laws(
    factory: QueueFactory,
    *,
    request_factory: RequestFactory | None = None,
    max_examples: int = 200,
    max_calls: int = STEPS_PER_EXAMPLE,
    initial_requests: int | tuple[int, int] = 0,
    max_failures: int = MAX_FAILURES,
    strict: bool = False,
) -> None:
    """Check the policy-independent laws of `RequestQueue` on `factory()` queues.

    For queues whose order is neither FCFS nor priority (shortest job first,
    fair sharing, ...): no expected order, only the laws (ORC-LAW-1 to
    ORC-LAW-6) -- peek is the next pop and empty pop/peek raise IndexError;
    iteration is the successive pops and does not change the queue; `len` and
    `bool` agree with it; nothing is lost or duplicated; `remove_request` of an
    absent request raises ValueError and `remove_requests` ignores absent
    ones; `prepend_requests` moves in every request and leaves the other queue
    as it was. Raises `ConformanceError` like `check_request_queue`, with
    the same budget options (ORC-SIZE-1, ORC-SIZE-2, ORC-MANY-1).

    >>> from queueref import PriorityRequestQueue
    >>> check_queue_laws(PriorityRequestQueue, max_examples=5)
    """
    __tracebackhide__ = True
    budget = Budget.of(
        max_examples=max_examples,
        max_calls=max_calls,
        initial_requests=initial_requests,
        max_failures=max_failures,
        ties="exact",
    )
    name, _ = python_name(factory, "factory")
    run_queue_machine(
        factory,
        None,
        request_factory=request_factory,
        strict=strict,
        budget=budget,
        title=f"{name} breaks a law that every RequestQueue obeys.",
    )
