"""A distillation of vLLM 0.33.0's scheduler waiting lifecycle (`kv_holding_waiting` + `waiting`).

Written by hand from the behaviour of `vllm/v1/core/sched/scheduler.py` in the
vLLM 0.33.0 wheel (not copied code):

* the waiting loop of `Scheduler.schedule()`, lines 1049-1617 (UNPAUSED):
  `while token_budget > 0`, `kv_holding_waiting` drained before `waiting`,
  the `max_num_active_reqs` guard counting paused streaming sessions (line
  1072), peek, `_handle_blocked_waiting_request` (3519-3554), the LoRA cap,
  the connector's unknown match and async load, the token budget, the KV
  allocation, and `skip_request` (1053-1060): pop, add to `deferred_waiting`,
  gather front first for the queue `_holds_kv_blocks` picks; at the end each
  queue `prepend_requests` its gathered requests (1606-1610);
* `_holds_kv_blocks` (2696-2707), `_enqueue_waiting_request` (2709-2715),
  `_handle_stopped_request` (2717-2742) with the re-enqueue of the continuing
  requests after they leave `running` (update_from_output, 2543-2550),
  `add_request`'s streaming path (2931-2945), `finish_requests` (2964-3015),
  `_preempt_request` (1799-1843).

The world (connector answers, LoRA ids, blocks, budget) is the same `World`
as for the 0.30.0 distillation.
"""

from __future__ import annotations

from vllm_distill_030 import BLOCKED, World
from vllm_distill_queues import (
    DistilledFCFSQueue,
    DistilledQueue,
    DistilledRequest,
    distilled_queue,
)

from queueref.request import RequestStatus


class Scheduler033:
    """vLLM 0.33.0's waiting queues, deferred set, running list and the loop between them."""

    def __init__(self, policy: str, world: World) -> None:
        self.policy = policy
        self.world = world
        self.waiting: DistilledQueue = distilled_queue(policy)
        self.kv_holding_waiting: DistilledQueue = distilled_queue(policy)
        self.deferred_waiting: set[DistilledRequest] = set()
        self.running: list[DistilledRequest] = []
        self.requests: dict[str, DistilledRequest] = {}
        self.num_waiting_for_streaming_input = 0

    # -- arrival

    @staticmethod
    def _holds_kv_blocks(request: DistilledRequest) -> bool:
        return (
            request.num_computed_tokens > 0
            or request.status == RequestStatus.WAITING_FOR_REMOTE_KVS
        )

    def _enqueue_waiting_request(self, request: DistilledRequest) -> None:
        if request.status in BLOCKED:
            self.deferred_waiting.add(request)
        if self._holds_kv_blocks(request):
            self.kv_holding_waiting.add_request(request)
        else:
            self.waiting.add_request(request)

    def add_request(self, request: DistilledRequest) -> None:
        self._enqueue_waiting_request(request)
        self.requests[request.request_id] = request

    def add_streaming_update(self, request_id: str, tokens: int | None) -> None:
        existing = self.requests[request_id]
        if existing.status != RequestStatus.WAITING_FOR_STREAMING_REQ:
            assert existing.streaming_queue is not None
            existing.streaming_queue.append(tokens)
        elif tokens is not None:
            self._update_request_as_session(existing, tokens)
        else:
            self.finish_requests([request_id], RequestStatus.FINISHED_ABORTED)

    def _update_request_as_session(self, session: DistilledRequest, tokens: int) -> None:
        session.num_tokens += tokens
        if session.status == RequestStatus.WAITING_FOR_STREAMING_REQ:
            self.num_waiting_for_streaming_input -= 1
        session.status = RequestStatus.WAITING

    # -- promotion

    def _handle_blocked_waiting_request(self, request: DistilledRequest) -> bool:
        """True: go on with the checks (not blocked, or promoted); False: skip it."""
        if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
            if request.request_id not in self.world.finished_recving:
                return False
            if request.num_computed_tokens == request.num_tokens:
                request.num_computed_tokens = request.num_tokens - 1
            self.world.finished_recving.discard(request.request_id)
            request.status = (
                RequestStatus.PREEMPTED if request.num_preemptions else RequestStatus.WAITING
            )
        elif request.status == RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR:
            if not request.grammar_ready:
                return False
            request.status = RequestStatus.WAITING
        elif request.status == RequestStatus.WAITING_FOR_STREAMING_REQ:
            assert not request.streaming_queue
            return False
        return True

    # -- the waiting loop

    def schedule(self, token_budget: int) -> dict[str, int]:
        world = self.world
        scheduled: dict[str, int] = {}
        scheduled_loras = {r.lora_int_id for r in self.running if r.lora_int_id > 0}
        # vLLM 0.33.0 gathers in deques with appendleft: a FCFS queue's prepend_request.
        step_skipped_waiting = DistilledFCFSQueue()
        step_skipped_kv_holding = DistilledFCFSQueue()

        def skip_request(from_queue: DistilledQueue) -> None:
            skipped = from_queue.pop_request()
            self.deferred_waiting.add(skipped)
            if self._holds_kv_blocks(skipped):
                step_skipped_kv_holding.prepend_request(skipped)
            else:
                step_skipped_waiting.prepend_request(skipped)

        while token_budget > 0:
            request_queue = self.kv_holding_waiting or self.waiting
            if not request_queue:
                break
            if len(self.running) + self.num_waiting_for_streaming_input >= (
                world.max_num_running_reqs
            ):
                break
            request = request_queue.peek_request()
            if not self._handle_blocked_waiting_request(request):
                skip_request(request_queue)
                continue
            if (
                request.lora_int_id > 0
                and len(scheduled_loras) == world.max_loras
                and request.lora_int_id not in scheduled_loras
            ):
                skip_request(request_queue)
                continue
            load_kv_async = False
            if request.num_computed_tokens == 0:
                if request.request_id in world.connector_unknown:
                    skip_request(request_queue)
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
            if load_kv_async:
                request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                request.num_computed_tokens = num_computed_tokens
                skip_request(request_queue)
                continue
            request = request_queue.pop_request()
            self.deferred_waiting.discard(request)
            self.running.append(request)
            assert request.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
            if request.lora_int_id > 0:
                scheduled_loras.add(request.lora_int_id)
            scheduled[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed_tokens
        if step_skipped_kv_holding:
            self.kv_holding_waiting.prepend_requests(step_skipped_kv_holding)
        if step_skipped_waiting:
            self.waiting.prepend_requests(step_skipped_waiting)
        return scheduled

    # -- leaving running

    def preempt(self, request: DistilledRequest) -> None:
        self.running.remove(request)
        self.world.free(request.request_id)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.waiting.prepend_request(request)

    def stop(self, request: DistilledRequest) -> None:
        """update_from_output: `_handle_stopped_request`, leave running, re-enqueue."""
        continuing = False
        if request.resumable:
            assert request.streaming_queue is not None
            if request.streaming_queue:
                update = request.streaming_queue.popleft()
                if update is not None:
                    self._update_request_as_session(request, update)
                    continuing = True
            else:
                request.status = RequestStatus.WAITING_FOR_STREAMING_REQ
                self.num_waiting_for_streaming_input += 1
                continuing = True
        self.running = [r for r in self.running if r is not request]
        if continuing:
            self._enqueue_waiting_request(request)
        else:
            request.status = RequestStatus.FINISHED_STOPPED
            self.world.free(request.request_id)
            del self.requests[request.request_id]

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
        self.kv_holding_waiting.remove_requests(valid)
        self.deferred_waiting.difference_update(valid)
        for request in valid:
            request.status = status
            self.world.free(request.request_id)
            del self.requests[request.request_id]
        return sorted(r.request_id for r in valid)
