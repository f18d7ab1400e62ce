"""The waiting lifecycle's scheduling step: queue selection and the waiting loop.

`SchedulingStep` is the part of `queueref.waiting.lifecycle.WaitingQueues` that models
the waiting loop of vLLM's `Scheduler.schedule()` (0.30.0-0.33.0): which head
is examined next (under the pause state), the callbacks asked about it,
running it, skipping it and parking the skipped requests.
"""

from __future__ import annotations

from collections.abc import Callable

import icontract

from queueref.queues.base import RequestQueue
from queueref.queues.factory import SchedulingPolicy, create_request_queue
from queueref.queues.fcfs import FCFSRequestQueue
from queueref.request import RequestStatus, request_key
from queueref.validators import is_limit
from queueref.waiting import model as waiting_model
from queueref.waiting.checks import (
    _blocked_handled,
    _contents,
    _continue_consulted,
    _examined_in_order,
    _log_runs_match,
    _log_truthful,
    _log_well_formed,
    _no_unpromoted_runs,
    _pause_respected,
    _paused_selection,
    _sessions_after_step,
    _skipped_parked,
    _slots_respected,
    _step_matches_model,
    _step_ran_nothing_after_no,
    _waiting_count,
    _waiting_statuses,
    lifecycle_operation,
)
from queueref.waiting.model import LAYOUT_V030
from queueref.waiting.pause import Pausing
from queueref.waiting.places import (
    IN_KV_HOLDING,
    IN_RUNNING,
    IN_SKIPPED,
    IN_WAITING,
    READY_STATUSES,
    LifecycleRequest,
    PauseState,
    StepDecision,
    StepEntry,
    release_decision,
)


def _not_a_status(callback: str, status: object, before: object) -> str:
    # WL-STEP-9: a status is a RequestStatus member, never a value equal to one.
    if status is before:  # not the callback's doing: it came in so
        return f"status {status!r} is not a RequestStatus (set before {callback} was asked)"
    return f"{callback} set status {status!r}, not a RequestStatus"


def _never_promote(request: LifecycleRequest) -> bool:
    """The default `try_promote`: a blocked request stays blocked."""
    return False


class SchedulingStep(Pausing):
    """`select_waiting_queue` and `schedule_step`, with the steps they are made of."""

    # -- selection

    def _select(self) -> RequestQueue | None:
        """The queue whose head the step examines next."""
        # WL-SEL-1, WL-SEL-2, WL-L33-2
        if not self._loop_runs():
            return None
        if self.layout != LAYOUT_V030:
            if self.pause_state is PauseState.PAUSED_NEW:  # WL-REL-1: 0.32.0 and later
                return self.kv_holding_waiting or None
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
        lambda self, result: (
            self.pause_state is not PauseState.UNPAUSED
            or (result is None) == (not self.waiting and not self._aside)
        ),
        "WL-SEL-1: no queue is selected exactly when both are empty (unpaused)",
    )
    @icontract.ensure(
        lambda self, result: _paused_selection(self, result),
        "WL-REL-1: paused, only vllm-0.32 and later under PAUSED_NEW select, and only "
        "a non-empty kv_holding_waiting",
    )
    @icontract.ensure(
        lambda self, result: (
            self.layout != LAYOUT_V030
            or self.policy is not SchedulingPolicy.FCFS
            or self.pause_state is not PauseState.UNPAUSED
            or result is (self.skipped_waiting or self.waiting or None)
        ),
        "WL-SEL-1: FCFS selects skipped_waiting whenever it is not empty",
    )
    @icontract.ensure(
        lambda self, result: (
            self.layout != LAYOUT_V030
            or self.policy is not SchedulingPolicy.PRIORITY
            or not (self.waiting and self.skipped_waiting)
            or self.pause_state is not PauseState.UNPAUSED
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
            self.layout == LAYOUT_V030
            or self.pause_state is not PauseState.UNPAUSED
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
        """The queue whose head a step examines next, or None."""
        return self._select()

    # -- a scheduling step

    def _skip(
        self, queue: RequestQueue, request: LifecycleRequest, step_skipped: RequestQueue
    ) -> None:
        """Pop the head and `prepend_request` it onto the step's queue."""
        # WL-STEP-3
        queue.pop_request()
        step_skipped.prepend_request(request)
        self._where[request.request_id] = IN_SKIPPED

    def _park(self, step_skipped: RequestQueue) -> None:
        """`skipped_waiting.prepend_requests(step_skipped)` (reverses back)."""
        # WL-STEP-4
        if step_skipped:
            self.skipped_waiting.prepend_requests(step_skipped)

    def _skip_v033(
        self,
        queue: RequestQueue,
        request: LifecycleRequest,
        skipped_waiting: RequestQueue,
        skipped_kv: RequestQueue,
    ) -> None:
        """Pop the head, defer it, gather it (front first) for its KV state's queue."""
        # WL-L33-3
        queue.pop_request()
        self.deferred_waiting.add(request.request_id)
        if self._holds_kv(request):
            skipped_kv.prepend_request(request)
            self._where[request.request_id] = IN_KV_HOLDING
        else:
            skipped_waiting.prepend_request(request)
            self._where[request.request_id] = IN_WAITING

    def _park_v033(self, skipped_waiting: RequestQueue, skipped_kv: RequestQueue) -> None:
        """Each queue `prepend_requests` the requests gathered for it."""
        # WL-STEP-4, WL-L33-3
        if skipped_kv:
            self.kv_holding_waiting.prepend_requests(skipped_kv)
        if skipped_waiting:
            self.waiting.prepend_requests(skipped_waiting)

    def _run(self, queue: RequestQueue, request: LifecycleRequest) -> None:
        """Pop the head into running with status RUNNING."""
        # WL-STEP-1
        queue.pop_request()
        request.status = RequestStatus.RUNNING
        self.running.append(request)
        self._where[request.request_id] = IN_RUNNING
        self._kv_held.add(request.request_id)
        if self.layout != LAYOUT_V030:
            self.deferred_waiting.discard(request.request_id)

    def _promote(
        self, try_promote: Callable[[LifecycleRequest], bool], request: LifecycleRequest
    ) -> bool:
        """Ask the callback, then check what it did to the status."""
        # WL-STEP-2
        before = request.status
        try:
            promoted = try_promote(request)
        except BaseException:
            request.status = before
            raise
        problem, error = None, ValueError
        if not isinstance(promoted, bool):
            problem, error = f"try_promote returned {promoted!r}, not a bool", TypeError
        elif not isinstance(request.status, RequestStatus):  # an int equal to a member too
            problem, error = _not_a_status("try_promote", request.status, before), TypeError
        elif promoted and not (
            request.status in READY_STATUSES or self._is_blocked(request.status)
        ):
            problem = f"try_promote set status {request.status.name}"
        elif not promoted and not self._is_blocked(request.status):
            problem = f"try_promote returned False but set status {request.status.name}"
        if problem is not None:
            request.status = before
            raise error(f"WL-STEP-9: {problem} for {request!r}")
        if promoted and self._is_blocked(request.status):
            request.status = RequestStatus.WAITING
        return promoted

    def _check(
        self, check: Callable[[LifecycleRequest], StepDecision], request: LifecycleRequest
    ) -> StepDecision:
        """Ask the callback, then check what it did to the status."""
        # WL-STEP-1
        before = request.status
        try:
            decision = check(request)
        except BaseException:
            request.status = before
            raise
        problem, error = None, ValueError
        if not isinstance(decision, StepDecision):
            problem, error = f"check returned {decision!r}, not a StepDecision", TypeError
        elif not isinstance(request.status, RequestStatus):  # an int equal to a member too
            problem, error = _not_a_status("check", request.status, before), TypeError
        elif request.status is not before and not (
            decision is StepDecision.SKIP and self._is_blocked(request.status)
        ):
            problem = f"check changed the status to {request.status.name} ({decision.name})"
        if problem is not None:
            request.status = before
            raise error(f"WL-STEP-9: {problem} for {request!r}")
        return decision

    def _may_continue(self, should_continue: Callable[[], bool] | None) -> bool:
        """vLLM's `token_budget > 0`, asked of the callback."""
        # WL-STEP-10
        if should_continue is None:
            return True
        answer = should_continue()
        if not isinstance(answer, bool):
            raise TypeError(f"WL-STEP-9: should_continue returned {answer!r}, not a bool")
        self._continue_answers.append(answer)
        return answer

    def _slots_full(self, max_running: int | None) -> bool:
        """Running and the paused sessions fill max_running."""
        # WL-STEP-1, WL-STR-4
        return max_running is not None and len(self.running) + len(self._paused) >= max_running

    @icontract.require(
        lambda max_running: is_limit(max_running),
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
    @lifecycle_operation("schedule_step")
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
        lambda self, OLD: _pause_respected(self, OLD.items),
        "WL-REL-1: PAUSED_ALL (and PAUSED_NEW up to vllm-0.31) examines no request; "
        "PAUSED_NEW from vllm-0.32 examines kv_holding_waiting only",
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
        lambda self: self.layout == LAYOUT_V030 or _skipped_parked(self),
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
        lambda self, OLD: self.layout == LAYOUT_V030 or _step_matches_model(self, OLD.items),
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
        lambda self, OLD: self.layout == LAYOUT_V030 or _examined_in_order(self, OLD.items),
        "WL-L33-2: vllm-0.33: every request of kv_holding_waiting is examined before any "
        "of waiting, each queue in its order",
    )
    @icontract.ensure(
        lambda self, result: (
            self.layout == LAYOUT_V030
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
        """The waiting loop of vLLM's `schedule()`; returns the requests that ran.

        While a queue is not empty: ask `should_continue()` (vLLM's
        `token_budget > 0`), stop when `running` and the paused sessions hold
        `max_running`, select a queue and peek its head; a blocked head that
        `try_promote` does not promote is skipped; otherwise `check(head)`
        decides RUN, SKIP or STOP. The skipped requests are parked at the end.

        :raises TypeError: a callback answered with the wrong type
        :raises ValueError: a callback broke the status rules
        :raises RuntimeError: called from a step's callback
        """
        # WL-SEL-1, WL-SEL-2, WL-STEP-9
        self._require_idle("schedule_step")
        if not callable(check) or not all(
            f is None or callable(f) for f in (try_promote, should_continue)
        ):
            raise TypeError(
                "WL-STEP-1: check (and try_promote, should_continue, when given) must be callables"
            )
        if not is_limit(max_running):
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
            # WL-REL-3: NO_TOKENS is recorded as the layout's release takes it.
            answer = release_decision(self.layout, check(request))
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
            while (self.waiting or self._aside) and self._loop_runs():
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
