"""`make bench`, the explorer per model: the token, joint and lease searches, compact beside plain.

Each instance is searched by the compact encoding (the default, OB-TOK-5, OB-LEASE-2) and,
where it finishes in reasonable time, by the plain one it is checked against; the table
gives the states and CPU seconds of each and the ratio plain / compact. The plain encoding
of the (3, 3, 2) token rows is run with the explorer's default limit of 5,000,000 states:
under `ge` it refuses (as `queueref bound-table` did before the compact encoding), and the
row says so with the seconds spent before refusing.

Then the default grids of `queueref bound-table --limit both` and `--limit leases`, each
run whole in process as a user runs it: rows, states, the largest row, CPU seconds.

A benchmark, not a test: it measures and reports, it asserts nothing. `BENCH_MODELS=0`
skips it; `BENCH_MODELS=quick` leaves out the plain runs of the (3, 3, 2) token rows.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# (model, instance, the keyword arguments, run the plain encoding too?)
Case = tuple[str, tuple[int, ...], dict[str, str], bool]


def _cases(quick: bool) -> list[Case]:
    return [
        ("tokens ge", (3, 2, 1), {"rule": "ge"}, True),
        ("tokens fits", (3, 2, 1), {"rule": "fits"}, True),
        ("tokens ge", (3, 3, 2), {"rule": "ge"}, not quick),
        ("tokens fits", (3, 3, 2), {"rule": "fits"}, not quick),
        ("tokens write-then-check", (3, 3, 2), {"protocol_name": "write-then-check"}, False),
        ("both (N, M, W, Mt, P)", (2, 3, 2, 2, 2), {}, True),
        ("both (N, M, W, Mt, P)", (3, 2, 1, 2, 1), {}, False),
        ("lease (N, M, W, lapses)", (2, 3, 2, 2), {}, True),
        ("lease (N, M, W, lapses)", (3, 2, 1, 2), {}, False),
    ]


def _search(model: str) -> Callable[..., Any]:
    from queueref.verify.lease import explore_leases
    from queueref.verify.tokens import explore_joint, explore_tokens

    if model.startswith("tokens"):
        return explore_tokens
    return explore_joint if model.startswith("both") else explore_leases


def _worst(found: Any) -> str:
    for fields in (("worst_requests", "worst_tokens"), ("worst_tokens",), ("worst_excess",)):
        if all(hasattr(found, name) for name in fields):
            return "/".join(str(getattr(found, name)) for name in fields)
    raise AssertionError(f"no worst case in {found!r}")  # pragma: no cover


def _timed(
    model: str, instance: tuple[int, ...], kwargs: dict[str, str], encoding: str
) -> dict[str, Any]:
    search = _search(model)  # imported before the clock starts
    began = time.process_time()
    try:
        found = search(*instance, encoding=encoding, **kwargs)
    except ValueError as error:  # the state limit: refused, with the time it took
        return {"refused": str(error), "cpu_seconds": round(time.process_time() - began, 2)}
    seconds = time.process_time() - began
    return {"states": found.states, "worst": _worst(found), "cpu_seconds": round(seconds, 2)}


def bench_models(quick: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """The table and the JSON rows: every case, compact and (where asked) plain."""
    sys.path.insert(0, str(ROOT / "reference"))
    rows: list[dict[str, Any]] = []
    lines = [
        "| model | instance | compact states | compact CPU s | plain states | plain CPU s "
        "| plain / compact | worst (compact = plain) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for model, instance, kwargs, with_plain in _cases(quick):
        compact = _timed(model, instance, kwargs, "compact")
        plain = _timed(model, instance, kwargs, "plain") if with_plain else None
        rows.append({"bench": "models", "model": model, "instance": list(instance),
                     "compact": compact, "plain": plain})  # fmt: skip
        plain_cells = ["", "", ""]
        same = compact.get("worst", "")
        if plain is not None and "refused" in plain:
            plain_cells = ["> limit (refused)", f"{plain['cpu_seconds']:.1f}", ""]
        elif plain is not None:
            ratio = plain["cpu_seconds"] / max(compact["cpu_seconds"], 0.01)
            plain_cells = [f"{plain['states']:,}", f"{plain['cpu_seconds']:.1f}", f"{ratio:.0f}x"]
            if plain["worst"] != compact["worst"]:
                same = f"{compact['worst']} != {plain['worst']} (DIFFERENT)"
        lines.append(
            f"| {model} | {instance} | {compact['states']:,} | {compact['cpu_seconds']:.2f} | "
            + " | ".join(plain_cells)
            + f" | {same} |"
        )
    text = "\n".join(
        ["### Explorer per model, compact beside plain (CPU seconds, one core)", "", *lines]
    )
    return text, rows


#: The tables `queueref bound-table` prints with its default grid: (name, its arguments).
TABLES = [
    ("--limit both (N 2-3, M 0-4, W 1-3, Mt 1-2, P 1)", ["--limit", "both"]),
    ("--limit leases (N 2-3, M 0-4, W 1-3, lapses 1)", ["--limit", "leases"]),
    ("--limit leases --lapses 2 (N 2-3, M 0-3, W 1-2)",
     ["--limit", "leases", "--lapses", "2", "--cap", "0-3", "--weight", "1-2"]),
]  # fmt: skip


def bench_tables() -> tuple[str, list[dict[str, Any]]]:
    """The default grids of `bound-table --limit both` and `--limit leases`, whole, timed
    as a user runs them (in process, CPU seconds): rows, states in all, the largest row."""
    import contextlib
    import io
    import json

    sys.path.insert(0, str(ROOT / "reference"))
    from queueref.cli.main import main

    rows: list[dict[str, Any]] = []
    lines = [
        "| table | rows | states in all | largest row (states) | CPU s | exit |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, args in TABLES:
        out = io.StringIO()
        began = time.process_time()
        with contextlib.redirect_stdout(out):
            code = main(["bound-table", "--quiet", "--json", *args])
        seconds = time.process_time() - began
        found = json.loads(out.getvalue()) if code in (0, 1) else []
        states = [int(row["states"]) for row in found]
        rows.append({"bench": "tables", "table": name, "rows": len(found), "exit": code,
                     "states": sum(states), "largest": max(states, default=0),
                     "cpu_seconds": round(seconds, 2)})  # fmt: skip
        lines.append(f"| {name} | {len(found)} | {sum(states):,} | {max(states, default=0):,} "
                     f"| {seconds:.1f} | {code} |")  # fmt: skip
    text = "\n".join(["### bound-table's default grids, whole (CPU seconds, one core)", "",
                      *lines])  # fmt: skip
    return text, rows


def run(results: dict[str, Any]) -> None:
    """Add the section to `make bench`'s results and print it (`BENCH_MODELS`)."""
    mode = os.environ.get("BENCH_MODELS", "1")
    if mode == "0":
        return
    text, results["models"] = bench_models(quick=mode == "quick")
    print("\n" + text)
    text, results["tables"] = bench_tables()
    print("\n" + text)


if __name__ == "__main__":
    if "--tables" in sys.argv:  # only the default grids
        print(bench_tables()[0])
    else:
        print(bench_models(quick="--quick" in sys.argv)[0])
        print("\n" + bench_tables()[0])
