"""`queueref serve`: N real HTTP API server processes on one port, sharing one cap.

Each process is a uvicorn-served ASGI app with its own `RequestTracker` and
`AdmissionController` over the counter array the parent allocated
(`queueref.http_server`). Ctrl-C or SIGTERM stops every process and frees the
port; a crashed server is reported and its slot reclaimed (E2E-SRV-4). Bad
input is one line on stderr and a non-zero exit (E2E-CLI-1).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from types import FrameType

from queueref.events import write_jsonl
from queueref.http_server import SERVE_MODES, HttpServers, PortInUseError, port_is_free

HELP = "run N real HTTP API server processes sharing one max_num_queued_reqs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", type=int, default=4, help="N, API server processes (4)")
    parser.add_argument(
        "--max-num-queued-reqs",
        "--max_num_queued_reqs",
        "--cap",
        dest="cap",
        type=int,
        default=10,
        help="M, the cap on unfinished requests (10)",
    )
    parser.add_argument(
        "--admission",
        choices=SERVE_MODES,
        default="shared",
        help="local: each server caps itself (before the PR); shared: check-then-write "
        "(vLLM 0.30.0); reserve: write-then-check (exact cap). Default shared.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="listen port (8000; 0 = any)")
    parser.add_argument(
        "--service-time-ms",
        type=float,
        default=200.0,
        help="how long the simulated engine holds a request (200, +-20%% jitter)",
    )
    parser.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="write every server's admit/reject/finish records, merged, to FILE (JSON Lines) "
        "for `queueref check-trace`",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: until Ctrl-C / SIGTERM)",
    )


def _fail(message: str) -> int:
    print(f"queueref serve: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """E2E-SRV-1, E2E-SRV-4, E2E-CLI-1: serve until stopped; one line per bad input."""
    if args.servers < 1:
        return _fail(f"--servers must be >= 1, got {args.servers}")
    if args.cap < 0:
        return _fail(f"--max-num-queued-reqs must be >= 0, got {args.cap}")
    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be in 0..65535, got {args.port}")
    if args.service_time_ms < 0:
        return _fail(f"--service-time-ms must be >= 0, got {args.service_time_ms}")
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        del frame
        stop = True

    # E2E-SRV-4: Ctrl-C (SIGINT, which the terminal also sends to every child) and SIGTERM
    # both stop the loop; `close` then stops, joins and reaps every process.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    trace_dir = None
    scratch = tempfile.TemporaryDirectory(prefix="queueref-serve-") if args.trace else None
    if scratch is not None:
        trace_dir = scratch.name
    servers = HttpServers(
        args.servers,
        args.cap,
        args.admission,
        host=args.host,
        port=args.port,
        service_time_ms=args.service_time_ms,
        trace_dir=trace_dir,
    )
    code = 0
    try:
        try:
            servers.start()
        except PortInUseError as error:
            return _fail(str(error.strerror))
        except OSError as error:
            return _fail(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}")
        except (RuntimeError, TimeoutError) as error:
            return _fail(str(error))
        pids = [p.pid for p in servers.group.processes]
        print(
            f"queueref serve: {args.servers} API server process(es), admission {args.admission}, "
            f"cap {args.cap}, on http://{args.host}:{servers.port} "
            f"(POST /v1/completions, GET /metrics); pids {pids}; Ctrl-C to stop",
            flush=True,
        )
        deadline = None if args.duration is None else time.monotonic() + args.duration
        try:
            while not stop and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.2)
                if stop:
                    break
                for line in servers.poll():
                    print(f"queueref serve: {line}", file=sys.stderr, flush=True)
                if servers.alive() == 0:
                    print("queueref serve: every server process has exited", file=sys.stderr)
                    code = 1
                    break
        except KeyboardInterrupt:
            pass
    finally:
        servers.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if servers.started:
            free = port_is_free(args.host, servers.port)
            print(
                f"queueref serve: stopped; slots {servers.result.final_slots}; "
                f"port {servers.port} {'free' if free else 'STILL IN USE'}",
                flush=True,
            )
        if args.trace and servers.started:
            count = write_jsonl(servers.result.events, args.trace)
            print(f"queueref serve: {count} records written to {args.trace}", flush=True)
        if scratch is not None:
            scratch.cleanup()
    return code
