"""`make verify`'s schedule (`tools/verify.py`, issue 30): which steps start beside which.

On 2 cores: pytest on both cores and the proofs' two workers never share the machine
with another CPU-bound step; single-core steps run two at a time; a step that mostly
waits (the server tests, the soak) runs beside the CPU-bound ones, never beside another
waiting step; and a step wider than the machine still runs, alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from verify import STEPS, Step, startable  # noqa: E402

WIDE = Step("wide", "wide", 2, "")
NARROW = Step("narrow", "narrow", 1, "")
OTHER = Step("other", "other", 1, "")
SERVERS = Step("servers", "servers", 0, "", waits=True)
SOAK = Step("soak", "soak", 0, "", waits=True)


def names(steps: list[Step]) -> list[str]:
    return [step.name for step in steps]


def test_a_two_core_step_starts_alone_with_one_waiting_step_beside_it() -> None:
    pending = [WIDE, NARROW, SERVERS, SOAK]
    assert names(startable(pending, [], 2)) == ["wide", "servers"]


def test_single_core_steps_run_two_at_a_time_and_fill_a_free_core() -> None:
    assert names(startable([NARROW, OTHER, WIDE], [], 2)) == ["narrow", "other"]
    assert names(startable([WIDE, OTHER], [NARROW], 2)) == ["other"]  # first that fits
    assert names(startable([NARROW], [WIDE], 2)) == []


def test_a_waiting_step_never_starts_beside_another() -> None:
    assert names(startable([SOAK, NARROW], [SERVERS], 2)) == ["narrow"]
    assert names(startable([SOAK], [SERVERS, WIDE], 2)) == []


def test_a_step_wider_than_the_machine_runs_alone() -> None:
    assert names(startable([WIDE, NARROW], [], 1)) == ["wide"]
    assert names(startable([WIDE], [SERVERS], 1)) == ["wide"]  # waiting steps take no core


def test_verify_starts_pytest_alone_on_two_cores_with_the_server_tests() -> None:
    """The real list: first pytest in process, beside it the server tests only."""
    assert names(startable(list(STEPS), [], 2)) == ["test", "test-processes"]
