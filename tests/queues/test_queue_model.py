"""Model tests: the reference queues against the plain list model, one machine per policy.

The machine is `queueref.oracle.variants.StrictQueueMachine` (the oracle's
runs), here with the reference queue as the subject and
`queueref.queues.model.ListQueueModel` as the expected side, in strict
mode: the precondition violations (duplicates, taken ids, non-requests, a
queue prepended to itself) are exercised too. The settings come from the
Hypothesis profile (`ci` is derandomized).

The list model is the oracle here, so it is itself checked first against
outcomes written out by hand from specs/request-queue.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test
from method_variants import Change, broken_class

from queueref import FCFSRequestQueue, PriorityRequestQueue, Request
from queueref.oracle.conformance import oracle_settings
from queueref.oracle.errors import ConformanceFailure
from queueref.oracle.variants import StrictQueueMachine
from queueref.queues.model import ListQueueModel

# Hypothesis types the factory as a machine class; any callable returning a machine works.
run_factory_machine: Callable[..., None] = run_state_machine_as_test


def names(queue: Any) -> list[str]:
    return [r.request_id for r in queue]


# --- the list model, by hand ---------------------------------------------------


def test_list_model_fcfs_by_hand() -> None:
    """RQ-FCFS-1, RQ-FCFS-2, RQ-FCFS-3, RQ-FCFS-4, RQ-FCFS-5, RQ-ALL-8: the FCFS list."""
    q = ListQueueModel("fcfs")
    a, b, c = Request("a"), Request("b"), Request("c")
    q.add_request(a)
    q.add_request(b)
    q.prepend_request(c)
    assert names(q) == ["c", "a", "b"]
    other = ListQueueModel("fcfs")
    x, y = Request("x"), Request("y")
    other.add_request(x)
    other.add_request(y)
    q.prepend_requests(other)
    assert names(q) == ["y", "x", "c", "a", "b"]
    assert names(other) == ["x", "y"]
    assert q.pop_request() is y
    assert q.peek_request() is x
    assert len(q) == 4 and bool(q)


def test_list_model_priority_by_hand() -> None:
    """RQ-REQ-1, RQ-PRI-1, RQ-PRI-2, RQ-PRI-3, RQ-PRI-4, RQ-PRI-5: the sorted list."""
    q = ListQueueModel("priority")
    late = Request("late", priority=0, arrival_time=2.0)
    early_b = Request("b", priority=0, arrival_time=1.0)
    early_a = Request("a", priority=0, arrival_time=1.0)
    urgent = Request("urgent", priority=-1, arrival_time=9.0)
    q.add_request(late)
    q.prepend_request(early_b)
    other = ListQueueModel("priority")
    other.add_request(urgent)
    other.add_request(early_a)
    q.prepend_requests(other)
    assert names(q) == ["urgent", "a", "b", "late"]
    assert q.pop_request() is urgent
    assert names(q) == ["a", "b", "late"]


def test_list_model_errors_by_hand() -> None:
    """RQ-ALL-2, RQ-ALL-3, RQ-ALL-4, RQ-ALL-5, RQ-ALL-6, RQ-ALL-7, RQ-ALL-8, RQ-REQ-2, RQ-REQ-3."""
    for policy in ("fcfs", "priority"):
        q = ListQueueModel(policy)
        with pytest.raises(IndexError):
            q.pop_request()
        with pytest.raises(IndexError):
            q.peek_request()
        a = Request("a")
        q.add_request(a)
        with pytest.raises(ValueError):
            q.add_request(a)
        with pytest.raises(ValueError):
            q.prepend_request(Request("a"))
        with pytest.raises(TypeError):
            q.add_request("a")
        with pytest.raises(ValueError):
            q.remove_request(Request("a"))  # same fields, another object: absent
        with pytest.raises(ValueError):
            q.prepend_requests(q)
        clash = ListQueueModel(policy)
        clash.add_request(Request("a"))
        with pytest.raises(ValueError):
            q.prepend_requests(clash)
        q.remove_requests([Request("zz"), a, a])
        assert names(q) == []


# --- the machines ------------------------------------------------------------


def test_fcfs_reference_matches_the_list_model() -> None:
    """ORC-MACH-1, RQ-ALL-1..10, RQ-FCFS-1..5, RQ-REQ-2, RQ-REQ-3: FCFSRequestQueue vs a list.

    Every operation (add, prepend, prepend_requests from another queue, pop,
    peek, remove of present and absent requests, remove_requests mixed, iterate,
    len, bool, and in strict mode duplicates RQ-ALL-2, taken ids RQ-ALL-3,
    non-requests RQ-REQ-3 and self-prepend RQ-ALL-8) is compared, and after
    every step the whole contents (RQ-FCFS-5, RQ-ALL-9, RQ-ALL-10).
    """
    run_factory_machine(
        lambda: StrictQueueMachine(FCFSRequestQueue, lambda: ListQueueModel("fcfs"))
    )


def test_priority_reference_matches_the_sorted_model() -> None:
    """ORC-MACH-1, RQ-ALL-1..10, RQ-PRI-1..5, RQ-REQ-1, RQ-REQ-3: PriorityRequestQueue vs sorted.

    Keys tie often (three priorities, three arrival times), so the request id
    decides (RQ-REQ-1); prepend is add (RQ-PRI-3); prepend_requests adds each
    (RQ-PRI-4); iteration is ascending and leaves the heap (RQ-PRI-5), whose
    property the deep contracts check on every call (RQ-PRI-6, RQ-IMPL-1).
    """
    run_factory_machine(
        lambda: StrictQueueMachine(PriorityRequestQueue, lambda: ListQueueModel("priority"))
    )


# --- the machine has teeth ------------------------------------------------------


_FCFSModelWithoutReversal = broken_class(
    ListQueueModel,
    "_FCFSModelWithoutReversal",
    Change(
        "prepend_requests",
        "puts the other queue in front in its own order, without the reversal",
        "for request in incoming:",
        "for request in reversed(incoming):",
    ),
)


_PriorityModelLaterFirst = broken_class(
    ListQueueModel,
    "_PriorityModelLaterFirst",
    Change(
        "add_request",
        "orders ties of priority by later arrival first",
        "self._insert_sorted(request)",
        "self._insert_sorted(request)\n"
        "        self.items.sort(key=lambda r: (r.priority, -r.arrival_time, r.request_id))",
    ),
)


@pytest.mark.parametrize(
    ("subject", "expected", "clauses"),
    [
        (FCFSRequestQueue, lambda: _FCFSModelWithoutReversal("fcfs"), {"RQ-FCFS-4"}),
        # The wrong order shows in q's contents (RQ-PRI-1) or in another queue's (RQ-PRI-5).
        (
            PriorityRequestQueue,
            lambda: _PriorityModelLaterFirst("priority"),
            {"RQ-PRI-1", "RQ-PRI-5"},
        ),
    ],
)
def test_the_model_machine_fails_on_a_wrong_model(
    subject: Any, expected: Any, clauses: set[str]
) -> None:
    """RQ-FCFS-4, RQ-PRI-1: a model that differs from the reference makes the machine fail."""
    with pytest.raises(ConformanceFailure) as caught:
        run_factory_machine(
            lambda: StrictQueueMachine(subject, expected), settings=oracle_settings(100)
        )
    assert caught.value.clause in clauses
    assert re.search(r"^assert list\((q|other\d+)\) == \[.*# FAILS", caught.value.program, re.M)
