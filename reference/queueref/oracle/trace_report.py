"""The report of the trace checker: what a replayed admission trace showed.

`TraceReport` holds the verdict of `queueref.oracle.trace_check.check_admission_trace`:
the largest global in-flight count, the bound it must respect, where the count
peaked, and every recorded decision the semantics forbid (`Violation`). It
renders itself as text (`summary`) and as plain JSON data (`to_dict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from queueref.trace.events import AdmissionEvent

#: The kinds of events the report counts, in the order it prints them.
KINDS: Final = ("admit", "reject", "finish", "abort")

#: Counted only when the trace has them: token and preflight records (E2E-REN-5).
_EXTRA_KINDS: Final = ("prefill_done", "preflight", "reserve", "release", "wasted_render")

#: How many requests in flight at the peak the text report lists (the JSON lists all).
SHOWN_IN_FLIGHT: Final = 10


def where(file: str | None, line: int) -> str:
    """`FILE:LINE` for an event of a trace folder, `line LINE` for one of a single trace."""
    return f"{file}:{line}" if file is not None else f"line {line}"


@dataclass(frozen=True)
class Violation:
    """One recorded event the semantics forbid: where, which rule, why."""

    line: int
    rule: str
    message: str
    event: AdmissionEvent
    file: str | None = None  # set when the trace is a folder of per-server files

    def __str__(self) -> str:
        return f"{where(self.file, self.line)}: {self.rule}: {self.message}"


@dataclass(frozen=True)
class InFlight:
    """A request in flight at the peak: its server, id, the slots it still holds, its admission."""

    server: int
    request_id: str
    slots: int
    line: int  # of its admission
    file: str | None = None

    def __str__(self) -> str:
        return (
            f"server {self.server} {self.request_id!r} holding {self.slots} "
            f"(admitted at {where(self.file, self.line)})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "request_id": self.request_id,
            "slots": self.slots,
            "file": self.file,
            "line": self.line,
        }


@dataclass(frozen=True)
class Peak:
    """Where the in-flight measure first reached its largest value.

    `line` (and `file`, for a folder) and `t` are those of the admission that
    brought the count there; `in_flight` lists the admissions not yet ended at
    that moment of the sweep, in the sweep's order.
    """

    count: int
    t: float
    line: int
    event: AdmissionEvent
    in_flight: tuple[InFlight, ...]
    file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "t": self.t,
            "file": self.file,
            "line": self.line,
            "event": self.event.to_json(),
            "in_flight": [request.to_dict() for request in self.in_flight],
        }


@dataclass(frozen=True)
class TraceReport:
    """What `check_admission_trace` found.

    `max_in_flight` is the in-flight measure of the mode (`measure` names it);
    `bound` is what it must not exceed; `violations` lists every forbidden
    decision in trace order. `ok` is true when the bound holds and nothing is
    forbidden.
    """

    # ORC-TR-1: the measure, the bound, whether it holds, the violations in trace order.
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
    # ORC-TR-14: the token limit's measure, None without `max_num_queued_tokens`.
    max_num_queued_tokens: int | None = None
    token_rule: str = "ge"
    max_request_tokens: int = 0
    max_queued_tokens: int | None = None
    token_bound: int | None = None
    # ORC-TR-16: true when `max_n` (W) was taken from the trace rather than given.
    max_n_inferred: bool = False
    # ORC-TR-17: where the measure peaked; None when nothing was ever in flight.
    peak: Peak | None = None

    @property
    def token_bound_holds(self) -> bool:
        """The queued tokens stay within their bound (true without a token limit)."""
        if self.max_queued_tokens is None or self.token_bound is None:
            return True
        return self.max_queued_tokens <= self.token_bound

    @property
    def ok(self) -> bool:
        """Both bounds hold and no recorded decision is forbidden."""
        return self.bound_holds and self.token_bound_holds and not self.violations

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON data."""
        return {
            "ok": self.ok,
            "mode": self.mode,
            "num_servers": self.num_servers,
            "max_num_queued_reqs": self.max_num_queued_reqs,
            "max_n": self.max_n,
            "max_n_inferred": self.max_n_inferred,
            "num_events": self.num_events,
            "max_in_flight": self.max_in_flight,
            "measure": self.measure,
            "bound": self.bound,
            "bound_holds": self.bound_holds,
            "peak": self.peak.to_dict() if self.peak is not None else None,
            "counts": dict(self.counts),
            "still_in_flight": self.still_in_flight,
            "max_num_queued_tokens": self.max_num_queued_tokens,
            "token_rule": self.token_rule,
            "max_request_tokens": self.max_request_tokens,
            "max_queued_tokens": self.max_queued_tokens,
            "token_bound": self.token_bound,
            "token_bound_holds": self.token_bound_holds,
            "violations": [
                {
                    "file": v.file,
                    "line": v.line,
                    "rule": v.rule,
                    "message": v.message,
                    "event": v.event.to_json(),
                }
                for v in self.violations
            ],
        }

    def summary(self) -> str:
        """A human-readable report, one fact a line."""
        inferred = " (inferred: the largest n in the trace)" if self.max_n_inferred else ""
        lines = [
            f"{self.num_events} events, {self.num_servers} servers, "
            f"cap M={self.max_num_queued_reqs}, W={self.max_n}{inferred}, mode {self.mode}",
            "  "
            + ", ".join(
                f"{kind} {self.counts.get(kind, 0)}"
                for kind in KINDS + tuple(k for k in _EXTRA_KINDS if k in self.counts)
            )
            + f"; still in flight at the end: {self.still_in_flight}",
            f"largest global in-flight count ({self.measure}): {self.max_in_flight}",
        ]
        lines += self.peak_lines()
        if self.max_num_queued_tokens is not None:
            lines += [
                f"token cap Mt={self.max_num_queued_tokens}, rule {self.token_rule}, "
                f"largest request P={self.max_request_tokens} tokens",
                f"largest global queued tokens: {self.max_queued_tokens}",
                f"token bound: {self.token_bound} -- "
                f"{'holds' if self.token_bound_holds else 'BROKEN'}",
            ]
        if self.violations:
            lines.append(f"{len(self.violations)} forbidden decision(s):")
            lines.extend(f"  {violation}" for violation in self.violations)
        else:
            lines.append("no forbidden decision")
        lines.append("OK" if self.ok else "FAILED")
        return "\n".join(lines)

    def peak_lines(self) -> list[str]:
        """Where the count peaked, the bound, and what was in flight when it broke."""
        # ORC-TR-17
        peak = self.peak
        lines = []
        if peak is not None:
            lines.append(
                f"  reached at {where(peak.file, peak.line)} (t={peak.t!r}): server "
                f"{peak.event.server} admitting {peak.event.request_id!r}"
            )
        lines.append(f"bound: {self.bound} -- {'holds' if self.bound_holds else 'BROKEN'}")
        if peak is not None and not self.bound_holds:
            held = sum(request.slots for request in peak.in_flight)
            lines.append(
                f"  in flight at the peak: {len(peak.in_flight)} request(s) holding {held} slot(s)"
            )
            lines.extend(f"    {request}" for request in peak.in_flight[:SHOWN_IN_FLIGHT])
            hidden = len(peak.in_flight) - SHOWN_IN_FLIGHT
            if hidden > 0:
                lines.append(f"    ... and {hidden} more (--json lists them all)")
        return lines
