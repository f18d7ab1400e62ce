"""The queue semantics as pure functions over tuples of request keys.

This is the table of `specs/request-queue.md` written as code that CrossHair
can check: a queue is a tuple, front at index 0, and a request is an int (its
key; for the priority queue, int order is key order). `make verify` runs

    crosshair check --analysis_kind=icontract reference/queueref/queues/semantics.py

and fails on any counterexample; `tests/queues/test_queue_semantics.py` shows the
reference classes follow these functions (a Hypothesis differential test) and
that CrossHair refutes a broken copy (`proofs/generated/broken/queue_semantics_broken.py`).

Functions over tuples of unbounded length are mostly reported "Not confirmed"
by CrossHair (no counterexample within the budget, not a proof); the
fixed-size obligations in `proofs/queue_obligations.py` are the ones proved.
Each postcondition states a property independently of the body.
"""

from __future__ import annotations

import icontract

Keys = tuple[int, ...]


def is_sorted(queue: Keys) -> bool:
    """Strictly ascending (keys are distinct)."""
    return all(queue[i] < queue[i + 1] for i in range(len(queue) - 1))


@icontract.ensure(lambda queue, result: len(result) == len(queue) + 1, "RQ-ALL-1: one more")
@icontract.ensure(lambda request, result: result[-1] == request, "RQ-FCFS-1: at the back")
@icontract.ensure(lambda queue, result: result[:-1] == queue, "RQ-FCFS-1: the rest unchanged")
def fcfs_add(queue: Keys, request: int) -> Keys:
    """RQ-FCFS-1: append at the back."""
    return queue + (request,)


@icontract.ensure(lambda queue, result: len(result) == len(queue) + 1, "RQ-ALL-1: one more")
@icontract.ensure(lambda request, result: result[0] == request, "RQ-FCFS-3: at the front")
@icontract.ensure(lambda queue, result: result[1:] == queue, "RQ-FCFS-3: the rest unchanged")
def fcfs_prepend(queue: Keys, request: int) -> Keys:
    """RQ-FCFS-3: insert at the front."""
    return (request,) + queue


@icontract.require(lambda queue: len(queue) > 0, "RQ-ALL-4: pop needs a request")
@icontract.ensure(lambda queue, result: result[0] == queue[0], "RQ-FCFS-2: the front leaves")
@icontract.ensure(lambda queue, result: len(result[1]) == len(queue) - 1, "RQ-ALL-4: one less")
def fcfs_pop(queue: Keys) -> tuple[int, Keys]:
    """RQ-FCFS-2: remove the front; return it and the rest."""
    return queue[0], queue[1:]


@icontract.ensure(
    lambda queue, incoming, result: len(result) == len(queue) + len(incoming),
    "RQ-ALL-8: every request moves in",
)
@icontract.ensure(
    lambda queue, incoming, result: result[len(incoming) :] == queue,
    "RQ-FCFS-4: the queued requests follow, in order",
)
@icontract.ensure(
    lambda incoming, result: all(
        result[i] == incoming[len(incoming) - 1 - i] for i in range(len(incoming))
    ),
    "RQ-FCFS-4: the incoming requests come first, reversed",
)
def fcfs_prepend_all(queue: Keys, incoming: Keys) -> Keys:
    """RQ-FCFS-4: `deque.extendleft`: each incoming request goes to the front in turn."""
    result = queue
    for request in incoming:
        result = (request,) + result
    return result


@icontract.require(lambda queue: is_sorted(queue), "RQ-PRI-6: the queue is in key order")
@icontract.require(lambda queue, request: request not in queue, "RQ-ALL-3: keys are distinct")
@icontract.ensure(lambda result: is_sorted(result), "RQ-PRI-1: still in key order")
@icontract.ensure(
    lambda queue, request, result: len(result) == len(queue) + 1 and request in result,
    "RQ-PRI-1: the request is added",
)
def priority_add(queue: Keys, request: int) -> Keys:
    """RQ-PRI-1, RQ-PRI-3: insert by key (prepend is the same)."""
    position = 0
    while position < len(queue) and queue[position] < request:
        position += 1
    return queue[:position] + (request,) + queue[position:]


@icontract.require(lambda queue: len(queue) > 0, "RQ-ALL-4: pop needs a request")
@icontract.require(lambda queue: is_sorted(queue), "RQ-PRI-6: the queue is in key order")
@icontract.ensure(
    lambda queue, result: all(result[0] < k for k in result[1]), "RQ-PRI-2: the minimum leaves"
)
@icontract.ensure(lambda queue, result: len(result[1]) == len(queue) - 1, "RQ-ALL-4: one less")
def priority_pop(queue: Keys) -> tuple[int, Keys]:
    """RQ-PRI-2: remove the minimum (the front of a key-ordered tuple)."""
    return queue[0], queue[1:]


@icontract.require(lambda queue: len(set(queue)) == len(queue), "RQ-ALL-2: keys are distinct")
@icontract.require(lambda queue, request: request in queue, "RQ-ALL-6: only a queued request")
@icontract.ensure(lambda request, result: request not in result, "RQ-ALL-6: it is gone")
@icontract.ensure(lambda queue, result: len(result) == len(queue) - 1, "RQ-ALL-6: only it")
def remove(queue: Keys, request: int) -> Keys:
    """RQ-ALL-6: remove one request; the others keep their order (both policies)."""
    position = queue.index(request)
    return queue[:position] + queue[position + 1 :]


@icontract.ensure(
    lambda requests, result: all(r not in result for r in requests), "RQ-ALL-7: all gone"
)
@icontract.ensure(
    lambda queue, requests, result: all(r in result for r in queue if r not in requests),
    "RQ-ALL-7: nothing else is removed",
)
def remove_all(queue: Keys, requests: Keys) -> Keys:
    """RQ-ALL-7: remove every named request that is queued; ignore the rest."""
    return tuple(r for r in queue if r not in requests)
