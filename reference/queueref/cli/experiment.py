"""`queueref experiment`: serve + load for every admission mode, and the table.

For `local`, `check-then-write` and `write-then-check` in turn (`--modes`
takes the protocols by their names): start N real HTTP server
processes (`queueref.runtime.http.group`), drive them with the built-in client
(`queueref.runtime.loadgen`), stop them, and compute the exact maximum global
in-flight count from the servers' admit/finish records against the mode's
bound (E2E-EXP-1). `--plot FILE.png` draws global in-flight over time per
mode against each mode's bound (needs matplotlib; skipped with a note
otherwise); `--json` prints the rows as JSON (E2E-EXP-2). Output paths are
checked before any server starts; one progress line per mode goes to stderr
(E2E-CLI-4). `--render-ms` runs vLLM's whole admission path instead, one row per
preflight mode, with the wasted renders (E2E-REN-6, `queueref.runtime.experiment_render`).
"""

from __future__ import annotations

import argparse
import json
import sys

from queueref.admission.paths import AdmissionPath
from queueref.cli.args import (
    add_quiet,
    duration,
    exit_codes,
    finite_float,
    int_at_least,
    progress_line,
    protocol_list,
    protocol_names,
    show_progress,
)
from queueref.cli.serve import preflight_type, render_ms_type
from queueref.runtime.experiment import (
    TOKEN_REQUESTS,
    ModeResult,
    check_output_path,
    format_table,
    plot,
    run_experiment,
)
from queueref.runtime.experiment_nodes import NodesRow, format_rows, run_nodes_experiment
from queueref.runtime.experiment_render import (
    RenderRow,
    format_render_table,
    plot_names,
    run_render_experiment,
)
from queueref.runtime.http.group import TOKEN_RULES
from queueref.runtime.http.ports import PortInUseError
from queueref.runtime.http.render import PREFLIGHT_MODES
from queueref.runtime.http.worker import SERVE_PROTOCOLS
from queueref.runtime.loadgen import LoadError
from queueref.runtime.nodes_plot import NodesSeries, plot_nodes

HELP = "run serve + load for each admission mode and print max global in-flight vs the bound"

EXIT_CODES = exit_codes(
    "0  every mode stays within its bound and no recorded decision is forbidden",
    "1  a bound is broken or a recorded decision is forbidden",
    "2  bad usage, a port in use, an unwritable --plot or --trace-dir (one line on stderr)",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--servers", type=int_at_least(1), default=4, help="N, API server processes (4)"
    )
    parser.add_argument(
        "--cap",
        "--max-num-queued-reqs",
        dest="cap",
        type=int_at_least(0),
        default=10,
        help="M, max_num_queued_reqs (10)",
    )
    parser.add_argument("--concurrency", type=int_at_least(1), default=80, help="clients (80)")
    parser.add_argument(
        "--duration", type=duration, default=10.0, help="load per mode, e.g. 5s (10s)"
    )
    parser.add_argument(
        "--service-time-ms",
        type=finite_float(0.0),
        default=200.0,
        help="simulated engine time (200)",
    )
    parser.add_argument(
        "--modes",
        type=protocol_list(SERVE_PROTOCOLS),
        default=protocol_names(SERVE_PROTOCOLS),
        help="comma-separated protocols to run, of "
        f"{protocol_names(SERVE_PROTOCOLS)} (default: all)",
    )
    parser.add_argument(
        "--port", type=int_at_least(0, 65535), default=0, help="port (default 0: any free port)"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", default=None, help="draw in-flight vs time, e.g. build/x.png"
    )
    parser.add_argument(
        "--trace-dir",
        default=None,
        help="keep each mode's per-server records in DIR/<mode>/server-<i>.jsonl",
    )
    parser.add_argument(
        "--max-num-queued-tokens",
        dest="max_num_queued_tokens",
        type=int_at_least(0),
        default=None,
        help="Mt: a token-limit run -- the servers cap their queued prompt tokens, the clients "
        "send mixed prompts with n 1..4, and the table gives the max global queued tokens "
        "against their bound (default: no token limit)",
    )
    parser.add_argument(
        "--token-rule", choices=TOKEN_RULES, default="ge", help="ge (vLLM 0.30.0) or fits"
    )
    parser.add_argument(
        "--render-ms",
        type=render_ms_type,
        default=None,
        metavar="MS|LOW-HIGH",
        help="a render run (E2E-REN-6): every request renders for MS ms (or LOW-HIGH, "
        "uniform) between preflight and registration; one row per --preflight-modes, with "
        "the wasted renders (rendered, then refused), the 503 rate, the max global in "
        "flight against the path's bound and p50/p99 latency",
    )
    parser.add_argument(
        "--preflight-modes",
        type=_preflight_list,
        default=list(PREFLIGHT_MODES),
        metavar="MODES",
        help="with --render-ms: comma-separated, of "
        f"{','.join(p.value for p in PREFLIGHT_MODES)} (default: all)",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--nodes",
        type=int_at_least(1),
        default=None,
        help="K serve groups of --servers each, sharing one cap through --store (ADM-STORE-9)",
    )
    parser.add_argument(
        "--store",
        choices=["redis"],
        default=None,
        help="with --nodes: one real redis-server started for the run, per store protocol",
    )
    add_quiet(parser)


def _run_nodes(args: argparse.Namespace) -> int:
    """ADM-STORE-9: one row per store protocol; exit 1 when a bound is broken."""
    if args.store != "redis":
        return _fail("--nodes needs --store redis")
    series: list[NodesSeries] = []
    if args.plot is not None:
        try:
            check_output_path(args.plot)
        except OSError as error:
            return _fail(f"cannot write {args.plot}: {error.strerror or error}")

    def progress(row: NodesRow) -> None:
        progress_line(
            "experiment",
            f"{row.protocol}: max in flight {row.max_in_flight} (bound {row.bound}), "
            f"{row.ok} answered 200, {row.busy} answered 503",
        )

    try:
        rows = run_nodes_experiment(
            nodes=args.nodes,
            servers=args.servers,
            cap=args.cap,
            concurrency=args.concurrency,
            seconds=args.duration,
            service_time_ms=args.service_time_ms,
            progress=progress if show_progress(args) else None,
            on_series=series.append if args.plot is not None else None,
        )
    except (LoadError, ValueError, RuntimeError, TimeoutError, OSError) as error:
        return _fail(str(error))
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=1))
    else:
        print(
            f"{args.nodes} nodes of {args.servers} API servers, one Redis, cap M={args.cap}, "
            f"{args.concurrency} clients, {args.duration:g} s per protocol"
        )
        print(format_rows(rows))
    if args.plot is not None:  # ADM-STORE-11
        title = (
            f"{args.nodes} nodes x {args.servers} API servers through one Redis: "
            "the global count per store protocol"
        )
        if plot_nodes(series, args.cap, title, args.plot):
            print(f"plot written to {args.plot}", file=sys.stderr if args.json else sys.stdout)
        else:
            print("matplotlib is not installed: no plot (pip install queueref[plot])",
                  file=sys.stderr)  # fmt: skip
    return 0 if all(row.within_bound for row in rows) else 1


def _preflight_list(text: str) -> list[AdmissionPath]:
    """argparse type of --preflight-modes: names of `PREFLIGHT_MODES`, comma-separated."""
    return [preflight_type(name.strip()) for name in text.split(",")]


def _run_render(args: argparse.Namespace) -> int:
    """E2E-REN-6: one row per preflight mode; exit 1 when a bound or a record is broken."""
    if args.max_num_queued_tokens is not None:
        return _fail("--render-ms runs the request cap only: drop --max-num-queued-tokens")

    def progress(row: RenderRow) -> None:
        progress_line(
            "experiment",
            f"{row.path.value}: {row.wasted_renders} wasted renders, max in flight "
            f"{row.max_in_flight} (bound {row.bound}), {row.result.load.busy} answered 503",
        )

    try:
        rows = run_render_experiment(
            num_servers=args.servers,
            cap=args.cap,
            concurrency=args.concurrency,
            duration=args.duration,
            render=args.render_ms,
            paths=args.preflight_modes,
            service_time_ms=args.service_time_ms,
            port=args.port,
            trace_dir=args.trace_dir,
            progress=progress if show_progress(args) else None,
        )
    except PortInUseError as error:
        return _fail(str(error.strerror))
    except (LoadError, ValueError, RuntimeError, TimeoutError, OSError) as error:
        return _fail(str(error))
    except KeyboardInterrupt:
        return _fail("interrupted")
    results = [row.result for row in rows]
    plotted = plot(results, args.plot, plot_names(rows)) if args.plot else None
    if args.json:
        print(json.dumps([row.to_dict() for row in rows], indent=2))
    else:
        print(
            f"{args.servers} API servers, cap M={args.cap}, {args.concurrency} clients, "
            f"{args.duration:g} s per preflight mode, rendering {args.render_ms} ms, "
            f"service time {args.service_time_ms:g} ms"
        )
        print(format_render_table(rows))
        for row in rows:
            if _notes(row.result):
                print(f"{row.path.value}: " + "; ".join(_notes(row.result)))
        if plotted:
            print(f"plot written to {args.plot}")
        elif plotted is False:
            print("matplotlib is not installed: no plot (pip install queueref[plot])")
    return 0 if all(row.within_bound for row in rows) else 1


def _fail(message: str) -> int:
    print(f"queueref experiment: {message}", file=sys.stderr)
    return 2


def _notes(result: ModeResult) -> list[str]:
    extra = []
    if not result.trace.token_bound_holds:
        extra.append(f"queued tokens {result.max_queued_tokens} > bound {result.token_bound}")
    if result.trace.violations:
        extra.append(f"{len(result.trace.violations)} forbidden decision(s)")
    if result.admitted != result.departed:
        extra.append(f"{result.admitted - result.departed} admitted slot(s) never finished")
    if any(result.final_slots):
        extra.append(f"slots not back to 0: {result.final_slots}")
    if result.crashed:
        extra.append(f"crashed servers: {result.crashed}")
    return extra


def run(args: argparse.Namespace) -> int:
    """E2E-EXP-1, E2E-EXP-2, E2E-CLI-1: print the table; exit 1 when a bound is broken."""
    if args.nodes is not None or args.store is not None:
        return _run_nodes(args)
    modes = list(args.modes)
    first = args.preflight_modes[0] if args.render_ms is not None else modes[0]
    try:
        # E2E-EXP-2: every output path is checked before any server starts.
        if args.plot is not None:
            check_output_path(args.plot)
        if args.trace_dir is not None:
            check_output_path(f"{args.trace_dir}/{first.value}/server-0.jsonl")
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        return _fail(f"cannot write {where}{error.strerror or error}")
    if args.render_ms is not None:
        return _run_render(args)

    def progress(result: ModeResult) -> None:
        progress_line(
            "experiment",
            f"{result.mode}: max in flight {result.max_in_flight} (bound {result.bound}), "
            f"{result.load.ok} answered 200, {result.load.busy} answered 503",
        )

    try:
        results = run_experiment(
            num_servers=args.servers,
            cap=args.cap,
            concurrency=args.concurrency,
            duration=args.duration,
            service_time_ms=args.service_time_ms,
            modes=modes,
            port=args.port,
            trace_dir=args.trace_dir,
            progress=progress if show_progress(args) else None,
            max_num_queued_tokens=args.max_num_queued_tokens,
            token_rule=args.token_rule,
        )
    except PortInUseError as error:
        return _fail(str(error.strerror))
    except (LoadError, ValueError, RuntimeError, TimeoutError, OSError) as error:
        return _fail(str(error))
    except KeyboardInterrupt:
        return _fail("interrupted")
    plotted = plot(results, args.plot) if args.plot else None
    if args.json:
        print(json.dumps([result.to_dict() for result in results], indent=2))
    else:
        print(
            f"{args.servers} API servers, cap M={args.cap}, {args.concurrency} clients, "
            f"{args.duration:g} s per mode, service time {args.service_time_ms:g} ms"
            + (
                f", token cap Mt={args.max_num_queued_tokens} ({args.token_rule}), "
                f"requests (n, prompt tokens) {list(TOKEN_REQUESTS)}"
                if args.max_num_queued_tokens is not None
                else ""
            )
        )
        print(format_table(results))
        for result in results:
            if _notes(result):
                print(f"{result.mode}: " + "; ".join(_notes(result)))
        if plotted:
            print(f"plot written to {args.plot}")
        elif plotted is False:
            print("matplotlib is not installed: no plot (pip install queueref[plot])")
    return 0 if all(r.within_bound and r.trace.ok for r in results) else 1
