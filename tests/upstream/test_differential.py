"""The differential run against vLLM's real `Scheduler`, and its teeth.

Run by `make upstream` once per installed release (tests/upstream/conftest.py).
The teeth: a planted divergence of each class -- a broken `WaitingQueues` of
`tests/waiting_variants.py` run with contracts off (`python -O`, so that the
comparison, not a contract, must catch it), or a tampered harness -- makes the
differential run report differences in the field that divergence touches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import vllm
from differential import LAYOUT_OF_RELEASE, MODELLED_RELEASES, sweep

pytestmark = pytest.mark.upstream

RELEASE = os.environ["QUEUEREF_UPSTREAM_RELEASE"]
LAYOUT = LAYOUT_OF_RELEASE[RELEASE]
HERE = Path(__file__).resolve().parent
# Seeds of the planted runs: enough scenarios that each class occurs many times.
PLANTED_SCENARIOS = 80


def run_planted(*options: str) -> dict[str, object]:
    """The differential run under `python -O` with one planted divergence."""
    out = HERE.parent.parent / "build" / "upstream" / f"planted-{RELEASE}-{'-'.join(options)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-O", str(HERE / "differential.py"), "--scenarios",
         str(PLANTED_SCENARIOS), "--out", str(out), *options],
        check=False, capture_output=True, text=True, env=dict(os.environ),
    )
    result: dict[str, object] = json.loads(out.read_text())
    return result


def test_the_release_checked_is_the_one_installed() -> None:
    assert vllm.__version__ == RELEASE


def test_vllm_scheduler_agrees_with_its_layout_with_deep_contracts() -> None:
    """Deep contracts on (tests/conftest.py): 150 scenarios, every step checked both ways."""
    entry = sweep(range(10_000, 10_150), LAYOUT)
    assert entry["crashes"] == 0, entry["first_crashes"]
    if RELEASE in MODELLED_RELEASES:
        assert entry["differences"] == 0, entry["first_differences"]
    classes = entry["classes"]
    assert isinstance(classes, dict)
    for name in ("preempt", "blocked", "grammar-promoted", "abort", "finish"):
        assert classes.get(name, 0) > 0, (name, classes)


def test_planted_baseline_under_python_O_agrees() -> None:
    """The seeds of the planted runs agree when nothing is planted (contracts off too)."""
    entry = run_planted()
    assert entry["crashes"] == 0, entry["first_crashes"]
    if RELEASE in MODELLED_RELEASES:
        assert entry["differences"] == 0, entry["first_differences"]


# (variant, the layouts it breaks, the fields the comparison must report)
VARIANTS = [
    ("PreemptsToBack", ("vllm-0.30", "vllm-0.33"), {"waiting", "from_waiting", "running"}),
    ("WaitingFirst", ("vllm-0.30",), {"skipped_waiting", "waiting", "from_waiting", "running"}),
    ("SkippedFirstPriority", ("vllm-0.30",),
     {"skipped_waiting", "waiting", "from_waiting", "running"}),
    ("PromotesWithoutAsking", ("vllm-0.30", "vllm-0.33"), {"statuses", "from_waiting"}),
    ("EnqueueIgnoresBlocked", ("vllm-0.30",), {"skipped_waiting", "waiting"}),
    ("ParksWithoutReversal", ("vllm-0.30",), {"skipped_waiting"}),
    ("ForgetsToDefer", ("vllm-0.33",), {"deferred_waiting"}),
    ("AbortMissesSkipped", ("vllm-0.30", "vllm-0.33"), {"skipped_waiting", "kv_holding_waiting"}),
    ("FinishLosesRequest", ("vllm-0.30", "vllm-0.33"), {"finished"}),
]


# Only the variants that break the layout under test (no skips).
APPLICABLE = [(name, fields) for name, layouts, fields in VARIANTS if LAYOUT in layouts]


@pytest.mark.parametrize(("variant", "fields"), APPLICABLE, ids=[v[0] for v in APPLICABLE])
def test_a_broken_waiting_queues_is_caught(variant: str, fields: set[str]) -> None:
    entry = run_planted("--variant", variant)
    assert entry["crashes"] == 0, entry["first_crashes"]
    found = entry["difference_classes"]
    assert isinstance(found, dict)
    assert entry["differences"] > 0 and set(found) & fields, (variant, found)


@pytest.mark.parametrize(
    ("tamper", "field"),
    [("victim-first-running", "victims"), ("arrival-tie-broken", "waiting")],
)
def test_a_tampered_harness_is_caught(tamper: str, field: str) -> None:
    entry = run_planted("--tamper", tamper)
    found = entry["difference_classes"]
    assert isinstance(found, dict)
    assert entry["differences"] > 0 and field in found, (tamper, found)
