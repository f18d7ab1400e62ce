"""`check_admission_trace`: replay a recorded admission trace against the semantics.

A trace is the sequence of `queueref.trace.events.AdmissionEvent` records that API
servers wrote (one JSON object a line, the schema of ADM-EV-1 / ADM-EV-2).
The checker reports the largest global in-flight count, the bound it must
respect, whether it does, and every recorded decision the semantics forbid
(ORC-TR-1 to ORC-TR-8). It reuses the schema, the parser and the sweeps of
`queueref.trace.events`; files are read by `queueref.trace.files`, strictly,
with errors that name the line and the field (ORC-TR-9). The reading names
(`read_trace`, `read_trace_folder`, `trace_file`, ...) are re-exported here.

Models no single vLLM file: it judges recordings of the admission path of
`AsyncLLM.check_admission` (`vllm/v1/engine/async_llm.py`) with the counters of
`vllm/v1/engine/admission_control.py`, as `specs/admission.md` states it.

Modes (ORC-TR-10): the protocol names of `queueref.admission.protocol.Protocol`
(the deprecated `shared` and `reserve` are accepted for the first two):

| mode | protocol | admit iff | view must be | measure | bound |
|---|---|---|---|---|---|
| `check-then-write` | vLLM's | `view + n <= M` | `>= own` | max_in_flight | `M + (N-1)*min(M, W)` |
| `locked` | the same, locked | `view + n <= M` | `>= own` | max_admitted_in_flight | `M` |
| `write-then-check` | reserve first | `view <= M` | `>= own + n` | max_admitted_in_flight | `M` |
| `local` | own count only | `view + n <= M` | `== own` | max_in_flight | `N * M` |

`own` is the server's own in-flight count, rebuilt from its earlier events.
"""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from queueref.admission.protocol import (
    Protocol,
    TokenRule,
    admits_tokens,
    keeps_reservation,
    parse_protocol,
)
from queueref.admission.protocol import bound as protocol_bound
from queueref.admission.tracker import child_request_id
from queueref.trace.events import AdmissionEvent, max_admitted_in_flight, max_in_flight, sweep

# Re-exported: the reading of trace files moved to `trace_files`; callers still name it here.
from queueref.trace.files import MAX_LINE_CHARS as MAX_LINE_CHARS
from queueref.trace.files import OPTIONAL_KEYS as OPTIONAL_KEYS
from queueref.trace.files import REQUIRED_KEYS as REQUIRED_KEYS
from queueref.trace.files import TraceFolder as TraceFolder
from queueref.trace.files import parse_event_line as parse_event_line
from queueref.trace.files import read_trace as read_trace
from queueref.trace.files import read_trace_folder as read_trace_folder
from queueref.trace.files import trace_file as trace_file
from queueref.validators import is_int_at_least
from queueref.verify.tokens import token_bound

#: The modes `check_admission_trace` knows (ORC-TR-10).
MODES: Final = tuple(protocol.value for protocol in Protocol)

#: The token rules `check_admission_trace` knows (ORC-TR-14).
TOKEN_RULES: Final = ("ge", "fits")


# ---------------------------------------------------------------------------
# The report


@dataclass(frozen=True)
class Violation:
    """One recorded event the semantics forbid: where, which rule, why."""

    line: int
    rule: str
    message: str
    event: AdmissionEvent
    file: str | None = None  # set when the trace is a folder of per-server files

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file is not None else f"line {self.line}"
        return f"{where}: {self.rule}: {self.message}"


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
    # ORC-TR-14: the token limit's measure, None without `max_num_queued_tokens`.
    max_num_queued_tokens: int | None = None
    token_rule: str = "ge"
    max_request_tokens: int = 0
    max_queued_tokens: int | None = None
    token_bound: int | None = None

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
            "num_events": self.num_events,
            "max_in_flight": self.max_in_flight,
            "measure": self.measure,
            "bound": self.bound,
            "bound_holds": self.bound_holds,
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
        verdict = "holds" if self.bound_holds else "BROKEN"
        lines = [
            f"{self.num_events} events, {self.num_servers} servers, "
            f"cap M={self.max_num_queued_reqs}, W={self.max_n}, mode {self.mode}",
            "  "
            + ", ".join(
                f"{kind} {self.counts.get(kind, 0)}"
                for kind in _KINDS + (("prefill_done",) if "prefill_done" in self.counts else ())
            )
            + f"; still in flight at the end: {self.still_in_flight}",
            f"largest global in-flight count ({self.measure}): {self.max_in_flight}",
            f"bound: {self.bound} -- {verdict}",
        ]
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


_KINDS = ("admit", "reject", "finish", "abort")


def trace_bound(
    mode: Protocol | str, num_servers: int, max_num_queued_reqs: int, max_n: int
) -> int:
    """ORC-TR-10: the bound of the mode's in-flight measure (ADM-BOUND-1, ADM-BOUND-2)."""
    return protocol_bound(parse_protocol(mode), num_servers, max_num_queued_reqs, max_n)


def trace_token_bound(
    mode: Protocol | str,
    rule: str,
    num_servers: int,
    max_num_queued_tokens: int,
    max_request_tokens: int,
) -> int:
    """ORC-TR-14: the bound of the queued tokens (OB-TOK-1, OB-TOK-2, OB-TOK-3).

    check-then-write: the N-server bound of the rule; write-then-check:
    Mt; `locked`: one server's bound (the checks are serialised); `local`: N
    times one server's bound (each checks its own tokens).
    """
    token_rule = TokenRule(rule)
    chosen = parse_protocol(mode)
    if chosen is Protocol.WRITE_THEN_CHECK:
        return token_bound(token_rule, True, num_servers, max_num_queued_tokens, max_request_tokens)
    one = token_bound(token_rule, False, 1, max_num_queued_tokens, max_request_tokens)
    if chosen is Protocol.LOCKED:
        return one
    if chosen is Protocol.LOCAL:
        return num_servers * one
    return token_bound(token_rule, False, num_servers, max_num_queued_tokens, max_request_tokens)


# ---------------------------------------------------------------------------
# The replay


@dataclass
class _Live:
    """A request in flight on one server: its `n` and the children already ended.

    Children are never materialised (ORC-TR-12): child `k` of a request `r`
    with `n > 1` is `f"{k}_{r}"` (ADM-TRK-1), alive while `k < n` and `k`
    is not in `ended`, so memory grows with the events, not with `n`.
    """

    n: int
    ended: set[int] = field(default_factory=set)
    tokens: int = 0  # the prompt length p of each child (ADM-EV-6)
    prefilled: set[int] = field(default_factory=set)  # children whose prefill is done
    queued: int = 0  # children neither ended nor prefilled: they hold p tokens each

    @property
    def remaining(self) -> int:
        return self.n - len(self.ended)


_CHILD_ID = re.compile(r"(0|[1-9][0-9]{0,3999})_(.*)", re.DOTALL)


def _split_child(request_id: str) -> tuple[int, str] | None:
    """`(k, parent)` when `request_id` has the shape of a child id `k_parent`, else None."""
    match = _CHILD_ID.fullmatch(request_id)
    return (int(match.group(1)), match.group(2)) if match else None


class _Server:
    """What one server has in flight, rebuilt from its events (O(events) memory)."""

    def __init__(self) -> None:
        self.live: dict[str, _Live] = {}
        # request ids that ended wholly -> their n (for "already ended" messages)
        self.ended: dict[str, int] = {}
        # live requests named like a child id `k_rest`: rest -> heap of k (lazy deletion)
        self.prefixed: dict[str, list[int]] = {}
        self.own = 0
        self.own_tokens = 0
        self.last_t: float | None = None

    def live_child(self, request_id: str) -> tuple[str, int] | None:
        """`(parent, k)` when `request_id` is a child still in flight here."""
        split = _split_child(request_id)
        if split is None:
            return None
        k, parent = split
        record = self.live.get(parent)
        if record is None or record.n == 1 or k >= record.n or k in record.ended:
            return None
        return parent, k

    def smallest_prefixed(self, rest: str) -> int | None:
        """The smallest `k` of a live request named `f"{k}_{rest}"`, or None."""
        heap = self.prefixed.get(rest)
        while heap and f"{heap[0]}_{rest}" not in self.live:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def was_ended(self, request_id: str) -> bool:
        if request_id in self.ended:
            return True
        split = _split_child(request_id)
        if split is None:
            return False
        k, parent = split
        record = self.live.get(parent)
        if record is not None:
            return record.n > 1 and k in record.ended
        return parent in self.ended and k < self.ended[parent] and self.ended[parent] > 1


class _Replay:
    """Per-server state rebuilt from the events: what is in flight, and since when."""

    def __init__(
        self,
        mode: Protocol,
        num_servers: int,
        cap: int,
        max_n: int,
        token_limit: int | None = None,
        token_rule: str = "ge",
    ) -> None:
        self.mode = mode
        self.num_servers = num_servers
        self.cap = cap
        self.max_n = max_n
        self.token_limit = token_limit
        self.token_rule = TokenRule(token_rule)
        # ORC-TR-14: (t, rank, delta) of the queued tokens, at t and at t_before (O(events)).
        self.token_points: list[tuple[float, int, int]] = []
        self.admitted_token_points: list[tuple[float, int, int]] = []
        self.max_request_tokens = 0
        self.violations: list[Violation] = []
        self.positions: list[int] = []  # of each violation's event in the trace (ORC-TR-1)
        self.servers: dict[int, _Server] = {}
        self.file: str | None = None  # the file of the event being replayed (a folder)
        self.position = 0  # the place in the trace of the event being replayed

    def flag(self, line: int, rule: str, message: str, event: AdmissionEvent) -> None:
        self.violations.append(Violation(line, rule, message, event, self.file))
        self.positions.append(self.position)

    def server(self, index: int) -> _Server:
        state = self.servers.get(index)
        if state is None:
            state = self.servers[index] = _Server()
        return state

    @property
    def still_in_flight(self) -> int:
        return sum(state.own for state in self.servers.values())

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
        state = self.server(server)
        previous = state.last_t
        if previous is not None and event.t < previous:
            self.flag(
                line,
                "ORC-TR-6",
                f"time goes backwards on server {server}: t={event.t!r} after t={previous!r}",
                event,
            )
        state.last_t = event.t if previous is None else max(previous, event.t)
        if event.event == "admit":
            self.admit(line, event)
        elif event.event == "reject":
            self.decide(line, event, admitted=False)
            self.decide_tokens(line, event, admitted=False)
        elif event.event == "prefill_done":
            self.prefill(line, event)
        else:
            self.depart(line, event)

    def tokens_leave(self, event: AdmissionEvent, state: _Server, tokens: int) -> None:
        """Queued tokens leave at `t` (and at `t_before` for the admitted measure)."""
        if tokens:
            state.own_tokens -= tokens
            self.token_points.append((event.t, 1, -tokens))
            at = event.t_before if event.t_before is not None else event.t
            self.admitted_token_points.append((at, 0, -tokens))

    def decide_tokens(self, line: int, event: AdmissionEvent, *, admitted: bool) -> None:
        """ORC-TR-15: the token decision fits the recorded token view, and that view fits."""
        limit = self.token_limit
        if limit is None:
            return
        token_view = event.token_view
        if token_view is None:
            if admitted:
                self.flag(
                    line,
                    "ORC-TR-15",
                    f"admitted under the token cap {limit}, but no token view is recorded",
                    event,
                )
            return  # a rejection by the request limit read no tokens
        weight = event.n * (event.tokens or 0)
        if self.mode is Protocol.WRITE_THEN_CHECK:
            fits = keeps_reservation(token_view, limit)
            rule_text = f"token view {token_view} <= token cap {limit}"
        else:
            fits = admits_tokens(self.token_rule, token_view, weight, limit)
            rule_text = (
                f"token view {token_view} < token cap {limit}"
                if self.token_rule is TokenRule.GE
                else f"token view {token_view} + tokens {weight} <= token cap {limit}"
            )
        if admitted and not fits:
            self.flag(line, "ORC-TR-15", f"admitted although not {rule_text}", event)
        if not admitted and fits:
            self.flag(line, "ORC-TR-15", f"rejected although {rule_text}", event)
        own = self.server(event.server).own_tokens
        reserves = self.mode is Protocol.WRITE_THEN_CHECK
        floor = own + weight if reserves else own
        if token_view < floor or (self.mode is Protocol.LOCAL and token_view != own):
            self.flag(
                line,
                "ORC-TR-15",
                f"token view {token_view} cannot have been read: the server's own queued "
                f"tokens are {own}"
                + (f" plus its reservation {weight}" if weight and reserves else ""),
                event,
            )

    def prefill(self, line: int, event: AdmissionEvent) -> None:
        """ORC-TR-14: a prefill_done ends the prefill of one internal request in flight."""
        state = self.server(event.server)
        target = event.request_id
        record = state.live.get(target)
        child = state.live_child(target)
        if record is not None and record.n == 1:
            parent, k = target, 0
        elif child is not None:
            parent, k = child
        else:
            history = (
                "a request of n > 1, not an internal request"
                if record is not None
                else ("already ended" if state.was_ended(target) else "unknown")
            )
            self.flag(
                line,
                "ORC-TR-14",
                f"prefill_done of {target!r}, which is {history} on server {event.server}",
                event,
            )
            return
        live = state.live[parent]
        leaving = 0 if k in live.prefilled else live.tokens
        if event.tokens is not None and event.tokens != leaving:
            self.flag(
                line,
                "ORC-TR-14",
                f"prefill_done of {target!r} takes out {event.tokens} tokens, but it "
                f"holds {leaving}",
                event,
            )
        if k not in live.prefilled:
            live.prefilled.add(k)
            live.queued -= 1
            self.tokens_leave(event, state, leaving)

    def decide(self, line: int, event: AdmissionEvent, *, admitted: bool) -> None:
        """ORC-TR-2, ORC-TR-3, ORC-TR-7: the decision fits the view; the view fits the server."""
        view = event.view
        if view is None:
            return  # no request limit was read (e.g. a token-limit rejection): nothing to judge
        n, cap = event.n, self.cap
        own = self.server(event.server).own
        if self.mode is Protocol.WRITE_THEN_CHECK:
            fits, rule_text = view <= cap, f"view {view} <= cap {cap}"
        else:
            fits, rule_text = view + n <= cap, f"view {view} + n {n} <= cap {cap}"
        if admitted and not fits:
            self.flag(line, "ORC-TR-2", f"admitted although not {rule_text}", event)
        if not admitted and fits:
            self.flag(line, "ORC-TR-3", f"rejected although {rule_text}", event)
        if self.mode is Protocol.LOCAL and view != own:
            self.flag(
                line,
                "ORC-TR-7",
                f"view {view} is not the server's own in-flight count {own} (local mode)",
                event,
            )
        elif self.mode is Protocol.WRITE_THEN_CHECK and view < own + n:
            self.flag(
                line,
                "ORC-TR-7",
                f"view {view} is below the server's own in-flight count {own} plus its "
                f"reservation {n}",
                event,
            )
        elif self.mode in (Protocol.CHECK_THEN_WRITE, Protocol.LOCKED) and view < own:
            self.flag(
                line,
                "ORC-TR-7",
                f"view {view} is below the server's own in-flight count {own}",
                event,
            )

    def admit(self, line: int, event: AdmissionEvent) -> None:
        """ORC-TR-2, ORC-TR-4, ORC-TR-8: a legal admission of a request not in flight."""
        self.decide(line, event, admitted=True)
        self.decide_tokens(line, event, admitted=True)
        if event.n > self.max_n:
            self.flag(
                line,
                "ORC-TR-8",
                f"admitted n={event.n} > max_n={self.max_n}: the bound assumes W={self.max_n}",
                event,
            )
        state = self.server(event.server)
        request_id = event.request_id
        # The ids this admission would register: the request itself, and `k_<id>` for k < n.
        taken: list[str] = []
        if request_id in state.live or state.live_child(request_id) is not None:
            taken.append(request_id)
        if event.n > 1:
            smallest = state.smallest_prefixed(request_id)
            if smallest is not None and smallest < event.n:
                taken.append(child_request_id(request_id, smallest))
        if taken:
            self.flag(
                line,
                "ORC-TR-4",
                f"admitted {request_id!r} while {sorted(set(taken))} still in flight "
                f"on server {event.server}",
                event,
            )
            return
        tokens = event.tokens or 0
        state.live[request_id] = _Live(event.n, tokens=tokens, queued=event.n)
        if tokens:
            weight = event.n * tokens
            self.max_request_tokens = max(self.max_request_tokens, weight)
            state.own_tokens += weight
            self.token_points.append((event.t, 0, weight))
            self.admitted_token_points.append((event.t, 1, weight))
        state.ended.pop(request_id, None)
        split = _split_child(request_id)
        if split is not None:
            heapq.heappush(state.prefixed.setdefault(split[1], []), split[0])
        state.own += event.n

    def depart(self, line: int, event: AdmissionEvent) -> None:
        """ORC-TR-4: a finish or abort ends requests in flight on that server, n of them."""
        state = self.server(event.server)
        target = event.request_id
        record = state.live.get(target)
        child = state.live_child(target)
        parent: str
        if record is not None and record.n == 1:
            parent, count = target, 1
        elif child is not None:
            parent, count = child[0], 1
        elif record is not None:
            parent, count = target, record.remaining
        else:
            history = "already ended" if state.was_ended(target) else "unknown"
            self.flag(
                line,
                "ORC-TR-4",
                f"{event.event} of {target!r}, which is {history} on server {event.server}",
                event,
            )
            return
        if event.n != count:
            self.flag(
                line,
                "ORC-TR-4",
                f"{event.event} of {target!r} gives back n={event.n}, but it ends "
                f"{count} internal request(s) in flight",
                event,
            )
        live = state.live[parent]
        if child is not None:
            live.ended.add(child[1])  # one child of a request with n > 1
            if child[1] not in live.prefilled:
                live.queued -= 1
                self.tokens_leave(event, state, live.tokens)
        else:  # the request itself, or every child still in flight
            self.tokens_leave(event, state, live.queued * live.tokens)
            live.queued = 0
        if child is None or live.remaining == 0:
            state.ended[parent] = state.live.pop(parent).n  # the whole request is over
        state.own -= count


def in_flight_requests(events: Iterable[AdmissionEvent], server: int) -> dict[str, int]:
    """The requests of `server` still in flight after `events`, with the slots each holds.

    What the parent gives back, as `abort` records, when it reclaims the
    slot of a server that died (E2E-SRV-7). Events of other servers are
    ignored; decisions are not judged here.
    """
    replay = _Replay(Protocol.CHECK_THEN_WRITE, server + 1, 0, 1)
    for event in events:
        if event.server == server and event.event != "reject":
            replay.step(0, event)
    return {rid: live.remaining for rid, live in replay.server(server).live.items()}


def check_admission_trace(
    events: Iterable[AdmissionEvent] | str | os.PathLike[str],
    num_servers: int,
    max_num_queued_reqs: int,
    max_n: int = 1,
    *,
    mode: Protocol | str = Protocol.CHECK_THEN_WRITE,
    line_numbers: Sequence[int] | None = None,
    files: Sequence[str] | None = None,
    max_num_queued_tokens: int | None = None,
    token_rule: str = "ge",
) -> TraceReport:
    """Replay a recorded admission trace and report what the semantics forbid.

    ORC-TR-1: reports the largest global in-flight count, the bound of the
    mode and whether it holds; every forbidden decision is a `Violation`
    (ORC-TR-2 to ORC-TR-8), in trace order. `events` is a sequence of
    `AdmissionEvent` or the path of a JSON Lines trace (read strictly,
    ORC-TR-9), or of a folder of per-server files (ORC-TR-13).
    `line_numbers` gives the line of each event for the report (default: its
    1-based position), `files` the file of each (a folder's events).
    `mode` is a protocol, by its name in `MODES` (ORC-TR-10; the deprecated
    `shared` and `reserve` still spell check-then-write and write-then-check).
    With `max_num_queued_tokens` the token limit is checked too: its measure
    against its bound (ORC-TR-14) and every token decision (ORC-TR-15), under
    `token_rule` (`ge`, `fits`).

    >>> from queueref.trace.events import AdmissionEvent
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
    try:
        chosen = parse_protocol(mode)
    except ValueError as error:
        raise ValueError(f"ORC-TR-10: mode: {error}") from None
    if not is_int_at_least(num_servers, 1):
        raise ValueError(f"ORC-TR-10: num_servers must be an int >= 1, got {num_servers!r}")
    if not is_int_at_least(max_num_queued_reqs, 0):
        raise ValueError(
            f"ORC-TR-10: max_num_queued_reqs must be an int >= 0, got {max_num_queued_reqs!r}"
        )
    if not is_int_at_least(max_n, 1):
        raise ValueError(f"ORC-TR-10: max_n must be an int >= 1, got {max_n!r}")
    if max_num_queued_tokens is not None and not is_int_at_least(max_num_queued_tokens, 0):
        raise ValueError(
            "ORC-TR-14: max_num_queued_tokens must be None or an int >= 0, "
            f"got {max_num_queued_tokens!r}"
        )
    if token_rule not in TOKEN_RULES:
        raise ValueError(f"ORC-TR-14: token_rule must be one of {TOKEN_RULES}, got {token_rule!r}")
    sources: list[str] | None = list(files) if files is not None else None
    if isinstance(events, (str, Path, os.PathLike)) and os.path.isdir(events):
        folder = read_trace_folder(events, num_servers)
        trace, numbers, sources = folder.events, folder.numbers, folder.files
    elif isinstance(events, (str, Path, os.PathLike)):
        trace, numbers = read_trace(events)
    else:
        trace = list(events)
        numbers = list(line_numbers) if line_numbers is not None else []
    if not numbers:
        numbers = list(range(1, len(trace) + 1))
    if len(numbers) != len(trace):
        raise ValueError("ORC-TR-1: line_numbers must give one line per event")
    if sources is not None and len(sources) != len(trace):
        raise ValueError("ORC-TR-1: files must give one file per event")
    replay = _Replay(
        chosen, num_servers, max_num_queued_reqs, max_n, max_num_queued_tokens, token_rule
    )
    for position, (number, event) in enumerate(zip(numbers, trace, strict=True)):
        replay.file = sources[position] if sources is not None else None
        replay.position = position
        if not isinstance(event, AdmissionEvent):
            raise TypeError(f"ORC-TR-1: event {number} is not an AdmissionEvent: {event!r}")
        replay.step(number, event)
    measure = "max_in_flight"
    if chosen in (Protocol.WRITE_THEN_CHECK, Protocol.LOCKED):
        missing = [
            (position, number, event)
            for position, (number, event) in enumerate(zip(numbers, trace, strict=True))
            if event.event in ("finish", "abort") and event.t_before is None
        ]
        for position, number, event in missing:
            replay.file = sources[position] if sources is not None else None
            replay.position = position
            replay.flag(
                number,
                "ORC-TR-10",
                f"{chosen.value} mode measures with t_before (ADM-EV-5), "
                f"but this {event.event} has none",
                event,
            )
        if not missing:
            measure = "max_admitted_in_flight"
    largest = max_admitted_in_flight(trace) if measure != "max_in_flight" else max_in_flight(trace)
    bound = trace_bound(chosen, num_servers, max_num_queued_reqs, max_n)
    counts = {kind: sum(1 for event in trace if event.event == kind) for kind in _KINDS}
    prefills = sum(1 for event in trace if event.event == "prefill_done")
    if prefills:
        counts["prefill_done"] = prefills
    max_queued_tokens: int | None = None
    bound_of_tokens: int | None = None
    if max_num_queued_tokens is not None:
        # ORC-TR-14: the same measure as the requests', over the token deltas of the replay.
        points = replay.token_points if measure == "max_in_flight" else replay.admitted_token_points
        max_queued_tokens = sweep(points)
        bound_of_tokens = trace_token_bound(
            chosen, token_rule, num_servers, max_num_queued_tokens, replay.max_request_tokens
        )
    # ORC-TR-1: in trace order (a folder's merged order, not file by file); the ORC-TR-10
    # ones, flagged after the replay, go back to their event's place (a stable sort).
    order = sorted(range(len(replay.violations)), key=replay.positions.__getitem__)
    violations = [replay.violations[i] for i in order]
    return TraceReport(
        mode=chosen.value,
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
        still_in_flight=replay.still_in_flight,
        max_num_queued_tokens=max_num_queued_tokens,
        token_rule=token_rule,
        max_request_tokens=replay.max_request_tokens,
        max_queued_tokens=max_queued_tokens,
        token_bound=bound_of_tokens,
    )
