"""`check_admission_trace`: replay a recorded admission trace against the semantics.

A trace is the sequence of `queueref.trace.events.AdmissionEvent` records that API
servers wrote (one JSON object a line, the schema of ADM-EV-1 / ADM-EV-2).
The checker reports the largest global in-flight count, the bound it must
respect, whether it does, and every recorded decision the semantics forbid
(ORC-TR-1 to ORC-TR-8; the preflight records of `serve --render-ms`: ORC-TR-19
to ORC-TR-21, `queueref.oracle.trace_preflight`). It reuses the schema, the parser and the sweeps of
`queueref.trace.events`; files are read by `queueref.trace.files`, strictly,
with errors that name the line and the field (ORC-TR-9).

Models no single vLLM file: it judges recordings of the admission path of
`AsyncLLM.check_admission` (`vllm/v1/engine/async_llm.py`) with the counters of
`vllm/v1/engine/admission_control.py`, as `specs/admission.md` states it.

Modes (ORC-TR-10): the protocol names of `queueref.admission.protocol.Protocol`:

| mode | protocol | admit iff | view must be | measure | bound |
|---|---|---|---|---|---|
| `check-then-write` | vLLM's | `view + n <= M` | `>= own` | max_in_flight | `M + (N-1)*min(M, W)` |
| `locked` | the same, locked | `view + n <= M` | `>= own` | max_admitted_in_flight | `M` |
| `write-then-check` | reserve first | `view <= M` | `>= own + n` | max_admitted_in_flight | `M` |
| `local` | own count only | `view + n <= M` | `== own` | max_in_flight | `N * M` |

`own` is the server's own in-flight count, rebuilt from its earlier events.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from queueref.admission.protocol import Protocol, parse_protocol
from queueref.oracle.trace_bounds import (
    TOKEN_RULES,
    infer_max_n,
    locate_peak,
    trace_bound,
    trace_token_bound,
)
from queueref.oracle.trace_replay import Replay
from queueref.oracle.trace_report import KINDS, TraceReport
from queueref.trace.events import AdmissionEvent, max_admitted_in_flight, max_in_flight, sweep
from queueref.trace.files import read_trace, read_trace_folder
from queueref.validators import is_int_at_least


def in_flight_requests(events: Iterable[AdmissionEvent], server: int) -> dict[str, int]:
    """The requests of `server` still in flight after `events`, with the slots each holds.

    What the parent gives back, as `abort` records, when it reclaims the
    slot of a server that died (E2E-SRV-7). Events of other servers are
    ignored; decisions are not judged here.
    """
    replay = Replay(Protocol.CHECK_THEN_WRITE, server + 1, 0, 1)
    for event in events:
        if event.server == server and event.event != "reject":
            replay.step(0, event)
    return {rid: live.remaining for rid, live in replay.server(server).live.items()}


def check_admission_trace(
    events: Iterable[AdmissionEvent] | str | os.PathLike[str],
    num_servers: int,
    max_num_queued_reqs: int,
    max_n: int | None = None,
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
    `max_n` is W, the largest `n` a request may have; without it W is read
    off the trace, the largest `n` admitted or rejected (ORC-TR-16), and the
    report says so (`max_n_inferred`). The report locates the peak of the
    count: its line, time and the requests in flight there (ORC-TR-17).
    `mode` is a protocol, by its name in `trace_bounds.MODES` (ORC-TR-10).
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
    >>> report.peak.line, report.peak.t, [r.request_id for r in report.peak.in_flight]
    (2, 1.1, ['a', 'b'])

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
    if max_n is not None and not is_int_at_least(max_n, 1):
        raise ValueError(f"ORC-TR-10: max_n must be None or an int >= 1, got {max_n!r}")
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
    for number, event in zip(numbers, trace, strict=True):
        if not isinstance(event, AdmissionEvent):
            raise TypeError(f"ORC-TR-1: event {number} is not an AdmissionEvent: {event!r}")
    # ORC-TR-16: W from the trace when none is given; a given W is checked by ORC-TR-8.
    inferred = max_n is None
    width = infer_max_n(trace) if max_n is None else max_n
    replay = Replay(
        chosen, num_servers, max_num_queued_reqs, width, max_num_queued_tokens, token_rule
    )
    for position, (number, event) in enumerate(zip(numbers, trace, strict=True)):
        replay.file = sources[position] if sources is not None else None
        replay.position = position
        replay.step(number, event)
    replay.preflight.finish(replay)  # ORC-TR-19, ORC-TR-20: judged at the end of the trace
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
    bound = trace_bound(chosen, num_servers, max_num_queued_reqs, width)
    peak = locate_peak(trace, numbers, sources, admitted=measure != "max_in_flight")
    counts = {kind: sum(1 for event in trace if event.event == kind) for kind in KINDS}
    prefills = sum(1 for event in trace if event.event == "prefill_done")
    if prefills:
        counts["prefill_done"] = prefills
    if replay.preflight.recorded:  # E2E-REN-5: only for a trace with preflight records
        for kind in ("preflight", "reserve", "release"):
            counts[kind] = sum(1 for event in trace if event.event == kind)
        counts["wasted_render"] = replay.preflight.wasted
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
        max_n=width,
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
        max_n_inferred=inferred,
        peak=peak,
    )
