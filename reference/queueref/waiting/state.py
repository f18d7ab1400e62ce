"""The waiting lifecycle's state and the bookkeeping every operation shares.

`WaitingState` holds what a `queueref.waiting.lifecycle.WaitingQueues` is made of (the
layout's two waiting queues, `running`, `finished`, and for every request
seen its place, whether it holds KV blocks and whether it is a paused
streaming session) and the steps every operation takes on it: the checks
made in the method bodies (they hold under `python -O`, with contracts off),
moving a request between places, and enqueueing by the layout's rule. It has
no public method and no contract of its own: `WaitingQueues` has them.
"""

from __future__ import annotations

from queueref.queues.base import RequestQueue
from queueref.queues.factory import SchedulingPolicy
from queueref.request import BLOCKED_STATUSES, RequestStatus
from queueref.waiting.model import LAYOUT_V030
from queueref.waiting.places import (
    IN_KV_HOLDING,
    IN_RUNNING,
    IN_SKIPPED,
    IN_WAITING,
    REMOTE_KVS,
    STREAMING,
    LifecycleRequest,
    PauseState,
    StepEntry,
    check_lifecycle_request,
    is_lifecycle_request,
)


def place_of(wq: WaitingState, request: object) -> str | None:
    """The place of this very request, or None when the instance does not know it.

    Compare a place with `==`, never `is`: a copy made through pickle holds names
    equal to `IN_WAITING` and the others, not the same objects."""
    # WL-COPY-1: places compared by value, so a pickled copy goes on as the original.
    if not is_lifecycle_request(request):
        return None
    request_id = getattr(request, "request_id")  # noqa: B009 - checked shape, any object
    if wq._known.get(request_id) is not request:
        return None
    return wq._where[request_id]


class WaitingState:
    """The data of a `WaitingQueues` and the bookkeeping its operations share."""

    policy: SchedulingPolicy
    layout: str
    waiting: RequestQueue
    skipped_waiting: RequestQueue  # vllm-0.30 only
    kv_holding_waiting: RequestQueue  # vllm-0.33 only
    deferred_waiting: set[str]  # vllm-0.33 only
    running: list[LifecycleRequest]
    finished: dict[str, LifecycleRequest]
    # vLLM's pause state (WL-REL-1).
    pause_state: PauseState
    # The layout's second queue (skipped_waiting or kv_holding_waiting) and its place name.
    _aside: RequestQueue
    _aside_place: str
    # request_id -> request and request_id -> place, for every request seen.
    _known: dict[str, LifecycleRequest]
    _where: dict[str, str]
    # Paused streaming sessions (vLLM's num_waiting_for_streaming_input counts them).
    _paused: set[str]
    # Requests holding KV blocks (what vLLM 0.33.0 reads from num_computed_tokens).
    _kv_held: set[str]
    # The queue of requests skipped by the step in progress (None between steps).
    _step_skipped: RequestQueue | None
    # The log of the last step and should_continue's answers in it, for the contracts.
    _last_step: list[StepEntry]
    _continue_answers: list[bool]

    # -- checks in the bodies (they hold with contracts off, under `python -O`)

    def _require_idle(self, operation: str) -> None:
        if self._step_skipped is not None:
            raise RuntimeError(
                f"WL-STEP-9: {operation} called from a step's callback while a step is in progress"
            )

    @staticmethod
    def _require_request(request: object) -> None:
        # A TypeError for what is not a request at all, asked before the place (in the
        # contracts' order); a request the lifecycle holds passed the full check on enqueue.
        if not is_lifecycle_request(request):
            check_lifecycle_request(request)

    def _require_running(self, request: LifecycleRequest, rule: str) -> None:
        self._require_request(request)
        place = place_of(self, request)
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
        """vLLM 0.33.0's `_holds_kv_blocks`, from the lifecycle.

        A request holds KV blocks from the moment it is WAITING_FOR_REMOTE_KVS
        (an async load allocated them) or runs, until it is preempted (vLLM
        frees them and resets `num_computed_tokens`) or finished.
        """
        # WL-L33-1
        return request.request_id in self._kv_held or request.status is REMOTE_KVS

    def _note_status(self, request: LifecycleRequest) -> None:
        """Keep the KV and session records in step with a status a callback set."""
        if request.status is REMOTE_KVS:
            self._kv_held.add(request.request_id)
        if request.status is not STREAMING:
            self._paused.discard(request.request_id)

    def _forget_state(self, request: LifecycleRequest) -> None:
        self._paused.discard(request.request_id)
        self._kv_held.discard(request.request_id)
        if self.layout != LAYOUT_V030:
            self.deferred_waiting.discard(request.request_id)

    # -- enqueue

    @staticmethod
    def _is_blocked(status: RequestStatus) -> bool:
        """vLLM's `_is_blocked_waiting_status` (the three WAITING_FOR_*)."""
        # WL-ENQ-1
        return status in BLOCKED_STATUSES

    def _queue_for(self, request: LifecycleRequest) -> tuple[RequestQueue, str]:
        """`_enqueue_waiting_request`'s choice of queue."""
        # WL-ENQ-1, WL-L33-1
        if self.layout == LAYOUT_V030:
            if self._is_blocked(request.status):
                return self.skipped_waiting, IN_SKIPPED
            return self.waiting, IN_WAITING
        if self._holds_kv(request):
            return self.kv_holding_waiting, IN_KV_HOLDING
        return self.waiting, IN_WAITING

    def _enqueue_waiting(self, request: LifecycleRequest) -> None:
        """`add_request` to the layout's queue (and deferred, if blocked)."""
        # WL-ENQ-1, WL-L33-1
        if request.status is REMOTE_KVS:
            self._kv_held.add(request.request_id)
        queue, place = self._queue_for(request)
        queue.add_request(request)
        self._place(request, place)
        if self.layout != LAYOUT_V030 and self._is_blocked(request.status):
            self.deferred_waiting.add(request.request_id)

    def _expected_place(self, request: LifecycleRequest) -> str:
        """The place `enqueue` must choose, for the contracts."""
        # WL-ENQ-1, WL-L33-1
        if self.layout == LAYOUT_V030:
            return IN_SKIPPED if RequestStatus.is_blocked(request.status) else IN_WAITING
        holds = request.request_id in self._kv_held or request.status is REMOTE_KVS
        return IN_KV_HOLDING if holds else IN_WAITING
