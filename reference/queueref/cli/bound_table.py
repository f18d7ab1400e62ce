"""`queueref bound-table`: the exact worst case of the admission protocols, by exhaustive search.

For every N (servers), M (cap, `max_num_queued_reqs`) and W (largest request weight n)
in the given inclusive ranges, enumerates every interleaving of the servers' steps
(`queueref.verify.search`) and prints the worst global count next to the bound:

* check-then-write (vLLM 0.30.0's protocol, the default): `worst_total` is the largest global
  unfinished count, `bound` is M + (N-1)*min(M, W) -- the two are equal;
* write-then-check (queueref's addition): `worst_total` is the largest admitted
  count, `bound` is M; `worst_slot_total` counts reservations in progress too,
  and `spurious_rejection` is the largest free capacity M - A at which a request that fits
  can be rejected under contention (null when it never happens).

`--limit tokens` searches the shared token limit instead (`queueref.verify.tokens`): the
cap is Mt (`max_num_queued_tokens`), the weight is P (the most tokens one admission
adds), `--rule ge` (vLLM 0.30.0's `>=` rejects, the default) or `fits`; the rows have the
same keys, `worst_total` being the worst global queued tokens. `--limit
both` sets both limits (`--token-cap`, `--prompt` for the token side): `worst_total` and
`bound` are the request count's, `worst_tokens` and `token_bound` the tokens'.
`--limit leases` searches check-then-write with lease lapses (`queueref.cli.bound_table_leases`,
`--lapses A-B`): `worst_total` is the worst real total minus what the lapses dropped, `bound`
M + (N-1)*min(M, W).
`--path P` searches one of vLLM's admission paths or a reservation at preflight instead
(`queueref.cli.bound_table_paths`: two-check, two-check-await-gap,
reserve-write-then-check, reserve-check-then-write; `--requests-per-server K`), each row
with `wasted_renders` and `spurious_rejection`.
`--engine spin` has Spin search check-then-write (the compact encoding's Promela text,
`queueref.verify.promela`): the same rows, `engine` and `encoding` added.
`--json` prints a JSON list of rows; `--witness` adds the interleaving that reaches
`worst_total` (and, for write-then-check, the one that shows the spurious rejection).

Exit status: 0 when every row is within its bound, 1 when one is not, 2 on bad arguments
(one line on stderr, no traceback) or when a search would exceed `--max-states`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence

from queueref.admission.protocol import parse_protocol
from queueref.cli import bound_table_leases as leases
from queueref.cli import bound_table_paths as paths
from queueref.cli.args import add_protocol_argument, add_quiet, progress_line, show_progress
from queueref.verify.admission_models import (
    CHECK_THEN_WRITE,
    PROTOCOLS,
    WRITE_THEN_CHECK,
    StateLimitExceeded,
    Step,
)
from queueref.verify.search import (
    ENGINES,
    Exploration,
    explore,
    make_model,
    replay,
    worst_spurious_rejection,
)
from queueref.verify.tokens import explore_joint, explore_tokens

HELP = "exact worst-case global count of the admission protocols, by exhaustive search"

#: The smallest value each range accepts.
MINIMUM = {"servers": 1, "cap": 0, "weight": 1}


#: Without --force, a table may have at most this many rows ...
MAX_ROWS = 1000
#: ... and at most this many states in all, estimated as (M + W + 2)^N per row.
MAX_ESTIMATED_STATES = 10**8

EXIT_CODES = """exit status:
  0  every row is within its bound
  1  a row is over its bound
  2  bad usage, a range too large (see --force) or a search over --max-states"""


class UsageError(Exception):
    """A bad argument: reported as one line on stderr, exit status 2."""


def parse_range(text: str, name: str, minimum: int) -> range:
    """`A-B` (inclusive) or `A`, with minimum <= A <= B."""
    # OB-TABLE-2: a bad range is a usage error (exit 2, one line), never a traceback.
    parts = text.strip().split("-")
    try:
        if len(parts) == 1:
            low = high = int(parts[0])
        elif len(parts) == 2:
            low, high = int(parts[0]), int(parts[1])
        else:
            raise ValueError
    except ValueError:
        raise UsageError(f"--{name} {text!r}: expected A-B or A (integers)") from None
    if low < minimum:
        raise UsageError(f"--{name} {text!r}: values must be >= {minimum}")
    if high < low:
        raise UsageError(f"--{name} {text!r}: the range is empty ({high} < {low})")
    return range(low, high + 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", default="2-3", help="N: A-B or A, inclusive (default 2-3)")
    parser.add_argument("--cap", default="0-4", help="M: A-B or A, inclusive (default 0-4)")
    parser.add_argument("--weight", default="1-3", help="W: A-B or A, inclusive (default 1-3)")
    add_protocol_argument(
        parser,
        "--protocol",
        allowed=tuple(parse_protocol(name) for name in PROTOCOLS),
        default=parse_protocol(CHECK_THEN_WRITE),
        help="the protocol to explore",
    )
    parser.add_argument(
        "--limit",
        choices=["requests", "tokens", "both", "leases"],
        default="requests",
        help="which limit to search: max_num_queued_reqs (default), max_num_queued_tokens "
        "(--cap is Mt, --weight the largest prompt P), both (see --token-cap, --prompt), "
        "or the request limit with lease lapses (leases, see --lapses)",
    )
    parser.add_argument(
        "--rule", choices=["ge", "fits"], default="ge", help="the token rule (ge: vLLM 0.30.0's)"
    )
    parser.add_argument("--token-cap", default="1-2", help="with --limit both: Mt (1-2)")
    parser.add_argument("--prompt", default="1", help="with --limit both: prompt tokens P (1)")
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")
    parser.add_argument(
        "--witness", action="store_true", help="add the interleaving that reaches worst_total"
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="python",
        help="who searches: queueref's explorer (default) or Spin on the compact encoding "
        "(check-then-write, --limit requests, no --witness; Spin and a C compiler needed)",
    )
    parser.add_argument(
        "--max-states",
        default="5000000",
        help="stop (exit 2) rather than search more states than this per row (default 5e6)",
    )
    leases.add_arguments(parser)  # OB-LEASE-3: --lapses
    paths.add_arguments(parser)  # ADM-PRE-7: --path, --requests-per-server
    add_quiet(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"search even more than {MAX_ROWS} rows or about {MAX_ESTIMATED_STATES:.0e} states",
    )


def clamp_weights(weights: range, caps: range) -> range:
    """Weights above the largest cap admit nothing more than W = M does: clamp them."""
    # E2E-CLI-3: an absurd weight range is clamped, with a note.
    top = max(caps.stop - 1, 1)
    if weights.stop - 1 <= top:
        return weights
    clamped = range(min(weights.start, top), top + 1)
    print(
        f"queueref bound-table: note: weights above the largest cap M={top} admit nothing "
        f"a weight of M does not; using --weight {clamped.start}-{top}",
        file=sys.stderr,
    )
    return clamped


def check_size(servers: range, caps: range, weights: range) -> None:
    """Refuse a table too large to search: rows, or states estimated in log space."""
    # E2E-CLI-3: refused unless --force.
    rows = len(servers) * len(caps) * len(weights)
    if rows > MAX_ROWS:
        raise UsageError(f"{rows} rows is more than {MAX_ROWS}: narrow the ranges or pass --force")
    # log10 of the largest row's estimate (M + W + 2)^N, without computing the power.
    digits = (servers.stop - 1) * math.log10(caps.stop - 1 + weights.stop - 1 + 2)
    if digits > math.log10(MAX_ESTIMATED_STATES):
        raise UsageError(
            f"about 10^{digits:.0f} states for N={servers.stop - 1}, M={caps.stop - 1}, "
            f"W={weights.stop - 1}: narrow the ranges or pass --force"
        )


def witness_json(protocol: str, exploration: Exploration, steps: Sequence[Step]) -> list[object]:
    """The steps with the slots and the counted total after each one."""
    model = make_model(protocol, exploration.servers, exploration.cap, exploration.weight)
    states = replay(model, steps)
    out: list[object] = []
    for step, before, state in zip(steps, states, states[1:], strict=False):
        entry: dict[str, object] = dict(step.to_json())
        if step.action in ("read", "reject"):
            entry["value"] = model.slots(before)[step.arg]
        entry["slots"] = list(model.slots(state))
        entry["total"] = model.total(state)
        out.append(entry)
    return out


def _token_rows(args: argparse.Namespace, max_states: int) -> list[dict[str, object]]:
    """The token limit (or both limits), searched by `queueref.verify.tokens`."""
    # OB-TOK-1, OB-TOK-2, OB-TOK-3 (tokens), OB-TOK-4 (both): the rows of the exact search.
    protocol = str(args.protocol)
    servers = parse_range(str(args.servers), "servers", MINIMUM["servers"])
    caps = parse_range(str(args.cap), "cap", MINIMUM["cap"])
    weights = parse_range(
        str(args.weight), "weight", MINIMUM["weight"]
    )  # no clamp: ge admits P > Mt
    if not args.force:
        check_size(servers, caps, weights)
    rows: list[dict[str, object]] = []
    for n in servers:
        for m in caps:
            for w in weights:
                started = time.monotonic()
                try:
                    if args.limit == "tokens":
                        found = explore_tokens(n, m, w, args.rule, protocol, max_states)
                        row: dict[str, object] = {
                            "protocol": protocol, "limit": "tokens", "rule": args.rule,
                            "servers": n, "cap": m, "weight": w,
                            "worst_total": found.worst_tokens, "bound": found.bound,
                            "states": found.states,
                        }  # fmt: skip
                    else:
                        if protocol != CHECK_THEN_WRITE or args.rule != "ge":
                            raise UsageError(
                                "--limit both searches check-then-write with --rule ge"
                            )
                        for mt in parse_range(str(args.token_cap), "token-cap", 0):
                            for p in parse_range(str(args.prompt), "prompt", 1):
                                joint = explore_joint(n, m, w, mt, p, max_states)
                                _progress(args, f"N={n} M={m} W={w} Mt={mt} P={p}",
                                          joint.states, time.monotonic() - started)  # fmt: skip
                                rows.append({
                                    "protocol": protocol, "limit": "both", "rule": "ge",
                                    "servers": n, "cap": m, "weight": w,
                                    "token_cap": mt, "prompt": p,
                                    "worst_total": joint.worst_requests,
                                    "bound": joint.request_bound,
                                    "worst_tokens": joint.worst_tokens,
                                    "token_bound": joint.token_bound,
                                    "states": joint.states,
                                    "seconds": round(time.monotonic() - started, 3),
                                })  # fmt: skip
                        continue
                except ValueError as error:
                    raise UsageError(str(error)) from None
                row["seconds"] = round(time.monotonic() - started, 3)
                _progress(args, f"N={n} Mt={m} P={w}", found.states, time.monotonic() - started)
                rows.append(row)
    return rows


def _progress(args: argparse.Namespace, instance: str, states: int, seconds: float) -> None:
    """The states searched and the rate of one row, on stderr (not with --quiet)."""
    if show_progress(args):  # E2E-CLI-4: long runs show progress
        progress_line(
            "bound-table",
            f"{instance}: {states} states in {seconds:.2f} s "
            f"({states / max(seconds, 1e-9):,.0f} states/s)",
        )


def _rows(args: argparse.Namespace) -> list[dict[str, object]]:
    protocol = str(args.protocol)
    if protocol not in PROTOCOLS:
        raise UsageError(f"--protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    if args.engine == "spin" and (
        args.limit != "requests" or protocol != CHECK_THEN_WRITE or args.witness
    ):
        raise UsageError(
            "--engine spin searches check-then-write with --limit requests, without --witness"
        )
    servers = parse_range(str(args.servers), "servers", MINIMUM["servers"])
    caps = parse_range(str(args.cap), "cap", MINIMUM["cap"])
    weights = clamp_weights(parse_range(str(args.weight), "weight", MINIMUM["weight"]), caps)
    try:
        states = float(args.max_states)
    except ValueError:
        raise UsageError(f"--max-states {args.max_states!r}: expected a number") from None
    if not math.isfinite(states) or states < 1:
        raise UsageError(f"--max-states {args.max_states!r}: expected a finite number >= 1")
    max_states = int(states)
    if args.limit == "leases":  # OB-LEASE-3: the lease model's rows
        if protocol != CHECK_THEN_WRITE or args.engine != "python" or args.path or args.witness:
            raise UsageError(
                "--limit leases searches check-then-write with --engine python, "
                "without --path or --witness"
            )
        if not args.force:
            check_size(servers, caps, weights)
        try:
            return leases.lease_rows(
                args, parse_range, (servers, caps, weights), max_states,
                lambda instance, n, s: _progress(args, instance, n, s),
            )  # fmt: skip
        except ValueError as error:  # the state limit: OB-LEASE-1's one line
            raise UsageError(str(error)) from None
    if args.limit != "requests":
        return _token_rows(args, max_states)
    if not args.force:
        check_size(servers, caps, weights)
    if args.path is not None:  # ADM-PRE-7: vLLM's admission paths
        if args.engine != "python":
            raise UsageError("--path is searched by queueref's explorer (--engine python)")
        try:
            return paths.path_rows(args, parse_range, (servers, caps, weights), max_states)
        except ValueError as error:
            raise UsageError(str(error)) from None
    rows: list[dict[str, object]] = []
    for n in servers:
        for m in caps:
            for w in weights:
                result = explore(
                    protocol,
                    n,
                    m,
                    w,
                    witness=args.witness,
                    max_states=max_states,
                    engine=args.engine,
                )
                row = result.row()
                if show_progress(args):  # E2E-CLI-4: states explored and the rate, per row
                    states, seconds = int(str(row["states"])), float(str(row["seconds"]))
                    progress_line(
                        "bound-table",
                        f"N={n} M={m} W={w}: {states} states in {seconds:.2f} s "
                        f"({states / max(seconds, 1e-9):,.0f} states/s)",
                    )
                if args.witness:
                    row["witness"] = witness_json(protocol, result, result.witness or ())
                    if protocol == WRITE_THEN_CHECK:
                        _, steps = worst_spurious_rejection(protocol, n, m, w)
                        row["spurious_witness"] = witness_json(protocol, result, steps)
                rows.append(row)
    return rows


def _within(row: dict[str, object]) -> bool:
    if "path" in row:
        return paths.within(row)
    worst, bound = row["worst_total"], row["bound"]
    assert isinstance(worst, int) and isinstance(bound, int)
    if row.get("limit") == "both":  # either limit can bind first: each within its bound
        tokens, token_bound = row["worst_tokens"], row["token_bound"]
        assert isinstance(tokens, int) and isinstance(token_bound, int)
        return worst <= bound and tokens <= token_bound
    if row.get("limit") in ("tokens", "leases"):  # OB-TOK-1..3, OB-LEASE-1 are exact
        return worst == bound
    if row["protocol"] == CHECK_THEN_WRITE:
        return worst == bound
    return worst <= bound


def _print_table(protocol: str, rows: list[dict[str, object]], witness: bool) -> None:
    limit = rows[0].get("limit") if rows else None
    path = rows[0].get("path") if rows else None
    if isinstance(path, str):
        print(paths.title(path))
        header = paths.header(path)
    elif limit == "tokens":
        print(f"{protocol}, token rule {rows[0]['rule']}: worst global queued tokens vs the bound")
        header = ["servers", "cap", "weight", "worst_total", "bound", "states", "seconds"]
    elif limit == "leases":
        print(leases.TITLE)
        header = leases.HEADER
    elif limit == "both":
        print("check-then-write, both limits: worst requests and tokens vs each bound")
        header = ["servers", "cap", "weight", "token_cap", "prompt", "worst_total", "bound",
                  "worst_tokens", "token_bound", "states"]  # fmt: skip
    elif protocol == CHECK_THEN_WRITE:
        print("check-then-write: worst global count vs the bound M + (N-1)*min(M, W)")
        header = ["servers", "cap", "weight", "worst_total", "bound", "states", "seconds"]
    else:
        print("write-then-check: worst admitted count vs the cap M")
        header = [
            "servers",
            "cap",
            "weight",
            "worst_total",
            "bound",
            "worst_slot_total",
            "spurious_rejection",
            "states",
            "seconds",
        ]
    widths = [max(len(h), 7) for h in header]
    print("  ".join(h.rjust(wd) for h, wd in zip(header, widths, strict=True)) + "  check")
    for row in rows:
        cells = ["-" if row.get(h) is None else str(row.get(h)) for h in header]
        verdict = "ok" if _within(row) else "OVER THE BOUND"
        print("  ".join(c.rjust(wd) for c, wd in zip(cells, widths, strict=True)) + "  " + verdict)
        if witness:
            for title, key in paths.WITNESSES:
                steps = row.get(key)
                if not isinstance(steps, list) or (key != "witness" and not steps):
                    continue
                print(f"    {title} (N={row['servers']}, M={row['cap']}, W={row['weight']}):")
                for i, entry in enumerate(steps, 1):
                    assert isinstance(entry, dict)
                    text = Step.from_json(entry).describe() if not path else paths.describe(entry)
                    if "value" in entry and not path:
                        text = text.replace(
                            f"slot {entry['slot']}", f"slot {entry['slot']} (= {entry['value']})", 1
                        )
                    print(f"      {i:3}. {text:<48} slots {entry['slots']}")


def run(args: argparse.Namespace) -> int:
    """Print the rows; exit 0, 1 (a row over its bound) or 2 (bad arguments)."""
    try:
        rows = _rows(args)
    except UsageError as error:
        print(f"queueref bound-table: {error}", file=sys.stderr)
        return 2
    except StateLimitExceeded as error:
        print(f"queueref bound-table: {error} (raise --max-states)", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=1 if args.witness else None))
    else:
        _print_table(str(args.protocol), rows, bool(args.witness))
    over = [row for row in rows if not _within(row)]
    for row in over:
        print(
            f"queueref bound-table: N={row['servers']} M={row['cap']} W={row['weight']}: "
            f"worst_total {row['worst_total']} vs bound {row['bound']}",
            file=sys.stderr,
        )
    return 1 if over else 0
