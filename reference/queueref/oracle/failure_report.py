"""The message of a failed queue check: one `ConformanceError` for every failure (ORC-CRQ-2).

Each failure gives its summary, its clause (ORC-CLAUSE-1), a hint when
there is one (ORC-TIES-2), and its program; several are numbered
(ORC-MANY-1); Hypothesis's `Flaky` errors say that the subject behaves
nondeterministically (ORC-CRQ-5); the message ends with what the search
spent and the Hypothesis version (ORC-CRQ-4, ORC-SIZE-4).
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from typing import Protocol

import hypothesis
from hypothesis.errors import Flaky

from queueref.oracle import search_budget
from queueref.oracle.clauses import describe
from queueref.oracle.errors import ConformanceError, ConformanceFailure


class Budget(Protocol):
    """What the message says about the budget (`queueref.oracle.conformance.Budget`)."""

    @property
    def max_failures(self) -> int: ...

    def describe(self) -> str: ...


def indent(text: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in text.splitlines())


def leaves_of(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(leaves_of(inner))
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
        if leaf.shrunk:
            parts.append("Shortest failing sequence (paste it into a test):")
        else:
            calls = search_budget.SHRINK_CALLS
            parts.append(
                f"Shortest failing sequence found before the shrinking budget ({calls} calls, "
                "ORC-SIZE-4) ran out; a shorter one may exist. If the bug needs a long queue, "
                "initial_requests=(50, 100) reaches one in a single step that shrinks by "
                "halves (ORC-SIZE-2). Paste it into a test:"
            )
        parts.append(indent(leaf.program))
        return parts
    if isinstance(leaf, Flaky) and not isinstance(leaf, BaseExceptionGroup):
        return [f"Hypothesis reports {type(leaf).__name__}", indent(str(leaf))]
    text = "".join(traceback.format_exception(leaf)).rstrip()
    return [f"the check itself failed with {type(leaf).__name__}", indent(text)]


def conformance_error(
    found: BaseException | Sequence[BaseException],
    title: str,
    first_seen: ConformanceFailure | None = None,
    budget: Budget | None = None,
    search_cut: bool = False,
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
        leaves_of(found)
        if isinstance(found, BaseException)
        else [leaf for exc in found for leaf in leaves_of(exc)]
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
    return _error(parts, leaves, budget, search_cut)


def _error(
    parts: list[str],
    leaves: Sequence[BaseException],
    budget: Budget | None,
    search_cut: bool = False,
) -> ConformanceError:
    reports = [leaf for leaf in leaves if isinstance(leaf, ConformanceFailure)]
    if budget is not None and len(reports) >= budget.max_failures:
        parts.append(
            f"The search stopped at max_failures={budget.max_failures}; there may be more."
        )
    elif search_cut:
        calls = search_budget.EXTRA_SEARCH_CALLS
        parts.append(
            f"The search for more failures stopped when its budget ({calls} calls, "
            "ORC-SIZE-4) was spent; there may be more."
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
