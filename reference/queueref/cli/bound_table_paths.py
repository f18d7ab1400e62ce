"""`queueref bound-table --path P`: the rows of vLLM's admission paths (ADM-PRE-7).

`--path` names an `AdmissionPath` (vLLM's two-check path, 0.30.0's await gap, or a
reservation at preflight); `--requests-per-server K` how many requests of one server can
be in flight at once. Each row adds to the usual keys `path`, `requests_per_server`,
`wasted_renders` and `spurious_rejection` (and `worst_slot_total` for the
write-then-check reservation); `--witness` adds the interleaving that reaches
`worst_total` and, when there is one, the spurious rejection and the wasted renders.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from queueref.admission.paths import AdmissionPath
from queueref.cli.args import progress_line, show_progress
from queueref.verify.admission_models import Step
from queueref.verify.path_models import PathModel, PathStep
from queueref.verify.path_search import (
    explore_path,
    worst_spurious_rejection_path,
    worst_wasted_renders,
)

#: The witnesses a path row can carry, as (title, key).
WITNESSES = (
    ("witness", "witness"),
    ("spurious rejection", "spurious_witness"),
    ("wasted renders", "wasted_witness"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path",
        choices=[p.value for p in AdmissionPath],
        default=None,
        help="search one of vLLM's admission paths or a reservation at preflight instead "
        "of --protocol (see specs/preflight-reservations.md)",
    )
    parser.add_argument(
        "--requests-per-server",
        default="1",
        help="with --path: K, the requests of one server in flight at once (A-B or A; 1)",
    )


def witness_json(model: PathModel, steps: Sequence[Step]) -> list[object]:
    """The steps with the slots and the counted total after each one."""
    states = [model.initial()]
    for step in steps:
        states.append(model.step(states[-1], step))
    out: list[object] = []
    for step, before, state in zip(steps, states, states[1:], strict=False):
        entry: dict[str, object] = dict(step.to_json())
        if "slot" in entry:
            entry["value"] = before[step.arg]
        entry["slots"] = list(model.slots(state))
        entry["total"] = model.total(state)
        out.append(entry)
    return out


def path_rows(
    args: argparse.Namespace,
    parse_range: Callable[[str, str, int], range],
    grid: tuple[range, range, range],
    max_states: int,
) -> list[dict[str, object]]:
    """One row per (N, M, W, K) of the ranges."""
    path = AdmissionPath(args.path)
    servers, caps, weights = grid
    rows: list[dict[str, object]] = []
    for k in parse_range(str(args.requests_per_server), "requests-per-server", 1):
        for n in servers:
            for m in caps:
                for w in weights:
                    found = explore_path(
                        path, n, m, w, k, witness=args.witness, max_states=max_states
                    )
                    row = found.row()
                    if show_progress(args):  # E2E-CLI-4: one line per row
                        progress_line(
                            "bound-table",
                            f"{path.value} N={n} M={m} W={w} K={k}: {found.states} states "
                            f"in {found.seconds:.2f} s",
                        )
                    if args.witness:
                        model = PathModel(path, n, m, w, k)
                        row["witness"] = witness_json(model, found.witness or ())
                        quiet = PathModel(path, n, m, w, k, finishes=False, failures=False)
                        steps = worst_spurious_rejection_path(path, n, m, w, k)[1]
                        row["spurious_witness"] = witness_json(quiet, steps)
                        burst = PathModel(path, n, m, w, k, burst=True)
                        row["wasted_witness"] = witness_json(
                            burst, worst_wasted_renders(path, n, m, w, k)[1]
                        )
                    rows.append(row)
    return rows


def within(row: dict[str, object]) -> bool:
    """Every path's worst count equals its bound (ADM-PRE-7: the bounds are exact)."""
    return row["worst_total"] == row["bound"]


def header(path: str) -> list[str]:
    extra = ["worst_slot_total"] if path == AdmissionPath.RESERVE_WRITE_THEN_CHECK.value else []
    return ["servers", "cap", "weight", "requests_per_server", "worst_total", "bound", *extra,
            "wasted_renders", "spurious_rejection", "states", "seconds"]  # fmt: skip


def title(path: str) -> str:
    return {
        "two-check": "vLLM 0.31.0-0.33.0's path (two checks, n registered with no await)",
        "two-check-await-gap": "vLLM 0.30.0's path (two checks, an await before each child)",
        "reserve-write-then-check": "a write-then-check reservation at preflight",
        "reserve-check-then-write": "a check-then-write reservation at preflight",
    }[path] + ": worst count vs the bound"


def describe(entry: dict[str, object]) -> str:
    """One witness step as a sentence, the value read included."""
    arg = int(str(entry.get("n", entry.get("slot", 0))))
    step = PathStep(
        str(entry["action"]), int(str(entry["server"])), arg, int(str(entry.get("check", 0)))
    )
    text = step.describe()
    if "value" in entry:
        text = text.replace(
            f"slot {entry['slot']}", f"slot {entry['slot']} (= {entry['value']})", 1
        )
    return text
