"""`queueref bound-table --limit leases`: the rows of the lease model (OB-LEASE-3).

Searches `queueref.verify.lease.explore_leases` -- check-then-write where a server's lease
can lapse at any moment (the others then read its slot as 0 until its next write) -- for
every N, M, W and number of lapses (`--lapses A-B`, default 1). Each row has the request
table's keys, `worst_total` being the worst `real total - dropped` (what OB-LEASE-1
bounds by M + (N-1)*min(M, W), and reaches), plus `lapses` and `worst_real_total`, the
largest real total (what the lapses add on top).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from queueref.verify.lease import explore_leases

TITLE = "check-then-write with lease lapses: worst total - dropped vs M + (N-1)*min(M, W)"
HEADER = ["servers", "cap", "weight", "lapses", "worst_total", "bound", "worst_real_total",
          "states", "seconds"]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lapses", default="1", help="with --limit leases: the most lease lapses, A-B or A (1)"
    )


def lease_rows(
    args: argparse.Namespace,
    parse_range: Callable[[str, str, int], range],
    bounds: tuple[range, range, range],
    max_states: int,
    progress: Callable[[str, int, float], None],
) -> list[dict[str, object]]:
    """One row per (N, M, W, lapses); `ValueError` past `max_states` (OB-LEASE-1's text)."""
    # OB-LEASE-3: the rows of the exhaustive lease search, each against OB-LEASE-1's bound.
    lapse_range = parse_range(str(args.lapses), "lapses", 0)
    rows: list[dict[str, object]] = []
    servers, caps, weights = bounds
    for n in servers:
        for m in caps:
            for w in weights:
                for lapses in lapse_range:
                    started = time.monotonic()
                    found = explore_leases(n, m, w, lapses, max_states=max_states)
                    seconds = time.monotonic() - started
                    progress(f"N={n} M={m} W={w} lapses={lapses}", found.states, seconds)
                    rows.append({
                        "protocol": "check-then-write", "limit": "leases",
                        "servers": n, "cap": m, "weight": w, "lapses": lapses,
                        "worst_total": found.worst_excess, "bound": found.bound,
                        "worst_real_total": found.worst_total, "states": found.states,
                        "seconds": round(seconds, 3),
                    })  # fmt: skip
    return rows
