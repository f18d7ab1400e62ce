"""`check_admission_trace`: replay a recorded admission trace against the semantics.

A trace is the sequence of `queueref.events.AdmissionEvent` records that API
servers wrote (one JSON object a line, the schema of ADM-EV-1 / ADM-EV-2).
The checker reports the largest global in-flight count, the bound it must
respect, whether it does, and every recorded decision the semantics forbid
(ORC-TR-1 to ORC-TR-8). It reuses the schema, the parser and the sweeps of
`queueref.events`; what it adds for files is strict reading with errors that
name the line and the field (ORC-TR-9).

Models no single vLLM file: it judges recordings of the admission path of
`AsyncLLM.check_admission` (`vllm/v1/engine/async_llm.py`) with the counters of
`vllm/v1/engine/admission_control.py`, as `specs/admission.md` states it.

Modes (ORC-TR-10), named like `AdmissionController(mode=...)` and the
protocols of `queueref.servers`:

| mode | protocol | admit iff | view must be | measure | bound |
|---|---|---|---|---|---|
| `shared` | check-then-write | `view + n <= M` | `>= own` | max_in_flight | `M + (N-1)*min(M, W)` |
| `locked` | the same, locked | `view + n <= M` | `>= own` | max_admitted_in_flight | `M` |
| `reserve` | write-then-check | `view <= M` | `>= own + n` | max_admitted_in_flight | `M` |
| `local` | own count only | `view + n <= M` | `== own` | max_in_flight | `N * M` |

`own` is the server's own in-flight count, rebuilt from its earlier events.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from queueref.events import AdmissionEvent, max_admitted_in_flight, max_in_flight
from queueref.models.protocol import bound as protocol_bound
from queueref.models.protocol import parse_protocol
from queueref.oracle.errors import TraceFormatError
from queueref.tracker import child_request_ids
from queueref.validators import is_int_at_least

#: The modes `check_admission_trace` knows (ORC-TR-10).
MODES: Final = ("shared", "locked", "reserve", "local")

#: The keys of one event line (ADM-EV-2): required, then optional.
REQUIRED_KEYS: Final = ("t", "server", "event", "request_id", "n")
OPTIONAL_KEYS: Final = ("view", "t_before")

_REQUIREMENT = re.compile(r"[A-Z]+(?:-[A-Z0-9]+)+")
_FIELD_IN_MESSAGE = re.compile(r"\b(t_before|t|server|event|request_id|n|view)\b must")


# ---------------------------------------------------------------------------
# Reading


def _field_of(message: str) -> str | None:
    match = _FIELD_IN_MESSAGE.search(message)
    return match.group(1) if match else None


def parse_event_line(line: str, path: str, number: int) -> AdmissionEvent:
    """ORC-TR-9: one line as an event, or `TraceFormatError` naming the line and the field."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, number, None, f"not valid JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise TraceFormatError(
            path, number, None, f"an event is a JSON object, got {type(record).__name__}"
        )
    for key in REQUIRED_KEYS:
        if key not in record:
            raise TraceFormatError(path, number, key, "missing")
    for key in record:
        if key not in REQUIRED_KEYS and key not in OPTIONAL_KEYS:
            raise TraceFormatError(path, number, str(key), "unknown field")
    try:
        return AdmissionEvent.from_json(line)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        head, _, rest = message.partition(": ")
        problem = rest if _REQUIREMENT.fullmatch(head) else message  # drop the "ID: " prefix
        raise TraceFormatError(path, number, _field_of(message), problem) from None


def read_trace(path: str | os.PathLike[str]) -> tuple[list[AdmissionEvent], list[int]]:
    """ORC-TR-9: the events of a JSON Lines trace and the line number of each.

    Blank lines are skipped (as `read_jsonl` does).

    :raises TraceFormatError: a line that breaks the schema (the first one)
    :raises OSError: the file cannot be read
    """
    name = os.fspath(path)
    events: list[AdmissionEvent] = []
    numbers: list[int] = []
    with open(name, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            events.append(parse_event_line(line, name, number))
            numbers.append(number)
    return events, numbers


# ---------------------------------------------------------------------------
# The report


@dataclass(frozen=True)
class Violation:
    """One recorded event the semantics forbid: where, which rule, why."""

    line: int
    rule: str
    message: str
    event: AdmissionEvent

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}: {self.message}"


@dataclass(frozen=True)
class TraceReport:
    """What `check_admission_trace` found (ORC-TR-1).

    `max_in_flight` is the in-flight measure of the mode (`measure` names it);
    `bound` is what it must not exceed; `violations` lists every forbidden
    decision in trace order. `ok` is true when the bound holds and nothing is
    forbidden.
    """

    mode: str
    num_servers: int
    max_num_queued_reqs: int
    max_n: int
    num_events: int
    max_in_flight: int
    measure: str
    bound: int
    bound_holds: bool
    violations: tuple[Violation, ...]
    counts: dict[str, int] = field(default_factory=dict)
    still_in_flight: int = 0

    @property
    def ok(self) -> bool:
        """The bound holds and no recorded decision is forbidden."""
        return self.bound_holds and not self.violations

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON data."""
        return {
            "ok": self.ok,
            "mode": self.mode,
            "num_servers": self.num_servers,
            "max_num_queued_reqs": self.max_num_queued_reqs,
            "max_n": self.max_n,
            "num_events": self.num_events,
            "max_in_flight": self.max_in_flight,
            "measure": self.measure,
            "bound": self.bound,
            "bound_holds": self.bound_holds,
            "counts": dict(self.counts),
            "still_in_flight": self.still_in_flight,
            "violations": [
                {"line": v.line, "rule": v.rule, "message": v.message, "event": v.event.to_json()}
                for v in self.violations
            ],
        }

    def summary(self) -> str:
        """A human-readable report, one fact a line."""
        verdict = "holds" if self.bound_holds else "BROKEN"
        lines = [
            f"{self.num_events} events, {self.num_servers} servers, "
            f"cap M={self.max_num_queued_reqs}, W={self.max_n}, mode {self.mode}",
            "  "
            + ", ".join(f"{kind} {self.counts.get(kind, 0)}" for kind in _KINDS)
            + f"; still in flight at the end: {self.still_in_flight}",
            f"largest global in-flight count ({self.measure}): {self.max_in_flight}",
            f"bound: {self.bound} -- {verdict}",
        ]
        if self.violations:
            lines.append(f"{len(self.violations)} forbidden decision(s):")
            lines.extend(f"  {violation}" for violation in self.violations)
        else:
            lines.append("no forbidden decision")
        lines.append("OK" if self.ok else "FAILED")
        return "\n".join(lines)


_KINDS = ("admit", "reject", "finish", "abort")


def trace_bound(mode: str, num_servers: int, max_num_queued_reqs: int, max_n: int) -> int:
    """ORC-TR-10: the bound of the mode's in-flight measure (ADM-BOUND-1, ADM-BOUND-2)."""
    return protocol_bound(parse_protocol(mode), num_servers, max_num_queued_reqs, max_n)


# ---------------------------------------------------------------------------
# The replay


class _Replay:
    """Per-server state rebuilt from the events: what is in flight, and since when."""

    def __init__(self, mode: str, num_servers: int, cap: int, max_n: int) -> None:
        self.mode = mode
        self.num_servers = num_servers
        self.cap = cap
        self.max_n = max_n
        self.violations: list[Violation] = []
        self.last_t: dict[int, float] = {}
        # server -> request id -> the internal ids still in flight
        self.live: dict[int, dict[str, set[str]]] = {}
        # server -> internal id -> its request id
        self.owner: dict[int, dict[str, str]] = {}
        # server -> ids (request or internal) that were in flight and ended
        self.ended: dict[int, set[str]] = {}
        self.own: dict[int, int] = {}

    def flag(self, line: int, rule: str, message: str, event: AdmissionEvent) -> None:
        self.violations.append(Violation(line, rule, message, event))

    def step(self, line: int, event: AdmissionEvent) -> None:
        server = event.server
        if server >= self.num_servers:
            self.flag(
                line,
                "ORC-TR-5",
                f"server {server} is out of range: there are {self.num_servers} servers "
                f"(indices 0..{self.num_servers - 1})",
                event,
            )
        previous = self.last_t.get(server)
        if previous is not None and event.t < previous:
            self.flag(
                line,
                "ORC-TR-6",
                f"time goes backwards on server {server}: t={event.t!r} after t={previous!r}",
                event,
            )
        self.last_t[server] = event.t if previous is None else max(previous, event.t)
        if event.event == "admit":
            self.admit(line, event)
        elif event.event == "reject":
            self.decide(line, event, admitted=False)
        else:
            self.depart(line, event)

    def decide(self, line: int, event: AdmissionEvent, *, admitted: bool) -> None:
        """ORC-TR-2, ORC-TR-3, ORC-TR-7: the decision fits the view; the view fits the server."""
        view = event.view
        if view is None:
            return  # no request limit was read (e.g. a token-limit rejection): nothing to judge
        n, cap = event.n, self.cap
        own = self.own.get(event.server, 0)
        if self.mode == "reserve":
            fits, rule_text = view <= cap, f"view {view} <= cap {cap}"
        else:
            fits, rule_text = view + n <= cap, f"view {view} + n {n} <= cap {cap}"
        if admitted and not fits:
            self.flag(line, "ORC-TR-2", f"admitted although not {rule_text}", event)
        if not admitted and fits:
            self.flag(line, "ORC-TR-3", f"rejected although {rule_text}", event)
        if self.mode == "local" and view != own:
            self.flag(
                line,
                "ORC-TR-7",
                f"view {view} is not the server's own in-flight count {own} (local mode)",
                event,
            )
        elif self.mode == "reserve" and view < own + n:
            self.flag(
                line,
                "ORC-TR-7",
                f"view {view} is below the server's own in-flight count {own} plus its "
                f"reservation {n}",
                event,
            )
        elif self.mode in ("shared", "locked") and view < own:
            self.flag(
                line,
                "ORC-TR-7",
                f"view {view} is below the server's own in-flight count {own}",
                event,
            )

    def admit(self, line: int, event: AdmissionEvent) -> None:
        """ORC-TR-2, ORC-TR-4, ORC-TR-8: a legal admission of a request not in flight."""
        self.decide(line, event, admitted=True)
        if event.n > self.max_n:
            self.flag(
                line,
                "ORC-TR-8",
                f"admitted n={event.n} > max_n={self.max_n}: the bound assumes W={self.max_n}",
                event,
            )
        server = event.server
        live = self.live.setdefault(server, {})
        owner = self.owner.setdefault(server, {})
        children = child_request_ids(event.request_id, event.n)
        taken = [rid for rid in [event.request_id, *children] if rid in live or rid in owner]
        if taken:
            self.flag(
                line,
                "ORC-TR-4",
                f"admitted {event.request_id!r} while {sorted(set(taken))} still in flight "
                f"on server {server}",
                event,
            )
            return
        live[event.request_id] = set(children)
        for child in children:
            owner[child] = event.request_id
        self.ended.setdefault(server, set()).difference_update([event.request_id, *children])
        self.own[server] = self.own.get(server, 0) + event.n

    def depart(self, line: int, event: AdmissionEvent) -> None:
        """ORC-TR-4: a finish or abort ends requests in flight on that server, n of them."""
        server = event.server
        live = self.live.setdefault(server, {})
        owner = self.owner.setdefault(server, {})
        target = event.request_id
        if target in owner:
            ending = [target]
        elif target in live:
            ending = sorted(live[target])
        else:
            history = "already ended" if target in self.ended.get(server, set()) else "unknown"
            self.flag(
                line,
                "ORC-TR-4",
                f"{event.event} of {target!r}, which is {history} on server {server}",
                event,
            )
            return
        if event.n != len(ending):
            self.flag(
                line,
                "ORC-TR-4",
                f"{event.event} of {target!r} gives back n={event.n}, but it ends "
                f"{len(ending)} internal request(s) in flight",
                event,
            )
        ended = self.ended.setdefault(server, set())
        for rid in ending:
            parent = owner.pop(rid)
            live[parent].discard(rid)
            ended.add(rid)
            if not live[parent]:
                del live[parent]
                ended.add(parent)
        self.own[server] = self.own.get(server, 0) - len(ending)


def check_admission_trace(
    events: Iterable[AdmissionEvent] | str | os.PathLike[str],
    num_servers: int,
    max_num_queued_reqs: int,
    max_n: int = 1,
    *,
    mode: str = "shared",
    line_numbers: Sequence[int] | None = None,
) -> TraceReport:
    """Replay a recorded admission trace and report what the semantics forbid.

    ORC-TR-1: reports the largest global in-flight count, the bound of the
    mode and whether it holds; every forbidden decision is a `Violation`
    (ORC-TR-2 to ORC-TR-8), in trace order. `events` is a sequence of
    `AdmissionEvent` or the path of a JSON Lines trace (read strictly,
    ORC-TR-9). `line_numbers` gives the line of each event for the report
    (default: its 1-based position). `mode` is one of `MODES` (ORC-TR-10).

    >>> from queueref.events import AdmissionEvent
    >>> trace = [
    ...     AdmissionEvent(1.0, 0, "admit", "a", 1, view=0),
    ...     AdmissionEvent(1.1, 1, "admit", "b", 1, view=0),
    ...     AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.9),
    ... ]
    >>> report = check_admission_trace(trace, num_servers=2, max_num_queued_reqs=1)
    >>> report.max_in_flight, report.bound, report.ok
    (2, 2, True)

    :raises ValueError: a bad parameter (ORC-TR-10)
    :raises TraceFormatError: a malformed line of a trace file (ORC-TR-9)
    """
    if mode not in MODES:
        raise ValueError(f"ORC-TR-10: mode must be one of {MODES}, got {mode!r}")
    if not is_int_at_least(num_servers, 1):
        raise ValueError(f"ORC-TR-10: num_servers must be an int >= 1, got {num_servers!r}")
    if not is_int_at_least(max_num_queued_reqs, 0):
        raise ValueError(
            f"ORC-TR-10: max_num_queued_reqs must be an int >= 0, got {max_num_queued_reqs!r}"
        )
    if not is_int_at_least(max_n, 1):
        raise ValueError(f"ORC-TR-10: max_n must be an int >= 1, got {max_n!r}")
    if isinstance(events, (str, Path, os.PathLike)):
        trace, numbers = read_trace(events)
    else:
        trace = list(events)
        numbers = list(line_numbers) if line_numbers is not None else []
    if not numbers:
        numbers = list(range(1, len(trace) + 1))
    if len(numbers) != len(trace):
        raise ValueError("ORC-TR-1: line_numbers must give one line per event")
    replay = _Replay(mode, num_servers, max_num_queued_reqs, max_n)
    for number, event in zip(numbers, trace, strict=True):
        if not isinstance(event, AdmissionEvent):
            raise TypeError(f"ORC-TR-1: event {number} is not an AdmissionEvent: {event!r}")
        replay.step(number, event)
    measure = "max_in_flight"
    if mode in ("reserve", "locked"):
        missing = [
            (number, event)
            for number, event in zip(numbers, trace, strict=True)
            if event.event in ("finish", "abort") and event.t_before is None
        ]
        for number, event in missing:
            replay.flag(
                number,
                "ORC-TR-10",
                f"{mode} mode measures with t_before (ADM-EV-5), but this {event.event} has none",
                event,
            )
        if not missing:
            measure = "max_admitted_in_flight"
    largest = max_admitted_in_flight(trace) if measure != "max_in_flight" else max_in_flight(trace)
    bound = trace_bound(mode, num_servers, max_num_queued_reqs, max_n)
    counts = {kind: sum(1 for event in trace if event.event == kind) for kind in _KINDS}
    violations = sorted(replay.violations, key=lambda violation: violation.line)
    return TraceReport(
        mode=mode,
        num_servers=num_servers,
        max_num_queued_reqs=max_num_queued_reqs,
        max_n=max_n,
        num_events=len(trace),
        max_in_flight=largest,
        measure=measure,
        bound=bound,
        bound_holds=largest <= bound,
        violations=tuple(violations),
        counts=counts,
        still_in_flight=sum(replay.own.values()),
    )
