"""The scheduler's waiting lifecycle: the waiting queues, `running`, finished.

Models the waiting-queue part of vLLM's `vllm/v1/core/sched/scheduler.py`
(`Scheduler`) with one layout per release, chosen with
`WaitingQueues(policy, layout=...)`:

* `"vllm-0.30"` (the default): vLLM 0.30.0's `waiting` and `skipped_waiting`
  queues -- `_is_blocked_waiting_status`, `_enqueue_waiting_request`,
  `_select_waiting_queue_for_scheduling`, `_try_promote_blocked_waiting_request`,
  the waiting loop of `schedule()` with its per-step `step_skipped_waiting`
  queue, `_handle_stopped_request` (streaming sessions), `_preempt_request` and
  `finish_requests`.
* `"vllm-0.31"`, `"vllm-0.32"`, `"vllm-0.33"`: the `kv_holding_waiting` and
  `waiting` queues with the `deferred_waiting` set (from 0.31.0): requests
  holding KV blocks are drained first, blocked requests stay in their queue,
  and a step's skipped requests go back to the front of the queue their KV
  state picks. The three differ only where `RULES` (`places`) says:
  under PAUSED_NEW 0.32.0 drains `kv_holding_waiting` (`pause`), and
  0.33.0 skips a head left with no tokens (`StepDecision.NO_TOKENS`).

In every layout `preempt()` with no request named takes vLLM's victim (the
same rule in 0.30.0-0.33.0).

The semantics, clause by clause, are in `specs/waiting-lifecycle.md`; every
contract (here and in the modules below) names the clause (`WL-...`) it
enforces, and the list model the deep contracts compare a step with is
`queueref.waiting.model`.

Deliberate divergences from vLLM (0.30.0-0.33.0 alike):

* Everything the loop asks about one request besides promotion (prefix cache,
  encoder budget, LoRA cap, KV allocation, ...) is one callback,
  `check(request) -> StepDecision`: RUN, SKIP (vLLM's `continue` paths) or STOP
  (vLLM's `break` paths). vLLM's async KV load -- a request that passes every
  check and is parked as WAITING_FOR_REMOTE_KVS -- is `check` setting a blocked
  status and returning SKIP. The loop's own guard,
  `token_budget > 0`, is the optional `should_continue()` callback, asked at
  the top of every iteration.
* vLLM's loop also stops when `running` plus the paused streaming sessions
  fill `max_num_running_reqs`; here that is the optional `max_running`
  argument of `schedule_step`.
* Request ids are unique among all requests an instance has seen, finished ones
  included, and finished requests are kept in `finished` (vLLM frees them and
  may see an id again) so that conservation can be checked.
* `finish` takes one running request (vLLM removes stopped requests from
  `running` in `update_from_output`); `abort(ids)` is vLLM's
  `finish_requests(ids, FINISHED_ABORTED)` and returns the requests in the
  order their ids were given (vLLM collects them from a set).
* `preempt` removes the request from `running` itself; vLLM's
  `_preempt_request` expects the caller to have popped it already. The
  running loop that decides when to preempt (KV allocation) is the caller's.
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
  lifecycle, not read from `num_computed_tokens`.
* The callbacks are checked: `check` must return a `StepDecision`,
  `try_promote` and `should_continue` a bool, neither may move the request to
  a status the spec's callback rules do not allow, nor call a mutating method
  of the same instance. A callback that raises or breaks a rule ends the step as if
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

`WaitingQueues` is built from one module per job: `places` (the
vocabulary: places, statuses, a step's log, the request shape check),
`state` (the data and the bookkeeping every operation shares),
`checks` (what the contracts ask), `pause` (the pause states), `step`
(selection and the scheduling step), `stream` (streaming sessions) and `leave`
(preempt, finish, abort). This module holds the invariants, construction and
enqueue; import the other names from the module that defines them.
"""

from __future__ import annotations

from collections.abc import Iterable

import icontract

from queueref.preconditions import require
from queueref.queues.factory import SchedulingPolicy, create_request_queue
from queueref.queues.fcfs import FCFSRequestQueue
from queueref.queues.priority import PriorityRequestQueue
from queueref.request import BLOCKED_STATUSES, RequestStatus
from queueref.waiting import model as waiting_model
from queueref.waiting.checks import (
    _conserved,
    _contents,
    _deferred_consistent,
    _layout_queues_named,
    _sessions_consistent,
    _statuses_match,
    lifecycle_operation,
)
from queueref.waiting.leave import Leaving
from queueref.waiting.model import LAYOUT_V030, same
from queueref.waiting.places import (
    IN_KV_HOLDING,
    IN_SKIPPED,
    IN_WAITING,
    LAYOUTS,
    READY_STATUSES,
    LifecycleRequest,
    PauseState,
    check_lifecycle_request,
    is_lifecycle_request,
)
from queueref.waiting.state import place_of
from queueref.waiting.step import SchedulingStep
from queueref.waiting.stream import StreamingSessions

__all__ = ["WaitingQueues"]


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
class WaitingQueues(SchedulingStep, StreamingSessions, Leaving, icontract.DBC):
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
        """`policy` is a `SchedulingPolicy` or its value.

        :raises ValueError: an unknown policy or layout
        """
        # RQ-POL-2
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
        self.pause_state = PauseState.UNPAUSED
        # What each attribute holds: `WaitingState`.
        self._known, self._where = {}, {}
        self._paused, self._kv_held = set(), set()
        self._step_skipped = None
        self._last_step, self._continue_answers = [], []

    # -- enqueue

    # Declared once: checked by icontract, and kept under `python -O` (queueref.preconditions).
    @require(
        lambda request: (
            not is_lifecycle_request(request)
            or request.status in READY_STATUSES
            or request.status in BLOCKED_STATUSES
        ),
        "WL-ENQ-2: only a waiting (WAITING, PREEMPTED) or blocked request can be enqueued",
    )
    @require(
        lambda self, request: (
            not is_lifecycle_request(request) or request.request_id not in self._known
        ),
        "WL-ENQ-2: the request (or another with its request_id) is not already known",
    )
    @lifecycle_operation("enqueue", shape="WL-ENQ-2")
    @icontract.snapshot(lambda self: len(self._known), name="known")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.snapshot(lambda self, request: self._expected_place(request), name="place")
    @icontract.ensure(
        lambda self, request, OLD: (
            self.layout != LAYOUT_V030 or place_of(self, request) == OLD.place
        ),
        "WL-ENQ-1: a blocked request goes to skipped_waiting, any other to waiting",
    )
    @icontract.ensure(
        lambda self, request, OLD: (
            self.layout == LAYOUT_V030 or place_of(self, request) == OLD.place
        ),
        "WL-L33-1: a request holding KV blocks goes to kv_holding_waiting, any other to waiting",
    )
    @icontract.ensure(
        lambda self, request: (
            self.layout == LAYOUT_V030
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
        """vLLM's `_enqueue_waiting_request`.

        :raises TypeError: not a request
        :raises ValueError: already known, or RUNNING / finished
        :raises RuntimeError: called from a step's callback
        """
        # WL-STEP-9
        self._require_idle("enqueue")
        check_lifecycle_request(request)
        self._enqueue_waiting(request)

    def __repr__(self) -> str:
        def ids(requests: Iterable[LifecycleRequest]) -> list[str]:
            return [r.request_id for r in requests]

        layout = "" if self.layout == LAYOUT_V030 else f" {self.layout}"
        return (
            f"<WaitingQueues {self.policy.value}{layout}: waiting={ids(self.waiting)} "
            f"{self._aside_place}={ids(self._aside)} running={ids(self.running)} "
            f"finished={list(self.finished)}>"
        )
