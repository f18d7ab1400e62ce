"""A per-server API front: admission, registration, submission, departures.

Models the admission path of `vllm/v1/engine/async_llm.py`
(`AsyncLLM.add_request` / `_add_request`: `check_admission`, then
`OutputProcessor.add_request` before the first `await`, then
`engine_core.add_request_async`) and `AsyncLLM.abort`.

Deliberate divergences from vLLM:

* A request with `n` parallel samples is checked and all its children are
  registered in one synchronous step. vLLM 0.30.0 checks `n` once
  and then registers the children one at a time, awaiting the engine between
  two children, so another coroutine's check can pass in between; vLLM 0.33.0
  registers them all before its first `await`, as here.
* Every decision and departure can be recorded as an `AdmissionEvent`,
  stamped by the convention of `specs/admission.md` ("Event records").
* An optional lock around check + registration gives the exact,
  lock-protected baseline protocol the benchmark compares with ("locked").
* There is no engine: `submit` is any coroutine function standing for
  `engine_core.add_request_async`; tests and the stress run drive `finish`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import icontract

from queueref.admission.controller import AdmissionController
from queueref.admission.tracker import RequestTracker
from queueref.errors import AdmissionRejected, MaxQueuedTokensError, QueueOverflowError
from queueref.trace.events import AdmissionEvent, EventKind
from queueref.validators import is_int_at_least

Recorder = Callable[[AdmissionEvent], None]
Submitter = Callable[[str], Awaitable[None]]


class APIServer:
    """One API server process's front: `admit` is check + registration, never split.

    `admit` runs `check_admission(n)` and the tracker registration of all `n`
    children with no `await` between them, so two coroutines of
    one server can never both take the last slot. `add_request` then awaits
    the submission of each child; a failure or a cancellation there aborts
    every child, giving the slots back.
    """

    @icontract.require(
        lambda server_index: is_int_at_least(server_index, 0),
        "ADM-FRONT-1: server_index is an int >= 0",
        error=ValueError,
    )
    def __init__(
        self,
        controller: AdmissionController,
        *,
        server_index: int = 0,
        submit: Submitter | None = None,
        record: Recorder | None = None,
        admission_lock: AbstractContextManager[Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._controller = controller
        self._server_index = server_index
        self._submit = submit
        self._record = record
        self._lock: AbstractContextManager[Any] = (
            admission_lock if admission_lock is not None else nullcontext()
        )
        self._clock = clock

    @property
    def controller(self) -> AdmissionController:
        """The server's admission controller."""
        return self._controller

    @property
    def tracker(self) -> RequestTracker:
        """The server's request tracker."""
        return self._controller.tracker

    @property
    def server_index(self) -> int:
        """The index written into the event records."""
        return self._server_index

    def _emit(
        self,
        t: float,
        event: EventKind,
        request_id: str,
        n: int,
        view: int | None = None,
        t_before: float | None = None,
        tokens: int | None = None,
        token_view: int | None = None,
    ) -> None:
        if self._record is not None:
            self._record(
                AdmissionEvent(
                    t, self._server_index, event, request_id, n, view, t_before, tokens, token_view
                )
            )

    @property
    def _records_tokens(self) -> bool:
        """Token fields and `prefill_done` events are recorded under a token limit."""
        # ADM-EV-6: without a token limit the records stay as they were.
        return self._record is not None and self._controller.max_num_queued_tokens is not None

    def _check(self, n: int, num_prompt_tokens: int) -> tuple[int | None, int | None]:
        """`check_admission`, and the token view when it is recorded."""
        if not self._records_tokens:
            return self._controller.check_admission(n, num_prompt_tokens), None
        # The steps of `check_admission`, kept open to read the token view it decided on.
        check = self._controller.start_check(n, num_prompt_tokens)
        while not check.done:
            check.read_next()
        view = check.decide()
        return view, check.token_view

    @icontract.require(
        lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1", error=ValueError
    )
    @icontract.snapshot(lambda self: self.tracker.get_num_unfinished_requests(), name="unfinished")
    @icontract.snapshot(lambda self: self.tracker.num_reserved, name="reserved")
    @icontract.ensure(
        lambda self, n, OLD: self.tracker.get_num_unfinished_requests() == OLD.unfinished + n,
        "ADM-FRONT-2: an admitted request has all n children registered",
    )
    @icontract.ensure(
        lambda self, OLD: self.tracker.num_reserved == OLD.reserved,
        "ADM-FRONT-1: the registration takes the reservation over (no double count)",
    )
    @icontract.snapshot(lambda self: self.tracker.num_reserved_tokens, name="reserved_tokens")
    @icontract.snapshot(lambda self: self.tracker.get_num_queued_tokens(), name="tokens")
    @icontract.ensure(
        lambda self, OLD: self.tracker.num_reserved_tokens == OLD.reserved_tokens,
        "ADM-TOK-5: the registration takes the token reservation over (no double count)",
    )
    @icontract.ensure(
        lambda self, n, num_prompt_tokens, OLD: (
            self.tracker.get_num_queued_tokens() == OLD.tokens + n * num_prompt_tokens
        ),
        "ADM-TOK-1: an admitted request queues n * num_prompt_tokens",
    )
    def admit(self, request_id: str, n: int = 1, num_prompt_tokens: int = 1) -> list[str]:
        """Check and register in one synchronous step; raise `AdmissionRejected`.

        `num_prompt_tokens` is the prompt length p: the check is for `n`
        requests and `n * p` tokens, the registration queues them.

        Returns the internal ids registered. A rejection registers nothing and
        changes no count. Events: `admit` is stamped right after the decision
        and before the slot write of the registration; `reject` right after
        the decision.
        """
        # ADM-FRONT-1: bad ids are refused before any check, so no reservation is at stake.
        self.tracker.check_new_request(request_id, n, num_prompt_tokens)
        with self._lock:
            tokens = num_prompt_tokens if self._records_tokens else None
            try:
                view, token_view = self._check(n, num_prompt_tokens)
            except AdmissionRejected as rejection:
                seen = rejection.view if isinstance(rejection, QueueOverflowError) else None
                seen_tokens = (
                    rejection.queued_tokens
                    if isinstance(rejection, MaxQueuedTokensError) and tokens is not None
                    else None
                )
                self._emit(
                    self._clock(),
                    "reject",
                    request_id,
                    n,
                    seen,
                    tokens=tokens,
                    token_view=seen_tokens,
                )
                raise
            # ADM-EV-3: stamped after the decision, before the registration writes the slot.
            t = self._clock()
            try:
                ids = self.tracker.add(request_id, n, num_prompt_tokens)
            except BaseException:
                self._controller.cancel_admission(n, num_prompt_tokens)
                raise
        self._emit(t, "admit", request_id, n, view, tokens=tokens, token_view=token_view)
        return ids

    async def add_request(
        self, request_id: str, n: int = 1, num_prompt_tokens: int = 1
    ) -> list[str]:
        """`admit`, then await the submission of every child.

        If a submission fails or the coroutine is cancelled, every child still
        tracked is aborted (its slot given back) and the error propagates.
        """
        ids = self.admit(request_id, n, num_prompt_tokens)
        if self._submit is not None:
            try:
                for rid in ids:
                    await self._submit(rid)
            except BaseException:
                # ADM-FRONT-2: all or nothing, also when the submission fails half-way.
                self.abort(request_id)
                raise
        return ids

    @icontract.snapshot(lambda self: self.tracker.get_num_unfinished_requests(), name="unfinished")
    @icontract.ensure(
        lambda self, OLD: self.tracker.get_num_unfinished_requests() == OLD.unfinished - 1,
        "ADM-TRK-3: finishing ends exactly one internal request",
    )
    def finish(self, request_id: str) -> None:
        """An internal request finished; stamps `t_before`/`t` around the slot write."""
        t_before = self._clock()
        self.tracker.finish(request_id)
        self._emit(self._clock(), "finish", request_id, 1, None, t_before)

    @icontract.snapshot(lambda self: self.tracker.get_num_unfinished_requests(), name="unfinished")
    @icontract.ensure(
        lambda self, result, OLD: (
            self.tracker.get_num_unfinished_requests() == OLD.unfinished - len(result)
        ),
        "ADM-TRK-2: exactly the returned requests are gone",
    )
    def abort(self, request_id: str) -> list[str]:
        """Abort a request, a parent with its children; one event if any ended."""
        t_before = self._clock()
        ended = self.tracker.abort(request_id)
        if ended:
            self._emit(self._clock(), "abort", request_id, len(ended), None, t_before)
        return ended

    def prefill_done(self, request_id: str) -> None:
        """The first output of an internal request arrived: its prompt leaves the count.

        With shared tokens counter 1 of the own slot is written;
        an unknown id is a `KeyError` and nothing changes. Under a token
        limit a `prefill_done` event is recorded, stamped like a departure
        (`t_before` before the write, `t` after).
        """
        if not self._records_tokens:
            self.tracker.prefill_done(request_id)
            return
        tokens = self.tracker.prefill_tokens(request_id)
        t_before = self._clock()
        self.tracker.prefill_done(request_id)
        self._emit(self._clock(), "prefill_done", request_id, 1, None, t_before, tokens=tokens)
