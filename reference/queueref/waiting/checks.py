"""The checks the waiting lifecycle's contracts make, and the preconditions they share.

Each function reads a `WaitingState` (or a step's log) and answers one
question a contract of `queueref.waiting.lifecycle` asks: where a request is, whether
every request is in exactly one place, whether a step did what the list model
of a step (`queueref.waiting.model`) gives for its decisions, ... The
whole-structure ones are O(n) and answer True unless
`queueref.config.deep_checks()`. `lifecycle_operation` is the run of
preconditions every operation on the lifecycle starts with, stated once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import icontract

from queueref.config import deep_checks
from queueref.queues.factory import SchedulingPolicy
from queueref.request import BLOCKED_STATUSES, RequestStatus
from queueref.waiting import model as waiting_model
from queueref.waiting.model import (
    LAYOUT_V030,
    LAYOUT_V031,
    LAYOUT_V032,
    LAYOUT_V033,
    Contents,
    same,
)
from queueref.waiting.places import (
    ALLOWED_STATUSES,
    ALLOWED_STATUSES_V033,
    IN_FINISHED,
    IN_KV_HOLDING,
    IN_RUNNING,
    IN_SKIPPED,
    IN_WAITING,
    STREAMING,
    LifecycleRequest,
    PauseState,
    StepDecision,
    StepEntry,
    is_lifecycle_request,
)
from queueref.waiting.state import WaitingState, place_of

_Method = TypeVar("_Method", bound=Callable[..., Any])


# ---------------------------------------------------------------------------
# The preconditions every operation shares.


def _no_step_in_progress(self: WaitingState) -> bool:
    return self._step_skipped is None


def _running_if_a_request(self: WaitingState, request: object) -> bool:
    return not is_lifecycle_request(request) or place_of(self, request) == IN_RUNNING


def lifecycle_operation(
    operation: str, shape: str | None = None, running: str | None = None
) -> Callable[[_Method], _Method]:
    """The preconditions an operation on the lifecycle starts with, checked in this order.

    * `running` ("ID: what it says"): the `request` given, when it is a request,
      is running, else `ValueError`;
    * `shape` (the ID of the operation's input rule): the `request` given is a
      lifecycle request, else `TypeError`;
    * always: `operation` is not called from a step's callbacks, else `RuntimeError`.
    """
    contracts: list[Callable[[_Method], _Method]] = []
    if running is not None:
        contracts.append(icontract.require(_running_if_a_request, running, error=ValueError))
    if shape is not None:
        contracts.append(
            icontract.require(
                is_lifecycle_request,
                f"{shape}: the request has request_id, priority, arrival_time and a RequestStatus",
                error=TypeError,
            )
        )
    contracts.append(
        icontract.require(
            _no_step_in_progress,
            f"WL-STEP-9: {operation} is not called from a step's callbacks",
            error=RuntimeError,
        )
    )

    def decorate(method: _Method) -> _Method:
        # The last decorator applied is checked first: apply them bottom-up.
        for contract in reversed(contracts):
            method = contract(method)
        return method

    return decorate


# ---------------------------------------------------------------------------
# What the contracts ask of the state.


def _is_finished_status(status: object) -> bool:
    return isinstance(status, RequestStatus) and RequestStatus.is_finished(status)


def _waiting_count(wq: WaitingState) -> int:
    return len(wq.waiting) + len(wq._aside)


def _contents(wq: WaitingState) -> Contents | None:
    """(waiting, aside, running) in order, only under deep checks (O(n))."""
    if not deep_checks():
        return None
    return list(wq.waiting), list(wq._aside), list(wq.running)


def _conserved(wq: WaitingState) -> bool:
    """Conservation, over the whole structure: each known request in exactly one place."""
    # WL-CONS-1
    if not deep_checks():
        return True
    seen: set[str] = set()
    places: list[tuple[str, Iterable[LifecycleRequest]]] = [
        (IN_WAITING, wq.waiting),
        (wq._aside_place, wq._aside),
        (IN_RUNNING, wq.running),
        (IN_FINISHED, wq.finished.values()),
    ]
    for place, requests in places:
        for request in requests:
            rid = request.request_id
            if rid in seen or wq._known.get(rid) is not request or wq._where.get(rid) != place:
                return False
            seen.add(rid)
    return len(seen) == len(wq._known) and all(wq.finished[k].request_id == k for k in wq.finished)


def _statuses_match(wq: WaitingState) -> bool:
    """Statuses, over the whole structure: each status allowed where it is."""
    # WL-CONS-2, WL-L33-1
    allowed = ALLOWED_STATUSES if wq.layout == LAYOUT_V030 else ALLOWED_STATUSES_V033
    # A member, not a value equal to one (an int written behind the lifecycle's back).
    return not deep_checks() or all(
        isinstance(r.status, RequestStatus) and r.status in allowed[wq._where[rid]]
        for rid, r in wq._known.items()
    )


def _sessions_consistent(wq: WaitingState) -> bool:
    """Each paused session is a known, waiting WAITING_FOR_STREAMING_REQ request."""
    # WL-STR-1
    return not deep_checks() or all(
        wq._where.get(rid) in (IN_WAITING, wq._aside_place) and wq._known[rid].status is STREAMING
        for rid in wq._paused
    )


def _deferred_consistent(wq: WaitingState) -> bool:
    """`deferred_waiting` names waiting requests only (vllm-0.33)."""
    # WL-L33-3
    return (
        wq.layout == LAYOUT_V030
        or not deep_checks()
        or all(wq._where.get(rid) in (IN_WAITING, IN_KV_HOLDING) for rid in wq.deferred_waiting)
    )


def _is_deferred(wq: WaitingState, request: LifecycleRequest) -> bool:
    """The request is in vllm-0.33's deferred_waiting (never, in vllm-0.30)."""
    # WL-L33-1
    return wq.layout != LAYOUT_V030 and request.request_id in wq.deferred_waiting


def _layout_queues_named(wq: WaitingState) -> bool:
    """The second queue has the layout's name (and vllm-0.33 its deferred set)."""
    # WL-LAY-1
    if wq.layout == LAYOUT_V030:
        return wq.skipped_waiting is wq._aside and not hasattr(wq, "kv_holding_waiting")
    return (
        wq.kv_holding_waiting is wq._aside
        and wq.deferred_waiting == set()
        and not hasattr(wq, "skipped_waiting")
    )


def _ran(log: Sequence[StepEntry]) -> list[LifecycleRequest]:
    return [e.request for e in log if e.decision is StepDecision.RUN]


def _skipped(log: Sequence[StepEntry]) -> list[LifecycleRequest]:
    return [e.request for e in log if e.decision is StepDecision.SKIP]


def _step_matches_model(wq: WaitingState, before: Contents | None) -> bool:
    """The queues are what the list model of the step gives."""
    # WL-STEP-1, WL-L33-3
    if before is None:
        return True
    log = wq._last_step
    try:
        expected = waiting_model.expected_step(
            wq.policy, wq.layout, before, _ran(log), _skipped(log), wq._holds_kv
        )
    except ValueError:  # the model refuses a duplicate: the step examined a request twice
        return False
    after = (list(wq.waiting), list(wq._aside), wq.running)
    return all(same(a, e) for a, e in zip(after, expected, strict=True))


def _examined_in_order(wq: WaitingState, before: Contents | None) -> bool:
    """The step examined the requests in the layout's order."""
    # WL-STEP-6, WL-STEP-8, WL-L33-2
    if before is None:
        return True
    examined = [e.request for e in wq._last_step]
    order = waiting_model.examination_order(wq.policy, wq.layout, before)
    return same(examined, order[: len(examined)])


def _log_runs_match(wq: WaitingState, result: list[LifecycleRequest], n_running: int) -> bool:
    return (
        same(_ran(wq._last_step), result)
        and same(wq.running[n_running:], result)
        and all(r.status is RequestStatus.RUNNING and place_of(wq, r) == IN_RUNNING for r in result)
    )


def _log_well_formed(wq: WaitingState) -> bool:
    log = wq._last_step
    stops = [i for i, e in enumerate(log) if e.decision is StepDecision.STOP]
    stopped_in_place = all(
        place_of(wq, e.request) in (IN_WAITING, wq._aside_place) for e in log[-1:] if stops
    )
    distinct = len({id(e.request) for e in log}) == len(log)
    return distinct and stops in ([], [len(log) - 1]) and stopped_in_place


def _blocked_handled(wq: WaitingState) -> bool:
    """A blocked head is offered to try_promote; not promoted means skipped."""
    # WL-STEP-2
    for e in wq._last_step:
        if (e.status_before in BLOCKED_STATUSES) != (e.promoted is not None):
            return False
        if e.promoted is False and e.decision is not StepDecision.SKIP:
            return False
    return True


def _skipped_parked(wq: WaitingState) -> bool:
    """Every request skipped in the step is back in a queue."""
    # WL-STEP-3, WL-STEP-4, WL-L33-3
    queues = {IN_WAITING: wq.waiting, wq._aside_place: wq._aside}
    skipped = _skipped(wq._last_step)
    parked = all((place := place_of(wq, r)) in queues and r in queues[place] for r in skipped)
    if wq.layout == LAYOUT_V030:
        return parked and all(place_of(wq, r) == IN_SKIPPED for r in skipped)
    return parked and all(
        (place_of(wq, r) == IN_KV_HOLDING) == wq._holds_kv(r)
        and r.request_id in wq.deferred_waiting
        for r in skipped
    )


def _no_unpromoted_runs(wq: WaitingState) -> bool:
    """A request blocked when examined runs only after a successful promotion."""
    # WL-STEP-7
    return all(
        e.status_before not in BLOCKED_STATUSES or e.promoted is True
        for e in wq._last_step
        if e.decision is StepDecision.RUN
    )


def _waiting_statuses(wq: WaitingState) -> dict[int, RequestStatus] | None:
    """The status of every waiting request before a step, only under deep checks (O(n))."""
    if not deep_checks():
        return None
    return {id(r): r.status for queue in (wq.waiting, wq._aside) for r in queue}


def _log_truthful(wq: WaitingState, statuses: dict[int, RequestStatus] | None) -> bool:
    # The statuses recorded in the log are the ones the requests had before the step.
    return statuses is None or all(
        statuses.get(id(e.request)) is e.status_before for e in wq._last_step
    )


def _continue_consulted(wq: WaitingState, given: bool) -> bool:
    """`should_continue` was asked before every examination; False ended the step.

    Each iteration asks once, before it selects a queue: so the answers are one
    True per examined request, then possibly one more answer (False, or True
    when `max_running` or the empty queues ended the step).
    """
    # WL-STEP-10
    answers, examined = wq._continue_answers, len(wq._last_step)
    if not given:
        return not answers
    return (
        len(answers) in (examined, examined + 1)
        and all(answers[:examined])
        and False not in answers[:-1]
    )


def _step_ran_nothing_after_no(wq: WaitingState, result: list[LifecycleRequest]) -> bool:
    """After a False answer nothing was examined (so nothing ran)."""
    # WL-STEP-10
    answers = wq._continue_answers
    return not answers or answers[-1] or len(wq._last_step) == len(answers) - 1


def _sessions_after_step(wq: WaitingState, paused_before: frozenset[str]) -> bool:
    """A paused session offered to try_promote stays paused unless promoted."""
    # WL-STR-5
    for e in wq._last_step:
        rid = e.request.request_id
        if e.status_before is STREAMING and rid in paused_before:
            if (rid in wq._paused) != (e.promoted is False):
                return False
    return True


def _slots_respected(wq: WaitingState, max_running: int | None, n_ran: int) -> bool:
    """No request ran once running + paused sessions held max_running."""
    # WL-STEP-1, WL-STR-4
    return max_running is None or n_ran == 0 or len(wq.running) + len(wq._paused) <= max_running


def _paused_selection(wq: WaitingState, result: object) -> bool:
    """Paused, the selection is kv_holding_waiting (if not empty) under PAUSED_NEW from
    vllm-0.32, else none."""
    # WL-REL-1
    if wq.pause_state is PauseState.UNPAUSED:
        return True
    if wq.pause_state is PauseState.PAUSED_NEW and wq.layout in (LAYOUT_V032, LAYOUT_V033):
        return result is (wq._aside or None)
    return result is None


def _pause_respected(wq: WaitingState, before: Contents | None) -> bool:
    """Under a pause the step examined only what the release lets it take."""
    # WL-REL-1
    if wq.pause_state is PauseState.UNPAUSED:
        return True
    examined = [e.request for e in wq._last_step]
    if wq.pause_state is PauseState.PAUSED_ALL or wq.layout in (LAYOUT_V030, LAYOUT_V031):
        return not examined
    if before is None:  # cheap checks: the places the step left them in are not enough
        return True
    aside = {id(r) for r in before[1]}
    return all(id(r) in aside for r in examined)


def _is_vllm_victim(
    policy: SchedulingPolicy, running: Sequence[LifecycleRequest], victim: object
) -> bool:
    """`victim` is the request vLLM preempts from `running` (a different statement of
    the rule than the body's `max`: no larger key anywhere, no equal key before it)."""
    # WL-PRE-3
    at = next((i for i, r in enumerate(running) if r is victim), None)
    if at is None:
        return False
    if policy is SchedulingPolicy.FCFS:
        return at == len(running) - 1
    key = (running[at].priority, running[at].arrival_time)
    return all((r.priority, r.arrival_time) < key for r in running[:at]) and all(
        (r.priority, r.arrival_time) <= key for r in running[at + 1 :]
    )
