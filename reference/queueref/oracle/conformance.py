"""`check_request_queue` and `check_queue_laws`: queueref as an oracle for other queues.

Both run `queueref.oracle.queue_machine.QueueMachine` under fixed Hypothesis
settings (derandomized, no example database, no deadline), so a verdict does
not depend on the caller's Hypothesis profile and the same queue always gets
the same verdict and the same failing program (ORC-CRQ-4).

A failure becomes one `ConformanceError` (an `AssertionError`) whose message
holds Hypothesis's shrunk example rewritten as Python statements that paste
into a test (ORC-CRQ-2); when Hypothesis reports several distinct failures,
the one error lists every one of them (ORC-CRQ-5).

Models no vLLM file: this is how a vLLM plugin's `RequestQueue` subclass can be
compared with `vllm/v1/core/sched/request_queue.py` as queueref reads it.
"""

from __future__ import annotations

import traceback
from typing import Any, cast

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from queueref.oracle.errors import ConformanceError
from queueref.oracle.queue_machine import (
    ConformanceFailure,
    QueueFactory,
    QueueMachine,
    RequestFactory,
    python_name,
    queue_machine,
)
from queueref.queues import SchedulingPolicy, create_request_queue

#: At most this many steps per generated program (fixed, so profiles do not change it).
STEPS_PER_EXAMPLE = 20


def oracle_settings(max_examples: int) -> settings:
    """ORC-CRQ-4: the fixed settings every oracle run uses, whatever the caller's profile."""
    if max_examples < 1:
        raise ValueError(f"ORC-CRQ-4: max_examples must be at least 1, got {max_examples!r}")
    return settings(
        settings.get_profile("default"),
        max_examples=max_examples,
        stateful_step_count=STEPS_PER_EXAMPLE,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=True,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )


def _describe_exception(exc: BaseException) -> tuple[str, str]:
    """A one-line summary and the indented failing program (or traceback)."""
    if isinstance(exc, ConformanceFailure):
        return exc.summary, _indent(exc.program)
    if isinstance(exc, Flaky) and not isinstance(exc, BaseExceptionGroup):
        return f"Hypothesis reports {type(exc).__name__}", _indent(str(exc))
    text = "".join(traceback.format_exception(exc)).rstrip()
    return f"the check itself failed with {type(exc).__name__}", _indent(text)


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in text.splitlines())


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(_leaves(inner))
        return found
    return [exc]


def conformance_error(
    exc: BaseException, title: str, first_seen: ConformanceFailure | None = None
) -> ConformanceError:
    """ORC-CRQ-2, ORC-CRQ-5: one ConformanceError from whatever Hypothesis raised.

    A single failure gives its program; an `ExceptionGroup` of distinct
    failures gives all of them, numbered; Hypothesis's `Flaky` errors (the
    subject did not fail, or did not draw, the same way when replayed) say that
    the subject behaves nondeterministically, and show `first_seen`, the
    failure as it was first seen (not shrunk, since it did not reproduce).
    """
    leaves = _leaves(exc)
    programs = [leaf.program if isinstance(leaf, ConformanceFailure) else "" for leaf in leaves]
    parts = [title]
    if isinstance(exc, Flaky) or any(isinstance(leaf, Flaky) for leaf in leaves):
        parts.append(
            "The failure did not reproduce when replayed: the queue behaves "
            "nondeterministically (it depends on something besides the calls made)."
        )
        if first_seen is not None:
            leaves = [first_seen]
            programs = [first_seen.program]
            parts.append("The failure as first seen (not shrunk):")
            parts.append(f"{first_seen.summary}\n\n{_indent(first_seen.program)}")
            return ConformanceError("\n\n".join(parts), program=programs[0], failures=programs)
    if len(leaves) > 1:
        parts.append(f"Hypothesis found {len(leaves)} distinct failures.")
    for number, leaf in enumerate(leaves, start=1):
        summary, program = _describe_exception(leaf)
        if len(leaves) > 1:
            summary = f"--- failure {number} of {len(leaves)}: {summary}"
        parts.append(summary)
        if isinstance(leaf, ConformanceFailure):
            parts.append("Shortest failing sequence (paste it into a test):")
        parts.append(program)
    return ConformanceError(
        "\n\n".join(parts), program=programs[0], failures=[p for p in programs if p]
    )


def run_queue_machine(
    factory: QueueFactory,
    expected_factory: QueueFactory | None,
    *,
    request_factory: RequestFactory | None,
    strict: bool,
    max_examples: int,
    title: str,
) -> None:
    """ORC-MACH-1: run the queue machine under the oracle settings; failures -> ConformanceError."""
    __tracebackhide__ = True  # pytest: show the caller's line, not the oracle's internals
    run_settings = oracle_settings(max_examples)
    first_seen: list[ConformanceFailure] = []

    def machine() -> QueueMachine:
        # Keep the first failure seen: when it does not replay, it is all there is.
        if not first_seen and machines and machines[-1].failure is not None:
            first_seen.append(machines[-1].failure)
        made = queue_machine(
            factory, expected_factory, request_factory=request_factory, strict=strict
        )
        machines[:] = [made]
        return made

    machines: list[QueueMachine] = []
    try:
        # Hypothesis accepts any callable that makes a machine (zarr-python passes a lambda).
        run_state_machine_as_test(cast(Any, machine), settings=run_settings)
    except (Exception, BaseExceptionGroup) as exc:
        if not first_seen and machines and machines[-1].failure is not None:
            first_seen.append(machines[-1].failure)
        raise conformance_error(exc, title, first_seen[0] if first_seen else None) from None


def check_request_queue(
    factory: QueueFactory,
    policy: SchedulingPolicy | str,
    *,
    request_factory: RequestFactory | None = None,
    max_examples: int = 200,
    strict: bool = False,
) -> None:
    """Check that `factory()` queues behave like queueref's reference for `policy`.

    ORC-CRQ-1: drives `factory()` and `create_request_queue(policy)` side by
    side through `QueueMachine`; returns None when they agree on every
    generated program, else raises `ConformanceError` (ORC-CRQ-2) holding
    the shortest failing program. Results and exception types (IndexError,
    ValueError, TypeError) are compared; an `icontract.ViolationError` or any
    other exception from the subject is a failure (ORC-CRQ-3).

    ORC-SEED-1: the default budget (`max_examples=200` programs of at most
    `STEPS_PER_EXAMPLE` calls) catches each seeded bug listed in
    specs/oracle.md; a failure costs a few more seconds to shrink.

    ORC-CRQ-6: with `strict=True` the calls that break a precondition of the
    spec (a request queued twice, a taken id, a non-request, a queue
    prepended to itself or sharing a request) are made too, and the subject
    must reject them as the reference does. vLLM leaves them undefined, so
    they are off by default.

    >>> from queueref import FCFSRequestQueue
    >>> check_request_queue(FCFSRequestQueue, "fcfs", max_examples=5)

    :raises ValueError: an unknown policy (RQ-POL-2, ORC-CRQ-7), before anything runs
    """
    __tracebackhide__ = True
    create_request_queue(policy)  # ORC-CRQ-7: an unknown policy raises ValueError (RQ-POL-2)
    reference = SchedulingPolicy(policy)
    name, _ = python_name(factory, "factory")
    run_queue_machine(
        factory,
        lambda: create_request_queue(reference),
        request_factory=request_factory,
        strict=strict,
        max_examples=max_examples,
        title=f"{name} does not behave like queueref's {reference.value!r} reference queue.",
    )


def check_queue_laws(
    factory: QueueFactory,
    *,
    request_factory: RequestFactory | None = None,
    max_examples: int = 200,
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
    as it was. Raises `ConformanceError` like `check_request_queue`.

    >>> from queueref import PriorityRequestQueue
    >>> check_queue_laws(PriorityRequestQueue, max_examples=5)
    """
    __tracebackhide__ = True
    name, _ = python_name(factory, "factory")
    run_queue_machine(
        factory,
        None,
        request_factory=request_factory,
        strict=strict,
        max_examples=max_examples,
        title=f"{name} breaks a law that every RequestQueue obeys.",
    )
