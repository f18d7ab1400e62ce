"""The preflight records of a trace (`serve --render-ms`): ORC-TR-19, ORC-TR-20, ORC-TR-21.

A server that renders records a `preflight` (vLLM's first check passed, nothing
written) or a `reserve` (a reservation written at preflight) before the `admit` of
the same request, and a `release` when a reservation is given back (ADM-EV-7,
`queueref.runtime.http.render`). The checks:

* ORC-TR-19: an `admit` on a server that records preflights, with no passing
  preflight (`preflight` or a held `reserve`) of that request before it.
* ORC-TR-20: a reservation neither registered nor released by the end of the trace.
* ORC-TR-21: a reservation counted twice: reserved again while held, given back
  twice, given back after its registration took it over (or registered after it was
  given back), or given back with another n.

`wasted` counts the renders thrown away: a `reject` of a request whose preflight
passed (E2E-REN-5). Models no vLLM file: vLLM records none of this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol as TypingProtocol

from queueref.trace.events import AdmissionEvent


class Flagger(TypingProtocol):
    """The replay that reports violations (`queueref.oracle.trace_replay.Replay`)."""

    file: str | None
    position: int

    def flag(self, line: int, rule: str, message: str, event: AdmissionEvent) -> None: ...


#: Where a record is: its line, its place in the trace, its file, the record.
_Where = tuple[int, int, str | None, AdmissionEvent]


@dataclass
class _ServerRecords:
    """One server's preflight state, rebuilt from its records."""

    passed: set[str] = field(default_factory=set)  # preflight passed, not yet registered
    # Reservations held: id -> (line, position, file, the reserve record).
    held: dict[str, _Where] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)  # reservations released or taken over
    records: bool = False  # the server recorded a preflight record
    # ORC-TR-19: admits with no pass, judged at the end (only if the server records any).
    unchecked: list[_Where] = field(default_factory=list)


class PreflightRecords:
    """The preflight bookkeeping of a replay: fed every event, flags ORC-TR-19..21."""

    def __init__(self) -> None:
        self.servers: dict[int, _ServerRecords] = {}
        self.wasted = 0  # E2E-REN-5: rendered, then refused
        self.reserved = 0
        self.released = 0

    @property
    def recorded(self) -> bool:
        """Whether any server recorded a preflight record (a `serve --render-ms` trace)."""
        return any(state.records for state in self.servers.values())

    def _server(self, index: int) -> _ServerRecords:
        return self.servers.setdefault(index, _ServerRecords())

    def step(self, replay: Flagger, line: int, event: AdmissionEvent) -> None:
        """A `preflight`, `reserve` or `release` record."""
        state = self._server(event.server)
        state.records = True
        rid = event.request_id
        if event.event == "preflight":
            state.passed.add(rid)
        elif event.event == "reserve":
            self.reserved += 1
            if rid in state.held:  # ORC-TR-21
                replay.flag(line, "ORC-TR-21", f"{rid!r} reserved again while its "
                            f"reservation of {state.held[rid][3].n} is held", event)  # fmt: skip
            state.held[rid] = (line, replay.position, replay.file, event)
            state.ended.discard(rid)
        else:
            self.released += 1
            self._end(replay, line, event, state, "given back")

    def _end(
        self, replay: Flagger, line: int, event: AdmissionEvent, state: _ServerRecords, how: str
    ) -> None:
        """A reservation ends (given back, or taken over by the registration): once."""
        rid = event.request_id
        held = state.held.pop(rid, None)
        if held is None:  # ORC-TR-21
            what = "already ended" if rid in state.ended else "never reserved"
            replay.flag(line, "ORC-TR-21", f"reservation of {rid!r} {how}, but it is {what} "
                        f"on server {event.server}", event)  # fmt: skip
            return
        if held[3].n != event.n:  # ORC-TR-21
            replay.flag(line, "ORC-TR-21", f"reservation of {rid!r} of n={held[3].n} {how} "
                        f"with n={event.n}", event)  # fmt: skip
        state.ended.add(rid)

    def admit(self, replay: Flagger, line: int, event: AdmissionEvent) -> None:
        """An `admit`: it needs a passing preflight, and takes a reservation over."""
        state = self._server(event.server)
        rid = event.request_id
        if rid in state.passed:
            state.passed.discard(rid)
        elif rid in state.held or rid in state.ended:
            self._end(replay, line, event, state, "registered")
        else:
            state.unchecked.append((line, replay.position, replay.file, event))

    def reject(self, event: AdmissionEvent) -> None:
        """A `reject` after a passing preflight: a wasted render (E2E-REN-5)."""
        state = self.servers.get(event.server)
        if state is not None and event.request_id in state.passed:
            state.passed.discard(event.request_id)
            self.wasted += 1

    def finish(self, replay: Flagger) -> None:
        """At the end of the trace: ORC-TR-19's admits, ORC-TR-20's held reservations."""
        for index, state in sorted(self.servers.items()):
            if state.records:  # ORC-TR-19
                for line, position, file, event in state.unchecked:
                    replay.position, replay.file = position, file
                    replay.flag(line, "ORC-TR-19", f"{event.request_id!r} registered on "
                                f"server {index} without a passing preflight", event)  # fmt: skip
            for rid, (line, position, file, event) in state.held.items():  # ORC-TR-20
                replay.position, replay.file = position, file
                replay.flag(line, "ORC-TR-20", f"reservation of {rid!r} (n={event.n}) on "
                            f"server {index} never released nor registered", event)  # fmt: skip


def held_reservations(events: list[AdmissionEvent], server: int) -> dict[str, int]:
    """E2E-REN-4: the reservations `server` holds after `events` (what a reclaim gives back)."""
    held: dict[str, int] = {}
    for event in events:
        if event.server != server:
            continue
        if event.event == "reserve":
            held[event.request_id] = event.n
        elif event.event in ("release", "admit"):
            held.pop(event.request_id, None)
    return held
