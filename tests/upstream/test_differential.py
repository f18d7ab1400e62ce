"""The differential run against vLLM's real `Scheduler`, and its teeth.

Run by `make upstream` once per installed release (tests/conftest.py).
`test_sweep` runs the release's scenarios and writes its entry of
`build/upstream-report.json` (tools/upstream.py merges them). The teeth: a
planted divergence of each class -- a broken `WaitingQueues` of
`tests/helpers/waiting_variants.py`, or a tampered harness -- run in one `python -O`
process (contracts off, so that the comparison, not a contract, must catch
it) makes the differential run report differences in the field it touches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import vllm
from differential import LAYOUT_OF_RELEASE, MODELLED_RELEASES, queue_family, sweep
from planted import (
    CLASS_TAMPER_FIELDS,
    NEIGHBOUR_REACHABLE,
    PAUSE_VARIANTS,
    TAMPER_FIELDS,
    VARIANTS,
    VICTIM_VARIANTS,
)

import queueref.config

pytestmark = pytest.mark.upstream

RELEASE = os.environ["QUEUEREF_UPSTREAM_RELEASE"]
SCENARIOS = int(os.environ.get("QUEUEREF_UPSTREAM_SCENARIOS", "1000"))
LAYOUT = LAYOUT_OF_RELEASE[RELEASE]
HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "build" / "upstream"
# The classes every sweep must exercise (scenarios that agreed and went through them).
REQUIRED_CLASSES = (
    "preempt",
    "blocked",
    "grammar-promoted",
    "abort",
    "finish",
    "token-budget",
    "max-num-seqs",
    "priority-ties",
    "streaming-paused",
    "streaming-continued",
    "streaming-paused-skipped",
    # A LoRAConfig's max_loras and the scenario's KV connector (vllm_side.py).
    "lora-cap-skip",
    "connector-skip",
    "kv-load-async",
    "kv-load-promoted",
    # Pause events (WL-REL-1) and steps under PAUSED_NEW.
    "pause",
    "paused-new-step",
) + (("kv-holding-waiting", "max-num-active-seqs") if LAYOUT != "vllm-0.30" else ())
# From 0.32.0 a step under PAUSED_NEW drains kv_holding_waiting.
REQUIRED_CLASSES += ("paused-new-kv-drained",) if LAYOUT in ("vllm-0.32", "vllm-0.33") else ()
PLANTED_SEEDS = (20_000, 20_080)


@pytest.fixture(scope="module")
def planted() -> dict[str, Any]:
    """Every planted divergence, in one `python -O` process."""
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"planted-{RELEASE}.json"
    out.unlink(missing_ok=True)
    first, last = PLANTED_SEEDS
    subprocess.run(
        [
            sys.executable,
            "-O",
            str(HERE / "planted.py"),
            "--first-seed",
            str(first),
            "--scenarios",
            str(last - first),
            "--out",
            str(out),
        ],
        check=True,
        env=dict(os.environ),
    )
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_the_release_checked_is_the_one_named() -> None:
    assert vllm.__version__ == RELEASE


def test_sweep() -> None:
    """WL-STEP-1, WL-STEP-10, WL-STR-1, WL-STR-2, WL-STR-4, WL-STR-5, WL-LAY-1, WL-L33-1,
    WL-L33-2, WL-L33-3, WL-L33-4, WL-REL-1, WL-REL-2 on the real Scheduler: the release's
    scenarios (cheap contracts on), every required class exercised; writes its entry of
    the report."""
    deep = queueref.config.deep_checks()
    queueref.config.set_deep_checks(False)
    try:
        entry = sweep(range(SCENARIOS), LAYOUT, progress=True)
    finally:
        queueref.config.set_deep_checks(deep)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{RELEASE}.json").write_text(json.dumps(entry, indent=2) + "\n")
    assert entry["crashes"] == 0, entry["first_crashes"]
    if RELEASE in MODELLED_RELEASES:
        assert entry["differences"] == 0, entry["first_differences"]
    for name in REQUIRED_CLASSES:
        assert entry["classes"].get(name, 0) > 0, (name, entry["classes"])


def test_deep_contracts_hold_on_vllm_scenarios() -> None:
    """Deep contracts on (tests/conftest.py): queueref's own checks hold on every step."""
    assert queueref.config.deep_checks()
    entry = sweep(range(10_000, 10_100), LAYOUT)
    assert entry["crashes"] == 0, entry["first_crashes"]
    if RELEASE in MODELLED_RELEASES:
        assert entry["differences"] == 0, entry["first_differences"]


def test_planted_baseline_agrees(planted: dict[str, Any]) -> None:
    """The planted runs' seeds agree, contracts off, when nothing is planted."""
    baseline = planted["baseline"]
    assert baseline["crashes"] == 0, baseline["first_crashes"]
    if RELEASE in MODELLED_RELEASES:
        assert baseline["differences"] == 0, baseline["first_differences"]


# Only the variants that break the layout under test (no skips).
APPLICABLE = [
    (name, fields)
    for name, layouts, fields in VARIANTS + VICTIM_VARIANTS
    if queue_family(LAYOUT) in layouts
] + [(name, fields) for name, layouts, fields in PAUSE_VARIANTS if LAYOUT in layouts]


@pytest.mark.parametrize(("variant", "fields"), APPLICABLE, ids=[v[0] for v in APPLICABLE])
def test_a_broken_waiting_queues_is_caught(
    planted: dict[str, Any], variant: str, fields: frozenset[str]
) -> None:
    """Each planted bug (the pause ones too, WL-REL-1) shows in a field it touches."""
    entry = planted[variant]
    assert entry["crashes"] == 0, entry["first_crashes"]
    found = set(entry["difference_classes"])
    assert entry["differences"] > 0 and found & fields, (variant, entry["difference_classes"])


@pytest.mark.parametrize(("tamper", "field"), sorted(TAMPER_FIELDS.items()))
def test_a_tampered_harness_is_caught(planted: dict[str, Any], tamper: str, field: str) -> None:
    entry = planted[tamper]
    assert entry["differences"] > 0 and field in entry["difference_classes"], (
        tamper,
        entry["difference_classes"],
    )


def test_the_neighbouring_release_layout(planted: dict[str, Any]) -> None:
    """WL-LAY-1: the release's scenarios, run against the layout of the release next to it
    and compared on the fields every layout shares, differ in behaviour where the scenarios
    reach what tells the two apart (NEIGHBOUR_REACHABLE), and agree where they do not (the
    claim of specs/upstream-versions.md: a new scenario class that reaches the difference
    makes this fail until the release joins NEIGHBOUR_REACHABLE)."""
    entry = planted["neighbour-layout"]
    assert entry["layout"] != LAYOUT and entry["crashes"] == 0, entry["first_crashes"]
    if RELEASE not in NEIGHBOUR_REACHABLE:
        assert entry["differences"] == 0, entry["first_differences"]
        return
    assert entry["differences"] > 0, entry
    assert set(entry["difference_classes"]) <= {
        "from_waiting",
        "victims",
        "running",
        "statuses",
        "finished",
        "paused_sessions",
        "num_unfinished",
        "queueref-error",  # queueref refused what vLLM did: a request it had not run
    }, entry["difference_classes"]


@pytest.mark.parametrize(
    ("tamper", "checked"), sorted(CLASS_TAMPER_FIELDS.items()), ids=sorted(CLASS_TAMPER_FIELDS)
)
def test_a_wrong_answer_of_each_class_is_caught(
    planted: dict[str, Any], tamper: str, checked: tuple[str, frozenset[str]]
) -> None:
    """The LoRA and connector classes have teeth: the planted seeds go through the
    class (its baseline counts it) and a wrong answer in it shows in the fields
    it touches."""
    name, fields = checked
    assert planted["baseline"]["classes"].get(name, 0) > 0, (name, planted["baseline"]["classes"])
    entry = planted[tamper]
    assert entry["crashes"] == 0, entry["first_crashes"]
    found = set(entry["difference_classes"])
    assert entry["differences"] > 0 and found & fields, (tamper, entry["difference_classes"])
