"""`queueref check-trace FILE`: check a recorded admission trace (JSON Lines).

Exit status (ORC-TR-11): 0 when the bound holds and no recorded decision is
forbidden, 1 when something is forbidden or the bound is broken, 2 when the
file cannot be read or a line breaks the schema -- then one line on stderr
names the file, the line and the field, and there is no traceback (ORC-TR-9).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from queueref.oracle.errors import TraceFormatError
from queueref.oracle.trace_check import MODES, check_admission_trace, read_trace

HELP = "check a recorded admission trace (JSON Lines) against the bound and the decision rules"


def _positive(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the trace: one AdmissionEvent per line")
    parser.add_argument(
        "--cap",
        "--max-num-queued-reqs",
        dest="cap",
        type=_positive(0),
        required=True,
        help="M, the max_num_queued_reqs the servers ran with",
    )
    parser.add_argument(
        "--servers",
        type=_positive(1),
        default=None,
        help="N, the number of API servers (default: 1 + the largest server index in the trace)",
    )
    parser.add_argument(
        "--max-n",
        type=_positive(1),
        default=1,
        help="W, the largest n (parallel samples) a request may have (default 1)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="shared",
        help="the admission protocol the servers ran (default shared: check-then-write)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """ORC-TR-9, ORC-TR-11: report, and exit 0 / 1, or 2 with one line on stderr."""
    try:
        events, numbers = read_trace(args.file)
    except TraceFormatError as error:
        print(f"queueref check-trace: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"queueref check-trace: cannot read {args.file}: {error.strerror}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as error:
        print(f"queueref check-trace: {args.file} is not UTF-8 text: {error}", file=sys.stderr)
        return 2
    num_servers = args.servers
    if num_servers is None:
        num_servers = 1 + max((event.server for event in events), default=0)
    report = check_admission_trace(
        events,
        num_servers,
        args.cap,
        args.max_n,
        mode=args.mode,
        line_numbers=numbers,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(f"{args.file}: {report.summary()}")
    return 0 if report.ok else 1
