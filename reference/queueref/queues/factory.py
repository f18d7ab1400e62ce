"""The scheduler's waiting queues: `RequestQueue`, FCFS (deque) and priority (heap).

Models `vllm/v1/core/sched/request_queue.py`. The semantics, clause by clause,
are in `specs/request-queue.md`; every contract names the clause it enforces.
Deliberate divergences from vLLM (0.30.0 and 0.33.0 alike):

* A request may be queued once, and request ids are unique within a queue
  (preconditions of add and prepend). vLLM does not check; with the check
  the priority order is total, so equal queues pop in equal order.
* An id index makes membership O(1): removing an absent request fails at
  once, and the priority queue removes lazily (a tombstone that `pop` skips,
  compacted when tombstones outnumber live entries) instead of vLLM's
  `list.remove` + `heapify`.
* The priority heap orders entries by the key `(priority, arrival_time,
  request_id)` rather than by calling the request's `<`; vLLM's `Request.__lt__`
  (0.30.0, 0.33.0) compares the same key and then `id()`, so the two agree.
* Iterating an FCFS queue behaves as iterating a copy (as the priority queue
  does in vLLM), so the caller may change the queue while iterating; the copy
  is made only by a change while an iterator is alive (`_unshare`).
* Bad input never corrupts a queue: an object that is not a request, a
  duplicate, an absent request to remove, or a pop from an empty queue raise
  before anything changes.

Contracts are cheap by default (O(1), or O(k) in the k requests an operation
moves); whole-structure checks run only when `queueref.config.deep_checks()`.

The queues are built from one module per job: `base` (the `RequestQueue`
interface, and what both reference queues share), `fcfs` and `priority` (the
two queues) and, beside them, their contracts: `checks` (what every queue's
contracts ask, and the clause machinery), `clauses` (what our two queues add)
and `contracts` (the checker that binds them to every subclass). This module
holds the policies and `create_request_queue`; import a queue from the module
that defines it.
"""

# RQ-ALL-2, RQ-ALL-3: the duplicate checks above are the preconditions of add and prepend.
# RQ-COST-1: the cheap-by-default rule above; the contract layout is in `contracts`.

from __future__ import annotations

import enum

from queueref.queues.base import RequestQueue
from queueref.queues.fcfs import FCFSRequestQueue
from queueref.queues.priority import PriorityRequestQueue

__all__ = ["SchedulingPolicy", "create_request_queue"]


class SchedulingPolicy(enum.Enum):
    """The two orders vLLM's scheduler knows."""

    # Implements RQ-POL-1.
    FCFS = "fcfs"
    PRIORITY = "priority"


def create_request_queue(policy: SchedulingPolicy | str) -> RequestQueue:
    """The queue for a policy, given as the enum or its string value.

    >>> type(create_request_queue("priority")).__name__
    'PriorityRequestQueue'

    :raises ValueError: an unknown policy; the message lists the valid ones
    """
    # Implements RQ-POL-1, RQ-POL-2.
    try:
        policy = SchedulingPolicy(policy)
    except ValueError:
        valid = ", ".join(repr(p.value) for p in SchedulingPolicy)
        raise ValueError(
            f"RQ-POL-2: unknown scheduling policy {policy!r}; valid policies are {valid}"
        ) from None
    if policy is SchedulingPolicy.FCFS:
        return FCFSRequestQueue()
    return PriorityRequestQueue()
