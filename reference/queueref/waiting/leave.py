"""The waiting lifecycle's ways out of running and of the queues: preempt, finish, abort.

`Leaving` is the part of `queueref.waiting.lifecycle.WaitingQueues` that models vLLM's
`_preempt_request` (a running request goes back to the front of `waiting`;
with none named, vLLM's own victim),
a running request finishing, and `finish_requests(ids, FINISHED_ABORTED)`
(requests leave whatever place they are in for `finished`), vLLM 0.30.0 to
0.33.0 alike.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import icontract

from queueref.queues.factory import SchedulingPolicy
from queueref.request import RequestStatus
from queueref.waiting import model as waiting_model
from queueref.waiting.checks import (
    _contents,
    _is_finished_status,
    _is_vllm_victim,
    _waiting_count,
    lifecycle_operation,
)
from queueref.waiting.model import LAYOUT_V030, same, without
from queueref.waiting.places import (
    IN_FINISHED,
    IN_RUNNING,
    IN_WAITING,
    LifecycleRequest,
    is_lifecycle_request,
)
from queueref.waiting.state import WaitingState, place_of


class Leaving(WaitingState):
    """`preempt`, `finish` and `abort`, with the checks of what `abort` is given."""

    # -- leaving running

    def _victim(self) -> LifecycleRequest:
        """vLLM's choice when `schedule()` must preempt (0.30.0-0.33.0 alike)."""
        # WL-PRE-3
        if self.policy is SchedulingPolicy.PRIORITY:
            return max(self.running, key=lambda r: (r.priority, r.arrival_time))
        return self.running[-1]

    @icontract.require(
        lambda request: request is None or is_lifecycle_request(request),
        "WL-PRE-2: the request has request_id, priority, arrival_time and a RequestStatus "
        "(or is None)",
        error=TypeError,
    )
    @icontract.require(
        lambda self, request: request is not None or len(self.running) > 0,
        "WL-PRE-3: preempt() with no request named needs a running request",
        error=ValueError,
    )
    @lifecycle_operation("preempt", running="WL-PRE-2: only a running request can be preempted")
    @icontract.snapshot(lambda self: len(self.running), name="n_running")
    @icontract.snapshot(lambda self: list(self.running), name="running")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, result, OLD: (
            result is request
            if request is not None
            else _is_vllm_victim(self.policy, OLD.running, result)
        ),
        "WL-PRE-3: with no request named the victim is vLLM's: PRIORITY the first in "
        "running with the largest (priority, arrival_time), FCFS the last in running",
    )
    @icontract.ensure(
        lambda self, result, OLD: (
            result.status is RequestStatus.PREEMPTED
            and place_of(self, result) == IN_WAITING
            and len(self.running) == OLD.n_running - 1
        ),
        "WL-PRE-1: the request leaves running for waiting with status PREEMPTED",
    )
    @icontract.ensure(
        lambda self, result: (
            self.policy is not SchedulingPolicy.FCFS or self.waiting.peek_request() is result
        ),
        "WL-PRE-1: FCFS: the preempted request is at the front of waiting",
    )
    @icontract.ensure(
        lambda self, result, OLD: (
            OLD.items is None
            or same(list(self.waiting), waiting_model.prepended(self.policy, OLD.items[0], result))
            and same(self.running, without(OLD.items[2], [result]))
            and same(list(self._aside), OLD.items[1])
        ),
        "WL-PRE-1: waiting.prepend_request (FCFS: in front; PRIORITY: in key order); the "
        "other requests keep their places",
    )
    @icontract.ensure(
        lambda self, result: self.layout == LAYOUT_V030 or not self._holds_kv(result),
        "WL-L33-4: a preempted request holds no KV blocks: it goes to waiting",
    )
    def preempt(self, request: LifecycleRequest | None = None) -> LifecycleRequest:
        """vLLM's `_preempt_request`: running -> `waiting.prepend_request`; returns the victim.

        With no request named, the victim is vLLM's: under PRIORITY
        the first request of `running` with the largest `(priority,
        arrival_time)`, under FCFS the last of `running`.

        :raises ValueError: the request is not running, or none is running
        :raises RuntimeError: called from a step's callback
        """
        # WL-STEP-9
        self._require_idle("preempt")
        if request is None:
            if not self.running:
                raise ValueError("WL-PRE-3: preempt() with no request named: nothing is running")
            request = self._victim()
        self._require_running(request, "WL-PRE-2")
        self._take_running(request)
        request.status = RequestStatus.PREEMPTED
        self._kv_held.discard(request.request_id)  # vLLM frees its blocks
        self.waiting.prepend_request(request)
        self._where[request.request_id] = IN_WAITING
        return request

    @icontract.require(
        lambda status: _is_finished_status(status),
        "WL-FIN-2: the status is a FINISHED_* status",
        error=ValueError,
    )
    @lifecycle_operation(
        "finish", shape="WL-FIN-2", running="WL-FIN-2: only a running request can be finished"
    )
    @icontract.snapshot(lambda self: len(self.running), name="n_running")
    @icontract.snapshot(lambda self: len(self.finished), name="n_finished")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, status, OLD: (
            request.status is status
            and self.finished.get(request.request_id) is request
            and place_of(self, request) == IN_FINISHED
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
        """Take a running request out with a finished status.

        :raises ValueError: the request is not running, or the status is not finished
        :raises RuntimeError: called from a step's callback
        """
        # WL-STEP-9
        self._require_idle("finish")
        if not _is_finished_status(status):
            raise ValueError(f"WL-FIN-2: {status!r} is not a FINISHED_* status")
        self._require_running(request, "WL-FIN-2")
        self._take_running(request)
        request.status = status
        self._forget_state(request)
        self.finished[request.request_id] = request
        self._where[request.request_id] = IN_FINISHED

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
        """The known unfinished requests named, first mention first."""
        # WL-ABT-1
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
    @lifecycle_operation("abort")
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
        """vLLM's `finish_requests(request_ids, FINISHED_ABORTED)`.

        `request_ids` is one id, an iterable of ids, or None for every unfinished
        request. Ids that are unknown or already finished are ignored.

        :raises TypeError: request_ids is not a str, an iterable of str or None
        :raises RuntimeError: called from a step's callback
        """
        # WL-STEP-9
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
