"""The scheduler's waiting lifecycle: `waiting`, `skipped_waiting`, `running`, finished.

Models the waiting-queue part of `vllm/v1/core/sched/scheduler.py` (`Scheduler`):
`_is_blocked_waiting_status`, `_enqueue_waiting_request`,
`_select_waiting_queue_for_scheduling`, `_try_promote_blocked_waiting_request`,
the waiting loop of `schedule()` (with its per-step `step_skipped_waiting`
queue), `_preempt_request` and `finish_requests`. The semantics, clause by
clause, are in `specs/waiting-lifecycle.md`; every contract below names the
clause (`WL-...`) it enforces.

Deliberate divergences from vLLM:

* Everything the loop asks about one request besides promotion (prefix cache,
  encoder budget, LoRA cap, KV allocation, token budget, ...) is one callback,
  `check(request) -> StepDecision`: RUN, SKIP (vLLM's `continue` paths) or STOP
  (vLLM's `break` paths). vLLM's async KV load -- a request that passes every
  check and is parked as WAITING_FOR_REMOTE_KVS -- is `check` setting a blocked
  status and returning SKIP (WL-STEP-3).
* vLLM's loop also stops when `running` is full (`max_num_running_reqs`); here
  that is the optional `max_running` argument of `schedule_step`.
* Request ids are unique among all requests an instance has seen, finished ones
  included, and finished requests are kept in `finished` (vLLM frees them and
  may see an id again) so that conservation (WL-CONS-1) can be checked.
* `finish` takes one running request (vLLM removes stopped requests from
  `running` in `update_from_output`); `abort(ids)` is vLLM's
  `finish_requests(ids, FINISHED_ABORTED)` and returns the requests in the
  order their ids were given (vLLM collects them from a set).
* `preempt` removes the request from `running` itself; vLLM's
  `_preempt_request` expects the caller to have popped it already.
* The PRIORITY arbitration compares the two heads by the queue key
  `(priority, arrival_time, request_id)`, as the queues order them; vLLM calls
  `Request.__lt__`. The two agree wherever vLLM's order is defined.
* A promotion that succeeds leaves WAITING or PREEMPTED (whichever the callback
  chose; vLLM picks PREEMPTED for a request preempted before) and sets WAITING
  when the callback left the status blocked.
* The callbacks are checked: `check` must return a `StepDecision`, neither
  callback may move the request to a status outside the rules of WL-STEP-9,
  nor call a mutating method of the same instance. A callback that raises or
  breaks a rule ends the step as if it had returned STOP: the requests skipped
  so far are parked in `skipped_waiting` before the error propagates, so
  nothing is lost (vLLM would lose its local `step_skipped_waiting`).
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
from typing import Any, NamedTuple

import icontract

from queueref.config import deep_checks
from queueref.queues import (
    FCFSRequestQueue,
    PriorityRequestQueue,
    RequestQueue,
    SchedulingPolicy,
    create_request_queue,
)
from queueref.request import REQUEST_FIELDS, RequestStatus, request_key


class StepDecision(enum.Enum):
    """WL-STEP-1: what `check(request)` says about the head examined by a step."""

    RUN = "run"  # the request is popped into `running`
    SKIP = "skip"  # cannot run this step for a reason of its own: skipped, like a blocked one
    STOP = "stop"  # budget exhausted: the request stays where it is and the step ends


# The places a known request can be in; each is in exactly one (WL-CONS-1).
IN_WAITING = "waiting"
IN_SKIPPED = "skipped_waiting"
IN_RUNNING = "running"
IN_FINISHED = "finished"

_READY = frozenset({RequestStatus.WAITING, RequestStatus.PREEMPTED})
_BLOCKED = frozenset(s for s in RequestStatus if RequestStatus.is_blocked(s))
_FINISHED_STATUSES = frozenset(s for s in RequestStatus if RequestStatus.is_finished(s))

#: WL-CONS-2: the statuses a request may have in each place.
ALLOWED_STATUSES: dict[str, frozenset[RequestStatus]] = {
    IN_WAITING: _READY,
    IN_SKIPPED: _READY | _BLOCKED,
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

    request: Any
    status_before: RequestStatus
    promoted: bool | None
    decision: StepDecision


def _never_promote(request: Any) -> bool:
    """The default `try_promote`: a blocked request stays blocked."""
    return False


# ---------------------------------------------------------------------------
# Helpers the contracts use.


def _is_request_shaped(request: object) -> bool:
    return all(hasattr(request, f) for f in REQUEST_FIELDS) and isinstance(
        getattr(request, "status", None), RequestStatus
    )


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Equal as sequences of objects (identity, not ==)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _without(requests: Iterable[Any], gone: Iterable[Any]) -> list[Any]:
    ids = {id(r) for r in gone}
    return [r for r in requests if id(r) not in ids]


def _model_add(policy: SchedulingPolicy, queue: list[Any], requests: Iterable[Any]) -> list[Any]:
    """The list model of adding to a queue: FCFS at the back, PRIORITY in key order."""
    merged = [*queue, *requests]
    return sorted(merged, key=request_key) if policy is SchedulingPolicy.PRIORITY else merged


def _model_prepend(policy: SchedulingPolicy, queue: list[Any], request: Any) -> list[Any]:
    """The list model of prepend_request: FCFS at the front, PRIORITY in key order."""
    if policy is SchedulingPolicy.PRIORITY:
        return _model_add(policy, queue, [request])
    return [request, *queue]


def _is_finished_status(status: object) -> bool:
    return isinstance(status, RequestStatus) and RequestStatus.is_finished(status)


def _waiting_count(wq: WaitingQueues) -> int:
    return len(wq.waiting) + len(wq.skipped_waiting)


def _where(wq: WaitingQueues, request: Any) -> str | None:
    """The place of this very request, or None when the instance does not know it."""
    if not _is_request_shaped(request):
        return None
    request_id = request.request_id
    if wq._known.get(request_id) is not request:
        return None
    return wq._where[request_id]


def _contents(wq: WaitingQueues) -> tuple[list[Any], list[Any], list[Any]] | None:
    """(waiting, skipped_waiting, running) in order, only under deep checks (O(n))."""
    if not deep_checks():
        return None
    return list(wq.waiting), list(wq.skipped_waiting), list(wq.running)


def _conserved(wq: WaitingQueues) -> bool:
    """WL-CONS-1 over the whole structure: each known request in exactly one place."""
    if not deep_checks():
        return True
    seen: set[str] = set()
    places: list[tuple[str, Iterable[Any]]] = [
        (IN_WAITING, wq.waiting),
        (IN_SKIPPED, wq.skipped_waiting),
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
    """WL-CONS-2 over the whole structure: each status allowed where its request is."""
    return not deep_checks() or all(
        r.status in ALLOWED_STATUSES[wq._where[rid]] for rid, r in wq._known.items()
    )


def _expected_step(
    policy: SchedulingPolicy,
    before: tuple[list[Any], list[Any], list[Any]],
    log: Sequence[StepEntry],
) -> tuple[list[Any], list[Any], list[Any]]:
    """WL-STEP-1: the list model of a step, given what it decided about each request.

    A skipped request leaves its queue and joins `skipped_waiting` in
    examination order (FCFS: in front of the requests not examined; PRIORITY:
    in key order); a request that runs is appended to `running`; the request
    that stopped the step and the unexamined ones stay where they are.
    """
    waiting, skipped, running = before
    ran = [e.request for e in log if e.decision is StepDecision.RUN]
    skipped_now = [e.request for e in log if e.decision is StepDecision.SKIP]
    gone = [*ran, *skipped_now]
    rest_skipped = _without(skipped, gone)
    if policy is SchedulingPolicy.FCFS:
        new_skipped = [*skipped_now, *rest_skipped]
    else:
        new_skipped = _model_add(policy, rest_skipped, skipped_now)
    return _without(waiting, gone), new_skipped, [*running, *ran]


def _fcfs_step_keeps_order(
    wq: WaitingQueues, before: tuple[list[Any], list[Any], list[Any]], result: list[Any]
) -> bool:
    """WL-STEP-5: `skipped_waiting + waiting` only loses the requests that ran.

    The step's skipped requests move from the front of `waiting` (or stay at
    the front of `skipped_waiting`) to the back of the skipped part, which is
    the same position in the concatenation: the two reversals cancel.
    """
    waiting, skipped, _running = before
    after = [*wq.skipped_waiting, *wq.waiting]
    rest = list(wq.waiting)
    return _same(after, _without([*skipped, *waiting], result)) and _same(
        rest, waiting[len(waiting) - len(rest) :]
    )


def _examination_order(
    policy: SchedulingPolicy, before: tuple[list[Any], list[Any], list[Any]]
) -> list[Any]:
    """WL-STEP-6, WL-STEP-8: the order in which a step examines the waiting requests."""
    waiting, skipped, _running = before
    if policy is SchedulingPolicy.FCFS:
        return [*skipped, *waiting]  # every skipped request before any waiting one
    return sorted([*skipped, *waiting], key=request_key)  # the smaller head each time


def _log_runs_match(wq: WaitingQueues, result: list[Any], n_running: int) -> bool:
    log = wq._last_step
    ran = [e.request for e in log if e.decision is StepDecision.RUN]
    return (
        _same(ran, result)
        and _same(wq.running[n_running:], result)
        and all(r.status is RequestStatus.RUNNING and _where(wq, r) == IN_RUNNING for r in result)
    )


def _log_well_formed(wq: WaitingQueues) -> bool:
    log = wq._last_step
    stops = [i for i, e in enumerate(log) if e.decision is StepDecision.STOP]
    stopped_in_place = all(
        _where(wq, e.request) in (IN_WAITING, IN_SKIPPED) for e in log[-1:] if stops
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
    """WL-STEP-3, WL-STEP-4: every request skipped in the step is now in skipped_waiting."""
    return all(
        _where(wq, e.request) == IN_SKIPPED and e.request in wq.skipped_waiting
        for e in wq._last_step
        if e.decision is StepDecision.SKIP
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
    return {id(r): r.status for queue in (wq.waiting, wq.skipped_waiting) for r in queue}


def _log_truthful(wq: WaitingQueues, statuses: dict[int, RequestStatus] | None) -> bool:
    # The statuses recorded in the log are the ones the requests had before the step.
    return statuses is None or all(
        statuses.get(id(e.request)) is e.status_before for e in wq._last_step
    )


# ---------------------------------------------------------------------------


@icontract.invariant(
    lambda self: (
        len(self._known)
        == len(self.waiting) + len(self.skipped_waiting) + len(self.running) + len(self.finished)
    ),
    "WL-CONS-1: as many requests are placed as are known (O(1) count)",
)
@icontract.invariant(
    lambda self: _conserved(self),
    "WL-CONS-1: every known request is in exactly one of waiting, skipped_waiting, "
    "running, finished",
)
@icontract.invariant(
    lambda self: _statuses_match(self),
    "WL-CONS-2: every request has a status allowed where it is",
)
class WaitingQueues(icontract.DBC):
    """vLLM's `waiting`, `skipped_waiting` and `running` for one policy, plus `finished`.

    The attributes are for reading; change them only through the methods.

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
    waiting: RequestQueue
    skipped_waiting: RequestQueue
    running: list[Any]
    finished: dict[str, Any]

    @icontract.ensure(
        lambda self: (
            not self.waiting and not self.skipped_waiting and not self.running and not self.finished
        ),
        "WL-POL-1: a new instance holds no request",
    )
    @icontract.ensure(
        lambda self: (
            type(self.waiting) is type(self.skipped_waiting)
            and isinstance(
                self.waiting,
                FCFSRequestQueue if self.policy is SchedulingPolicy.FCFS else PriorityRequestQueue,
            )
        ),
        "WL-POL-1: waiting and skipped_waiting are both queues of the policy",
    )
    def __init__(self, policy: SchedulingPolicy | str) -> None:
        """WL-POL-1: `policy` is a `SchedulingPolicy` or its value.

        :raises ValueError: an unknown policy (RQ-POL-2)
        """
        self.waiting = create_request_queue(policy)
        self.skipped_waiting = create_request_queue(policy)
        self.policy = SchedulingPolicy(policy)
        self.running = []
        self.finished = {}
        # request_id -> request and request_id -> place, for every request seen.
        self._known: dict[str, Any] = {}
        self._where: dict[str, str] = {}
        # The queue of requests skipped by the step in progress (None between steps).
        self._step_skipped: RequestQueue | None = None
        self._last_step: list[StepEntry] = []

    # -- checks in the bodies (they hold with contracts off, under `python -O`)

    def _require_idle(self, operation: str) -> None:
        if self._step_skipped is not None:
            raise RuntimeError(
                f"WL-STEP-9: {operation} called from a check/try_promote callback "
                "while a step is in progress"
            )

    @staticmethod
    def _require_shape(request: Any) -> None:
        for field in REQUEST_FIELDS:
            if not hasattr(request, field):
                raise TypeError(
                    f"RQ-REQ-3: {type(request).__name__} object is not a request: "
                    f"it has no {field!r} attribute"
                )
        if not isinstance(getattr(request, "status", None), RequestStatus):
            raise TypeError(f"WL-ENQ-2: {request!r} has no queueref RequestStatus status")

    def _require_running(self, request: Any, rule: str) -> None:
        self._require_shape(request)
        place = _where(self, request)
        if place != IN_RUNNING:
            state = "unknown" if place is None else f"in {place}"
            raise ValueError(f"{rule}: {request!r} is not running (it is {state})")

    # -- the places

    def _place(self, request: Any, place: str) -> None:
        self._known[request.request_id] = request
        self._where[request.request_id] = place

    def _take_running(self, request: Any) -> None:
        # O(len(running)); by identity, like the rest of the lifecycle.
        for i, r in enumerate(self.running):
            if r is request:
                del self.running[i]
                return
        raise AssertionError("WL-CONS-1: a request marked running is not in running")

    # -- enqueue

    @staticmethod
    def _is_blocked(status: RequestStatus) -> bool:
        """WL-ENQ-1: vLLM's `_is_blocked_waiting_status` (the three WAITING_FOR_*)."""
        return status in _BLOCKED

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
    @icontract.ensure(
        lambda self, request: (
            _where(self, request)
            == (IN_SKIPPED if RequestStatus.is_blocked(request.status) else IN_WAITING)
        ),
        "WL-ENQ-1: a blocked request goes to skipped_waiting, any other to waiting",
    )
    @icontract.ensure(
        lambda self, OLD: len(self._known) == OLD.known + 1,
        "WL-CONS-1: enqueue adds exactly one known request",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            OLD.items is None
            or (
                _same(list(self.skipped_waiting), _model_add(self.policy, OLD.items[1], [request]))
                and _same(list(self.waiting), OLD.items[0])
                if RequestStatus.is_blocked(request.status)
                else _same(list(self.waiting), _model_add(self.policy, OLD.items[0], [request]))
                and _same(list(self.skipped_waiting), OLD.items[1])
            )
        ),
        "WL-ENQ-1: the request is added with add_request (FCFS: at the back; PRIORITY: "
        "in key order) and the other queue is unchanged",
    )
    def enqueue(self, request: Any) -> None:
        """WL-ENQ-1: vLLM's `_enqueue_waiting_request`.

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
        if self._is_blocked(request.status):
            self.skipped_waiting.add_request(request)
            self._place(request, IN_SKIPPED)
        else:
            self.waiting.add_request(request)
            self._place(request, IN_WAITING)

    # -- selection

    def _select(self) -> RequestQueue | None:
        """WL-SEL-1, WL-SEL-2: vLLM's `_select_waiting_queue_for_scheduling`."""
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
        lambda self, result: (result is None) == (not self.waiting and not self.skipped_waiting),
        "WL-SEL-1: no queue is selected exactly when both are empty",
    )
    @icontract.ensure(
        lambda self, result: (
            self.policy is not SchedulingPolicy.FCFS
            or result is (self.skipped_waiting or self.waiting or None)
        ),
        "WL-SEL-1: FCFS selects skipped_waiting whenever it is not empty",
    )
    @icontract.ensure(
        lambda self, result: (
            self.policy is not SchedulingPolicy.PRIORITY
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
            result is None or result is self.waiting or result is self.skipped_waiting
        ),
        "WL-SEL-1: the selection is one of the two queues",
    )
    def select_waiting_queue(self) -> RequestQueue | None:
        """WL-SEL-1, WL-SEL-2: the queue whose head a step examines next, or None."""
        return self._select()

    # -- a scheduling step

    def _skip(self, queue: RequestQueue, request: Any, step_skipped: RequestQueue) -> None:
        """WL-STEP-3: pop the head and `prepend_request` it onto the step's queue."""
        queue.pop_request()
        step_skipped.prepend_request(request)
        self._where[request.request_id] = IN_SKIPPED

    def _park(self, step_skipped: RequestQueue) -> None:
        """WL-STEP-4: `skipped_waiting.prepend_requests(step_skipped)` (reverses back)."""
        if step_skipped:
            self.skipped_waiting.prepend_requests(step_skipped)

    def _run(self, queue: RequestQueue, request: Any) -> None:
        """WL-STEP-1: pop the head into running with status RUNNING."""
        queue.pop_request()
        request.status = RequestStatus.RUNNING
        self.running.append(request)
        self._where[request.request_id] = IN_RUNNING

    def _promote(self, try_promote: Callable[[Any], bool], request: Any) -> bool:
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

    def _check(self, check: Callable[[Any], StepDecision], request: Any) -> StepDecision:
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
        lambda check, try_promote: (
            callable(check) and (try_promote is None or callable(try_promote))
        ),
        "WL-STEP-1: check (and try_promote, when given) are callables",
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
        lambda self, result, max_running: (
            max_running is None or not result or len(self.running) <= max_running
        ),
        "WL-STEP-1: a step moves no request to running once running holds max_running",
    )
    @icontract.ensure(
        lambda self: _blocked_handled(self),
        "WL-STEP-2: a blocked head is offered to try_promote; if not promoted it is skipped",
    )
    @icontract.ensure(
        lambda self: _skipped_parked(self),
        "WL-STEP-4: every request skipped in the step (WL-STEP-3) ends in skipped_waiting",
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
        lambda self, OLD: (
            OLD.items is None
            or all(
                _same(after, expected)
                for after, expected in zip(
                    (list(self.waiting), list(self.skipped_waiting), self.running),
                    _expected_step(self.policy, OLD.items, self._last_step),
                    strict=True,
                )
            )
        ),
        "WL-STEP-1: waiting, skipped_waiting and running are what the list model of the "
        "step gives for its decisions",
    )
    @icontract.ensure(
        lambda self, result, OLD: (
            OLD.items is None
            or self.policy is not SchedulingPolicy.FCFS
            or _fcfs_step_keeps_order(self, OLD.items, result)
        ),
        "WL-STEP-5: FCFS: skipped_waiting + waiting keeps its order minus the requests "
        "that ran (the two reversals cancel); waiting only loses a prefix",
    )
    @icontract.ensure(
        lambda self, OLD: (
            OLD.items is None
            or self.policy is not SchedulingPolicy.PRIORITY
            or _same(
                [e.request for e in self._last_step],
                _examination_order(self.policy, OLD.items)[: len(self._last_step)],
            )
        ),
        "WL-STEP-6: PRIORITY: each examined request (so each that ran) was the smallest "
        "head the step could choose from",
    )
    @icontract.ensure(
        lambda self, OLD: (
            OLD.items is None
            or self.policy is not SchedulingPolicy.FCFS
            or _same(
                [e.request for e in self._last_step],
                _examination_order(self.policy, OLD.items)[: len(self._last_step)],
            )
        ),
        "WL-STEP-8: FCFS: every skipped request is examined before any waiting one, and "
        "each queue front to back (no starvation)",
    )
    def schedule_step(
        self,
        check: Callable[[Any], StepDecision],
        try_promote: Callable[[Any], bool] | None = None,
        *,
        max_running: int | None = None,
    ) -> list[Any]:
        """WL-STEP-1: the waiting loop of vLLM's `schedule()`; returns the requests that ran.

        While a queue is selected (WL-SEL-1, WL-SEL-2) and `running` holds fewer
        than `max_running` requests: peek the selected head; a blocked head that
        `try_promote` does not promote is skipped (WL-STEP-2); otherwise
        `check(head)` decides RUN, SKIP (WL-STEP-3) or STOP. Skipped requests are
        gathered with `prepend_request` and parked with
        `skipped_waiting.prepend_requests` at the end (WL-STEP-4).

        :raises TypeError: `check` returned something other than a StepDecision (WL-STEP-9)
        :raises ValueError: a callback broke the status rules (WL-STEP-9)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("schedule_step")
        if not callable(check) or not (try_promote is None or callable(try_promote)):
            raise TypeError("WL-STEP-1: check (and try_promote, when given) must be callables")
        if max_running is not None and (
            isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 0
        ):
            raise ValueError(f"WL-STEP-1: max_running must be an int >= 0, got {max_running!r}")
        promote = try_promote if try_promote is not None else _never_promote
        # What the callbacks answered, recorded here rather than by the hooks
        # (_promote, _check) so that the log the contracts read is first-hand.
        promoted: dict[int, bool] = {}
        decided: dict[int, StepDecision] = {}

        def ask_promote(request: Any) -> bool:
            answer = promote(request)
            promoted[id(request)] = answer
            return answer

        def ask_check(request: Any) -> StepDecision:
            answer = check(request)
            decided[id(request)] = answer
            return answer

        step_skipped = create_request_queue(self.policy)
        log: list[StepEntry] = []
        self._last_step = log
        scheduled: list[Any] = []
        self._step_skipped = step_skipped
        try:
            while max_running is None or len(self.running) < max_running:
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
                    self._skip(queue, request, step_skipped)
                    continue
                self._run(queue, request)
                scheduled.append(request)
        finally:
            # WL-STEP-4: park the skipped requests even when a callback raised.
            self._step_skipped = None
            self._park(step_skipped)
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
            or (_same(list(self.waiting), _model_prepend(self.policy, OLD.items[0], request)))
            and _same(self.running, _without(OLD.items[2], [request]))
            and _same(list(self.skipped_waiting), OLD.items[1])
        ),
        "WL-PRE-1: waiting.prepend_request (FCFS: in front; PRIORITY: in key order); the "
        "other requests keep their places",
    )
    def preempt(self, request: Any) -> None:
        """WL-PRE-1: vLLM's `_preempt_request`: running -> `waiting.prepend_request`.

        :raises ValueError: the request is not running (WL-PRE-2)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("preempt")
        self._require_running(request, "WL-PRE-2")
        self._take_running(request)
        request.status = RequestStatus.PREEMPTED
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
                _same(self.running, _without(OLD.items[2], [request]))
                and _same(list(self.waiting), OLD.items[0])
                and _same(list(self.skipped_waiting), OLD.items[1])
            )
        ),
        "WL-FIN-1: the other requests keep their places",
    )
    def finish(self, request: Any, status: RequestStatus = RequestStatus.FINISHED_STOPPED) -> None:
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
        self.finished[request.request_id] = request
        self._where[request.request_id] = IN_FINISHED

    # -- abort

    @staticmethod
    def _ids_well_formed(request_ids: Any) -> bool:
        if request_ids is None or isinstance(request_ids, str):
            return True
        if not isinstance(request_ids, Iterable):
            return False
        if isinstance(request_ids, Collection):
            return all(isinstance(i, str) for i in request_ids)
        return True  # an iterator: checked in the body, before anything changes

    def _abort_targets(self, request_ids: str | Iterable[str] | None) -> list[Any]:
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
        targets: dict[str, Any] = {}
        for rid in ids:
            if rid in self._known and self._where[rid] != IN_FINISHED:
                targets.setdefault(rid, self._known[rid])
        return list(targets.values())

    def _expected_aborted(self, request_ids: Any) -> list[Any] | None:
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
        lambda result, OLD: OLD.named is None or _same(result, OLD.named),
        "WL-ABT-2: exactly the known unfinished requests named are aborted, in the order "
        "of first mention; unknown and finished ids are ignored",
    )
    @icontract.ensure(
        lambda self, result, OLD: (
            OLD.items is None
            or (
                _same(list(self.waiting), _without(OLD.items[0], result))
                and _same(list(self.skipped_waiting), _without(OLD.items[1], result))
                and _same(self.running, _without(OLD.items[2], result))
            )
        ),
        "WL-ABT-1: the other requests keep their places and their order",
    )
    def abort(self, request_ids: str | Iterable[str] | None) -> list[Any]:
        """WL-ABT-1: vLLM's `finish_requests(request_ids, FINISHED_ABORTED)`.

        `request_ids` is one id, an iterable of ids, or None for every unfinished
        request. Ids that are unknown or already finished are ignored (WL-ABT-2).

        :raises TypeError: request_ids is not a str, an iterable of str or None (WL-ABT-2)
        :raises RuntimeError: called from a step's callback (WL-STEP-9)
        """
        self._require_idle("abort")
        targets = self._abort_targets(request_ids)
        by_place: dict[str, list[Any]] = {IN_WAITING: [], IN_SKIPPED: [], IN_RUNNING: []}
        for request in targets:
            by_place[self._where[request.request_id]].append(request)
        if by_place[IN_WAITING]:
            self.waiting.remove_requests(by_place[IN_WAITING])
        if by_place[IN_SKIPPED]:
            self.skipped_waiting.remove_requests(by_place[IN_SKIPPED])
        if by_place[IN_RUNNING]:
            self.running[:] = _without(self.running, by_place[IN_RUNNING])
        for request in targets:
            request.status = RequestStatus.FINISHED_ABORTED
            self.finished[request.request_id] = request
            self._where[request.request_id] = IN_FINISHED
        return targets

    def __repr__(self) -> str:
        def ids(requests: Iterable[Any]) -> list[str]:
            return [r.request_id for r in requests]

        return (
            f"<WaitingQueues {self.policy.value}: waiting={ids(self.waiting)} "
            f"skipped_waiting={ids(self.skipped_waiting)} running={ids(self.running)} "
            f"finished={list(self.finished)}>"
        )
