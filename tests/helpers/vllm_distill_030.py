"""A distillation of vLLM 0.30.0's scheduler waiting lifecycle (`waiting` + `skipped_waiting`).

Written by hand from the behaviour of `vllm/v1/core/sched/scheduler.py` in the
vLLM 0.30.0 wheel (not copied code):

* the waiting loop of `Scheduler.schedule()`, lines 855-1293: `while (waiting or
  skipped_waiting) and token_budget > 0`, the `max_num_running_reqs` guard
  counting paused streaming sessions (line 863), peek, promotion of a blocked
  head, the LoRA cap, the connector's unknown match (skip) and async load
  (park as WAITING_FOR_REMOTE_KVS), the token budget (chunked prefill or
  `break`), the KV allocation (`break` on failure), and
  `skipped_waiting.prepend_requests(step_skipped_waiting)` at the end;
* `_enqueue_waiting_request` (2311-2315), `_select_waiting_queue_for_scheduling`
  (2317-2327), `_handle_stopped_request` (2329-2345), `add_request`'s streaming
  path (2470-2496), `_update_request_as_session` (1570-1611, the status and
  counter part), `finish_requests` (2498-2559), `_preempt_request` (1477-1518),
  `_try_promote_blocked_waiting_request` (2962-2996) and the part of
  `_update_waiting_for_remote_kv` (2919-2960) the loop sees.

What the loop asks of other components is reduced to the test's `World`:
the connector's answers (`connector_unknown`, `async_load`), the LoRA ids, a
block pool with one block per admission, the per-step token budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm_distill_queues import DistilledQueue, DistilledRequest, distilled_queue

from queueref.request import RequestStatus

BLOCKED = (
    RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR,
    RequestStatus.WAITING_FOR_REMOTE_KVS,
    RequestStatus.WAITING_FOR_STREAMING_REQ,
)


@dataclass
class World:
    """What the loop learns from outside the queues, the same for both sides of a test."""

    max_num_running_reqs: int
    max_loras: int
    chunked_prefill: bool
    free_blocks: int
    connector_unknown: set[str] = field(default_factory=set)  # matched tokens unknown: skip
    async_load: set[str] = field(default_factory=set)  # the connector loads KV asynchronously
    finished_recving: set[str] = field(default_factory=set)  # async loads that completed
    held_blocks: dict[str, int] = field(default_factory=dict)

    def allocate(self, request_id: str) -> bool:
        """kv_cache_manager.allocate_slots, one block per admission: False when none is free."""
        if self.free_blocks < 1:
            return False
        self.free_blocks -= 1
        self.held_blocks[request_id] = self.held_blocks.get(request_id, 0) + 1
        return True

    def free(self, request_id: str) -> None:
        self.free_blocks += self.held_blocks.pop(request_id, 0)


class Scheduler030:
    """vLLM 0.30.0's waiting queues, running list and the loop between them."""

    def __init__(self, policy: str, world: World) -> None:
        self.policy = policy
        self.world = world
        self.waiting: DistilledQueue = distilled_queue(policy)
        self.skipped_waiting: DistilledQueue = distilled_queue(policy)
        self.running: list[DistilledRequest] = []
        self.requests: dict[str, DistilledRequest] = {}
        self.num_waiting_for_streaming_input = 0

    # -- arrival

    def _enqueue_waiting_request(self, request: DistilledRequest) -> None:
        if request.status in BLOCKED:
            self.skipped_waiting.add_request(request)
        else:
            self.waiting.add_request(request)

    def add_request(self, request: DistilledRequest) -> None:
        self._enqueue_waiting_request(request)
        self.requests[request.request_id] = request

    def add_streaming_update(self, request_id: str, tokens: int | None) -> None:
        """add_request for a known id: a streaming update (None: the stream ended)."""
        existing = self.requests[request_id]
        if existing.status != RequestStatus.WAITING_FOR_STREAMING_REQ:
            assert existing.streaming_queue is not None
            existing.streaming_queue.append(tokens)
        elif tokens is not None:
            self._update_request_as_session(existing, tokens)
        else:
            self.finish_requests([request_id], RequestStatus.FINISHED_ABORTED)

    def _update_request_as_session(self, session: DistilledRequest, tokens: int) -> None:
        # The update's prompt extends the session (arrival_time: the test keeps it unchanged).
        session.num_tokens += tokens
        if session.status == RequestStatus.WAITING_FOR_STREAMING_REQ:
            self.num_waiting_for_streaming_input -= 1
        session.status = RequestStatus.WAITING

    # -- selection and promotion

    def _select_waiting_queue_for_scheduling(self) -> DistilledQueue | None:
        if self.policy == "fcfs":
            return self.skipped_waiting or self.waiting or None
        if self.waiting and self.skipped_waiting:
            waiting_head = self.waiting.peek_request()
            skipped_head = self.skipped_waiting.peek_request()
            return self.waiting if waiting_head < skipped_head else self.skipped_waiting
        return self.waiting or self.skipped_waiting or None

    def _try_promote_blocked_waiting_request(self, request: DistilledRequest) -> bool:
        if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
            if request.request_id not in self.world.finished_recving:
                return False
            # _update_waiting_for_remote_kv: a full hit recomputes the last token.
            if request.num_computed_tokens == request.num_tokens:
                request.num_computed_tokens = request.num_tokens - 1
            self.world.finished_recving.discard(request.request_id)
            request.status = (
                RequestStatus.PREEMPTED if request.num_preemptions else RequestStatus.WAITING
            )
            return True
        if request.status == RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR:
            if not request.grammar_ready:
                return False
            request.status = RequestStatus.WAITING
            return True
        assert request.status == RequestStatus.WAITING_FOR_STREAMING_REQ
        assert not request.streaming_queue
        return False

    # -- the waiting loop

    def schedule(self, token_budget: int) -> dict[str, int]:
        """The waiting loop of one `schedule()`; returns request_id -> tokens scheduled."""
        world = self.world
        scheduled: dict[str, int] = {}
        scheduled_loras = {r.lora_int_id for r in self.running if r.lora_int_id > 0}
        step_skipped_waiting = distilled_queue(self.policy)
        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            if len(self.running) + self.num_waiting_for_streaming_input >= (
                world.max_num_running_reqs
            ):
                break
            request_queue = self._select_waiting_queue_for_scheduling()
            assert request_queue is not None
            request = request_queue.peek_request()
            if request.status in BLOCKED and not self._try_promote_blocked_waiting_request(request):
                request_queue.pop_request()
                step_skipped_waiting.prepend_request(request)
                continue
            if (
                request.lora_int_id > 0
                and len(scheduled_loras) == world.max_loras
                and request.lora_int_id not in scheduled_loras
            ):
                request_queue.pop_request()
                step_skipped_waiting.prepend_request(request)
                continue
            load_kv_async = False
            if request.num_computed_tokens == 0:
                if request.request_id in world.connector_unknown:
                    request_queue.pop_request()
                    step_skipped_waiting.prepend_request(request)
                    continue
                load_kv_async = request.request_id in world.async_load
                num_computed_tokens = request.num_tokens - 1 if load_kv_async else 0
            else:
                num_computed_tokens = request.num_computed_tokens
            if load_kv_async:
                num_new_tokens = 0
            else:
                num_new_tokens = request.num_tokens - num_computed_tokens
                if not world.chunked_prefill and num_new_tokens > token_budget:
                    break
                num_new_tokens = min(num_new_tokens, token_budget)
                assert num_new_tokens > 0
            if not world.allocate(request.request_id):
                break
            request = request_queue.pop_request()
            if load_kv_async:
                request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                step_skipped_waiting.prepend_request(request)
                request.num_computed_tokens = num_computed_tokens
                continue
            self.running.append(request)
            assert request.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
            if request.lora_int_id > 0:
                scheduled_loras.add(request.lora_int_id)
            scheduled[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed_tokens
        if step_skipped_waiting:
            self.skipped_waiting.prepend_requests(step_skipped_waiting)
        return scheduled

    # -- leaving running

    def preempt(self, request: DistilledRequest) -> None:
        """The caller pops the request from running; then `_preempt_request`."""
        self.running.remove(request)
        self.world.free(request.request_id)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.waiting.prepend_request(request)

    def stop(self, request: DistilledRequest) -> None:
        """update_from_output for a running request that stopped: `_handle_stopped_request`."""
        finished = True
        if request.resumable:
            assert request.streaming_queue is not None
            if request.streaming_queue:
                update = request.streaming_queue.popleft()
                if update is not None:
                    self._update_request_as_session(request, update)
                    self._enqueue_waiting_request(request)
                    finished = False
            else:
                request.status = RequestStatus.WAITING_FOR_STREAMING_REQ
                self.num_waiting_for_streaming_input += 1
                self._enqueue_waiting_request(request)
                finished = False
        if finished:
            request.status = RequestStatus.FINISHED_STOPPED
            self.world.free(request.request_id)
            del self.requests[request.request_id]
        self.running = [r for r in self.running if r is not request]

    def finish_requests(self, request_ids: list[str], status: RequestStatus) -> list[str]:
        valid: list[DistilledRequest] = []
        for request_id in set(request_ids):
            request = self.requests.get(request_id)
            if request is None or RequestStatus.is_finished(request.status):
                continue
            valid.append(request)
            if request.status == RequestStatus.WAITING_FOR_STREAMING_REQ:
                self.num_waiting_for_streaming_input -= 1
        self.running = [r for r in self.running if all(r is not v for v in valid)]
        self.waiting.remove_requests(valid)
        self.skipped_waiting.remove_requests(valid)
        for request in valid:
            request.status = status
            self.world.free(request.request_id)
            del self.requests[request.request_id]
        return sorted(r.request_id for r in valid)
