"""`queueref check-trace PATH`: check a recorded admission trace (JSON Lines).

PATH is one trace file or a trace folder (`serve --trace DIR`: one
`server-<i>.jsonl` per server, ORC-TR-13). Exit status (ORC-TR-11): 0 when
the bound holds (and, with `--max-num-queued-tokens`, the token bound,
ORC-TR-14) and no recorded decision is forbidden, 1 when something is
forbidden or the bound is broken, 2 when the input cannot be read or a line
breaks the schema -- then one line on stderr names the file, the line and
the field, and there is no traceback (ORC-TR-9), or when the trace holds no
event and `--allow-empty` is not given (ORC-TR-18). Without `--max-n`, W is
the largest `n` in the trace (ORC-TR-16). A broken bound is located: the
line and time of the peak and the requests in flight there (ORC-TR-17).
Time and memory grow with the number of events only (ORC-TR-12).

`--mode` takes a protocol by its name; the report prints that name. A trace
file holds no protocol name: old traces read as they always did.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from queueref.admission.protocol import Protocol
from queueref.cli.args import add_protocol_argument, exit_codes, int_at_least
from queueref.oracle.trace_bounds import TOKEN_RULES
from queueref.oracle.trace_check import check_admission_trace
from queueref.trace.events import AdmissionEvent
from queueref.trace.files import TraceFormatError, read_trace, read_trace_folder

HELP = "check a recorded admission trace (a JSON Lines file or a serve --trace folder)"

EXIT_CODES = exit_codes(
    "0  the bound holds and no recorded decision is forbidden",
    "1  a forbidden decision, or the bound is broken",
    "2  bad usage, or the trace cannot be read, breaks the schema or is empty (one line on stderr)",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="PATH",
        help="the trace: a file of one AdmissionEvent per line, or a folder of "
        "server-<i>.jsonl files (serve --trace DIR)",
    )
    parser.add_argument(
        "--cap",
        "--max-num-queued-reqs",
        dest="cap",
        type=int_at_least(0),
        required=True,
        help="M, the max_num_queued_reqs the servers ran with",
    )
    parser.add_argument(
        "--servers",
        type=int_at_least(1),
        default=None,
        help="N, the number of API servers (default: the number of files of a folder, or "
        "1 + the largest server index of a file, whose indices must then be 0..N-1)",
    )
    parser.add_argument(
        "--max-n",
        type=int_at_least(1),
        default=None,
        help="W, the largest n (parallel samples) a request may have (default: the largest n "
        "admitted or rejected in the trace, and the report says W was inferred)",
    )
    add_protocol_argument(
        parser,
        "--mode",
        allowed=tuple(Protocol),
        default=Protocol.CHECK_THEN_WRITE,
        help="the admission protocol the servers ran",
    )
    parser.add_argument(
        "--max-num-queued-tokens",
        dest="max_num_queued_tokens",
        type=int_at_least(0),
        default=None,
        help="Mt, the token cap the servers ran with: also check the queued tokens against "
        "their bound and every token decision (default: no token check)",
    )
    parser.add_argument(
        "--token-rule",
        choices=TOKEN_RULES,
        default="ge",
        help="the token rule the servers ran (ge: vLLM 0.30.0, the default; fits)",
    )
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="accept a trace with no events (default: exit 2, nothing was recorded)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _servers_of_file(
    path: str, events: list[AdmissionEvent], numbers: list[int], num_servers: int | None
) -> int:
    """N for a single file: every index below it (ORC-TR-5), which a guess must not inflate."""
    if num_servers is not None:
        for event, number in zip(events, numbers, strict=True):
            if event.server >= num_servers:
                raise TraceFormatError(
                    path,
                    number,
                    "server",
                    f"server {event.server} is not below --servers {num_servers}",
                )
        return num_servers
    seen = {event.server for event in events}
    if not seen:
        return 1  # an empty trace: one server, nothing to judge
    largest = max(seen, default=0)
    if largest + 1 != len(seen):
        line = next(n for e, n in zip(events, numbers, strict=True) if e.server == largest)
        raise TraceFormatError(
            path,
            line,
            "server",
            f"server {largest}, but only {len(seen)} server indices occur in the trace: "
            "pass --servers N",
        )
    return largest + 1


def run(args: argparse.Namespace) -> int:
    """ORC-TR-9, ORC-TR-11, ORC-TR-13, ORC-TR-18: report; exit 0 / 1, or 2 with one line."""
    path = args.file
    files: list[str] | None = None
    try:
        if os.path.isdir(path):
            folder = read_trace_folder(path, args.servers)
            events, numbers, files = folder.events, folder.numbers, folder.files
            num_servers = folder.num_servers
        else:
            events, numbers = read_trace(path)
            num_servers = _servers_of_file(path, events, numbers, args.servers)
    except TraceFormatError as error:
        print(f"queueref check-trace: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(
            f"queueref check-trace: cannot read {path}: {error.strerror or error}",
            file=sys.stderr,
        )
        return 2
    if not events and not args.allow_empty:
        # ORC-TR-18: an empty recording is a recording that failed, not a clean run.
        print(
            f"queueref check-trace: {path}: the trace holds no events, nothing to check "
            "(pass --allow-empty to accept it)",
            file=sys.stderr,
        )
        return 2
    report = check_admission_trace(
        events,
        num_servers,
        args.cap,
        args.max_n,
        mode=args.mode,
        line_numbers=numbers,
        files=files,
        max_num_queued_tokens=args.max_num_queued_tokens,
        token_rule=args.token_rule,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(f"{path}: {report.summary()}")
    return 0 if report.ok else 1
