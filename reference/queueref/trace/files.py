"""Reading admission traces: one JSON Lines file, or a folder of per-server files.

A trace is the sequence of `queueref.trace.events.AdmissionEvent` records that API
servers wrote, one JSON object a line. Reading is strict: every error is a
`TraceFormatError` that names the file, the line and the field, and quotes
at most a short piece of the bad value. `queueref.oracle.trace_check` judges
what is read here.

Models no single vLLM file: the event schema is queueref's (`queueref.trace.events`).
"""

from __future__ import annotations

import heapq
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from queueref.trace.events import AdmissionEvent

#: The keys of one event line (ADM-EV-2): required, then optional.
REQUIRED_KEYS: Final = ("t", "server", "event", "request_id", "n")
OPTIONAL_KEYS: Final = ("view", "t_before", "tokens", "token_view")


class TraceFormatError(ValueError):  # ORC-TR-9
    """A line of a recorded trace breaks the event schema.

    `line` is the 1-based line number (0 when the problem is the file or the
    folder itself), `field` the offending field (or None when the line is not
    a JSON object at all).
    """

    def __init__(self, path: str, line: int, field: str | None, problem: str) -> None:
        where = f"{path}:{line}" if line else path  # line 0: about the file, not a line
        what = f"field {field!r}: " if field is not None else ""
        super().__init__(f"{where}: {what}{problem}")
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem


# Public as `queueref.oracle.TraceFormatError` too: say so in reprs.
TraceFormatError.__module__ = "queueref.oracle"


_REQUIREMENT = re.compile(r"[A-Z]+(?:-[A-Z0-9]+)+")
_FIELD_IN_MESSAGE = re.compile(
    r"\b(t_before|token_view|tokens|t|server|event|request_id|n|view)\b must"
)

#: The longest line read (ORC-TR-12): a longer one is malformed, so memory stays bounded.
MAX_LINE_CHARS: Final = 1 << 20

#: How much of a bad value an error message quotes (ORC-TR-9: one short line).
_MAX_PROBLEM_CHARS: Final = 200

#: One trace file per server in a trace folder (E2E-TRACE-1): `server-<index>.jsonl`.
_TRACE_FILE = re.compile(r"server-(0|[1-9][0-9]{0,6})\.jsonl")


def trace_file(folder: str | os.PathLike[str], index: int) -> Path:
    """The trace file of server `index` in a trace folder."""
    # E2E-TRACE-1: one trace file per server, `server-<index>.jsonl`.
    return Path(folder) / f"server-{index}.jsonl"


def _field_of(message: str) -> str | None:
    match = _FIELD_IN_MESSAGE.search(message)
    return match.group(1) if match else None


def _short(problem: str) -> str:
    problem = " ".join(problem.split())  # one line, whatever the value held
    if len(problem) > _MAX_PROBLEM_CHARS:
        return problem[:_MAX_PROBLEM_CHARS] + "...(cut)"
    return problem


def parse_event_line(line: str, path: str, number: int) -> AdmissionEvent:
    """One line as an event, or `TraceFormatError` naming the line and the field."""
    # ORC-TR-9: strict reading; every error names the line and the field.
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, number, None, f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise TraceFormatError(path, number, None, "not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer longer than Python reads (int_max_str_digits)
        raise TraceFormatError(path, number, None, _short(f"not valid JSON ({exc})")) from None
    if not isinstance(record, dict):
        raise TraceFormatError(
            path, number, None, f"an event is a JSON object, got {type(record).__name__}"
        )
    for key in REQUIRED_KEYS:
        if key not in record:
            raise TraceFormatError(path, number, key, "missing")
    for key in record:
        if key not in REQUIRED_KEYS and key not in OPTIONAL_KEYS:
            raise TraceFormatError(path, number, _short(str(key)), "unknown field")
    try:
        return AdmissionEvent.from_json(line)
    except (ValueError, TypeError, RecursionError) as exc:
        message = str(exc)
        head, _, rest = message.partition(": ")
        problem = rest if _REQUIREMENT.fullmatch(head) else message  # drop the "ID: " prefix
        raise TraceFormatError(path, number, _field_of(message), _short(problem)) from None


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """(number, text) of every non-blank line; too long or not UTF-8 is a `TraceFormatError`."""
    with open(path, "rb") as stream:
        number = 0
        while True:
            raw = stream.readline(MAX_LINE_CHARS + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_CHARS:
                raise TraceFormatError(
                    path, number, None, f"line longer than {MAX_LINE_CHARS} bytes"
                )
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TraceFormatError(
                    path, number, None, f"not UTF-8 text ({exc.reason})"
                ) from None
            if text.strip():
                yield number, text


def read_trace(path: str | os.PathLike[str]) -> tuple[list[AdmissionEvent], list[int]]:
    """The events of a JSON Lines trace and the line number of each.

    Blank lines are skipped (as `read_jsonl` does). Time and memory grow with
    the number of lines, never with the values in them.

    :raises TraceFormatError: a line that breaks the schema (the first one)
    :raises OSError: the file cannot be read
    """
    # ORC-TR-9: strict reading, the first bad line raises; ORC-TR-12: cost grows with lines only.
    name = os.fspath(path)
    events: list[AdmissionEvent] = []
    numbers: list[int] = []
    for number, line in _lines(name):
        events.append(parse_event_line(line, name, number))
        numbers.append(number)
    return events, numbers


@dataclass(frozen=True)
class TraceFolder:
    """The merged events of a trace folder, with the file and line of each."""

    # ORC-TR-13: each event keeps its file and line, for the report.
    num_servers: int
    events: list[AdmissionEvent]
    numbers: list[int]
    files: list[str]


def read_trace_folder(
    folder: str | os.PathLike[str], num_servers: int | None = None
) -> TraceFolder:
    """The `server-<i>.jsonl` files of a folder, merged in order of `t`.

    The files must be `server-0.jsonl` .. `server-<N-1>.jsonl` with none
    missing (N is `num_servers` when given, else one more than the largest index), and
    every event of `server-<i>.jsonl` must be of server `i`. The merge keeps
    each file's own order, so time going backwards on one server is still
    seen.

    :raises TraceFormatError: a malformed line, a misplaced event, a stray or missing file
    :raises OSError: the folder cannot be read
    """
    # ORC-TR-13: the files of one folder, merged; ORC-TR-6: each file's own order is kept.
    name = os.fspath(folder)
    indices = sorted(
        int(match.group(1))
        for entry in os.listdir(name)
        if (match := _TRACE_FILE.fullmatch(entry)) is not None
    )
    if not indices:
        raise TraceFormatError(name, 0, None, "no server-<i>.jsonl trace file in this folder")
    count = indices[-1] + 1 if num_servers is None else num_servers
    for index in indices:
        if index >= count:
            raise TraceFormatError(
                str(trace_file(name, index)),
                0,
                "server",
                f"a trace file of server {index}, but there are {count} servers "
                f"(server-0.jsonl .. server-{count - 1}.jsonl)",
            )
    # With N given too: `serve --trace` makes every server's file before it starts, so a
    # missing one is a folder that is not what was asked for, never "a server said nothing".
    if indices != list(range(count)):
        missing = sorted(set(range(count)) - set(indices))
        raise TraceFormatError(
            name, 0, "server", f"the trace files of servers {missing} are missing"
        )
    per_file: list[list[tuple[AdmissionEvent, int, str]]] = []
    for index in indices:
        path = str(trace_file(name, index))
        events, numbers = read_trace(path)
        for event, number in zip(events, numbers, strict=True):
            if event.server != index:
                raise TraceFormatError(
                    path, number, "server", f"server {event.server} in the file of server {index}"
                )
        per_file.append([(e, n, path) for e, n in zip(events, numbers, strict=True)])
    merged = list(heapq.merge(*per_file, key=lambda item: item[0].t))
    return TraceFolder(
        count,
        [item[0] for item in merged],
        [item[1] for item in merged],
        [item[2] for item in merged],
    )
