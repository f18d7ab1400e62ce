"""Admission event records: what a server decided, when, and what it read.

Models no single vLLM file. vLLM logs admission decisions as free text
(`AsyncLLM.check_admission` in `vllm/v1/engine/async_llm.py` logs
"Request queue full - rejecting request ..."); queueref records them as
structured events instead, so that a run of real processes (the stress run of
`queueref.runtime.servers`, the HTTP experiment) can be checked afterwards against the
overshoot bound of `specs/admission.md`.

Deliberate divergences from vLLM:

* vLLM keeps no such record at all; the schema is queueref's.
* The timestamps follow a stamping convention chosen so that the
  maximum computed by `max_in_flight` is an upper bound of the real slot sum.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import icontract

from queueref.validators import is_int, is_int_at_least, is_real

EventKind = Literal[
    "admit", "reject", "finish", "abort", "prefill_done", "preflight", "reserve", "release"
]

#: The kinds of event, in the order a sweep resolves ties (ADM-EV-4); the last three are
#: the preflight records of `serve --render-ms` (ADM-EV-7), which no sweep counts.
EVENT_KINDS: tuple[EventKind, ...] = (
    "admit", "reject", "finish", "abort", "prefill_done", "preflight", "reserve", "release"
)  # fmt: skip

#: ADM-EV-7: a passing preflight check, a reservation written at preflight, one given back.
PREFLIGHT_KINDS: frozenset[str] = frozenset({"preflight", "reserve", "release"})

_DEPARTURES: frozenset[str] = frozenset({"finish", "abort"})

#: The kinds that never carry `tokens` (ADM-EV-6, ADM-EV-7).
_NO_TOKENS: frozenset[str] = _DEPARTURES | {"preflight", "reserve", "release"}

#: The kinds that record a decision, so may carry a view (ADM-EV-1, ADM-EV-6).
_DECISIONS: frozenset[str] = frozenset({"admit", "reject", "preflight", "reserve"})


def _check_fields(event: AdmissionEvent) -> str | None:
    """The first field of `event` that breaks the event schema, as a message, or None."""
    if event.event not in EVENT_KINDS:
        return f"event must be one of {EVENT_KINDS}, got {event.event!r}"
    if not is_real(event.t):
        return f"t must be a float, got {event.t!r}"
    if not math.isfinite(event.t):
        return f"t must be finite, got {event.t!r}"
    if not is_int_at_least(event.server, 0):
        return f"server must be an int >= 0, got {event.server!r}"
    if not isinstance(event.request_id, str):
        return f"request_id must be a str, got {event.request_id!r}"
    if not is_int_at_least(event.n, 1):
        return f"n must be an int >= 1, got {event.n!r}"
    if event.event not in _DECISIONS:
        if event.view is not None:
            return f"view must be None for a {event.event} event, got {event.view!r}"
        if event.token_view is not None:
            return f"token_view must be None for a {event.event} event, got {event.token_view!r}"
    elif event.view is not None and not is_int(event.view):
        return f"view must be an int or None, got {event.view!r}"
    elif event.token_view is not None and not is_int(event.token_view):
        return f"token_view must be an int or None, got {event.token_view!r}"
    if event.tokens is not None and (
        event.event in _NO_TOKENS or not is_int_at_least(event.tokens, 0)
    ):
        return (
            f"tokens must be None for a {event.event} event, got {event.tokens!r}"
            if event.event in _NO_TOKENS
            else f"tokens must be an int >= 0 or None, got {event.tokens!r}"
        )
    if event.event == "prefill_done" and event.n != 1:
        return f"n must be 1 for a prefill_done event (one internal request), got {event.n!r}"
    if event.t_before is not None:
        if not is_real(event.t_before):
            return f"t_before must be a float or None, got {event.t_before!r}"
        if not math.isfinite(event.t_before) or event.t_before > event.t:
            return f"t_before must be finite and <= t, got {event.t_before!r} > {event.t!r}"
    return None


@dataclass(frozen=True)
class AdmissionEvent:
    """One admission decision or departure of one server.

    `t` is `time.monotonic()` in seconds (system-wide on Linux, so events of
    different processes are comparable); `view` is the global count the check
    read (admit/reject only); `t_before` is an optional earlier stamp taken
    just before the slot write of a departure (or of a `prefill_done`).
    `tokens` is the prompt length p of each of the `n` samples (admit,
    reject; the request queues `n * p`) or the tokens a `prefill_done` took
    out; `token_view` the queued tokens the token check read.
    """

    t: float
    server: int
    event: EventKind
    request_id: str
    n: int = 1
    view: int | None = None
    t_before: float | None = None
    tokens: int | None = None
    token_view: int | None = None

    def __post_init__(self) -> None:
        # ADM-EV-1: an event that breaks the schema is refused at construction.
        problem = _check_fields(self)
        if problem is not None:
            raise ValueError(f"ADM-EV-1: {problem}")

    @icontract.ensure(lambda result: "\n" not in result, "ADM-EV-2: one event is one line")
    @icontract.ensure(
        lambda self, result: AdmissionEvent.from_json(result) == self,
        "ADM-EV-2: from_json(to_json(e)) == e",
    )
    def to_json(self) -> str:
        """One JSON object on one line; `t_before`, `tokens`, `token_view` left out when None."""
        record: dict[str, Any] = {
            "t": self.t,
            "server": self.server,
            "event": self.event,
            "request_id": self.request_id,
            "n": self.n,
            "view": self.view,
        }
        if self.t_before is not None:
            record["t_before"] = self.t_before
        # ADM-EV-6: the token keys only when set, so a run without a token limit is unchanged.
        if self.tokens is not None:
            record["tokens"] = self.tokens
        if self.token_view is not None:
            record["token_view"] = self.token_view
        return json.dumps(record, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, line: str) -> AdmissionEvent:
        """Parse one line written by `to_json`; unknown keys are an error."""
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError(f"ADM-EV-2: an event is a JSON object, got {line!r}")
        allowed = {
            "t",
            "server",
            "event",
            "request_id",
            "n",
            "view",
            "t_before",
            "tokens",
            "token_view",
        }
        unknown = set(record) - allowed
        missing = {"t", "server", "event", "request_id", "n"} - set(record)
        if unknown or missing:
            raise ValueError(
                f"ADM-EV-2: bad keys in {line!r}: unknown {sorted(unknown)}, "
                f"missing {sorted(missing)}"
            )
        t = record["t"]
        t_before = record.get("t_before")
        return cls(
            t=float(t) if is_int(t) else t,
            server=record["server"],
            event=cast(EventKind, record["event"]),
            request_id=record["request_id"],
            n=record["n"],
            view=record.get("view"),
            t_before=(float(t_before) if is_int(t_before) else t_before),
            tokens=record.get("tokens"),
            token_view=record.get("token_view"),
        )


def write_jsonl(events: Iterable[AdmissionEvent], path: str | Path) -> int:
    """Write the events to `path`, one JSON object a line; returns how many."""
    count = 0
    with open(path, "w", encoding="utf-8") as stream:
        for event in events:
            stream.write(event.to_json())
            stream.write("\n")
            count += 1
    return count


def read_jsonl(path: str | Path) -> list[AdmissionEvent]:
    """Read the events written by `write_jsonl`; blank lines are skipped."""
    with open(path, encoding="utf-8") as stream:
        return [AdmissionEvent.from_json(line) for line in stream if line.strip()]


def sweep(points: Sequence[tuple[float, int, int]]) -> int:
    """The running maximum of the sum of deltas, in (time, rank) order."""
    level = 0
    best = 0
    for _time, _rank, delta in sorted(points, key=lambda point: (point[0], point[1])):
        level += delta
        best = max(best, level)
    return best


@icontract.ensure(lambda result: result >= 0, "ADM-EV-4: the maximum is never negative")
@icontract.ensure(
    lambda events, result: result <= sum(event.n for event in events if event.event == "admit"),
    "ADM-EV-4: the maximum never exceeds everything admitted",
)
def max_in_flight(events: Iterable[AdmissionEvent]) -> int:
    """The global in-flight maximum: sweep admit +n, finish/abort -n, ordered by `t`.

    Ties are resolved conservatively: at equal `t`, admissions count before
    departures. Rejections do not change the count. With the stamping
    convention of `specs/admission.md` the result is an upper bound of the
    real slot sum.
    """
    points: list[tuple[float, int, int]] = []
    for event in events:
        if event.event == "admit":
            points.append((event.t, 0, event.n))
        elif event.event in _DEPARTURES:
            points.append((event.t, 1, -event.n))
    return sweep(points)


@icontract.ensure(lambda result: result >= 0, "ADM-EV-5: the maximum is never negative")
def max_admitted_in_flight(events: Iterable[AdmissionEvent]) -> int:
    """The decided-and-not-yet-released maximum: departures at `t_before`.

    Admissions count from `t` (after the decision), departures from
    `t_before` (before the slot write), ties resolved in favour of the
    departure. This is a lower bound of the admitted count; under
    write-then-check it never exceeds the cap. Every departure must carry
    `t_before`.
    """
    points: list[tuple[float, int, int]] = []
    for event in events:
        if event.event == "admit":
            points.append((event.t, 1, event.n))
        elif event.event in _DEPARTURES:
            if event.t_before is None:
                raise ValueError(f"ADM-EV-5: departure without t_before: {event!r}")
            points.append((event.t_before, 0, -event.n))
    return sweep(points)
