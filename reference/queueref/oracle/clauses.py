"""The requirement each comparison of the queue machine checks (ORC-CLAUSE-1).

Every failure of `QueueMachine` names one clause, and a kind of failure names
the same clause in both checkers: what the contents must be after an
operation, compared with a reference queue, is one of RQ-FCFS-1..5 and
RQ-PRI-1..5 (specs/request-queue.md); what every queue does is one of RQ-ALL-1..10
(or RQ-REQ-3) requirement in both checkers, except that a `len` disagreeing
with the iteration is ORC-LAW-3 (no `RQ-` requirement says it); the laws
checker alone names ORC-LAW-1 (pop and peek give the first request iterated)
and ORC-LAW-4 (nothing lost, duplicated or invented); a factory that fails is
`ORC-MACH-1`. `STATEMENTS` says each in one line, as the failure prints it
beside the program. No Hypothesis here.
"""

from __future__ import annotations

from typing import Literal

#: "fcfs", "priority", or None: only the laws (no expected order).
Policy = Literal["fcfs", "priority"] | None

STATEMENTS: dict[str, str] = {
    "RQ-REQ-1": "requests are ordered by (priority, arrival_time, request_id)",
    "RQ-REQ-3": "a queue rejects an object that is no request with TypeError",
    "RQ-ALL-1": "add_request and prepend_request grow the queue by exactly one",
    "RQ-ALL-2": "adding a request that is already queued raises ValueError",
    "RQ-ALL-3": "adding another request with a queued request_id raises ValueError",
    "RQ-ALL-4": "pop_request removes what peek_request gives; on an empty queue IndexError",
    "RQ-ALL-5": "peek_request gives the next request without changing the queue",
    "RQ-ALL-6": "remove_request removes that request and nothing else; absent: ValueError",
    "RQ-ALL-7": "remove_requests removes the queued requests named and ignores the others",
    "RQ-ALL-8": "prepend_requests moves in every request of the other queue and leaves it",
    "RQ-ALL-9": "iteration is the order of successive pops and does not change the queue",
    "RQ-ALL-10": "bool(q) is len(q) > 0",
    "RQ-FCFS-1": "add_request appends at the back",
    "RQ-FCFS-2": "pop_request takes the front",
    "RQ-FCFS-3": "prepend_request puts the request at the front",
    "RQ-FCFS-4": "prepend_requests puts the other queue's requests in front in reverse order",
    "RQ-FCFS-5": "iteration runs from the front to the back",
    "RQ-PRI-1": "add_request inserts by (priority, arrival_time, request_id)",
    "RQ-PRI-2": "pop_request takes the request with the smallest key",
    "RQ-PRI-3": "prepend_request is add_request",
    "RQ-PRI-4": "prepend_requests adds each request of the other queue by its key",
    "RQ-PRI-5": "iteration yields ascending keys and leaves the heap",
    "ORC-LAW-1": "peek_request and pop_request give the first request iterated; empty: IndexError",
    "ORC-LAW-2": "iteration does not change the queue and is the sequence of successive pops",
    "ORC-LAW-3": "len(q) is the number of requests iterated",
    "ORC-LAW-4": "the queue holds exactly the requests added and not taken out, each once",
    "ORC-LAW-5": "remove_request removes a queued request, else ValueError; remove_requests "
    "ignores absent ones",
    "ORC-LAW-6": "prepend_requests moves in every request of the other queue and leaves it",
    "ORC-MACH-1": "the factories given to the checker build an empty queue and requests",
}

#: What the contents must be after each operation, compared with the reference, by policy;
#: without one (the laws) what pop gives and what iteration gives.
_EFFECT: dict[Policy, dict[str, str]] = {
    "fcfs": {
        "add_request": "RQ-FCFS-1",
        "pop_request": "RQ-FCFS-2",
        "prepend_request": "RQ-FCFS-3",
        "prepend_requests": "RQ-FCFS-4",
        "iter": "RQ-FCFS-5",
    },
    "priority": {
        "add_request": "RQ-PRI-1",
        "pop_request": "RQ-PRI-2",
        "prepend_request": "RQ-PRI-3",
        "prepend_requests": "RQ-PRI-4",
        "iter": "RQ-PRI-5",
    },
    None: {"pop_request": "ORC-LAW-1"},
}

#: The clause of each kind of failure that does not compare with the reference's order:
#: the same in both checkers (`len` disagreeing with the iteration is ORC-LAW-3 in both).
_COMMON = {
    "add_request": "RQ-ALL-1",
    "prepend_request": "RQ-ALL-1",
    "prepend_requests": "RQ-ALL-8",
    "pop_request": "RQ-ALL-4",
    "peek_request": "RQ-ALL-5",
    "remove_request": "RQ-ALL-6",
    "remove_requests": "RQ-ALL-7",
    "iter": "RQ-ALL-9",
    "len": "ORC-LAW-3",
    "bool": "RQ-ALL-10",
    "factory": "ORC-MACH-1",
}


def common_clause(policy: Policy, operation: str) -> str:
    """ORC-CLAUSE-1: the clause of an operation's result or exception, the same in both checkers.

    `policy` is accepted for symmetry with `effect_clause`; it does not change the answer.
    """
    del policy
    return _COMMON.get(operation, "ORC-MACH-1")


def effect_clause(policy: Policy, operation: str) -> str:
    """ORC-CLAUSE-1: the clause that says what the queue holds after `operation`."""
    return _EFFECT[policy].get(operation) or common_clause(policy, operation)


def length_clause(policy: Policy, operation: str) -> str:
    """ORC-CLAUSE-1: a `len` that disagrees with the iteration: ORC-LAW-3 in both checkers."""
    del policy, operation
    return "ORC-LAW-3"


def law_or(policy: Policy, requirement: str, law: str) -> str:
    """ORC-CLAUSE-1: `law` when only the laws are checked, else the `RQ-` requirement."""
    return law if policy is None else requirement


def describe(clause: str) -> str:
    """`RQ-FCFS-4: prepend_requests puts ...`: the clause as a failure prints it."""
    return f"{clause}: {STATEMENTS[clause]}"
