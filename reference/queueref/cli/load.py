"""`queueref load`: drive a URL with N concurrent keep-alive clients for a duration.

Uses `hey` when it is installed (or `--client hey`), otherwise the built-in
asyncio HTTP/1.1 client of `queueref.runtime.loadgen`; prints requests sent, the
200/503 counts, throughput and latency percentiles (E2E-LOAD-1), or JSON
with `--json`, and the requests sent so far on stderr about once a second
(E2E-LOAD-2, E2E-CLI-4). An unreachable URL is one line on stderr and exit
code 1 (E2E-CLI-1).
"""

from __future__ import annotations

import argparse
import json
import sys

from queueref.cli.args import (
    add_quiet,
    duration,
    exit_codes,
    int_at_least,
    progress_line,
    show_progress,
)
from queueref.runtime.loadgen import LoadError, LoadReport, run_load

HELP = "load an HTTP endpoint with N concurrent clients (hey if installed, else built-in)"

EXIT_CODES = exit_codes(
    "0  the load ran (whatever the servers answered)",
    "1  the URL is wrong or cannot be reached, or hey failed (one line on stderr)",
    "2  bad usage (one line on stderr)",
    "130  interrupted",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default="http://127.0.0.1:8000/v1/completions",
        help="the completion URL (default http://127.0.0.1:8000/v1/completions)",
    )
    parser.add_argument(
        "--concurrency", "-c", type=int_at_least(1), default=80, help="clients (80)"
    )
    parser.add_argument(
        "--duration", "-z", type=duration, default=10.0, help="how long, e.g. 10s, 500ms (10s)"
    )
    parser.add_argument(
        "--client",
        choices=("auto", "hey", "builtin"),
        default="auto",
        help="auto: hey when installed, else the built-in asyncio client",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(parser)


def run(args: argparse.Namespace) -> int:
    """E2E-LOAD-1, E2E-LOAD-2, E2E-CLI-1: print the report, or one line and exit 1."""

    def progress(report: LoadReport, elapsed: float) -> None:
        progress_line(
            "load", f"{elapsed:.0f} s: {report.sent} requests sent, {report.completed} answered"
        )

    try:
        report = run_load(
            args.url,
            args.concurrency,
            args.duration,
            args.client,
            progress if show_progress(args) else None,
        )
    except (LoadError, ValueError) as error:
        print(f"queueref load: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("queueref load: interrupted", file=sys.stderr)
        return 130
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
    return 0
