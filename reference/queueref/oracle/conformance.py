"""`check_request_queue` and `check_queue_laws`: queueref as an oracle for other queues.

Both run `queueref.oracle.rules.QueueMachine` under fixed Hypothesis
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

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.errors import Unsatisfiable
from hypothesis.stateful import run_state_machine_as_test

from queueref.oracle import search_budget
from queueref.oracle.errors import ConformanceFailure, FailureKey
from queueref.oracle.failure_report import conformance_error, leaves_of
from queueref.oracle.handles import python_name
from queueref.oracle.machine_core import QueueFactory, RequestFactory, Ties
from queueref.oracle.queue_machine import queue_machine
from queueref.oracle.rules import QueueMachine
from queueref.oracle.search_budget import BudgetSpent, WorkMeter
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


@dataclass
class Round:
    """What one Hypothesis run found (ORC-MANY-1, ORC-SIZE-4)."""

    raised: BaseException | None = None  # None: no new failure
    first_seen: ConformanceFailure | None = None  # the failure as first seen (ORC-CRQ-5)
    budget_spent: bool = False  # the meter ended the run


def _one_round(make: Any, run_settings: settings, meter: WorkMeter) -> Round:
    """One Hypothesis run: what it raised, the first failure seen, and whether the budget ended it.

    When the meter ends the run while Hypothesis shrinks (ORC-SIZE-4), the
    failure is the shortest program seen so far; when it ends the run before
    any failure, there is none.
    """
    seen: list[ConformanceFailure] = []
    machines: list[QueueMachine] = []

    def keep_failure() -> None:
        if machines and machines[-1].failure is not None and machines[-1].failure not in seen:
            seen.append(machines[-1].failure)

    def machine() -> QueueMachine:
        keep_failure()  # when it does not replay, the first seen is all there is
        made: QueueMachine = make(meter=meter)
        machines[:] = [made]
        return made

    try:
        # Hypothesis accepts any callable that makes a machine (zarr-python passes a lambda).
        run_state_machine_as_test(cast(Any, machine), settings=run_settings)
    except Unsatisfiable:
        return Round()  # every program met a known failure: nothing new to find
    except BudgetSpent:
        keep_failure()
        if not seen:
            return Round(budget_spent=True)
        shortest = min(seen, key=lambda failure: failure.program.count("\n"))
        shortest.shrunk = False
        return Round(shortest, None, budget_spent=True)
    except (Exception, BaseExceptionGroup) as exc:
        keep_failure()
        return Round(exc, seen[0] if seen else None)
    return Round()


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
    """ORC-MACH-1, ORC-MANY-1: run the machine in rounds; every failure -> one ConformanceError.

    ORC-SIZE-4: the first round may spend SHRINK_CALLS calls shrinking its
    failure; the rounds after it share EXTRA_SEARCH_CALLS calls, each
    shrinking at most SHRINK_CALLS. ORC-TIES-2: a failure that parts only on
    a tie keeps its hint only if the same search with ties='any' finds nothing.
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not the oracle's internals
    long = budget.initial_requests[1] > 0
    run_settings = oracle_settings(budget.max_examples, budget.max_calls + (1 if long else 0))
    meter = WorkMeter()
    known: set[FailureKey] = set()
    found: list[BaseException] = []
    first_seen: ConformanceFailure | None = None
    extra_left = search_budget.EXTRA_SEARCH_CALLS  # read now: a test may lower it
    search_cut = False
    machine = partial(
        queue_machine,
        factory,
        expected_factory,
        request_factory=request_factory,
        strict=strict,
        policy=policy,
        initial_requests=budget.initial_requests,
    )
    while len(found) < budget.max_failures:
        make = partial(machine, ties=budget.ties, known=frozenset(known))
        meter.start_round(extra_left if found else None)
        result = _one_round(make, run_settings, meter)
        if found:
            extra_left -= meter.round_calls
        first_seen = result.first_seen
        if result.raised is None:
            search_cut = result.budget_spent
            break
        new = [
            leaf
            for leaf in leaves_of(result.raised)
            if not (isinstance(leaf, ConformanceFailure) and leaf.key in known)
        ]
        found.extend(new)
        meter.failures = len(found)
        known.update(leaf.key for leaf in new if isinstance(leaf, ConformanceFailure))
        if not new or not all(isinstance(leaf, ConformanceFailure) for leaf in new):
            break  # a crash of the check or a flaky failure: it cannot be left out
        if extra_left <= 0:
            search_cut = len(found) < budget.max_failures
            break
    if found:
        _confirm_ties(found, machine, run_settings, meter)
        raise conformance_error(found, title, first_seen, budget, search_cut) from None


def _confirm_ties(
    found: Sequence[BaseException], make: Any, run_settings: settings, meter: WorkMeter
) -> None:
    """ORC-TIES-2: keep the tie hint only if the queue passes with ties='any'.

    A failure whose comparison parted only on a tie says "pass ties='any'".
    Hypothesis shrinks keys towards equal ones, so a queue whose order is
    wrong for every key (a heap that forgets to re-heapify) also shows first
    on a tie; one more search with ties='any' tells them apart. When it
    fails too, the hint says so and names what it found instead.
    """
    tied = [leaf for leaf in found if isinstance(leaf, ConformanceFailure) and leaf.tie_only]
    if not tied:
        return
    meter.start_round(None)
    result = _one_round(partial(make, ties="any"), run_settings, meter)
    failures = [] if result.raised is None else leaves_of(result.raised)
    other = next((leaf for leaf in failures if isinstance(leaf, ConformanceFailure)), None)
    for failure in tied:
        if other is None:
            failure.hint += " (With ties='any' the same search finds no failure.)"
        else:
            tie_line = failure.hint.split(", and the reference")[0]
            failure.hint = (
                f"{tie_line}, but the order is wrong beyond ties: with ties='any' the check "
                f"still fails ({other.summary}; {other.clause}), so ties='any' would not help."
            )


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
    spec are made too, and the subject must reject them as the reference
    does: duplicates -- a request queued twice (RQ-ALL-2), a taken id
    (RQ-ALL-3), a queue prepended to itself or sharing a request (RQ-ALL-8),
    each with ValueError -- and the request type: an object that is no request (RQ-REQ-3),
    with TypeError. vLLM leaves them undefined, so they are off by default.

    ORC-SIZE-4, ORC-SIZE-5: shrinking a failure and looking for more after
    the first are bounded by a budget in calls (`queueref.oracle.search_budget`),
    and a check that runs longer than a few seconds prints progress on stderr.

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
