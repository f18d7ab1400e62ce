"""Oracle messages that point the right way (issue 27 item 5).

ORC-TIES-2: the tie hint only where ties are the whole story; ORC-TIES-3:
request ids whose string order leaves creation order only where a failure
needs it, and a message that says ids compare as strings; ORC-CLAUSE-1: one
clause per kind of failure in both checkers; ORC-CRQ-6: strict mode makes
the request-type calls too. Each on a broken queue of our own.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import pytest
from method_variants import Change, broken_class
from test_oracle import DuckFCFS, PlainPriority, run_program

from queueref.cli.check_queue import add_arguments
from queueref.oracle import ConformanceError, check_queue_laws, check_request_queue
from queueref.oracle.conformance import check_request_queue as documented

ForgetsToReheapify = broken_class(
    PlainPriority,
    "ForgetsToReheapify",
    Change(
        "remove_request",
        "remove_request deletes the entry but leaves the heap unsorted: wrong for every key",
        "            heapq.heapify(self._heap)\n",
        "",
    ),
)


_arrivals = itertools.count()


TiesInArrivalOrder = broken_class(
    PlainPriority,
    "TiesInArrivalOrder",
    Change(
        "key",
        "breaks ties by the order of adding, not by request_id: only ties are wrong",
        "request.request_id)",
        "next(_arrivals))",
    ),
    Change(
        "__iter__",
        "(iterates in key order)",
        "heap = list(self._heap)\n    while heap:\n        yield heapq.heappop(heap)[1]",
        "return iter([request for _, request in sorted(self._heap, key=lambda e: e[0])])",
    ),
    uses={"_arrivals": _arrivals},
)


LenOffAfterRemove = broken_class(
    DuckFCFS,
    "LenOffAfterRemove",
    Change(
        "__init__",
        "no contracts (not a RequestQueue): len counts a removed request once more",
        "self._items: list[Any] = []",
        "self._items: list[Any] = []\n    self._removed = 0",
    ),
    Change(
        "remove_request",
        "(remembers a removal)",
        "self._items.remove(request)",
        "self._items.remove(request)\n    self._removed = 1",
    ),
    Change(
        "__len__",
        "(counts it)",
        "return len(self._items)",
        "return len(self._items) + self._removed",
    ),
    Change(
        "__bool__",
        "(asks len)",
        "return bool(self._items)",
        "return len(self) > 0",
    ),
)


class AcceptsAnything(DuckFCFS):
    """Takes any object, like vLLM's queues: only strict mode objects."""


def _error(check: Any, *args: Any, **options: Any) -> ConformanceError:
    with pytest.raises(ConformanceError) as caught:
        check(*args, **options)
    return caught.value


def test_a_heap_that_forgets_to_reheapify_is_not_told_to_pass_ties_any() -> None:
    """ORC-TIES-2: the order is wrong for every key; the message must not blame ties.

    Hypothesis shrinks keys to equal ones, so the shortest program parts on
    a tie; the search with ties='any' fails too, and the message says that
    ties='any' would not help (before: "pass ties='any'" on every failure).
    """
    error = _error(check_request_queue, ForgetsToReheapify, "priority", max_failures=2)
    message = str(error)
    assert "pass ties='any'" not in message
    tie_reports = [report for report in error.reports if report.tie_only]
    for report in tie_reports:
        assert "the order is wrong beyond ties" in report.hint
        assert "so ties='any' would not help" in report.hint
    assert all(report.hint == "" for report in error.reports if not report.tie_only)
    for program in error.failures:
        assert run_program(program) is not None


def test_a_tie_bug_needs_two_requests_and_says_ids_compare_as_strings() -> None:
    """ORC-TIES-2, ORC-TIES-3: ties in adding order fail on two requests, not ten.

    The second request's id sorts first ('r02' < 'r1'); the hint says ids
    compare as strings, and, since the same search with ties='any' finds
    nothing, points at ties='any'.
    """
    error = _error(check_request_queue, TiesInArrivalOrder, "priority", max_failures=1)
    program = error.program
    assert program.count("Request(") == 2, program
    assert "Request('r02'" in program
    report = error.reports[0]
    assert report.tie_only
    assert "request ids compare as strings, so 'r02' < 'r1'" in report.hint
    assert "pass ties='any'" in report.hint
    assert "With ties='any' the same search finds no failure." in report.hint
    assert run_program(program) is not None


def test_ids_keep_creation_order_where_no_failure_needs_otherwise() -> None:
    """ORC-TIES-3: a bug that is not about ids shows ids equal to the request names."""
    error = _error(check_request_queue, LenOffAfterRemove, "fcfs", max_failures=1)
    assert "Request('r0" not in error.program
    assert "compare as strings" not in str(error)


@pytest.mark.parametrize("check", ["reference", "laws"])
def test_a_len_bug_names_the_same_clause_in_both_checkers(check: str) -> None:
    """ORC-CLAUSE-1: len disagreeing with the iteration is ORC-LAW-3 in both checkers.

    Before, the reference checker named the clause of the last operation
    (RQ-ALL-6 after a removal) and the laws checker ORC-LAW-3.
    """
    if check == "reference":
        error = _error(check_request_queue, LenOffAfterRemove, "fcfs", max_failures=1)
    else:
        error = _error(check_queue_laws, LenOffAfterRemove, max_failures=1)
    assert error.reports[0].clause == "ORC-LAW-3"
    assert "ORC-LAW-3: len(q) is the number of requests iterated" in str(error)
    assert "RQ-ALL-6" not in str(error)


def test_strict_mode_also_checks_the_request_type() -> None:
    """ORC-CRQ-6: strict=True adds the request-type call (RQ-REQ-3), not only duplicates."""
    check_request_queue(AcceptsAnything, "fcfs")  # without strict: no failure raised
    error = _error(check_request_queue, AcceptsAnything, "fcfs", strict=True, max_failures=5)
    clauses = {report.clause for report in error.reports}
    assert "RQ-REQ-3" in clauses
    assert clauses & {"RQ-ALL-2", "RQ-ALL-3"}


def test_strict_is_documented_for_what_it_does() -> None:
    """ORC-CRQ-6: the docstring and the CLI help name every kind of strict call."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    help_text = " ".join(parser.format_help().split())
    for words in ("queued twice", "taken id", "prepended to itself", "no request (TypeError)"):
        assert words in help_text
    doc = " ".join((documented.__doc__ or "").split())
    assert "an object that is no request (RQ-REQ-3)" in doc
