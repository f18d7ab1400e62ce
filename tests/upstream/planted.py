"""Planted divergences for the differential run: each must be caught by the comparison.

Run as a script (under `python -O`, so that icontract's conditions are off and
the comparison, not a contract, has to catch each bug) by
`tests/upstream/test_differential.py`: it runs the baseline and every planted
divergence that applies to the release's layout on the same seeds and writes
their report entries to one JSON file.

* A broken `WaitingQueues` of `tests/helpers/waiting_variants.py` (one named change of
  the real method each), and one made here.
* A step that ignores the pause (WL-REL-1, `PAUSE_VARIANTS`), made here.
* A wrong victim (WL-PRE-3): `WaitingQueues._victim` changed, made here.
* A tampered harness (`differential.TAMPERS`): arrival times moved on
  queueref's side.
* The neighbouring release's layout (`NEIGHBOUR_LAYOUT`), compared on the
  fields every layout shares: caught where the scenarios reach what tells
  the two releases apart (`NEIGHBOUR_REACHABLE`; specs/upstream-versions.md).
* Wrong answers in the LoRA and KV-connector classes (`differential.CLASS_TAMPERS`):
  a LoRA-cap or connector skip answered STOP, an async load not parked as
  WAITING_FOR_REMOTE_KVS, a load promoted before a model output reported it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import vllm_side
from differential import CLASS_TAMPERS, LAYOUT_OF_RELEASE, TAMPERS, queue_family, sweep

# Planted divergences: (broken WaitingQueues of tests/helpers/waiting_variants.py, the layouts
# it breaks, the fields the comparison must report). Run with contracts off
# (python -O), so that the comparison, not a contract, has to catch each.
VARIANTS: tuple[tuple[str, tuple[str, ...], frozenset[str]], ...] = (
    ("PreemptsToBack", ("vllm-0.30", "vllm-0.33"), frozenset({"waiting", "from_waiting"})),
    ("WaitingFirst", ("vllm-0.30",), frozenset({"skipped_waiting", "waiting", "from_waiting"})),
    (
        "SkippedFirstPriority",
        ("vllm-0.30",),
        frozenset({"skipped_waiting", "waiting", "from_waiting"}),
    ),
    ("PromotesWithoutAsking", ("vllm-0.30", "vllm-0.33"), frozenset({"statuses", "from_waiting"})),
    ("EnqueueIgnoresBlocked", ("vllm-0.30",), frozenset({"skipped_waiting", "waiting"})),
    ("ParksWithoutReversal", ("vllm-0.30",), frozenset({"skipped_waiting"})),
    ("ForgetsToDefer", ("vllm-0.33",), frozenset({"deferred_waiting"})),
    # A skipped async KV load (it holds blocks) sent back to waiting.
    ("SkipsBackToWaiting", ("vllm-0.33",), frozenset({"kv_holding_waiting", "waiting"})),
    (
        "AbortMissesSkipped",
        ("vllm-0.30", "vllm-0.33"),
        frozenset({"skipped_waiting", "kv_holding_waiting"}),
    ),
    ("AbortMissesWaiting", ("vllm-0.30", "vllm-0.33"), frozenset({"waiting"})),
    ("FinishLosesRequest", ("vllm-0.30", "vllm-0.33"), frozenset({"finished"})),
    ("ForgetsThePause", ("vllm-0.30", "vllm-0.33"), frozenset({"paused_sessions"})),
    (
        "RequeuesPausedSession",
        ("vllm-0.30", "vllm-0.33"),
        frozenset({"waiting", "skipped_waiting", "kv_holding_waiting"}),
    ),
    (
        "IgnoresTheGuard",
        ("vllm-0.30", "vllm-0.33"),
        # deferred_waiting: a head examined after the budget is spent and skipped.
        frozenset(
            {"skipped_waiting", "waiting", "kv_holding_waiting", "deferred_waiting", "statuses"}
        ),
    ),
    (
        "SlotsIgnorePausedSessions",
        ("vllm-0.30", "vllm-0.33"),
        frozenset({"from_waiting", "statuses"}),
    ),
)
# Planted wrong victims (WL-PRE-3): the layouts they break, the fields they show in.
VICTIM_VARIANTS: tuple[tuple[str, tuple[str, ...], frozenset[str]], ...] = (
    ("VictimFirstRunning", ("vllm-0.30", "vllm-0.33"), frozenset({"victims"})),
    ("VictimIgnoresArrival", ("vllm-0.30", "vllm-0.33"), frozenset({"victims"})),
)
# Planted pause bugs (WL-REL-1), made here as tests/waiting/test_waiting_releases.py
# makes them: the exact layouts they break (not queue families: the pause rule is a
# release's), the fields they show in.
PAUSE_FIELDS = frozenset(
    {"from_waiting", "statuses", "num_unfinished", "waiting", "skipped_waiting"}
    | {"kv_holding_waiting", "deferred_waiting"}
)
PAUSE_VARIANTS: tuple[tuple[str, tuple[str, ...], frozenset[str]], ...] = (
    # The waiting loop runs under PAUSED_NEW, where these releases run none.
    ("PauseIgnored", ("vllm-0.30", "vllm-0.31"), PAUSE_FIELDS),
    # Under PAUSED_NEW the loop falls back to `waiting` once kv_holding_waiting is empty.
    ("PausedNewTakesWaiting", ("vllm-0.32", "vllm-0.33"), PAUSE_FIELDS),
)
# Planted divergences of the harness: the field each must be caught in.
TAMPER_FIELDS = {"arrival-tie-broken": "waiting"}
# Each release's scenarios run against the layout of the release next to it.
NEIGHBOUR_LAYOUT = {
    "0.30.0": "vllm-0.31",
    "0.31.0": "vllm-0.30",
    "0.32.0": "vllm-0.31",
    "0.33.0": "vllm-0.32",
}
# Where the scenarios reach the difference (0.30.0 / 0.31.0: the queue layout; 0.32.0:
# under PAUSED_NEW its loop drains kv_holding_waiting and its count of unfinished
# requests adds it, the `Pause` events reach both). 0.33.0 differs from 0.32.0 only
# for a head left with no tokens (encoder inputs, prefill lookahead): not driven.
NEIGHBOUR_REACHABLE = frozenset({"0.30.0", "0.31.0", "0.32.0"})
# The class each answer tamper breaks, and the fields it must be caught in.
QUEUES = frozenset({"waiting", "skipped_waiting", "kv_holding_waiting", "deferred_waiting"})
CLASS_TAMPER_FIELDS: dict[str, tuple[str, frozenset[str]]] = {
    "lora-skip-stops": ("lora-cap-skip", QUEUES | {"from_waiting"}),
    "connector-skip-stops": ("connector-skip", QUEUES | {"from_waiting"}),
    "async-load-not-parked": ("kv-load-async", QUEUES | {"statuses"}),
    "kv-load-promoted-early": ("kv-load-promoted", QUEUES | {"statuses", "from_waiting"}),
}
assert set(CLASS_TAMPER_FIELDS) == set(CLASS_TAMPERS)


def planted(seeds: range, layout: str) -> dict[str, Any]:
    """The baseline and every planted divergence that applies to `layout`, on `seeds`."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
    waiting_variants = importlib.import_module("waiting_variants")

    # Made here: waiting_variants has no abort bug for requests in `waiting`.
    extra = {
        "AbortMissesWaiting": waiting_variants.broken_variant(
            "AbortMissesWaiting",
            waiting_variants.Change(
                "abort",
                "aborts requests in waiting without taking them out of the queue",
                "self.waiting.remove_requests(by_place[IN_WAITING])",
                "pass",
            ),
        ),
        "VictimFirstRunning": waiting_variants.broken_variant(
            "VictimFirstRunning",
            waiting_variants.Change(
                "_victim",
                "FCFS preempts the first in running, not the last",
                "return self.running[-1]",
                "return self.running[0]",
            ),
        ),
        "VictimIgnoresArrival": waiting_variants.broken_variant(
            "VictimIgnoresArrival",
            waiting_variants.Change(
                "_victim",
                "PRIORITY compares priorities only: the first in running of the largest",
                "key=lambda r: (r.priority, r.arrival_time)",
                "key=lambda r: r.priority",
            ),
        ),
    }
    pause_changes = {
        "PauseIgnored": waiting_variants.Change(
            "_loop_runs",
            "runs the waiting loop whatever the pause state",
            "if self.pause_state is PauseState.UNPAUSED:",
            "if True:",
        ),
        "PausedNewTakesWaiting": waiting_variants.Change(
            "_select",
            "under PAUSED_NEW falls back to waiting once kv_holding_waiting is empty",
            "return self.kv_holding_waiting or None",
            "return self.kv_holding_waiting or self.waiting or None",
        ),
    }
    for name, change in pause_changes.items():
        extra[name] = waiting_variants.broken_variant(name, change)
    results = {"baseline": sweep(seeds, layout)}
    for name, layouts, _ in VARIANTS + VICTIM_VARIANTS:
        if queue_family(layout) in layouts:
            factory = extra.get(name) or getattr(waiting_variants, name)
            results[name] = sweep(seeds, layout, factory)
    for name, layouts, _ in PAUSE_VARIANTS:
        if layout in layouts:
            results[name] = sweep(seeds, layout, extra[name])
    for tamper in TAMPERS + CLASS_TAMPERS:
        results[tamper] = sweep(seeds, layout, tamper=tamper)
    results["neighbour-layout"] = sweep(seeds, NEIGHBOUR_LAYOUT[vllm_side.RELEASE])
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=80)
    parser.add_argument("--first-seed", type=int, default=20_000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    layout = LAYOUT_OF_RELEASE[vllm_side.RELEASE]
    seeds = range(args.first_seed, args.first_seed + args.scenarios)
    with open(args.out, "w") as out:
        json.dump(planted(seeds, layout), out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
