"""The replay of a recorded admission trace: each server's requests in flight, rebuilt.

`Replay` steps through the events in trace order, keeps per server what is in
flight (and its queued prompt tokens), and flags every recorded decision the
semantics forbid as a `Violation`. It keeps memory that grows with the
events, never with a request's `n`: the children of a request are never
listed.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field

from queueref.admission.protocol import Protocol, TokenRule, admits_tokens, keeps_reservation
from queueref.admission.tracker import child_request_id
from queueref.oracle.trace_preflight import PreflightRecords
from queueref.oracle.trace_report import Violation
from queueref.trace.events import PREFLIGHT_KINDS, AdmissionEvent


@dataclass
class _Live:
    """A request in flight on one server: its `n` and the children already ended.

    Children are never materialised: child `k` of a request `r` with `n > 1`
    is `f"{k}_{r}"`, alive while `k < n` and `k` is not in `ended`, so memory
    grows with the events, not with `n`.
    """

    # ORC-TR-12: O(events) memory; ADM-TRK-1: the children's ids.
    n: int
    ended: set[int] = field(default_factory=set)
    tokens: int = 0  # the prompt length p of each child (ADM-EV-6)
    prefilled: set[int] = field(default_factory=set)  # children whose prefill is done
    queued: int = 0  # children neither ended nor prefilled: they hold p tokens each

    @property
    def remaining(self) -> int:
        return self.n - len(self.ended)


_CHILD_ID = re.compile(r"(0|[1-9][0-9]{0,3999})_(.*)", re.DOTALL)


def split_child(request_id: str) -> tuple[int, str] | None:
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
        split = split_child(request_id)
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
        split = split_child(request_id)
        if split is None:
            return False
        k, parent = split
        record = self.live.get(parent)
        if record is not None:
            return record.n > 1 and k in record.ended
        return parent in self.ended and k < self.ended[parent] and self.ended[parent] > 1


class Replay:
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
        self.preflight = PreflightRecords()  # ORC-TR-19..21: serve --render-ms's records

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
        if event.event in PREFLIGHT_KINDS:
            if event.event != "release":  # a passing preflight: judged as a decision to admit
                self.decide(line, event, admitted=True)
            self.preflight.step(self, line, event)
        elif event.event == "admit":
            self.preflight.admit(self, line, event)
            self.admit(line, event)
        elif event.event == "reject":
            self.preflight.reject(event)
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
        """The token decision fits the recorded token view, and that view fits."""
        # ORC-TR-15
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
        """A prefill_done ends the prefill of one internal request in flight."""
        # ORC-TR-14
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
        """The decision fits the view; the view fits the server."""
        # ORC-TR-2, ORC-TR-3, ORC-TR-7
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
        """A legal admission of a request not in flight."""
        # ORC-TR-2, ORC-TR-4, ORC-TR-8
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
        split = split_child(request_id)
        if split is not None:
            heapq.heappush(state.prefixed.setdefault(split[1], []), split[0])
        state.own += event.n

    def depart(self, line: int, event: AdmissionEvent) -> None:
        """A finish or abort ends requests in flight on that server, n of them."""
        # ORC-TR-4
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
