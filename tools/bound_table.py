"""Compute the exhaustive bound table and check it (OB-TABLE-1, OB-WTC-1, OB-WTC-3).

For every row, `queueref.verify.search` enumerates every interleaving of the servers'
steps and reports the worst count. This script checks each row against the formula,
recomputed here as an independent check (it does not call `queueref.admission.protocol.bound`,
the package's one definition, nor the explorer's `bound` field):

* check-then-write: worst global count == M + (N-1)*min(M, W) (OB-BOUND-1: the bound
  holds and is reached);
* write-then-check: worst admitted count <= M (OB-WTC-1), == M when M >= 1 (the cap is
  usable), and the worst spurious rejection leaves min(M, N*W - 1) free (N >= 2, M >= 1),
  none with one server (OB-WTC-3).

Rows covered (about a minute on one core, 0.5 GB peak for the largest row):

* check-then-write: N=1..3 x M=0..4 x W=1..3 (the required N=2..3 among them),
  N=2 x M=5..6 x W=1..3, N=4 x M=0..4 x W=1, N=4 x M=0..2 x W=2, N=5 x M=0..1 x W=1;
* write-then-check: N=1..3 x M=0..4 x W=1..3, N=4 x M=0..2 x W=1;
* the admission paths (ADM-PRE-7, about two more minutes): each of N=1..3 x M=0..3 x W=1..2
  with one request per server, and 0.30.0's await gap with two (N=1..2): its bound
  M + (N*K-1)*min(M, W) when min(M, W) >= 2; the reservations waste no render, and only
  write-then-check refuses a request that fits (OB-WTC-3's min(M, N*W - 1)).

Writes `build/bound-table.json` (a list of rows: protocol, servers, cap, weight,
worst_total, bound, states, seconds, plus worst_slot_total and spurious_rejection for
write-then-check), prints the table, exits 1 on any mismatch. `--quick` runs only the
required rows (N=2..3 x M=0..4 x W=1..3 and N=4 x M=0..2 x W=1; write-then-check
N=2..3 x M=1..3 x W=1..2).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "reference"))

from queueref.verify.path_search import explore_path  # noqa: E402
from queueref.verify.search import explore  # noqa: E402

Grid = tuple[range, range, range]  # servers, caps, weights

FULL: dict[str, list[Grid]] = {
    "check-then-write": [
        (range(1, 4), range(0, 5), range(1, 4)),
        (range(2, 3), range(5, 7), range(1, 4)),
        (range(4, 5), range(0, 5), range(1, 2)),
        (range(4, 5), range(0, 3), range(2, 3)),
        (range(5, 6), range(0, 2), range(1, 2)),
    ],
    "write-then-check": [
        (range(1, 4), range(0, 5), range(1, 4)),
        (range(4, 5), range(0, 3), range(1, 2)),
    ],
}

QUICK: dict[str, list[Grid]] = {
    "check-then-write": [
        (range(2, 4), range(0, 5), range(1, 4)),
        (range(4, 5), range(0, 3), range(1, 2)),
    ],
    "write-then-check": [(range(2, 4), range(1, 4), range(1, 3))],
}


def expected_worst(protocol: str, servers: int, cap: int, weight: int) -> int:
    """The formula the explorer must reproduce, written out on its own.

    An independent recomputation, on purpose: `queueref.admission.protocol.bound` is the
    one definition the package uses; this copy checks it (and the explorer) from outside.
    """
    if protocol == "check-then-write":
        effective = weight if weight < cap else cap  # heavier requests never pass
        return cap + (servers - 1) * effective
    return cap  # write-then-check: the cap is reached and never passed


#: ADM-PRE-7: vLLM's admission paths and the reservations at preflight, (N, M, W) grids
#: per K (requests of one server in flight at once).
PATHS: dict[str, list[tuple[int, Grid]]] = {
    path: [(1, (range(1, 4), range(0, 4), range(1, 3)))]
    for path in ("two-check", "two-check-await-gap", "reserve-write-then-check",
                 "reserve-check-then-write")
}  # fmt: skip
PATHS["two-check-await-gap"].append((2, (range(1, 3), range(0, 4), range(1, 3))))
QUICK_PATHS = {
    path: [(k, (range(1, 3), m, w)) for k, (_, m, w) in grids] for path, grids in PATHS.items()
}


def expected_path_worst(path: str, servers: int, cap: int, weight: int, k: int) -> int:
    """The bound of each path, written out on its own (ADM-PRE-1..6)."""
    effective = weight if weight < cap else cap
    if path == "reserve-write-then-check":
        return cap
    if path == "two-check-await-gap" and effective >= 2:
        return cap + (servers * k - 1) * effective  # each in-flight request: a server
    return cap + (servers - 1) * effective


def check_path_row(row: dict[str, object]) -> list[str]:
    """The ways a path row disagrees with its formula (empty when it agrees)."""
    path, k = str(row["path"]), int(str(row["requests_per_server"]))
    n, m, w = int(str(row["servers"])), int(str(row["cap"])), int(str(row["weight"]))
    want = expected_path_worst(path, n, m, w, k)
    problems = [
        f"{key} {row[key]} != {want}" for key in ("bound", "worst_total") if row[key] != want
    ]
    spurious = expected_spurious(n, m, w) if path == "reserve-write-then-check" else None
    if row["spurious_rejection"] != spurious:
        problems.append(f"spurious_rejection {row['spurious_rejection']} != {spurious}")
    if path.startswith("reserve") and row["wasted_renders"] != 0:
        problems.append(f"wasted_renders {row['wasted_renders']} != 0")
    return problems


def expected_spurious(servers: int, cap: int, weight: int) -> int | None:
    """The largest free capacity at a contention-only rejection of a request that fits."""
    if servers == 1 or cap == 0:
        return None
    return min(cap, servers * weight - 1)


def cells(grids: list[Grid]) -> Iterator[tuple[int, int, int]]:
    for servers, caps, weights in grids:
        for n in servers:
            for m in caps:
                for w in weights:
                    yield n, m, w


def check_row(row: dict[str, object]) -> list[str]:
    """The ways a row disagrees with the formula (empty when it agrees)."""
    protocol = str(row["protocol"])
    n, m, w = int(str(row["servers"])), int(str(row["cap"])), int(str(row["weight"]))
    worst = row["worst_total"]
    want = expected_worst(protocol, n, m, w)
    problems = []
    if row["bound"] != want:
        problems.append(f"bound {row['bound']} != formula {want}")
    if worst != want:
        problems.append(f"worst_total {worst} != {want}")
    if protocol == "write-then-check":
        spurious = expected_spurious(n, m, w)
        if row.get("spurious_rejection") != spurious:
            problems.append(f"spurious_rejection {row.get('spurious_rejection')} != {spurious}")
    return problems


def main(argv: list[str]) -> int:
    grids = QUICK if "--quick" in argv else FULL
    out_path = ROOT / "build" / "bound-table.json"
    began = time.perf_counter()
    rows: list[dict[str, object]] = []
    failures = 0
    print(
        f"{'protocol':<17} {'N':>2} {'M':>2} {'W':>2} {'worst':>6} {'bound':>6} "
        f"{'states':>9} {'seconds':>8}  check"
    )
    for protocol, protocol_grids in grids.items():
        for n, m, w in cells(protocol_grids):
            result = explore(protocol, n, m, w)
            row = result.row()
            rows.append(row)
            problems = check_row(row)
            failures += bool(problems)
            extra = ""
            if protocol == "write-then-check":
                extra = (
                    f"  slot total {row['worst_slot_total']}, spurious {row['spurious_rejection']}"
                )
            verdict = "ok" if not problems else "MISMATCH: " + "; ".join(problems)
            print(
                f"{protocol:<17} {n:>2} {m:>2} {w:>2} {result.worst_total:>6} {result.bound:>6} "
                f"{result.states:>9} {result.seconds:>8.2f}  {verdict}{extra}",
                flush=True,
            )
    for path, path_grids in (QUICK_PATHS if "--quick" in argv else PATHS).items():
        for k, grid in path_grids:
            for n, m, w in cells([grid]):
                result = explore_path(path, n, m, w, k)
                row = result.row()
                rows.append(row)
                problems = check_path_row(row)
                failures += bool(problems)
                verdict = "ok" if not problems else "MISMATCH: " + "; ".join(problems)
                print(
                    f"{path[:15] + f'/K={k}':<17} {n:>2} {m:>2} {w:>2} {result.worst_total:>6} "
                    f"{result.bound:>6} {result.states:>9} {result.seconds:>8.2f}  {verdict}  "
                    f"wasted {row['wasted_renders']}, spurious {row['spurious_rejection']}",
                    flush=True,
                )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(rows, indent=1) + "\n")
    seconds = time.perf_counter() - began
    print(
        f"{len(rows)} rows, {failures} mismatches, {seconds:.1f} s; "
        f"wrote {out_path.relative_to(ROOT)}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
