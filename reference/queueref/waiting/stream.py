"""The waiting lifecycle's streaming sessions: a request that waits for its next input.

`StreamingSessions` is the part of `queueref.waiting.lifecycle.WaitingQueues` that
models vLLM's streaming sessions (vLLM 0.30.0's `_handle_stopped_request` and
`_update_request_as_session`): a running request that stopped with no update
queued becomes a paused session waiting in the layout's second queue, and an
update makes it (or a running request) WAITING again.
"""

from __future__ import annotations

import icontract

from queueref.request import RequestStatus
from queueref.waiting import model as waiting_model
from queueref.waiting.checks import _contents, _is_deferred, lifecycle_operation
from queueref.waiting.model import LAYOUT_V030, same, without
from queueref.waiting.places import (
    IN_RUNNING,
    IN_WAITING,
    STREAMING,
    LifecycleRequest,
    is_lifecycle_request,
)
from queueref.waiting.state import WaitingState, place_of


class StreamingSessions(WaitingState):
    """`await_stream`, `continue_stream` and the count of paused sessions."""

    @property
    def num_paused_sessions(self) -> int:
        """The streaming sessions waiting for input (they hold a running slot)."""
        # WL-STR-4
        return len(self._paused)

    def _is_paused_session(self, request: object) -> bool:
        """A waiting request in WAITING_FOR_STREAMING_REQ (the update has not arrived)."""
        return place_of(self, request) in (IN_WAITING, self._aside_place) and (
            getattr(request, "status", None) is STREAMING
        )

    def _require_stream_target(self, request: LifecycleRequest) -> None:
        self._require_request(request)
        if place_of(self, request) != IN_RUNNING and not self._is_paused_session(request):
            place = place_of(self, request)
            state = "unknown" if place is None else f"in {place} as {request.status.name}"
            raise ValueError(
                f"WL-STR-3: {request!r} is neither running nor a paused streaming session "
                f"(it is {state})"
            )

    @lifecycle_operation(
        "await_stream",
        shape="WL-STR-3",
        running="WL-STR-3: only a running request can wait for its stream",
    )
    @icontract.snapshot(lambda self: len(self.running), name="n_running")
    @icontract.snapshot(lambda self: len(self._paused), name="n_paused")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, OLD: (
            request.status is STREAMING
            and place_of(self, request) == self._aside_place
            and len(self.running) == OLD.n_running - 1
            and len(self._paused) == OLD.n_paused + 1
            and (self.layout == LAYOUT_V030 or _is_deferred(self, request))
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
        """A resumable request stopped with no update queued (vLLM's
        `_handle_stopped_request`): it waits for the next input chunk.

        :raises ValueError: the request is not running
        :raises RuntimeError: called from a step's callback
        """
        # WL-STEP-9
        self._require_idle("await_stream")
        self._require_running(request, "WL-STR-3")
        self._take_running(request)
        request.status = STREAMING
        self._paused.add(request.request_id)
        self._enqueue_waiting(request)

    @icontract.require(
        lambda self, request: (
            not is_lifecycle_request(request)
            or place_of(self, request) == IN_RUNNING
            or self._is_paused_session(request)
        ),
        "WL-STR-3: only a running request or a paused streaming session can continue",
        error=ValueError,
    )
    @lifecycle_operation("continue_stream", shape="WL-STR-3")
    @icontract.snapshot(lambda self, request: place_of(self, request), name="place")
    @icontract.snapshot(lambda self, request: self._expected_place(request), name="target")
    @icontract.snapshot(lambda self: len(self._paused), name="n_paused")
    @icontract.snapshot(lambda self, request: request.request_id in self._paused, name="was_paused")
    @icontract.snapshot(lambda self: _contents(self), name="items")
    @icontract.ensure(
        lambda self, request, OLD: (
            request.status is RequestStatus.WAITING
            and request.request_id not in self._paused
            and (
                place_of(self, request) == OLD.target
                if OLD.place == IN_RUNNING
                else place_of(self, request) == OLD.place
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
        """The session's next input chunk arrived (vLLM's
        `_update_request_as_session`).

        A running request (it stopped with the update already queued) becomes
        WAITING and is enqueued by the layout's rule; a paused session becomes
        WAITING where it waits.

        :raises ValueError: neither running nor a paused session
        :raises RuntimeError: called from a step's callback
        """
        # WL-STEP-9
        self._require_idle("continue_stream")
        self._require_stream_target(request)
        if place_of(self, request) == IN_RUNNING:
            self._take_running(request)
            request.status = RequestStatus.WAITING
            self._enqueue_waiting(request)
            return
        request.status = RequestStatus.WAITING
        self._paused.discard(request.request_id)
