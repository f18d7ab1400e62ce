"""vLLM's own `SharedAdmissionStats` and `check_admission` beside queueref's, across
spawned server processes over one `RawArray` allocated as the release allocates it.

Run by `make upstream` once per installed release (tests/conftest.py); the
harness is `spawned_admission.py`. Every server reads the same global count
through the release's stats and queueref's -- the sum of the requests the
servers registered, written by queueref's tracker or, on every other
combination, last by the release's own `set_num_requests` (ADM-STATS-2,
ADM-STATS-3, ADM-LAYOUT-3) -- and both `check_admission`s decide alike at
every point of the grid (ADM-CTL-3, ADM-CTL-4, ADM-CTL-5, ADM-CTL-7).
queueref's stats are built from the client config before the release's pops
the buffer from it (ADM-RISK-3).

Its teeth: in the same processes, queueref handed only its own slot, or the
counters as 4-byte words (the stride between slots halved), disagrees.
It writes `build/upstream/admission-<release>.json`, which tools/upstream.py
puts in the release's entry of the report as `spawned_admission`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import spawned_admission as harness

pytestmark = [pytest.mark.upstream, pytest.mark.multiprocess]

RELEASE = os.environ["QUEUEREF_UPSTREAM_RELEASE"]
OUT = Path(__file__).resolve().parent.parent.parent / "build" / "upstream"
POINTS_PER_SERVER = len(harness.COMBOS) * len(harness.LIMITS) * len(harness.NS)


@pytest.fixture(scope="module")
def results() -> list[dict[str, Any]]:
    """Every phase, in one group of spawned servers; writes the report's entry."""
    found = harness.run()
    entry = {
        "servers": harness.SERVERS,
        "combinations": len(harness.COMBOS),
        "points": POINTS_PER_SERVER * harness.SERVERS,
        "differences": len(harness.differences(found, "agree")),
        "planted_caught": {
            phase: len(harness.differences(found, phase)) for phase in harness.PHASES[1:]
        },
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"admission-{RELEASE}.json").write_text(json.dumps(entry, indent=2) + "\n")
    return found


def test_every_server_runs_the_release_named(results: list[dict[str, Any]]) -> None:
    assert [r["server"] for r in results] == list(range(harness.SERVERS))
    assert {r["version"] for r in results} == {RELEASE}


def test_spawned_servers_agree_on_the_grid(results: list[dict[str, Any]]) -> None:
    """ADM-STATS-2, ADM-STATS-3, ADM-CTL-3, ADM-CTL-4, ADM-CTL-5, ADM-CTL-7, ADM-RISK-3:
    the same count (the sum registered) and the same decision everywhere."""
    assert harness.differences(results, "agree") == []
    rows = [row for r in results for row in r["records"]["agree"]]
    assert len(rows) == len(harness.COMBOS) * harness.SERVERS
    assert {row["vllm_wrote"] for row in rows} == {True, False}
    # Every outcome is reached, and every global count three servers of 0, 1, 2 or 4
    # requests can hold (11 cannot be made).
    outcomes = {pair[0] for row in rows for pair in row["decisions"]}
    assert outcomes == set(harness.DECISIONS)
    assert {row["vllm_count"] for row in rows} == set(range(13)) - {11}
    assert sum(len(row["decisions"]) for row in rows) == POINTS_PER_SERVER * harness.SERVERS


def test_queueref_reading_its_own_slot_only_is_caught(results: list[dict[str, Any]]) -> None:
    """The teeth: queueref's count is its own slot's, not the sum vLLM reads."""
    found = harness.differences(results, "own-slot")
    assert found
    for difference in found:
        own = len(harness.COMBOS[difference["combo"]][difference["server"]])
        assert difference["counts"] == (difference["expected"], own)
    # Wherever another server holds requests, the counts differ.
    assert len(found) == sum(
        1
        for combo in harness.COMBOS
        for server in range(harness.SERVERS)
        if any(prompts for other, prompts in enumerate(combo) if other != server)
    )


def test_a_wrong_stride_is_caught(results: list[dict[str, Any]]) -> None:
    """The teeth: with 4-byte counters queueref's slots are 32 bytes apart, so its writes
    and reads miss the release's slots and the counts read differ."""
    found = harness.differences(results, "int32-stride")
    assert found
    assert any(d["counts"][0] != d["counts"][1] for d in found)
