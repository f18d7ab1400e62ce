"""Proof obligations for the queue semantics at fixed sizes (CrossHair: confirmed over all paths).

`reference/queueref/queues/semantics.py` states each queue operation as a pure
function over tuples of keys. Over tuples of unbounded length CrossHair
reports most of its conditions "Not confirmed" (loops over a symbolic length).
Here each law is stated for fixed sizes with scalar int arguments, which
CrossHair explores exhaustively: "Confirmed over all paths" is then a proof
for every value of the keys at that size. `tests/queues/test_queue_semantics.py`
shows the reference classes follow the same functions.

Each obligation has a mutant in `proofs/generated/mutants/queue_obligations_bad.py`
that the same check refutes (listed in `proofs/generated/manifests/queues.json`).
"""

from __future__ import annotations

import icontract

from queueref.queues.semantics import (
    fcfs_add,
    fcfs_pop,
    fcfs_prepend,
    fcfs_prepend_all,
    priority_add,
    priority_pop,
    remove,
)


@icontract.ensure(
    lambda a, b, c, x, y, result: result == (y, x, a, b, c),
    "RQ-FCFS-4: the other queue lands in front, reversed, the queued requests follow",
)
def fcfs_prepend_all_3_2(a: int, b: int, c: int, x: int, y: int) -> tuple[int, ...]:
    return fcfs_prepend_all((a, b, c), (x, y))


@icontract.ensure(
    lambda s1, s2, s3, old, result: result == (s1, s2, s3, old),
    "RQ-FCFS-4: gathering with prepend, then prepend_all, keeps the skipped order",
)
def fcfs_double_reversal_3(s1: int, s2: int, s3: int, old: int) -> tuple[int, ...]:
    step_skipped: tuple[int, ...] = ()
    for request in (s1, s2, s3):
        step_skipped = fcfs_prepend(step_skipped, request)
    return fcfs_prepend_all((old,), step_skipped)


@icontract.ensure(
    lambda a, b, c, result: result == (a, b, c),
    "RQ-FCFS-2: requests leave in the order they were added",
)
def fcfs_fifo_3(a: int, b: int, c: int) -> tuple[int, ...]:
    queue: tuple[int, ...] = ()
    for request in (a, b, c):
        queue = fcfs_add(queue, request)
    out: list[int] = []
    for _ in range(3):
        request, queue = fcfs_pop(queue)
        out.append(request)
    return tuple(out)


@icontract.require(lambda a, b, c: a < b < c, "RQ-PRI-6: the queue is in key order")
@icontract.require(lambda a, b, c, k: k not in (a, b, c), "RQ-ALL-3: keys are distinct")
@icontract.ensure(
    lambda a, b, c, k, result: result == tuple(sorted((a, b, c, k))),
    "RQ-PRI-1: the new key takes its place in key order",
)
def priority_add_3(a: int, b: int, c: int, k: int) -> tuple[int, ...]:
    return priority_add((a, b, c), k)


@icontract.require(lambda a, b, c: a != b and b != c and a != c, "RQ-ALL-3: keys are distinct")
@icontract.ensure(
    lambda a, b, c, result: result == tuple(sorted((a, b, c))),
    "RQ-PRI-2: pops come out smallest key first, whatever the order of adds",
)
def priority_pop_order_3(a: int, b: int, c: int) -> tuple[int, ...]:
    queue: tuple[int, ...] = ()
    for request in (a, b, c):
        queue = priority_add(queue, request)
    out: list[int] = []
    for _ in range(3):
        request, queue = priority_pop(queue)
        out.append(request)
    return tuple(out)


@icontract.require(lambda a, b, c: a != b and b != c and a != c, "RQ-ALL-3: keys are distinct")
@icontract.require(lambda which: 0 <= which < 3, "RQ-ALL-6: remove a queued request")
@icontract.ensure(
    lambda a, b, c, which, result: (
        result == tuple(k for i, k in enumerate((a, b, c)) if i != which)
    ),
    "RQ-ALL-6: exactly that request leaves; the others keep their order",
)
def remove_3(a: int, b: int, c: int, which: int) -> tuple[int, ...]:
    queue = (a, b, c)
    return remove(queue, queue[which])
