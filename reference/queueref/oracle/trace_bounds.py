"""The bounds a recorded admission trace must respect, what they assume, where they bind.

`trace_bound` is the bound of each mode's in-flight measure and
`trace_token_bound` the bound of the queued tokens, both taken from the
protocol models (`queueref.admission.protocol`, `queueref.verify.tokens`) that
the proofs establish. `infer_max_n` reads W off a trace when none is given,
and `locate_peak` finds where the in-flight measure reaches its largest value
and which requests are in flight there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from queueref.admission.protocol import Protocol, TokenRule, parse_protocol
from queueref.admission.protocol import bound as protocol_bound
from queueref.oracle.trace_replay import split_child
from queueref.oracle.trace_report import InFlight, Peak
from queueref.trace.events import AdmissionEvent
from queueref.verify.tokens import token_bound

#: The modes `check_admission_trace` knows (ORC-TR-10).
MODES: Final = tuple(protocol.value for protocol in Protocol)

#: The token rules `check_admission_trace` knows (ORC-TR-14).
TOKEN_RULES: Final = ("ge", "fits")


def trace_bound(
    mode: Protocol | str, num_servers: int, max_num_queued_reqs: int, max_n: int
) -> int:
    """The bound of the mode's in-flight measure."""
    # ORC-TR-10: ADM-BOUND-1 for check-then-write, ADM-BOUND-2 for write-then-check.
    return protocol_bound(parse_protocol(mode), num_servers, max_num_queued_reqs, max_n)


def trace_token_bound(
    mode: Protocol | str,
    rule: str,
    num_servers: int,
    max_num_queued_tokens: int,
    max_request_tokens: int,
) -> int:
    """The bound of the queued tokens.

    check-then-write: the N-server bound of the rule; write-then-check:
    Mt; `locked`: one server's bound (the checks are serialised); `local`: N
    times one server's bound (each checks its own tokens).
    """
    # ORC-TR-14: OB-TOK-1 (ge), OB-TOK-2 (fits), OB-TOK-3 (write-then-check).
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


def infer_max_n(events: Sequence[AdmissionEvent]) -> int:
    """W as the trace shows it: the largest n admitted or requested (rejected), else 1."""
    # ORC-TR-16: a rejected request counts too, it was sent with that n.
    return max((event.n for event in events if event.event in ("admit", "reject")), default=1)


def _sweep_order(events: Sequence[AdmissionEvent], admitted: bool) -> list[tuple[float, int, int]]:
    """`(time, rank, position)` of each admission and departure, in the measure's sweep order.

    The order of `queueref.trace.events.max_in_flight` (admissions at `t` before
    departures at `t`) or, `admitted`, of `max_admitted_in_flight` (departures
    at `t_before` first); a stable sort keeps the trace order among ties.
    """
    points: list[tuple[float, int, int]] = []
    for position, event in enumerate(events):
        if event.event == "admit":
            points.append((event.t, 1 if admitted else 0, position))
        elif event.event in ("finish", "abort"):
            at = event.t_before if admitted and event.t_before is not None else event.t
            points.append((at, 0 if admitted else 1, position))
    points.sort(key=lambda point: (point[0], point[1]))
    return points


def locate_peak(
    events: Sequence[AdmissionEvent],
    numbers: Sequence[int],
    files: Sequence[str] | None,
    *,
    admitted: bool,
) -> Peak | None:
    """Where the measure first reaches its largest value, and what is in flight there.

    Two passes over the sweep (O(events log events) time, O(events) memory):
    the first finds the point, the second replays the admissions and
    departures up to it. A departure ends its request, or one child of it
    (`k_parent`); one that names nothing in flight ends nothing here (the
    replay reports it). None when the count never rises above 0.
    """
    # ORC-TR-17: the place of the peak and the requests in flight there.
    order = _sweep_order(events, admitted)
    level = best = 0
    best_at = -1
    for index, (_at, _rank, position) in enumerate(order):
        event = events[position]
        level += event.n if event.event == "admit" else -event.n
        if level > best:
            best, best_at = level, index
    if best_at < 0:
        return None
    # (server, request id) -> [slots still held, position of its admission]
    open_: dict[tuple[int, str], list[int]] = {}
    for _at, _rank, position in order[: best_at + 1]:
        event = events[position]
        key = (event.server, event.request_id)
        if event.event == "admit":
            held = open_.setdefault(key, [0, position])
            held[0] += event.n
            continue
        if key not in open_:
            child = split_child(event.request_id)  # `k_parent` (ADM-TRK-1)
            key = (event.server, child[1]) if child is not None else key
        held_or_none = open_.get(key)
        if held_or_none is not None:
            held_or_none[0] -= event.n
            if held_or_none[0] <= 0:
                del open_[key]
    in_flight = tuple(
        InFlight(
            server,
            request_id,
            slots,
            numbers[position],
            files[position] if files is not None else None,
        )
        for (server, request_id), (slots, position) in open_.items()
    )
    position = order[best_at][2]
    return Peak(
        best,
        events[position].t,
        numbers[position],
        events[position],
        in_flight,
        files[position] if files is not None else None,
    )
