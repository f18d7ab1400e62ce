"""The list model of a scheduling step: what `WaitingQueues.schedule_step` must leave.

The contracts of `queueref.waiting.lifecycle` compare a step with this model (under deep
checks). It is written with the list model of a queue, `ListQueueModel`
(`models/queue_model.py`), so the queue semantics are stated once: a step is a
sequence of queue operations on lists, replayed from the step's log (what the
callbacks answered about each examined request).

Two queue layouts (specs/waiting-lifecycle.md):

* `vllm-0.30`: the queues are `waiting` and `skipped_waiting`. A skipped
  request is `prepend_request`ed onto the step's queue and, at the end,
  `skipped_waiting.prepend_requests(step_skipped)` puts them back.
* `vllm-0.31` to `vllm-0.33` (they differ in nothing a step's list model
  sees): the queues are `waiting` and `kv_holding_waiting`. A skipped
  request is gathered (front first) for the queue its KV state picks, and at
  the end each queue `prepend_requests` its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from queueref.queues.factory import SchedulingPolicy
from queueref.queues.model import ListQueueModel
from queueref.request import RequestLike

LAYOUT_V030 = "vllm-0.30"
LAYOUT_V031 = "vllm-0.31"
LAYOUT_V032 = "vllm-0.32"
LAYOUT_V033 = "vllm-0.33"

_R = TypeVar("_R", bound=RequestLike)

#: (waiting, aside, running) in order; `aside` is skipped_waiting or kv_holding_waiting.
Contents = tuple[list[RequestLike], list[RequestLike], list[RequestLike]]


def same(a: Sequence[object], b: Sequence[object]) -> bool:
    """Equal as sequences of objects (identity, not ==)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def without(requests: Iterable[_R], gone: Iterable[object]) -> list[_R]:
    """`requests` minus `gone`, by identity, in order."""
    ids = {id(r) for r in gone}
    return [r for r in requests if id(r) not in ids]


def added(
    policy: SchedulingPolicy, queue: Sequence[RequestLike], requests: Iterable[RequestLike]
) -> list[RequestLike]:
    """`add_request` of each of `requests`, in turn (RQ-FCFS-1, RQ-PRI-1)."""
    model = ListQueueModel(policy, queue)
    for request in requests:
        model.add_request(request)
    return model.items


def prepended(
    policy: SchedulingPolicy, queue: Sequence[RequestLike], request: RequestLike
) -> list[RequestLike]:
    """`prepend_request` (RQ-FCFS-3: at the front; RQ-PRI-3: in key order)."""
    model = ListQueueModel(policy, queue)
    model.prepend_request(request)
    return model.items


def _parked(
    policy: SchedulingPolicy, queue: Sequence[RequestLike], skipped: Sequence[RequestLike]
) -> list[RequestLike]:
    """Gather `skipped` (in examination order) front first, then `prepend_requests` them."""
    step = ListQueueModel(SchedulingPolicy.FCFS)
    for request in skipped:
        step.prepend_request(request)
    target = ListQueueModel(policy, queue)
    target.prepend_requests(step)
    return target.items


def expected_step(
    policy: SchedulingPolicy,
    layout: str,
    before: Contents,
    ran: Sequence[_R],
    skipped: Sequence[_R],
    holds_kv: Callable[[_R], bool],
) -> Contents:
    """WL-STEP-1, WL-L33-3: the queues after a step, given what it ran and skipped.

    `ran` and `skipped` are in examination order; `holds_kv` says, for the
    vllm-0.33 layout, which queue a skipped request goes back to. The request
    that stopped the step and the unexamined ones stay where they are.
    """
    waiting, aside, running = before
    gone = [*ran, *skipped]
    rest_waiting, rest_aside = without(waiting, gone), without(aside, gone)
    if layout == LAYOUT_V030:
        # The step's queue is of the policy; under FCFS the two reversals cancel.
        step = ListQueueModel(policy)
        for request in skipped:
            step.prepend_request(request)
        target = ListQueueModel(policy, rest_aside)
        target.prepend_requests(step)
        return rest_waiting, target.items, [*running, *ran]
    to_kv = [r for r in skipped if holds_kv(r)]
    to_waiting = [r for r in skipped if not holds_kv(r)]
    return (
        _parked(policy, rest_waiting, to_waiting),
        _parked(policy, rest_aside, to_kv),
        [*running, *ran],
    )


def examination_order(policy: SchedulingPolicy, layout: str, before: Contents) -> list[RequestLike]:
    """WL-STEP-6, WL-STEP-8, WL-L33-2: the order in which a step examines the waiting requests.

    vllm-0.30 FCFS: every skipped request before any waiting one; vllm-0.30
    PRIORITY: ascending key across both queues; vllm-0.33 (either policy):
    `kv_holding_waiting` in its order, then `waiting` in its order.
    """
    waiting, aside, _running = before
    if layout == LAYOUT_V030 and policy is SchedulingPolicy.PRIORITY:
        return added(policy, [], [*aside, *waiting])
    return [*aside, *waiting]


def fcfs_keeps_order(before: Contents, after: Contents, ran: Sequence[RequestLike]) -> bool:
    """WL-STEP-5 (vllm-0.30, FCFS): `skipped_waiting + waiting` only loses the requests that ran.

    The step's skipped requests move from the front of `waiting` (or stay at
    the front of `skipped_waiting`) to the back of the skipped part, which is
    the same position in the concatenation; and `waiting` only loses a prefix.
    """
    waiting, skipped, _running = before
    waiting_after, skipped_after, _ = after
    kept_prefix = len(waiting) - len(waiting_after)
    return (
        same([*skipped_after, *waiting_after], without([*skipped, *waiting], ran))
        and kept_prefix >= 0
        and same(waiting_after, waiting[kept_prefix:])
    )
