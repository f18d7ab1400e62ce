"""The scheduler's waiting lifecycle: the waiting queues, `running`, finished.

Models the waiting-queue part of vLLM's `vllm/v1/core/sched/scheduler.py`
(`Scheduler`) in two layouts, chosen with `WaitingQueues(policy, layout=...)`:

* `"vllm-0.30"` (the default): vLLM 0.30.0's `waiting` and `skipped_waiting`
  queues -- `_is_blocked_waiting_status`, `_enqueue_waiting_request`,
  `_select_waiting_queue_for_scheduling`, `_try_promote_blocked_waiting_request`,
  the waiting loop of `schedule()` with its per-step `step_skipped_waiting`
  queue, `_handle_stopped_request` (streaming sessions), `_preempt_request` and
  `finish_requests`.
* `"vllm-0.33"`: vLLM 0.33.0's `kv_holding_waiting` and `waiting` queues with
  the `deferred_waiting` set: requests holding KV blocks are drained first,
  blocked requests stay in their queue, and a step's skipped requests go back
  to the front of the queue their KV state picks.

The semantics, clause by clause, are in `specs/waiting-lifecycle.md`; every
contract below names the clause (`WL-...`) it enforces, and the list model the
deep contracts compare a step with is `queueref.models.waiting_model`.

Deliberate divergences from vLLM (0.30.0 and 0.33.0 alike):

* Everything the loop asks about one request besides promotion (prefix cache,
  encoder budget, LoRA cap, KV allocation, ...) is one callback,
  `check(request) -> StepDecision`: RUN, SKIP (vLLM's `continue` paths) or STOP
  (vLLM's `break` paths). vLLM's async KV load -- a request that passes every
  check and is parked as WAITING_FOR_REMOTE_KVS -- is `check` setting a blocked
  status and returning SKIP (WL-STEP-3). The loop's own guard,
  `token_budget > 0`, is the optional `should_continue()` callback, asked at
  the top of every iteration (WL-STEP-10).
* vLLM's loop also stops when `running` plus the paused streaming sessions
  fill `max_num_running_reqs`; here that is the optional `max_running`
  argument of `schedule_step` (WL-STEP-1, WL-STR-4).
* Request ids are unique among all requests an instance has seen, finished ones
  included, and finished requests are kept in `finished` (vLLM frees them and
  may see an id again) so that conservation (WL-CONS-1) can be checked.
* `finish` takes one running request (vLLM removes stopped requests from
  `running` in `update_from_output`); `abort(ids)` is vLLM's
  `finish_requests(ids, FINISHED_ABORTED)` and returns the requests in the
  order their ids were given (vLLM collects them from a set).
* `preempt` removes the request from `running` itself; vLLM's
  `_preempt_request` expects the caller to have popped it already.
* The vllm-0.30 PRIORITY arbitration compares the two heads by the queue key
  `(priority, arrival_time, request_id)`, as the queues order them; vLLM 0.30.0
  calls `Request.__lt__`, which compares the same key and then `id()`: the two
  agree, since ids are unique here.
* A promotion that succeeds leaves WAITING or PREEMPTED (whichever the callback
  chose; vLLM picks PREEMPTED for a request preempted before) and sets WAITING
  when the callback left the status blocked.
* A streaming update does not change the session's `arrival_time` (vLLM 0.30.0
  and 0.33.0 set it to the update's, in place, also while the session is
  queued); whether a request holds KV blocks (vllm-0.33) is tracked from the
  lifecycle, not read from `num_computed_tokens` (WL-L33-1).
* The callbacks are checked: `check` must return a `StepDecision`,
  `try_promote` and `should_continue` a bool, neither may move the request to
  a status outside the rules of WL-STEP-9, nor call a mutating method of the
  same instance. A callback that raises or breaks a rule ends the step as if
  it had returned STOP: the requests skipped so far are parked before the
  error propagates, so nothing is lost (vLLM would lose its local
  `step_skipped_waiting`).
* Bad input (an unknown or non-running request, a non-finished status, a
  malformed id) raises before anything changes; unknown ids given to `abort`
  are ignored, as vLLM ignores them.

Contracts are cheap by default (O(1), or O(k) in the k requests an operation
moves or examines); whole-structure checks (conservation over every request,
queue orders, the step against its list model) run only when
`queueref.config.deep_checks()`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import NamedTuple, Protocol

import icontract

from queueref.config import deep_checks
from queueref.models import waiting_model
from queueref.models.waiting_model import LAYOUT_V030, LAYOUT_V033, Contents, same, without
from queueref.queues import (
    FCFSRequestQueue,
    PriorityRequestQueue,
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)
from queueref.request import REQUEST_FIELDS, RequestLike, RequestStatus, request_key

#: WL-LAY-1: the layouts `WaitingQueues` models, by the vLLM version they come from.
LAYOUTS = (LAYOUT_V030, LAYOUT_V033)


class LifecycleRequest(RequestLike, Protocol):
    """A request as the lifecycle sees it: a queue's `RequestLike` with a `status`."""

    status: RequestStatus


class StepDecision(enum.Enum):
    """WL-STEP-1: what `check(request)` says about the head examined by a step."""

    RUN = "run"  # the request is popped into `running`
    SKIP = "skip"  # cannot run this step for a reason of its own: skipped, like a blocked one
    STOP = "stop"  # budget exhausted: the request stays where it is and the step ends


# The places a known request can be in; each is in exactly one (WL-CONS-1).
IN_WAITING = "waiting"
IN_SKIPPED = "skipped_waiting"  # vllm-0.30
IN_KV_HOLDING = "kv_holding_waiting"  # vllm-0.33
IN_RUNNING = "running"
IN_FINISHED = "finished"

_READY = frozenset({RequestStatus.WAITING, RequestStatus.PREEMPTED})
_BLOCKED = frozenset(s for s in RequestStatus if RequestStatus.is_blocked(s))
_FINISHED_STATUSES = frozenset(s for s in RequestStatus if RequestStatus.is_finished(s))
_STREAMING = RequestStatus.WAITING_FOR_STREAMING_REQ
_REMOTE_KVS = RequestStatus.WAITING_FOR_REMOTE_KVS

#: WL-CONS-2: the statuses a request may have in each place (vllm-0.30 layout).
ALLOWED_STATUSES: dict[str, frozenset[RequestStatus]] = {
    IN_WAITING: _READY,
    IN_SKIPPED: _READY | _BLOCKED,
    IN_RUNNING: frozenset({RequestStatus.RUNNING}),
    IN_FINISHED: _FINISHED_STATUSES,
}

#: WL-L33-1: the same for the vllm-0.33 layout (blocked requests stay in their queue).
ALLOWED_STATUSES_V033: dict[str, frozenset[RequestStatus]] = {
    IN_WAITING: _READY | _BLOCKED,
    IN_KV_HOLDING: _READY | _BLOCKED,
    IN_RUNNING: frozenset({RequestStatus.RUNNING}),
    IN_FINISHED: _FINISHED_STATUSES,
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


def _never_promote(request: LifecycleRequest) -> bool:
    """The default `try_promote`: a blocked request stays blocked."""
    return False


# ---------------------------------------------------------------------------
# Helpers the contracts use (the list model itself is queueref.models.waiting_model).


def _is_request_shaped(request: object) -> bool:
    return all(hasattr(request, f) for f in REQUEST_FIELDS) and isinstance(
        getattr(request, "status", None), RequestStatus
    )


def _is_finished_status(status: object) -> bool:
    return isinstance(status, RequestStatus) and RequestStatus.is_finished(status)


def _waiting_count(wq: WaitingQueues) -> int:
    return len(wq.waiting) + len(wq._aside)


def _where(wq: WaitingQueues, request: object) -> str | None:
    """The place of this very request, or None when the instance does not know it."""
    if not _is_request_shaped(request):
        return None
    request_id = getattr(request, "request_id")  # noqa: B009 - checked shape, any object
    if wq._known.get(request_id) is not request:
        return None
    return wq._where[request_id]


def _contents(wq: WaitingQueues) -> Contents | None:
    """(waiting, aside, running) in order, only under deep checks (O(n))."""
    if not deep_checks():
        return None
    return list(wq.waiting), list(wq._aside), list(wq.running)


def _conserved(wq: WaitingQueues) -> bool:
    """WL-CONS-1 over the whole structure: each known request in exactly one place."""
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


def _statuses_match(wq: WaitingQueues) -> bool:
    """WL-CONS-2, WL-L33-1 over the whole structure: each status allowed where it is."""
    allowed = ALLOWED_STATUSES if wq.layout == LAYOUT_V030 else ALLOWED_STATUSES_V033
    return not deep_checks() or all(
        r.status in allowed[wq._where[rid]] for rid, r in wq._known.items()
    )


def _sessions_consistent(wq: WaitingQueues) -> bool:
    """WL-STR-1: each paused session is a known, waiting WAITING_FOR_STREAMING_REQ request."""
    return not deep_checks() or all(
        wq._where.get(rid) in (IN_WAITING, wq._aside_place) and wq._known[rid].status is _STREAMING
        for rid in wq._paused
    )


def _deferred_consistent(wq: WaitingQueues) -> bool:
    """WL-L33-3: deferred_waiting names waiting requests only (vllm-0.33)."""
    return (
        wq.layout != LAYOUT_V033
        or not deep_checks()
        or all(wq._where.get(rid) in (IN_WAITING, IN_KV_HOLDING) for rid in wq.deferred_waiting)
    )


def _is_deferred(wq: WaitingQueues, request: LifecycleRequest) -> bool:
    """WL-L33-1: the request is in vllm-0.33's deferred_waiting (never, in vllm-0.30)."""
    return wq.layout == LAYOUT_V033 and request.request_id in wq.deferred_waiting


def _layout_queues_named(wq: WaitingQueues) -> bool:
    """WL-LAY-1: the second queue has the layout's name (and vllm-0.33 its deferred set)."""
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


def _step_matches_model(wq: WaitingQueues, before: Contents | None) -> bool:
    """WL-STEP-1, WL-L33-3: the queues are what the list model of the step gives."""
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


def _examined_in_order(wq: WaitingQueues, before: Contents | None) -> bool:
    """WL-STEP-6, WL-STEP-8, WL-L33-2: the step examined the requests in the layout's order."""
    if before is None:
        return True
    examined = [e.request for e in wq._last_step]
    order = waiting_model.examination_order(wq.policy, wq.layout, before)
    return same(examined, order[: len(examined)])


def _log_runs_match(wq: WaitingQueues, result: list[LifecycleRequest], n_running: int) -> bool:
    return (
        same(_ran(wq._last_step), result)
        and same(wq.running[n_running:], result)
        and all(r.status is RequestStatus.RUNNING and _where(wq, r) == IN_RUNNING for r in result)
    )


def _log_well_formed(wq: WaitingQueues) -> bool:
    log = wq._last_step
    stops = [i for i, e in enumerate(log) if e.decision is StepDecision.STOP]
    stopped_in_place = all(
        _where(wq, e.request) in (IN_WAITING, wq._aside_place) for e in log[-1:] if stops
    )
    distinct = len({id(e.request) for e in log}) == len(log)
    return distinct and stops in ([], [len(log) - 1]) and stopped_in_place


def _blocked_handled(wq: WaitingQueues) -> bool:
    """WL-STEP-2: a blocked head is offered to try_promote; not promoted means skipped."""
    for e in wq._last_step:
        if (e.status_before in _BLOCKED) != (e.promoted is not None):
            return False
        if e.promoted is False and e.decision is not StepDecision.SKIP:
            return False
    return True


def _skipped_parked(wq: WaitingQueues) -> bool:
    """WL-STEP-3, WL-STEP-4, WL-L33-3: every request skipped in the step is back in a queue."""
    queues = {IN_WAITING: wq.waiting, wq._aside_place: wq._aside}
    skipped = _skipped(wq._last_step)
    parked = all((place := _where(wq, r)) in queues and r in queues[place] for r in skipped)
    if wq.layout == LAYOUT_V030:
        return parked and all(_where(wq, r) == IN_SKIPPED for r in skipped)
    return parked and all(
        (_where(wq, r) == IN_KV_HOLDING) == wq._holds_kv(r) and r.request_id in wq.deferred_waiting
        for r in skipped
    )


def _no_unpromoted_runs(wq: WaitingQueues) -> bool:
    """WL-STEP-7: a request blocked when examined runs only after a successful promotion."""
    return all(
        e.status_before not in _BLOCKED or e.promoted is True
        for e in wq._last_step
        if e.decision is StepDecision.RUN
    )


def _waiting_statuses(wq: WaitingQueues) -> dict[int, RequestStatus] | None:
    """The status of every waiting request before a step, only under deep checks (O(n))."""
    if not deep_checks():
        return None
    return {id(r): r.status for queue in (wq.waiting, wq._aside) for r in queue}


def _log_truthful(wq: WaitingQueues, statuses: dict[int, RequestStatus] | None) -> bool:
    # The statuses recorded in the log are the ones the requests had before the step.
    return statuses is None or all(
        statuses.get(id(e.request)) is e.status_before for e in wq._last_step
    )


def _continue_consulted(wq: WaitingQueues, given: bool) -> bool:
    """WL-STEP-10: should_continue was asked before every examination; False ended the step.

    Each iteration asks once, before it selects a queue: so the answers are one
    True per examined request, then possibly one more answer (False, or True
    when `max_running` or the empty queues ended the step).
    """
    answers, examined = wq._continue_answers, len(wq._last_step)
    if not given:
        return not answers
    return (
        len(answers) in (examined, examined + 1)
        and all(answers[:examined])
        and False not in answers[:-1]
    )


def _step_ran_nothing_after_no(wq: WaitingQueues, result: list[LifecycleRequest]) -> bool:
    """WL-STEP-10: after a False answer nothing was examined (so nothing ran)."""
    answers = wq._continue_answers
    return not answers or answers[-1] or len(wq._last_step) == len(answers) - 1


def _sessions_after_step(wq: WaitingQueues, paused_before: frozenset[str]) -> bool:
    """WL-STR-5: a paused session offered to try_promote stays paused unless promoted."""
    for e in wq._last_step:
        rid = e.request.request_id
        if e.status_before is _STREAMING and rid in paused_before:
            if (rid in wq._paused) != (e.promoted is False):
                return False
    return True


def _slots_respected(wq: WaitingQueues, max_running: int | None, n_ran: int) -> bool:
    """WL-STEP-1, WL-STR-4: no request ran once running + paused sessions held max_running."""
    return max_running is None or n_ran == 0 or len(wq.running) + len(wq._paused) <= max_running


# ---------------------------------------------------------------------------


@icontract.invariant(
    lambda self: (
        len(self._known)
        == len(self.waiting) + len(self._aside) + len(self.running) + len(self.finished)
    ),
    "WL-CONS-1: as many requests are placed as are known (O(1) count)",
)
@icontract.invariant(
    lambda self: _conserved(self),
    "WL-CONS-1: every known request is in exactly one of the two waiting queues, running, finished",
)
@icontract.invariant(
    lambda self: _statuses_match(self),
    "WL-CONS-2: every request has a status allowed where it is",
)
@icontract.invariant(
    lambda self: _sessions_consistent(self),
    "WL-STR-1: every paused session waits, as WAITING_FOR_STREAMING_REQ",
)
@icontract.invariant(
    lambda self: _deferred_consistent(self),
    "WL-L33-3: deferred_waiting names waiting requests only",
)
class WaitingQueues(icontract.DBC):
    """vLLM's waiting queues and `running` for one policy and layout, plus `finished`.

    The `"vllm-0.30"` layout (the default) has `waiting` and `skipped_waiting`;
    the `"vllm-0.33"` layout has `waiting`, `kv_holding_waiting` and the
    `deferred_waiting` set of request ids. The attributes are for reading;
    change them only through the methods.

    >>> from queueref import Request, RequestStatus, StepDecision
    >>> wq = WaitingQueues("fcfs")
    >>> wq.enqueue(Request("a"))
    >>> wq.enqueue(Request("g", status=RequestStatus.WAITING_FOR_REMOTE_KVS))
    >>> wq.schedule_step(lambda r: StepDecision.RUN)
    [Request('a', status=RequestStatus.RUNNING)]
    >>> [r.request_id for r in wq.skipped_waiting]
    ['g']
    """

    policy: SchedulingPolicy
    layout: str
    waiting: RequestQueue
    skipped_waiting: RequestQueue  # vllm-0.30 only
    kv_holding_waiting: RequestQueue  # vllm-0.33 only
    deferred_waiting: set[str]  # vllm-0.33 only
    running: list[LifecycleRequest]
    finished: dict[str, LifecycleRequest]

    @icontract.ensure(
        lambda self: (
            not self.waiting and not self._aside and not self.running and not self.finished
        ),
        "WL-POL-1: a new instance holds no request",
    )
    @icontract.ensure(
        lambda self: (
            type(self.waiting) is type(self._aside)
            and isinstance(
                self.waiting,
                FCFSRequestQueue if self.policy is SchedulingPolicy.FCFS else PriorityRequestQueue,
            )
        ),
        "WL-POL-1: both waiting queues are queues of the policy",
    )
    @icontract.ensure(
        lambda self, layout: self.layout == layout and _layout_queues_named(self),
        "WL-LAY-1: the layout's queues: vllm-0.30 waiting and skipped_waiting; vllm-0.33 "
        "waiting, kv_holding_waiting and an empty deferred_waiting",
    )
    def __init__(self, policy: SchedulingPolicy | str, layout: str = LAYOUT_V030) -> None:
        """WL-POL-1, WL-LAY-1: `policy` is a `SchedulingPolicy` or its value.

        :raises ValueError: an unknown policy (RQ-POL-2) or layout (WL-LAY-1)
        """
        if layout not in LAYOUTS:
            raise ValueError(
                f"WL-LAY-1: unknown layout {layout!r}; valid layouts are "
                + ", ".join(repr(x) for x in LAYOUTS)
            )
        self.waiting = create_request_queue(policy)
        self._aside = create_request_queue(policy)
        self.policy = SchedulingPolicy(policy)
        self.layout = layout
        if layout == LAYOUT_V030:
            self.skipped_waiting = self._aside
            self._aside_place = IN_SKIPPED
        else:
            self.kv_holding_waiting = self._aside
            self._aside_place = IN_KV_HOLDING
            self.deferred_waiting = set()
        self.running = []
        self.finished = {}
        # request_id -> request and request_id -> place, for every request seen.
        self._known: dict[str, LifecycleRequest] = {}
        self._where: dict[str, str] = {}
        # Paused streaming sessions (vLLM's num_waiting_for_streaming_input counts them).
        self._paused: set[str] = set()
        # Requests holding KV blocks (what vLLM 0.33.0 reads from num_computed_tokens).
        self._kv_held: set[str] = set()
        # The queue of requests skipped by the step in progress (None between steps).
        self._step_skipped: RequestQueue | None = None
        self._last_step: list[StepEntry] = []
        self._continue_answers: list[bool] = []

    @property
    def num_paused_sessions(self) -> int:
        """WL-STR-4: the streaming sessions waiting for input (they hold a running slot)."""
        return len(self._paused)

    # -- checks in the bodies (they hold with contracts off, under `python -O`)

    def _require_idle(self, operation: str) -> None:
        if self._step_skipped is not None:
            raise RuntimeError(
                f"WL-STEP-9: {operation} called from a step's callback while a step is in progress"
            )

    @staticmethod
    def _require_shape(request: object) -> None:
        for field in REQUEST_FIELDS:
            if not hasattr(request, field):
                raise TypeError(
                    f"RQ-REQ-3: {type(request).__name__} object is not a request: "
                    f"it has no {field!r} attribute"
                )
        if not isinstance(getattr(request, "status", None), RequestStatus):
            raise TypeError(f"WL-ENQ-2: {request!r} has no queueref RequestStatus status")

    def _require_running(self, request: LifecycleRequest, rule: str) -> None:
        self._require_shape(request)
        place = _where(self, request)
        if place != IN_RUNNING:
            state = "unknown" if place is None else f"in {place}"
            raise ValueError(f"{rule}: {request!r} is not running (it is {state})")

    # -- the places

    def _place(self, request: LifecycleRequest, place: str) -> None:
        self._known[request.request_id] = request
        self._where[request.request_id] = place

    def _take_running(self, request: LifecycleRequest) -> None:
        # O(len(running)); by identity, like the rest of the lifecycle.
        for i, r in enumerate(self.running):
            if r is request:
                del self.running[i]
                return
        raise AssertionError("WL-CONS-1: a request marked running is not in running")

    def _holds_kv(self, request: LifecycleRequest) -> bool:
        """WL-L33-1: vLLM 0.33.0's `_holds_kv_blocks`, from the lifecycle.

        A request holds KV blocks from the moment it is WAITING_FOR_REMOTE_KVS
        (an async load allocated them) or runs, until it is preempted (vLLM
        frees them and resets `num_computed_tokens`) or finished.
        """
        return request.request_id in self._kv_held or request.status is _REMOTE_KVS

    def _note_status(self, request: LifecycleRequest) -> None:
        """Keep the KV and session records in step with a status a callback set."""
        if request.status is _REMOTE_KVS:
            self._kv_held.add(request.request_id)
        if request.status is not _STREAMING:
            self._paused.discard(request.request_id)

    def _forget_state(self, request: LifecycleRequest) -> None:
        self._paused.discard(request.request_id)
        self._kv_held.discard(request.request_id)
        if self.layout == LAYOUT_V033:
            self.deferred_waiting.discard(request.request_id)

    # -- enqueue

    @staticmethod
    def _is_blocked(status: RequestStatus) -> bool:
        """WL-ENQ-1: vLLM's `_is_blocked_waiting_status` (the three WAITING_FOR_*)."""
        return status in _BLOCKED

    def _queue_for(self, request: LifecycleRequest) -> tuple[RequestQueue, str]:
        """WL-ENQ-1, WL-L33-1: `_enqueue_waiting_request`'s choice of queue."""
        if self.layout == LAYOUT_V030:
            if self._is_blocked(request.status):
                return self.skipped_waiting, IN_SKIPPED
            return self.waiting, IN_WAITING
        if self._holds_kv(request):
            return self.kv_holding_waiting, IN_KV_HOLDING
        return self.waiting, IN_WAITING

    def _enqueue_waiting(self, request: LifecycleRequest) -> None:
        """WL-ENQ-1, WL-L33-1: add_request to the layout's queue (and deferred, if blocked)."""
        if request.status is _REMOTE_KVS:
            self._kv_held.add(request.request_id)
        queue, place = self._queue_for(request)
        queue.add_request(request)
        self._place(request, place)
        if self.layout == LAYOUT_V033 and self._is_blocked(request.status):
            self.deferred_waiting.add(request.request_id)

    def _expected_place(self, request: LifecycleRequest) -> str:
        """The place `enqueue` must choose (WL-ENQ-1, WL-L33-1), for the contracts."""
        if self.layout == LAYOUT_V030:
            return IN_SKIPPED if RequestStatus.is_blocked(request.status) else IN_WAITING
        holds = request.request_id in self._kv_held or request.status is _REMOTE_KVS
        return IN_KV_HOLDING if holds else IN_WAITING

    @icontract.require(
        lambda request: (
            not _is_request_shaped(request)
            or request.status in _READY
            or request.status in _BLOCKED
        ),
        "WL-ENQ-2: only a waiting (WAITING, PREEMPTED) or blocked request can be enqueued",
        error=ValueError,
    )
    @icontract.require(
        lambda self, request: (
            not _is_request_shaped(request) or request.request_id not in self._known
        ),
        "WL-ENQ-2: the request (or another with its request_id) is not already known",
        error=ValueError,
    )
    @icontract.require(
        lambda request: _is_request_shaped(request),
        "WL-ENQ-2: the request has request_id, priority, arrival_time and a RequestStatus",
        error=TypeError,
    )
    @icontract.require(
        lambda self: self._step_skipped is None,
        "WL-STEP-9: enqueue is not called from a step's callbacks",
        error=RuntimeError,
    )
    @icontract.snapshot(lambda self: len(self._known), name="known")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.snapshot(lambda self, request: self._expected_place(request), name="place")
    @icontract.ensure(
        lambda self, request, OLD: self.layout != LAYOUT_V030 or _where(self, request) == OLD.place,
        "WL-ENQ-1: a blocked request goes to skipped_waiting, any other to waiting",
    )
    @icontract.ensure(
        lambda self, request, OLD: self.layout != LAYOUT_V033 or _where(self, request) == OLD.place,
        "WL-L33-1: a request holding KV blocks goes to kv_holding_waiting, any other to waiting",
    )
    @icontract.ensure(
        lambda self, request: (
            self.layout != LAYOUT_V033
            or (request.request_id in self.deferred_waiting)
            == RequestStatus.is_blocked(request.status)
        ),
        "WL-L33-1: vllm-0.33: a blocked request is deferred on arrival",
    )
    @icontract.ensure(
        lambda self, OLD: len(self._known) == OLD.known + 1,
        "WL-CONS-1: enqueue adds exactly one known request",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None
            or (
                same(
                    list(self._aside),
                    waiting_model.added(self.policy, OLD.items[1], [request]),
                )
                and same(list(self.waiting), OLD.items[0])
                if OLD.place != IN_WAITING
                else same(
                    list(self.waiting),
                    waiting_model.added(self.policy, OLD.items[0], [request]),
                )
                and same(list(self._aside), OLD.items[1])
            )
        ),
        "WL-ENQ-1: the request is added with add_request (FCFS: at the back; PRIORITY: "
        "in key order) and the other queue is unchanged",
    )
    def enqueue(self, request: LifecycleRequest) -> None:
        """WL-ENQ-1, WL-L33-1: vLLM's `_enqueue_waiting_request`.

        :raises TypeError: not a request (WL-ENQ-2)
        :raises ValueError: already known, or RUNNING / finished (WL-ENQ-2)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("enqueue")
        self._require_shape(request)
        if request.request_id in self._known:
            raise ValueError(
                f"WL-ENQ-2: a request with request_id {request.request_id!r} is already "
                f"known (it is in {self._where[request.request_id]})"
            )
        if request.status not in _READY and not self._is_blocked(request.status):
            raise ValueError(
                f"WL-ENQ-2: cannot enqueue {request!r}: status {request.status.name} is "
                "neither waiting nor blocked"
            )
        self._enqueue_waiting(request)

    # -- selection

    def _select(self) -> RequestQueue | None:
        """WL-SEL-1, WL-SEL-2, WL-L33-2: the queue whose head the step examines next."""
        if self.layout == LAYOUT_V033:
            return self.kv_holding_waiting or self.waiting or None
        if self.policy is SchedulingPolicy.FCFS:
            return self.skipped_waiting or self.waiting or None
        if self.waiting and self.skipped_waiting:
            waiting_head = self.waiting.peek_request()
            skipped_head = self.skipped_waiting.peek_request()
            if request_key(waiting_head) < request_key(skipped_head):
                return self.waiting
            return self.skipped_waiting
        return self.waiting or self.skipped_waiting or None

    @icontract.ensure(
        lambda self, result: (result is None) == (not self.waiting and not self._aside),
        "WL-SEL-1: no queue is selected exactly when both are empty",
    )
    @icontract.ensure(
        lambda self, result: (
            self.layout != LAYOUT_V030
            or self.policy is not SchedulingPolicy.FCFS
            or result is (self.skipped_waiting or self.waiting or None)
        ),
        "WL-SEL-1: FCFS selects skipped_waiting whenever it is not empty",
    )
    @icontract.ensure(
        lambda self, result: (
            self.layout != LAYOUT_V030
            or self.policy is not SchedulingPolicy.PRIORITY
            or not (self.waiting and self.skipped_waiting)
            or (result is self.waiting)
            == (
                request_key(self.waiting.peek_request())
                < request_key(self.skipped_waiting.peek_request())
            )
        ),
        "WL-SEL-2: PRIORITY selects waiting exactly when its head is strictly smaller",
    )
    @icontract.ensure(
        lambda self, result: (
            self.layout != LAYOUT_V033
            or result is (self.kv_holding_waiting or self.waiting or None)
        ),
        "WL-L33-2: vllm-0.33 selects kv_holding_waiting whenever it is not empty, whatever "
        "the policy",
    )
    @icontract.ensure(
        lambda self, result: result is None or result is self.waiting or result is self._aside,
        "WL-SEL-1: the selection is one of the two queues",
    )
    def select_waiting_queue(self) -> RequestQueue | None:
        """WL-SEL-1, WL-SEL-2, WL-L33-2: the queue whose head a step examines next, or None."""
        return self._select()

    # -- a scheduling step

    def _skip(
        self, queue: RequestQueue, request: LifecycleRequest, step_skipped: RequestQueue
    ) -> None:
        """WL-STEP-3: pop the head and `prepend_request` it onto the step's queue."""
        queue.pop_request()
        step_skipped.prepend_request(request)
        self._where[request.request_id] = IN_SKIPPED

    def _park(self, step_skipped: RequestQueue) -> None:
        """WL-STEP-4: `skipped_waiting.prepend_requests(step_skipped)` (reverses back)."""
        if step_skipped:
            self.skipped_waiting.prepend_requests(step_skipped)

    def _skip_v033(
        self,
        queue: RequestQueue,
        request: LifecycleRequest,
        skipped_waiting: RequestQueue,
        skipped_kv: RequestQueue,
    ) -> None:
        """WL-L33-3: pop the head, defer it, gather it (front first) for its KV state's queue."""
        queue.pop_request()
        self.deferred_waiting.add(request.request_id)
        if self._holds_kv(request):
            skipped_kv.prepend_request(request)
            self._where[request.request_id] = IN_KV_HOLDING
        else:
            skipped_waiting.prepend_request(request)
            self._where[request.request_id] = IN_WAITING

    def _park_v033(self, skipped_waiting: RequestQueue, skipped_kv: RequestQueue) -> None:
        """WL-STEP-4, WL-L33-3: each queue `prepend_requests` the requests gathered for it."""
        if skipped_kv:
            self.kv_holding_waiting.prepend_requests(skipped_kv)
        if skipped_waiting:
            self.waiting.prepend_requests(skipped_waiting)

    def _run(self, queue: RequestQueue, request: LifecycleRequest) -> None:
        """WL-STEP-1: pop the head into running with status RUNNING."""
        queue.pop_request()
        request.status = RequestStatus.RUNNING
        self.running.append(request)
        self._where[request.request_id] = IN_RUNNING
        self._kv_held.add(request.request_id)
        if self.layout == LAYOUT_V033:
            self.deferred_waiting.discard(request.request_id)

    def _promote(
        self, try_promote: Callable[[LifecycleRequest], bool], request: LifecycleRequest
    ) -> bool:
        """WL-STEP-2, WL-STEP-9: ask the callback, then check what it did to the status."""
        before = request.status
        try:
            promoted = try_promote(request)
        except BaseException:
            request.status = before
            raise
        problem = None
        if not isinstance(promoted, bool):
            problem = f"try_promote returned {promoted!r}, not a bool"
        elif promoted and not (request.status in _READY or self._is_blocked(request.status)):
            problem = f"try_promote set status {request.status.name}"
        elif not promoted and not self._is_blocked(request.status):
            problem = f"try_promote returned False but set status {request.status.name}"
        if problem is not None:
            request.status = before
            error = TypeError if not isinstance(promoted, bool) else ValueError
            raise error(f"WL-STEP-9: {problem} for {request!r}")
        if promoted and self._is_blocked(request.status):
            request.status = RequestStatus.WAITING
        return promoted

    def _check(
        self, check: Callable[[LifecycleRequest], StepDecision], request: LifecycleRequest
    ) -> StepDecision:
        """WL-STEP-1, WL-STEP-9: ask the callback, then check what it did to the status."""
        before = request.status
        try:
            decision = check(request)
        except BaseException:
            request.status = before
            raise
        problem = None
        if not isinstance(decision, StepDecision):
            problem = f"check returned {decision!r}, not a StepDecision"
        elif request.status is not before and not (
            decision is StepDecision.SKIP and self._is_blocked(request.status)
        ):
            problem = f"check changed the status to {request.status.name} ({decision.name})"
        if problem is not None:
            request.status = before
            error = TypeError if not isinstance(decision, StepDecision) else ValueError
            raise error(f"WL-STEP-9: {problem} for {request!r}")
        return decision

    def _may_continue(self, should_continue: Callable[[], bool] | None) -> bool:
        """WL-STEP-10, WL-STEP-9: vLLM's `token_budget > 0`, asked of the callback."""
        if should_continue is None:
            return True
        answer = should_continue()
        if not isinstance(answer, bool):
            raise TypeError(f"WL-STEP-9: should_continue returned {answer!r}, not a bool")
        self._continue_answers.append(answer)
        return answer

    def _slots_full(self, max_running: int | None) -> bool:
        """WL-STEP-1, WL-STR-4: running and the paused sessions fill max_running."""
        return max_running is not None and len(self.running) + len(self._paused) >= max_running

    @icontract.require(
        lambda max_running: (
            max_running is None
            or (
                isinstance(max_running, int)
                and not isinstance(max_running, bool)
                and max_running >= 0
            )
        ),
        "WL-STEP-1: max_running is None or an int >= 0",
        error=ValueError,
    )
    @icontract.require(
        lambda check, try_promote, should_continue: (
            callable(check)
            and (try_promote is None or callable(try_promote))
            and (should_continue is None or callable(should_continue))
        ),
        "WL-STEP-1: check (and try_promote, should_continue, when given) are callables",
        error=TypeError,
    )
    @icontract.require(
        lambda self: self._step_skipped is None,
        "WL-STEP-9: schedule_step is not called from a step's callbacks",
        error=RuntimeError,
    )
    @icontract.snapshot(lambda self: len(self.running), name="n_running")
    @icontract.snapshot(lambda self: _waiting_count(self), name="n_waiting")
    @icontract.snapshot(lambda self: len(self.finished), name="n_finished")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.snapshot(lambda self: _waiting_statuses(self), name="statuses")
    @icontract.snapshot(lambda self: frozenset(self._paused), name="paused")
    @icontract.ensure(
        lambda self, result, OLD: (
            _log_runs_match(self, result, OLD.n_running)
            and _waiting_count(self) == OLD.n_waiting - len(result)
            and len(self.finished) == OLD.n_finished
        ),
        "WL-STEP-1: the requests that ran were popped, in order, onto the end of running, "
        "with status RUNNING; nothing else left the waiting queues",
    )
    @icontract.ensure(
        lambda self: _log_well_formed(self),
        "WL-STEP-1: each request is examined at most once; STOP ends the step and leaves "
        "its request where it was",
    )
    @icontract.ensure(
        lambda self, result, max_running: _slots_respected(self, max_running, len(result)),
        "WL-STEP-1: a step moves no request to running once running holds max_running "
        "(with the paused sessions, WL-STR-4)",
    )
    @icontract.ensure(
        lambda self, should_continue: _continue_consulted(self, should_continue is not None),
        "WL-STEP-10: should_continue is asked at the top of every iteration, before a "
        "queue is selected, and a False answer ends the step",
    )
    @icontract.ensure(
        lambda self, result: _step_ran_nothing_after_no(self, result),
        "WL-STEP-10: after should_continue answers False no request is examined",
    )
    @icontract.ensure(
        lambda self: _blocked_handled(self),
        "WL-STEP-2: a blocked head is offered to try_promote; if not promoted it is skipped",
    )
    @icontract.ensure(
        lambda self: self.layout != LAYOUT_V030 or _skipped_parked(self),
        "WL-STEP-4: every request skipped in the step (WL-STEP-3) ends in skipped_waiting",
    )
    @icontract.ensure(
        lambda self: self.layout != LAYOUT_V033 or _skipped_parked(self),
        "WL-L33-3: every request skipped in the step is deferred and back in the queue of "
        "its KV state",
    )
    @icontract.ensure(
        lambda self, OLD: _sessions_after_step(self, OLD.paused),
        "WL-STR-5: a paused session is offered to try_promote like any blocked head, and "
        "is no longer paused once promoted",
    )
    @icontract.ensure(
        lambda self: _no_unpromoted_runs(self),
        "WL-STEP-7: a blocked request never runs without a successful promotion",
    )
    @icontract.ensure(
        lambda self, OLD: _log_truthful(self, OLD.statuses),
        "WL-STEP-7: the step's log records the statuses the requests had",
    )
    @icontract.ensure(
        lambda self, OLD: self.layout != LAYOUT_V030 or _step_matches_model(self, OLD.items),
        "WL-STEP-1: waiting, skipped_waiting and running are what the list model of the "
        "step gives for its decisions",
    )
    @icontract.ensure(
        lambda self, OLD: self.layout != LAYOUT_V033 or _step_matches_model(self, OLD.items),
        "WL-L33-3: waiting, kv_holding_waiting and running are what the list model of the "
        "step gives for its decisions",
    )
    @icontract.ensure(
        lambda self, result, OLD: (
            OLD.items is None
            or self.layout != LAYOUT_V030
            or self.policy is not SchedulingPolicy.FCFS
            or waiting_model.fcfs_keeps_order(
                OLD.items, (list(self.waiting), list(self.skipped_waiting), self.running), result
            )
        ),
        "WL-STEP-5: FCFS: skipped_waiting + waiting keeps its order minus the requests "
        "that ran (the two reversals cancel); waiting only loses a prefix",
    )
    @icontract.ensure(
        lambda self, OLD: (
            self.layout != LAYOUT_V030
            or self.policy is not SchedulingPolicy.PRIORITY
            or _examined_in_order(self, OLD.items)
        ),
        "WL-STEP-6: PRIORITY: each examined request (so each that ran) was the smallest "
        "head the step could choose from",
    )
    @icontract.ensure(
        lambda self, OLD: (
            self.layout != LAYOUT_V030
            or self.policy is not SchedulingPolicy.FCFS
            or _examined_in_order(self, OLD.items)
        ),
        "WL-STEP-8: FCFS: every skipped request is examined before any waiting one, and "
        "each queue front to back (no starvation)",
    )
    @icontract.ensure(
        lambda self, OLD: self.layout != LAYOUT_V033 or _examined_in_order(self, OLD.items),
        "WL-L33-2: vllm-0.33: every request of kv_holding_waiting is examined before any "
        "of waiting, each queue in its order",
    )
    @icontract.ensure(
        lambda self, result: (
            self.layout != LAYOUT_V033
            or all(r.request_id not in self.deferred_waiting for r in result)
        ),
        "WL-L33-3: vllm-0.33: a request that runs is no longer deferred",
    )
    def schedule_step(
        self,
        check: Callable[[LifecycleRequest], StepDecision],
        try_promote: Callable[[LifecycleRequest], bool] | None = None,
        *,
        max_running: int | None = None,
        should_continue: Callable[[], bool] | None = None,
    ) -> list[LifecycleRequest]:
        """WL-STEP-1: the waiting loop of vLLM's `schedule()`; returns the requests that ran.

        While a queue is not empty: ask `should_continue()` (vLLM's
        `token_budget > 0`, WL-STEP-10), stop when `running` and the paused
        sessions hold `max_running` (WL-STR-4), select a queue (WL-SEL-1,
        WL-SEL-2, WL-L33-2) and peek its head; a blocked head that
        `try_promote` does not promote is skipped (WL-STEP-2); otherwise
        `check(head)` decides RUN, SKIP (WL-STEP-3) or STOP. The skipped
        requests are parked at the end (WL-STEP-4, WL-L33-3).

        :raises TypeError: a callback answered with the wrong type (WL-STEP-9)
        :raises ValueError: a callback broke the status rules (WL-STEP-9)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("schedule_step")
        if not callable(check) or not all(
            f is None or callable(f) for f in (try_promote, should_continue)
        ):
            raise TypeError(
                "WL-STEP-1: check (and try_promote, should_continue, when given) must be callables"
            )
        if max_running is not None and (
            isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 0
        ):
            raise ValueError(f"WL-STEP-1: max_running must be an int >= 0, got {max_running!r}")
        promote = try_promote if try_promote is not None else _never_promote
        # What the callbacks answered, recorded here rather than by the hooks
        # (_promote, _check) so that the log the contracts read is first-hand.
        promoted: dict[int, bool] = {}
        decided: dict[int, StepDecision] = {}

        def ask_promote(request: LifecycleRequest) -> bool:
            answer = promote(request)
            promoted[id(request)] = answer
            return answer

        def ask_check(request: LifecycleRequest) -> StepDecision:
            answer = check(request)
            decided[id(request)] = answer
            return answer

        policy_queue = create_request_queue(self.policy)
        # vllm-0.33 gathers its skipped requests in deques (appendleft): a FCFS queue.
        step_skipped = policy_queue if self.layout == LAYOUT_V030 else FCFSRequestQueue()
        step_skipped_kv = FCFSRequestQueue()
        log: list[StepEntry] = []
        self._last_step = log
        self._continue_answers = []
        scheduled: list[LifecycleRequest] = []
        self._step_skipped = step_skipped
        try:
            while self.waiting or self._aside:
                if not self._may_continue(should_continue) or self._slots_full(max_running):
                    break
                queue = self._select()
                if queue is None:
                    break
                request = queue.peek_request()
                status_before = request.status
                if self._is_blocked(request.status) and not self._promote(ask_promote, request):
                    # WL-STEP-2: still blocked: skipped without asking check.
                    decision = StepDecision.SKIP
                else:
                    decision = self._check(ask_check, request)
                self._note_status(request)
                log.append(
                    StepEntry(
                        request,
                        status_before,
                        promoted.get(id(request)),
                        decided.get(id(request), StepDecision.SKIP),
                    )
                )
                if decision is StepDecision.STOP:
                    break
                if decision is StepDecision.SKIP:
                    if self.layout == LAYOUT_V030:
                        self._skip(queue, request, step_skipped)
                    else:
                        self._skip_v033(queue, request, step_skipped, step_skipped_kv)
                    continue
                self._run(queue, request)
                scheduled.append(request)
        finally:
            # WL-STEP-4: park the skipped requests even when a callback raised.
            self._step_skipped = None
            if self.layout == LAYOUT_V030:
                self._park(step_skipped)
            else:
                self._park_v033(step_skipped, step_skipped_kv)
        return scheduled

    # -- leaving running

    @icontract.require(
        lambda self, request: (
            not _is_request_shaped(request) or _where(self, request) == IN_RUNNING
        ),
        "WL-PRE-2: only a running request can be preempted",
        error=ValueError,
    )
    @icontract.require(
        lambda request: _is_request_shaped(request),
        "WL-PRE-2: the request has request_id, priority, arrival_time and a RequestStatus",
        error=TypeError,
    )
    @icontract.require(
        lambda self: self._step_skipped is None,
        "WL-STEP-9: preempt is not called from a step's callbacks",
        error=RuntimeError,
    )
    @icontract.snapshot(lambda self: len(self.running), name="n_running")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, OLD: (
            request.status is RequestStatus.PREEMPTED
            and _where(self, request) == IN_WAITING
            and len(self.running) == OLD.n_running - 1
        ),
        "WL-PRE-1: the request leaves running for waiting with status PREEMPTED",
    )
    @icontract.ensure(
        lambda self, request: (
            self.policy is not SchedulingPolicy.FCFS or self.waiting.peek_request() is request
        ),
        "WL-PRE-1: FCFS: the preempted request is at the front of waiting",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None
            or same(list(self.waiting), waiting_model.prepended(self.policy, OLD.items[0], request))
            and same(self.running, without(OLD.items[2], [request]))
            and same(list(self._aside), OLD.items[1])
        ),
        "WL-PRE-1: waiting.prepend_request (FCFS: in front; PRIORITY: in key order); the "
        "other requests keep their places",
    )
    @icontract.ensure(
        lambda self, request: self.layout != LAYOUT_V033 or not self._holds_kv(request),
        "WL-L33-4: a preempted request holds no KV blocks: it goes to waiting",
    )
    def preempt(self, request: LifecycleRequest) -> None:
        """WL-PRE-1, WL-L33-4: vLLM's `_preempt_request`: running -> `waiting.prepend_request`.

        :raises ValueError: the request is not running (WL-PRE-2)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("preempt")
        self._require_running(request, "WL-PRE-2")
        self._take_running(request)
        request.status = RequestStatus.PREEMPTED
        self._kv_held.discard(request.request_id)  # vLLM frees its blocks
        self.waiting.prepend_request(request)
        self._where[request.request_id] = IN_WAITING

    @icontract.require(
        lambda status: _is_finished_status(status),
        "WL-FIN-2: the status is a FINISHED_* status",
        error=ValueError,
    )
    @icontract.require(
        lambda self, request: (
            not _is_request_shaped(request) or _where(self, request) == IN_RUNNING
        ),
        "WL-FIN-2: only a running request can be finished",
        error=ValueError,
    )
    @icontract.require(
        lambda request: _is_request_shaped(request),
        "WL-FIN-2: the request has request_id, priority, arrival_time and a RequestStatus",
        error=TypeError,
    )
    @icontract.require(
        lambda self: self._step_skipped is None,
        "WL-STEP-9: finish is not called from a step's callbacks",
        error=RuntimeError,
    )
    @icontract.snapshot(lambda self: len(self.running), name="n_running")
    @icontract.snapshot(lambda self: len(self.finished), name="n_finished")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, status, OLD: (
            request.status is status
            and self.finished.get(request.request_id) is request
            and _where(self, request) == IN_FINISHED
            and len(self.running) == OLD.n_running - 1
            and len(self.finished) == OLD.n_finished + 1
        ),
        "WL-FIN-1: the request leaves running for finished with the given status",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None
            or (
                same(self.running, without(OLD.items[2], [request]))
                and same(list(self.waiting), OLD.items[0])
                and same(list(self._aside), OLD.items[1])
            )
        ),
        "WL-FIN-1: the other requests keep their places",
    )
    def finish(
        self, request: LifecycleRequest, status: RequestStatus = RequestStatus.FINISHED_STOPPED
    ) -> None:
        """WL-FIN-1: take a running request out with a finished status.

        :raises ValueError: the request is not running, or the status is not finished (WL-FIN-2)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("finish")
        if not _is_finished_status(status):
            raise ValueError(f"WL-FIN-2: {status!r} is not a FINISHED_* status")
        self._require_running(request, "WL-FIN-2")
        self._take_running(request)
        request.status = status
        self._forget_state(request)
        self.finished[request.request_id] = request
        self._where[request.request_id] = IN_FINISHED

    # -- streaming sessions

    def _is_paused_session(self, request: object) -> bool:
        """A waiting request in WAITING_FOR_STREAMING_REQ (the update has not arrived)."""
        return _where(self, request) in (IN_WAITING, self._aside_place) and (
            getattr(request, "status", None) is _STREAMING
        )

    def _require_stream_target(self, request: LifecycleRequest) -> None:
        self._require_shape(request)
        if _where(self, request) != IN_RUNNING and not self._is_paused_session(request):
            place = _where(self, request)
            state = "unknown" if place is None else f"in {place} as {request.status.name}"
            raise ValueError(
                f"WL-STR-3: {request!r} is neither running nor a paused streaming session "
                f"(it is {state})"
            )

    @icontract.require(
        lambda self, request: (
            not _is_request_shaped(request) or _where(self, request) == IN_RUNNING
        ),
        "WL-STR-3: only a running request can wait for its stream",
        error=ValueError,
    )
    @icontract.require(
        lambda request: _is_request_shaped(request),
        "WL-STR-3: the request has request_id, priority, arrival_time and a RequestStatus",
        error=TypeError,
    )
    @icontract.require(
        lambda self: self._step_skipped is None,
        "WL-STEP-9: await_stream is not called from a step's callbacks",
        error=RuntimeError,
    )
    @icontract.snapshot(lambda self: len(self.running), name="n_running")
    @icontract.snapshot(lambda self: len(self._paused), name="n_paused")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, OLD: (
            request.status is _STREAMING
            and _where(self, request) == self._aside_place
            and len(self.running) == OLD.n_running - 1
            and len(self._paused) == OLD.n_paused + 1
            and (self.layout != LAYOUT_V033 or _is_deferred(self, request))
        ),
        "WL-STR-1: the request leaves running as WAITING_FOR_STREAMING_REQ, a paused "
        "session, for skipped_waiting (vllm-0.30) or kv_holding_waiting, deferred (vllm-0.33)",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None
            or (
                same(list(self._aside), waiting_model.added(self.policy, OLD.items[1], [request]))
                and same(list(self.waiting), OLD.items[0])
                and same(self.running, without(OLD.items[2], [request]))
            )
        ),
        "WL-STR-1: the session is added with add_request; the other requests keep their places",
    )
    def await_stream(self, request: LifecycleRequest) -> None:
        """WL-STR-1: a resumable request stopped with no update queued (vLLM's
        `_handle_stopped_request`): it waits for the next input chunk.

        :raises ValueError: the request is not running (WL-STR-3)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("await_stream")
        self._require_running(request, "WL-STR-3")
        self._take_running(request)
        request.status = _STREAMING
        self._paused.add(request.request_id)
        self._enqueue_waiting(request)

    @icontract.require(
        lambda self, request: (
            not _is_request_shaped(request)
            or _where(self, request) == IN_RUNNING
            or self._is_paused_session(request)
        ),
        "WL-STR-3: only a running request or a paused streaming session can continue",
        error=ValueError,
    )
    @icontract.require(
        lambda request: _is_request_shaped(request),
        "WL-STR-3: the request has request_id, priority, arrival_time and a RequestStatus",
        error=TypeError,
    )
    @icontract.require(
        lambda self: self._step_skipped is None,
        "WL-STEP-9: continue_stream is not called from a step's callbacks",
        error=RuntimeError,
    )
    @icontract.snapshot(lambda self, request: _where(self, request), name="place")
    @icontract.snapshot(lambda self, request: self._expected_place(request), name="target")
    @icontract.snapshot(lambda self: len(self._paused), name="n_paused")
    @icontract.snapshot(lambda self, request: request.request_id in self._paused, name="was_paused")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, OLD: (
            request.status is RequestStatus.WAITING
            and request.request_id not in self._paused
            and (
                _where(self, request) == OLD.target
                if OLD.place == IN_RUNNING
                else _where(self, request) == OLD.place
                and len(self._paused) == OLD.n_paused - OLD.was_paused
            )
        ),
        "WL-STR-2: the request is WAITING: a running one is enqueued by the layout's rule, "
        "a paused session stays where it waits and is no longer paused",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None
            or (
                same(list(self.waiting), OLD.items[0])
                and same(list(self._aside), OLD.items[1])
                and same(self.running, OLD.items[2])
                if OLD.place != IN_RUNNING
                else same(self.running, without(OLD.items[2], [request]))
                and (
                    same(
                        list(self.waiting),
                        waiting_model.added(self.policy, OLD.items[0], [request]),
                    )
                    and same(list(self._aside), OLD.items[1])
                    if OLD.target == IN_WAITING
                    else same(
                        list(self._aside),
                        waiting_model.added(self.policy, OLD.items[1], [request]),
                    )
                    and same(list(self.waiting), OLD.items[0])
                )
            )
        ),
        "WL-STR-2: a running request is added with add_request; a paused session keeps its "
        "place; every other request keeps its place",
    )
    def continue_stream(self, request: LifecycleRequest) -> None:
        """WL-STR-2: the session's next input chunk arrived (vLLM's
        `_update_request_as_session`).

        A running request (it stopped with the update already queued) becomes
        WAITING and is enqueued by the layout's rule; a paused session becomes
        WAITING where it waits.

        :raises ValueError: neither running nor a paused session (WL-STR-3)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("continue_stream")
        self._require_stream_target(request)
        if _where(self, request) == IN_RUNNING:
            self._take_running(request)
            request.status = RequestStatus.WAITING
            self._enqueue_waiting(request)
            return
        request.status = RequestStatus.WAITING
        self._paused.discard(request.request_id)

    # -- abort

    @staticmethod
    def _ids_well_formed(request_ids: object) -> bool:
        if request_ids is None or isinstance(request_ids, str):
            return True
        if not isinstance(request_ids, Iterable):
            return False
        if isinstance(request_ids, Collection):
            return all(isinstance(i, str) for i in request_ids)
        return True  # an iterator: checked in the body, before anything changes

    def _abort_targets(self, request_ids: object) -> list[LifecycleRequest]:
        """WL-ABT-1, WL-ABT-2: the known unfinished requests named, first mention first."""
        if request_ids is None:
            ids: list[str] = list(self._known)
        elif isinstance(request_ids, str):
            ids = [request_ids]
        elif isinstance(request_ids, Iterable):
            ids = list(request_ids)
        else:
            raise TypeError(
                f"WL-ABT-2: request_ids must be a str, an iterable of str or None, "
                f"got {type(request_ids).__name__}"
            )
        for rid in ids:
            if not isinstance(rid, str):
                raise TypeError(f"WL-ABT-2: request ids are str, got {rid!r}")
        targets: dict[str, LifecycleRequest] = {}
        for rid in ids:
            if rid in self._known and self._where[rid] != IN_FINISHED:
                targets.setdefault(rid, self._known[rid])
        return list(targets.values())

    def _expected_aborted(self, request_ids: object) -> list[LifecycleRequest] | None:
        # A snapshot of what abort must return; None for an iterator (not consumed twice).
        if request_ids is not None and not isinstance(request_ids, (str, Collection)):
            return None
        if not self._ids_well_formed(request_ids):
            return None
        return self._abort_targets(request_ids)

    @icontract.require(
        lambda self, request_ids: self._ids_well_formed(request_ids),
        "WL-ABT-2: request_ids is a str, an iterable of str or None",
        error=TypeError,
    )
    @icontract.require(
        lambda self: self._step_skipped is None,
        "WL-STEP-9: abort is not called from a step's callbacks",
        error=RuntimeError,
    )
    @icontract.snapshot(lambda self: len(self.finished), name="n_finished")
    @icontract.snapshot(lambda self: _waiting_count(self) + len(self.running), name="n_unfinished")
    @icontract.snapshot(lambda self, request_ids: self._expected_aborted(request_ids), name="named")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, result, OLD: (
            all(
                r.status is RequestStatus.FINISHED_ABORTED and self.finished.get(r.request_id) is r
                for r in result
            )
            and len(self.finished) == OLD.n_finished + len(result)
            and _waiting_count(self) + len(self.running) == OLD.n_unfinished - len(result)
        ),
        "WL-ABT-1: each returned request left its place for finished as FINISHED_ABORTED",
    )
    @icontract.ensure(
        lambda result, OLD: OLD.named is None or same(result, OLD.named),
        "WL-ABT-2: exactly the known unfinished requests named are aborted, in the order "
        "of first mention; unknown and finished ids are ignored",
    )
    @icontract.ensure(
        lambda self, result, OLD: (
            OLD.items is None
            or (
                same(list(self.waiting), without(OLD.items[0], result))
                and same(list(self._aside), without(OLD.items[1], result))
                and same(self.running, without(OLD.items[2], result))
            )
        ),
        "WL-ABT-1: the other requests keep their places and their order",
    )
    def abort(self, request_ids: str | Iterable[str] | None) -> list[LifecycleRequest]:
        """WL-ABT-1: vLLM's `finish_requests(request_ids, FINISHED_ABORTED)`.

        `request_ids` is one id, an iterable of ids, or None for every unfinished
        request. Ids that are unknown or already finished are ignored (WL-ABT-2).

        :raises TypeError: request_ids is not a str, an iterable of str or None (WL-ABT-2)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("abort")
        targets = self._abort_targets(request_ids)
        by_place: dict[str, list[LifecycleRequest]] = {
            IN_WAITING: [],
            self._aside_place: [],
            IN_RUNNING: [],
        }
        for request in targets:
            by_place[self._where[request.request_id]].append(request)
        if by_place[IN_WAITING]:
            self.waiting.remove_requests(by_place[IN_WAITING])
        if by_place[self._aside_place]:
            self._aside.remove_requests(by_place[self._aside_place])
        if by_place[IN_RUNNING]:
            self.running[:] = without(self.running, by_place[IN_RUNNING])
        for request in targets:
            request.status = RequestStatus.FINISHED_ABORTED
            self._forget_state(request)
            self.finished[request.request_id] = request
            self._where[request.request_id] = IN_FINISHED
        return targets

    def __repr__(self) -> str:
        def ids(requests: Iterable[LifecycleRequest]) -> list[str]:
            return [r.request_id for r in requests]

        layout = "" if self.layout == LAYOUT_V030 else f" {self.layout}"
        return (
            f"<WaitingQueues {self.policy.value}{layout}: waiting={ids(self.waiting)} "
            f"{self._aside_place}={ids(self._aside)} running={ids(self.running)} "
            f"finished={list(self.finished)}>"
        )
