"""`queueref serve`: N real HTTP API server processes on one port, sharing one cap.

Each process is a uvicorn-served ASGI app with its own `RequestTracker` and
`AdmissionController` over the counter array the parent allocated
(`queueref.runtime.http.group`). `--trace DIR` gets one `server-<i>.jsonl` per
server, written as the run goes (E2E-TRACE-1). The parent supervises: a
server silent for `--worker-timeout` is killed, a dead one has its slot
reclaimed and is restarted (E2E-SRV-7). Ctrl-C or SIGTERM stops every process
and frees the port (E2E-SRV-4). Bad input is one line on stderr and exit 2,
before anything starts (E2E-CLI-1).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from queueref.admission.paths import AdmissionPath
from queueref.admission.protocol import Protocol
from queueref.cli.args import (
    add_protocol_argument,
    duration,
    exit_codes,
    finite_float,
    int_at_least,
)
from queueref.runtime.http.group import SUPERVISOR_LOG, TOKEN_RULES, HttpServers
from queueref.runtime.http.ports import PortInUseError, port_is_free
from queueref.runtime.http.releases import VLLM_RELEASES
from queueref.runtime.http.render import (
    MAX_RENDER_MS,
    PREFLIGHT_MODES,
    RENDER_FAULT,
    RenderConfig,
    RenderTime,
    parse_preflight,
    parse_render_ms,
)
from queueref.runtime.http.store import NodeStore
from queueref.runtime.http.worker import PREFILL_FRACTION, SERVE_PROTOCOLS
from queueref.runtime.store.redis_config import StoreFailurePolicy, StoreProtocol, allocate_node
from queueref.runtime.store.redis_scripts import StoreError
from queueref.trace.files import trace_file

#: The record files `serve --trace` writes, which --overwrite removes (E2E-TRACE-2).
RECORD_FILE = re.compile(r"server-[0-9]+\.jsonl")

HELP = "run N real HTTP API server processes sharing one max_num_queued_reqs"

EXIT_CODES = exit_codes(
    "0  stopped by Ctrl-C, SIGTERM or --duration",
    "1  every server process exited (and none was restarted)",
    "2  bad usage, the port in use, or the trace folder not writable (one line on stderr)",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--servers", type=int_at_least(1), default=4, help="N, API server processes (4)"
    )
    parser.add_argument(
        "--max-num-queued-reqs",
        "--max_num_queued_reqs",
        "--cap",
        dest="cap",
        type=int_at_least(0),
        default=10,
        help="M, the cap on unfinished requests (10)",
    )
    parser.add_argument(
        "--max-num-queued-tokens",
        "--max_num_queued_tokens",
        dest="max_num_queued_tokens",
        type=int_at_least(0),
        default=None,
        help="Mt, the cap on prompt tokens still in prefill (default: none); a request's "
        "tokens are n times its prompt length (prompt_token_ids, or the words of prompt)",
    )
    parser.add_argument(
        "--token-rule",
        choices=TOKEN_RULES,
        default="ge",
        help="ge: reject when the queued tokens are >= Mt (vLLM 0.30.0); fits: reject when "
        "they plus the request's would exceed Mt. Default ge.",
    )
    parser.add_argument(
        "--prefill-ms",
        type=finite_float(0.0),
        default=None,
        help="when a request's prefill is done and its tokens leave the count "
        f"(default {PREFILL_FRACTION:g} of --service-time-ms)",
    )
    add_protocol_argument(
        parser,
        "--admission",
        allowed=SERVE_PROTOCOLS,
        default=Protocol.CHECK_THEN_WRITE,
        help="local: each server caps itself (before the PR); check-then-write: vLLM "
        "0.30.0's shared counters; write-then-check: reserve first (exact cap)",
    )
    parser.add_argument(
        "--vllm-version",
        choices=VLLM_RELEASES,
        default=None,
        help="answer 503s and engine failures with this vLLM release's bodies and messages, "
        "and show /metrics as it does (default: queueref's wording)",
    )
    render = parser.add_argument_group(
        "vLLM's whole admission path (specs/preflight-reservations.md, E2E-REN-1, E2E-REN-2)",
        "a rendering time between the preflight check and the registration",
    )
    render.add_argument(
        "--render-ms",
        type=render_ms_type,
        default=None,
        metavar="MS|LOW-HIGH",
        help="each request renders for MS milliseconds, or a time drawn uniformly from "
        f"[LOW, HIGH] (e.g. 100, 50-200; at most {MAX_RENDER_MS:g}); a request with the "
        f"header x-queueref-fault: {RENDER_FAULT} fails its rendering (500). Default: no "
        "rendering, one check",
    )
    render.add_argument(
        "--preflight",
        type=preflight_type,
        default=PREFLIGHT_MODES[0],
        metavar="MODE",
        help="with --render-ms: two-check (vLLM 0.31.0-0.33.0: a check at preflight that "
        "writes nothing, a second at registration; the default), reserve-write-then-check "
        "(reserve n, then check; exact cap; runs over write-then-check counters, so "
        "--admission is set to it), reserve-check-then-write (check, then reserve n)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    parser.add_argument(
        "--port", type=int_at_least(0, 65535), default=8000, help="listen port (8000; 0 = any)"
    )
    parser.add_argument(
        "--service-time-ms",
        type=finite_float(0.0),
        default=200.0,
        help="how long the simulated engine holds a request (200, +-20%% jitter)",
    )
    parser.add_argument(
        "--trace",
        metavar="DIR",
        default=None,
        help="write each server's admit/reject/finish/abort records to DIR/server-<i>.jsonl "
        "as they happen, for `queueref check-trace DIR`; DIR must be new or empty",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="let --trace DIR hold files already: its old records (server-*.jsonl, "
        f"{SUPERVISOR_LOG}) are removed, other files kept",
    )
    parser.add_argument(
        "--duration",
        type=duration,
        default=None,
        help="stop after this long, e.g. 30s, 500ms (default: until Ctrl-C / SIGTERM)",
    )
    parser.add_argument(
        "--worker-timeout",
        type=duration,
        default=10.0,
        help="kill and restart a server whose event loop is silent this long (10s)",
    )
    parser.add_argument(
        "--restart",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="restart a server that crashed or hung (default on)",
    )
    store = parser.add_argument_group(
        "one cap across nodes (specs/multi-node.md)",
        "admit through a real Redis shared by every node of a deployment; --servers is "
        "then this node's server count",
    )
    store.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="redis://[user:password@]host:port/db (rediss:// for TLS); never printed",
    )
    store.add_argument(
        "--store-protocol",
        choices=[p.value for p in StoreProtocol],
        default=StoreProtocol.SLOTS.value,
        help="slots: one read per server; snapshot: one MGET; script: atomic (slots)",
    )
    store.add_argument("--deployment", default="queueref", help="key prefix (queueref)")
    store.add_argument("--node", default=None, help="this node's name (required with --store)")
    store.add_argument(
        "--store-servers",
        type=int_at_least(1),
        default=None,
        help="N: the deployment's servers on every node (required with --store)",
    )
    store.add_argument(
        "--lease", type=duration, default=3.0, help="heartbeat lease of a server (3s)"
    )
    store.add_argument(
        "--store-failure",
        choices=[p.value for p in StoreFailurePolicy],
        default=StoreFailurePolicy.CLOSED.value,
        help="when Redis fails: closed = 503, open = admit against floor(M / N) (closed)",
    )
    store.add_argument(
        "--store-sentinel",
        metavar="MASTER",
        default=None,
        help="--store names a Sentinel; follow the primary of MASTER through failovers",
    )
    store.add_argument(
        "--store-replicas",
        type=int_at_least(0),
        default=0,
        help="WAIT for this many replicas after every write; fewer is a failed write (0)",
    )


def render_ms_type(text: str) -> RenderTime:
    """argparse type of --render-ms (E2E-REN-1): one line naming the problem."""
    try:
        return parse_render_ms(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--render-ms ")) from None


def preflight_type(text: str) -> AdmissionPath:
    """argparse type of --preflight (E2E-REN-2)."""
    try:
        return parse_preflight(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--preflight ")) from None


def render_config(args: argparse.Namespace) -> RenderConfig | None:
    """E2E-REN-2: the render settings; a reservation by write-then-check sets --admission."""
    if args.render_ms is None:
        return None
    render = RenderConfig(args.render_ms, args.preflight)
    if args.admission is Protocol.CHECK_THEN_WRITE:
        args.admission = render.protocol  # the default follows the preflight mode
    return render


def _node_store(args: argparse.Namespace) -> NodeStore | None:
    """ADM-STORE-8: this node's place in the deployment, allocated in the store by name."""
    if args.store is None:
        return None
    if args.node is None or args.store_servers is None:
        raise ValueError("--store needs --node NAME and --store-servers N")
    if args.admission is not Protocol.CHECK_THEN_WRITE:
        raise ValueError(
            "--store runs check-then-write through the store: use --admission check-then-write"
        )
    base = allocate_node(
        args.store,
        args.deployment,
        args.node,
        args.servers,
        args.store_servers,
        sentinel_master=args.store_sentinel,
    )
    return NodeStore(
        args.store,
        args.deployment,
        args.node,
        base,
        args.store_servers,
        StoreProtocol(args.store_protocol),
        max(1, round(args.lease * 1000)),
        StoreFailurePolicy(args.store_failure),
        sentinel_master=args.store_sentinel,
        replicas=args.store_replicas,
    )


def _clear_trace_folder(args: argparse.Namespace, node: NodeStore | None) -> None:
    """E2E-TRACE-2: refuse a --trace folder that holds files, or clear its records with
    --overwrite; raises ValueError with the one line to print. With --store, other nodes
    share the folder: only this node's own files count."""
    folder = Path(args.trace)
    if not folder.is_dir():
        return  # a new folder, or a path the start-up check refuses with its own message
    if node is not None:
        own = {trace_file(folder, node.base + i).name for i in range(args.servers)}
        taken = sorted(p.name for p in folder.iterdir() if p.name in own)
    else:
        taken = sorted(p.name for p in folder.iterdir())
    if not taken:
        return
    if not args.overwrite:
        shown = ", ".join(taken[:3]) + (", ..." if len(taken) > 3 else "")
        raise ValueError(
            f"--trace {args.trace} is not empty ({len(taken)} entries: {shown}); "
            "pass --overwrite to replace its records, or name a new folder"
        )
    for name in taken:
        path = folder / name
        if path.is_file() and (name == SUPERVISOR_LOG or RECORD_FILE.fullmatch(name)):
            path.unlink()


def _fail(message: str) -> int:
    print(f"queueref serve: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """E2E-SRV-1, E2E-SRV-4, E2E-SRV-7, E2E-CLI-1: serve until stopped; one line per bad input."""
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        del signum, frame
        stop = True

    try:
        render = render_config(args)
        node = _node_store(args)
    except (ValueError, StoreError) as error:
        return _fail(str(error))
    try:
        if args.trace is not None:
            _clear_trace_folder(args, node)
    except ValueError as error:
        return _fail(str(error))
    except OSError as error:
        return _fail(f"cannot clear --trace {args.trace}: {error.strerror or error}")
    try:
        servers = HttpServers(
            args.servers,
            args.cap,
            args.admission,
            host=args.host,
            port=args.port,
            service_time_ms=args.service_time_ms,
            trace_dir=args.trace,
            worker_timeout=args.worker_timeout,
            restart=args.restart,
            store=node,
            max_num_queued_tokens=args.max_num_queued_tokens,
            token_rule=args.token_rule,
            prefill_ms=args.prefill_ms,
            vllm_version=args.vllm_version,
            render=render,
        )
    except ValueError as error:  # E2E-REN-2: a combination --render-ms does not run
        return _fail(str(error))
    # E2E-SRV-4: Ctrl-C (SIGINT, which the terminal also sends to every child) and SIGTERM
    # both stop the loop; `close` then stops, joins and reaps every process.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        try:
            servers.start()
        except PortInUseError as error:
            return _fail(str(error.strerror))
        except OSError as error:
            where = error.filename or f"{args.host}:{args.port}"
            return _fail(f"cannot use {where}: {error.strerror or error}")
        except (RuntimeError, TimeoutError) as error:
            return _fail(str(error))
        tokens = (
            f", token cap {args.max_num_queued_tokens} ({args.token_rule})"
            if args.max_num_queued_tokens is not None
            else ""
        )
        trace = f"; records in {args.trace}/server-<i>.jsonl" if args.trace else ""
        release = f", answering as vLLM {args.vllm_version}" if args.vllm_version else ""
        if render is not None:
            release += f", rendering {render.time} ms, preflight {render.path.value}"
        print(
            f"queueref serve: {args.servers} API server process(es), "
            f"admission {args.admission.value}, "
            f"cap {args.cap}{tokens}{release}, on http://{args.host}:{servers.port} "
            f"(POST /v1/completions, GET /metrics); pids {servers.pids()}{trace}; "
            "Ctrl-C to stop",
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
        for problem in servers.result.problems:
            print(f"queueref serve: {problem}", file=sys.stderr)
        if servers.started:
            free = port_is_free(args.host, servers.port)
            print(
                f"queueref serve: stopped; slots {servers.result.final_slots}; "
                f"port {servers.port} {'free' if free else 'STILL IN USE'}",
                flush=True,
            )
    return code
