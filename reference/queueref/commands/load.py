"""`queueref load`: drive a URL with N concurrent keep-alive clients for a duration.

Uses `hey` when it is installed (or `--client hey`), otherwise the built-in
asyncio HTTP/1.1 client of `queueref.loadgen`; prints requests sent, the
200/503 counts, throughput and latency percentiles (E2E-LOAD-1). An
unreachable URL is one line on stderr and exit code 1 (E2E-CLI-1).
"""

from __future__ import annotations

import argparse
import sys

from queueref.loadgen import LoadError, parse_duration, run_load

HELP = "load an HTTP endpoint with N concurrent clients (hey if installed, else built-in)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default="http://127.0.0.1:8000/v1/completions",
        help="the completion URL (default http://127.0.0.1:8000/v1/completions)",
    )
    parser.add_argument("--concurrency", "-c", type=int, default=80, help="clients (80)")
    parser.add_argument("--duration", "-z", default="10s", help="how long, e.g. 10s, 500ms (10s)")
    parser.add_argument(
        "--client",
        choices=("auto", "hey", "builtin"),
        default="auto",
        help="auto: hey when installed, else the built-in asyncio client",
    )


def run(args: argparse.Namespace) -> int:
    """E2E-LOAD-1, E2E-CLI-1: print the report, or one line and exit 1."""
    try:
        duration = parse_duration(args.duration)
        report = run_load(args.url, args.concurrency, duration, args.client)
    except (LoadError, ValueError) as error:
        print(f"queueref load: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("queueref load: interrupted", file=sys.stderr)
        return 130
    print(report.summary())
    return 0
