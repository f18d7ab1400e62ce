"""`queueref experiment`: serve + load for every admission mode, and the table.

For `local`, `shared` and `reserve` in turn: start N real HTTP server
processes (`queueref.http_server`), drive them with the built-in client
(`queueref.loadgen`), stop them, and compute the exact maximum global
in-flight count from the servers' admit/finish records against the mode's
bound (E2E-EXP-1). `--plot FILE.png` draws global in-flight over time per
mode against the cap (needs matplotlib; skipped with a note otherwise).
"""

from __future__ import annotations

import argparse
import sys

from queueref.experiment import format_table, plot, run_experiment
from queueref.http_server import SERVE_MODES, PortInUseError
from queueref.loadgen import LoadError, parse_duration

HELP = "run serve + load for each admission mode and print max global in-flight vs the bound"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", type=int, default=4, help="N, API server processes (4)")
    parser.add_argument(
        "--cap",
        "--max-num-queued-reqs",
        dest="cap",
        type=int,
        default=10,
        help="M, max_num_queued_reqs (10)",
    )
    parser.add_argument("--concurrency", type=int, default=80, help="clients (80)")
    parser.add_argument("--duration", default="10s", help="load per mode, e.g. 5s (10s)")
    parser.add_argument(
        "--service-time-ms", type=float, default=200.0, help="simulated engine time (200)"
    )
    parser.add_argument(
        "--modes",
        default=",".join(SERVE_MODES),
        help="comma-separated modes to run (default local,shared,reserve)",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    parser.add_argument("--plot", metavar="FILE.png", default=None, help="draw in-flight vs time")
    parser.add_argument(
        "--trace-dir",
        default=None,
        help="keep each mode's per-server records in DIR/<mode>/server-<i>.jsonl",
    )


def _fail(message: str) -> int:
    print(f"queueref experiment: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """E2E-EXP-1, E2E-CLI-1: print the table; exit 1 when a bound is broken."""
    if args.servers < 1:
        return _fail(f"--servers must be >= 1, got {args.servers}")
    if args.cap < 0:
        return _fail(f"--cap must be >= 0, got {args.cap}")
    if args.concurrency < 1:
        return _fail(f"--concurrency must be >= 1, got {args.concurrency}")
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in SERVE_MODES]
    if unknown or not modes:
        return _fail(f"--modes must name some of {', '.join(SERVE_MODES)}, got {args.modes!r}")
    try:
        duration = parse_duration(args.duration)
        results = run_experiment(
            num_servers=args.servers,
            cap=args.cap,
            concurrency=args.concurrency,
            duration=duration,
            service_time_ms=args.service_time_ms,
            modes=modes,
            port=args.port,
            trace_dir=args.trace_dir,
        )
    except PortInUseError as error:
        return _fail(str(error.strerror))
    except (LoadError, ValueError, RuntimeError, TimeoutError, OSError) as error:
        return _fail(str(error))
    except KeyboardInterrupt:
        return _fail("interrupted")
    print(
        f"{args.servers} API servers, cap M={args.cap}, {args.concurrency} clients, "
        f"{duration:g} s per mode, service time {args.service_time_ms:g} ms"
    )
    print(format_table(results))
    for result in results:
        extra = []
        if result.trace.violations:
            extra.append(f"{len(result.trace.violations)} forbidden decision(s)")
        if result.admitted != result.departed:
            extra.append(f"{result.admitted - result.departed} admitted slot(s) never finished")
        if any(result.final_slots):
            extra.append(f"slots not back to 0: {result.final_slots}")
        if result.crashed:
            extra.append(f"crashed servers: {result.crashed}")
        if extra:
            print(f"{result.mode}: " + "; ".join(extra))
    if args.plot:
        if plot(results, args.plot):
            print(f"plot written to {args.plot}")
        else:
            print("matplotlib is not installed: no plot (pip install queueref[plot])")
    return 0 if all(r.max_in_flight <= r.bound and r.trace.ok for r in results) else 1
