"""The waiting lifecycle's vocabulary: its requests, their places and a step's log.

What `queueref.waiting.lifecycle` and the modules it is built from share: the request
the lifecycle holds (a queue's `RequestLike` with a `status`) and the one
check of its shape, the places a request can be in with the statuses each
allows, the layouts, and what a scheduling step records about each request it
examines. The semantics are in `specs/waiting-lifecycle.md`.
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

from queueref.request import (
    BLOCKED_STATUSES,
    RequestLike,
    RequestStatus,
    check_request_shape,
    is_request_shaped,
)
from queueref.waiting.model import LAYOUT_V030, LAYOUT_V031, LAYOUT_V032, LAYOUT_V033

#: WL-LAY-1: the layouts `WaitingQueues` models, by the vLLM release they come from.
LAYOUTS = (LAYOUT_V030, LAYOUT_V031, LAYOUT_V032, LAYOUT_V033)


class ReleaseRules(NamedTuple):
    """What one release does on the paths the lifecycle models.

    Each release differs from the one before it in the fields marked with its
    number (read in the wheels' `vllm/v1/core/sched/scheduler.py`).
    """

    # 0.31.0: kv_holding_waiting and deferred_waiting replace skipped_waiting (WL-L33-1).
    kv_holding: bool
    # 0.32.0: under PAUSED_NEW the waiting loop drains kv_holding_waiting (WL-REL-1).
    paused_new_drains_kv: bool
    # 0.33.0: a head left with no tokens to schedule is skipped, not a stop (WL-REL-3).
    no_tokens_skips: bool


#: WL-REL-1, WL-REL-3: each layout's rules.
RULES: dict[str, ReleaseRules] = {
    LAYOUT_V030: ReleaseRules(kv_holding=False, paused_new_drains_kv=False, no_tokens_skips=False),
    LAYOUT_V031: ReleaseRules(kv_holding=True, paused_new_drains_kv=False, no_tokens_skips=False),
    LAYOUT_V032: ReleaseRules(kv_holding=True, paused_new_drains_kv=True, no_tokens_skips=False),
    LAYOUT_V033: ReleaseRules(kv_holding=True, paused_new_drains_kv=True, no_tokens_skips=True),
}


class PauseState(enum.Enum):
    """vLLM's `PauseState` (0.30.0-0.33.0), as `Scheduler.set_pause_state` takes it."""

    # WL-REL-1

    UNPAUSED = "unpaused"
    PAUSED_NEW = "paused_new"  # no new request starts
    PAUSED_ALL = "paused_all"  # nothing is scheduled


class LifecycleRequest(RequestLike, Protocol):
    """A request as the lifecycle sees it: a queue's `RequestLike` with a `status`."""

    status: RequestStatus


class StepDecision(enum.Enum):
    """What `check(request)` says about the head examined by a step."""

    # WL-STEP-1

    RUN = "run"  # the request is popped into `running`
    SKIP = "skip"  # cannot run this step for a reason of its own: skipped, like a blocked one
    STOP = "stop"  # budget exhausted: the request stays where it is and the step ends
    # WL-REL-3: no token left to schedule after encoder or lookahead trimming: the
    # release decides (STOP up to vllm-0.32, SKIP in vllm-0.33).
    NO_TOKENS = "no_tokens"


def release_decision(layout: str, decision: StepDecision) -> StepDecision:
    """What the layout's release makes of `check`'s answer (NO_TOKENS: STOP or SKIP)."""
    # WL-REL-3
    if decision is not StepDecision.NO_TOKENS:
        return decision
    return StepDecision.SKIP if RULES[layout].no_tokens_skips else StepDecision.STOP


# The places a known request can be in; each is in exactly one (WL-CONS-1).
IN_WAITING = "waiting"
IN_SKIPPED = "skipped_waiting"  # vllm-0.30
IN_KV_HOLDING = "kv_holding_waiting"  # vllm-0.33
IN_RUNNING = "running"
IN_FINISHED = "finished"

READY_STATUSES = frozenset({RequestStatus.WAITING, RequestStatus.PREEMPTED})
FINISHED_STATUSES = frozenset(s for s in RequestStatus if RequestStatus.is_finished(s))
STREAMING = RequestStatus.WAITING_FOR_STREAMING_REQ
REMOTE_KVS = RequestStatus.WAITING_FOR_REMOTE_KVS

#: WL-CONS-2: the statuses a request may have in each place (vllm-0.30 layout).
ALLOWED_STATUSES: dict[str, frozenset[RequestStatus]] = {
    IN_WAITING: READY_STATUSES,
    IN_SKIPPED: READY_STATUSES | BLOCKED_STATUSES,
    IN_RUNNING: frozenset({RequestStatus.RUNNING}),
    IN_FINISHED: FINISHED_STATUSES,
}

#: WL-L33-1: the same for the vllm-0.33 layout (blocked requests stay in their queue).
ALLOWED_STATUSES_V033: dict[str, frozenset[RequestStatus]] = {
    IN_WAITING: READY_STATUSES | BLOCKED_STATUSES,
    IN_KV_HOLDING: READY_STATUSES | BLOCKED_STATUSES,
    IN_RUNNING: frozenset({RequestStatus.RUNNING}),
    IN_FINISHED: FINISHED_STATUSES,
}


class StepEntry(NamedTuple):
    """One request examined by a step, in examination order (the step's log).

    `promoted` is what `try_promote` answered (None when it was not asked:
    the request was not blocked); `decision` is what `check` answered, or SKIP
    when `check` was not asked (a blocked request that was not promoted).
    Both are recorded as the callbacks answer, not as the loop understood
    them, so that the contracts compare the loop with first-hand answers.
    """

    request: LifecycleRequest
    status_before: RequestStatus
    promoted: bool | None
    decision: StepDecision


def is_lifecycle_request(request: object) -> bool:
    """Whether `request` has a queue's three fields and a queueref `RequestStatus`
    (safe on any object, so contracts can ask before they know what they were given).

    >>> from queueref import Request
    >>> is_lifecycle_request(Request("a")), is_lifecycle_request("a")
    (True, False)
    """
    return is_request_shaped(request) and isinstance(
        getattr(request, "status", None), RequestStatus
    )


def check_lifecycle_request(request: object) -> None:
    """Raise naming what the lifecycle cannot use: a queue's shape check, then the status.

    `TypeError` (or `ValueError` for a NaN arrival time) from
    `queueref.request.check_request_shape`; `TypeError` for a status that is
    not a queueref `RequestStatus`.
    """
    check_request_shape(request)
    # WL-ENQ-2: the lifecycle's own rule on top of a queue's.
    if not isinstance(getattr(request, "status", None), RequestStatus):
        raise TypeError(f"WL-ENQ-2: {request!r} has no queueref RequestStatus status")
