"""`serve --render-ms`: vLLM's whole admission path, with a rendering time (E2E-REN-1..6).

Models the path of vLLM 0.31.0-0.33.0 (`_preflight(n)` in
`vllm/entrypoints/generate/base/serving.py`, then rendering, then
`AsyncLLM.add_request`), and the two reservations at preflight proposed for vLLM
issue #58192 (`specs/preflight-reservations.md`; the models are
`queueref.admission.paths.AdmissionPath` and `queueref.verify.path_models`):

* `two-check` (vLLM's): a check that writes nothing, rendering, then the check and
  registration of `APIServer.admit` (ADM-PRE-1). A refusal at the second check is a
  wasted render.
* `reserve-write-then-check`: the controller (write-then-check) reserves n in the own
  slot and keeps it iff the view is <= M (ADM-PRE-5), held through rendering.
* `reserve-check-then-write`: vLLM's check, then `tracker.reserve(n)` with no `await`
  between (ADM-PRE-6), held through rendering.

A reservation is taken over by the registration (`RequestTracker.add`, no second
check) or given back on every other way out: a render error, a client disconnect, a
cancellation (E2E-REN-3); a dead server's slot is reset by the parent's reaper
(E2E-REN-4). Deliberate divergences from vLLM: rendering is a sleep; the request cap
only (no token reservation: `serve` refuses `--max-num-queued-tokens` with a
reservation).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

from queueref.admission.front import APIServer
from queueref.admission.paths import AdmissionPath
from queueref.admission.protocol import Protocol
from queueref.errors import AdmissionRejected, MaxQueuedTokensError, QueueOverflowError
from queueref.runtime.http.wire import CompletionBody, error_body
from queueref.trace.events import AdmissionEvent, EventKind

#: The preflight modes `serve --preflight` offers, vLLM's first (the default).
PREFLIGHT_MODES: Final[tuple[AdmissionPath, ...]] = (
    AdmissionPath.TWO_CHECK,
    AdmissionPath.RESERVE_WRITE_THEN_CHECK,
    AdmissionPath.RESERVE_CHECK_THEN_WRITE,
)

#: The longest rendering time `--render-ms` accepts, in milliseconds (E2E-REN-1).
MAX_RENDER_MS: Final = 60_000.0

#: The value of `x-queueref-fault` that makes rendering raise (E2E-REN-3).
RENDER_FAULT: Final = "render-error"

Recorder = Callable[[AdmissionEvent], None]
Receive = Callable[[], Awaitable[dict[str, Any]]]


class ClientGone(Exception):
    """The client closed the connection before the answer (E2E-SRV-6)."""


class RenderFailed(Exception):
    """Rendering raised (`x-queueref-fault: render-error`); nothing was registered."""

    def body(self) -> dict[str, Any]:
        """The 500's body, vLLM's `ErrorResponse` (E2E-REN-3)."""
        status = HTTPStatus.INTERNAL_SERVER_ERROR
        return error_body(str(self), status.phrase, status.value)


@dataclass(frozen=True)
class RenderTime:
    """A rendering time in milliseconds: fixed (`low == high`) or uniform on [low, high]."""

    low_ms: float
    high_ms: float

    def draw(self, rng: random.Random) -> float:
        """One rendering time, in seconds."""
        return rng.uniform(self.low_ms, self.high_ms) / 1000.0

    def __str__(self) -> str:
        same = self.low_ms == self.high_ms
        return f"{self.low_ms:g}" if same else f"{self.low_ms:g}-{self.high_ms:g}"


def parse_render_ms(text: str) -> RenderTime:
    """E2E-REN-1: `100` (fixed) or `50-200` (uniform), in ms, each in [0, 60000].

    >>> parse_render_ms("50-200"), str(parse_render_ms("100"))
    (RenderTime(low_ms=50.0, high_ms=200.0), '100')
    >>> parse_render_ms("-5")
    Traceback (most recent call last):
    ...
    ValueError: --render-ms must be MS or LOW-HIGH with 0 <= LOW <= HIGH <= 60000, got '-5'
    """
    parts = text.strip().split("-") if text.strip()[1:].count("-") else [text.strip()]
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    good = len(values) in (1, 2) and all(
        math.isfinite(v) and 0 <= v <= MAX_RENDER_MS for v in values
    )
    if not good or values[0] > values[-1]:
        raise ValueError(
            f"--render-ms must be MS or LOW-HIGH with 0 <= LOW <= HIGH <= "
            f"{MAX_RENDER_MS:g}, got {text!r}"
        )
    return RenderTime(values[0], values[-1])


def parse_preflight(name: str) -> AdmissionPath:
    """E2E-REN-2: one of `PREFLIGHT_MODES`, by its name; `ValueError` naming them."""
    for mode in PREFLIGHT_MODES:
        if name == mode.value:
            return mode
    choices = ", ".join(m.value for m in PREFLIGHT_MODES)
    raise ValueError(f"--preflight must be one of {choices}, got {name!r}")


@dataclass(frozen=True)
class RenderConfig:
    """What `serve --render-ms` adds to every server: the time and the preflight mode."""

    time: RenderTime
    path: AdmissionPath = AdmissionPath.TWO_CHECK

    @property
    def protocol(self) -> Protocol:
        """The controller's protocol: write-then-check for that reservation, else vLLM's."""
        wtc = self.path is AdmissionPath.RESERVE_WRITE_THEN_CHECK
        return Protocol.WRITE_THEN_CHECK if wtc else Protocol.CHECK_THEN_WRITE

    @property
    def reserves(self) -> bool:
        """Whether preflight writes a reservation into the own slot."""
        return self.path is not AdmissionPath.TWO_CHECK


def check_render_setup(
    render: RenderConfig | None, protocol: Protocol, store: object, token_limit: int | None
) -> None:
    """E2E-REN-2: the combinations `--render-ms` runs; `ValueError` with one line otherwise."""
    if render is None:
        return
    if render.path not in PREFLIGHT_MODES:
        parse_preflight(str(render.path))  # raises, naming the modes
    if protocol is not render.protocol:
        raise ValueError(
            f"--preflight {render.path.value} runs over {render.protocol.value} counters, "
            f"not --admission {protocol.value}"
        )
    if store is not None:
        raise ValueError("--render-ms is not simulated with --store")
    if render.reserves and token_limit is not None:
        raise ValueError(f"--preflight {render.path.value} reserves requests only: drop "
                         "--max-num-queued-tokens")  # fmt: skip


async def _disconnected(receive: Receive) -> None:
    """Returns when the client hangs up (E2E-SRV-6)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class Preflight:
    """The admission path of one server with rendering: `admit` is preflight, render,
    registration (E2E-REN-2), recording `preflight`, `reserve` and `release` (ADM-EV-7)."""

    def __init__(
        self, api: APIServer, render: RenderConfig, rng: random.Random, record: Recorder | None
    ) -> None:
        self._api = api
        self._render = render
        self._rng = rng
        self._record = record
        self.wasted_renders = 0  # rendered, then refused at the second check

    def _emit(self, event: EventKind, request_id: str, n: int, **fields: Any) -> None:
        if self._record is not None:
            server = self._api.server_index
            self._record(AdmissionEvent(time.monotonic(), server, event, request_id, n, **fields))

    def _preflight(self, request_id: str, n: int, tokens: int) -> None:
        """The first check (and the reservation); a refusal is recorded as a `reject`."""
        controller = self._api.controller
        try:
            view = controller.check_admission(n, tokens)
        except AdmissionRejected as rejection:
            seen = rejection.view if isinstance(rejection, QueueOverflowError) else None
            fields: dict[str, Any] = {"view": seen}
            if controller.max_num_queued_tokens is not None:  # ADM-EV-6: as APIServer records
                fields["tokens"] = tokens
                if isinstance(rejection, MaxQueuedTokensError):
                    fields["token_view"] = rejection.queued_tokens
            self._emit("reject", request_id, n, **fields)
            raise
        if self._render.path is AdmissionPath.RESERVE_CHECK_THEN_WRITE:
            controller.tracker.reserve(n)  # ADM-PRE-6: no await between check and write
        self._emit("reserve" if self._render.reserves else "preflight", request_id, n, view=view)

    async def admit_body(
        self, request_id: str, body: CompletionBody, fault: str, receive: Receive
    ) -> list[str]:
        """`admit` of a parsed completion body: its n and its prompt length."""
        return await self.admit(request_id, body.slots, body.num_prompt_tokens, fault, receive)

    async def admit(
        self, request_id: str, n: int, tokens: int, fault: str, receive: Receive
    ) -> list[str]:
        """Preflight, render, register; `AdmissionRejected`, `RenderFailed` or `ClientGone`.

        E2E-REN-3: a reservation is given back (and a `release` recorded) on every way
        out but the registration, which takes it over with no second check.
        """
        tracker = self._api.tracker
        tracker.check_new_request(request_id, n, tokens)
        self._preflight(request_id, n, tokens)
        held = self._render.reserves
        try:
            gone = asyncio.ensure_future(_disconnected(receive))
            try:
                done, _ = await asyncio.wait({gone}, timeout=self._render.time.draw(self._rng))
            finally:
                gone.cancel()
            if gone in done:
                raise ClientGone
            if fault == RENDER_FAULT:
                raise RenderFailed(f"rendering of {request_id} failed ({RENDER_FAULT})")
            if not held:
                try:  # ADM-PRE-1: vLLM's second check and the registration
                    return self._api.admit(request_id, n, tokens)
                except AdmissionRejected:
                    self.wasted_renders += 1
                    raise
            ids = tracker.add(request_id, n, tokens)  # takes the reservation over
            held = False
            self._emit("admit", request_id, n)
            return ids
        finally:
            if held:
                t_before = time.monotonic()
                tracker.release_reservation(n)
                self._emit("release", request_id, n, t_before=t_before)
