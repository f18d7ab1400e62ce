"""One layout per vLLM release: what `vllm-0.31`, `vllm-0.32` and `vllm-0.33` do differently.

The clauses of specs/waiting-lifecycle.md, section "One layout per release"
(WL-LAY-1, WL-REL-1 to WL-REL-3), and vLLM's victim (WL-PRE-3), each with the
values written by hand from the wheels' `vllm/v1/core/sched/scheduler.py`,
and broken variants (the real method with one named change) that the
contracts catch.
"""

from __future__ import annotations

from typing import Any

import icontract
import pytest
from waiting_variants import Change, broken_variant

from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.waiting.places import LAYOUTS, RULES, PauseState

RUN, SKIP, STOP, NO_TOKENS = (
    StepDecision.RUN,
    StepDecision.SKIP,
    StepDecision.STOP,
    StepDecision.NO_TOKENS,
)
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
KV_LAYOUTS = ("vllm-0.31", "vllm-0.32", "vllm-0.33")


def _ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


def _with_kv_and_waiting(layout: str) -> WaitingQueues:
    """`k` holds KV blocks (kv_holding_waiting), `w` does not (waiting), `r` runs."""
    wq = WaitingQueues("fcfs", layout=layout)
    wq.enqueue(Request("r"))
    wq.schedule_step(lambda r: RUN)
    wq.enqueue(Request("w", arrival_time=1.0))
    wq.enqueue(Request("k", arrival_time=2.0, status=KV))
    return wq


# -- WL-LAY-1: the four layouts


def test_four_layouts_and_their_rules() -> None:
    """WL-LAY-1: one layout per release, 0.31.0 onwards with kv_holding_waiting."""
    assert LAYOUTS == ("vllm-0.30", "vllm-0.31", "vllm-0.32", "vllm-0.33")
    for layout in LAYOUTS:
        wq = WaitingQueues("priority", layout=layout)
        assert wq.layout == layout and wq.pause_state is PauseState.UNPAUSED
        assert hasattr(wq, "kv_holding_waiting") == (layout != "vllm-0.30")
        assert hasattr(wq, "skipped_waiting") == (layout == "vllm-0.30")
    # Each release differs from the one before it in exactly one rule.
    rules = [RULES[layout] for layout in LAYOUTS]
    for before, after in zip(rules, rules[1:], strict=False):
        assert sum(a != b for a, b in zip(before, after, strict=True)) == 1
    with pytest.raises(ValueError, match="WL-LAY-1: unknown layout 'vllm-0.34'; valid layouts"):
        WaitingQueues("fcfs", layout="vllm-0.34")


# -- WL-REL-1: the pause states


@pytest.mark.parametrize("layout", LAYOUTS)
def test_paused_all_takes_nothing(layout: str) -> None:
    """WL-REL-1: under PAUSED_ALL no release runs its waiting loop."""
    wq = _with_kv_and_waiting(layout)
    wq.set_pause_state(PauseState.PAUSED_ALL)
    asked: list[str] = []

    def check(request: Any) -> StepDecision:
        asked.append(request.request_id)
        return RUN

    assert wq.schedule_step(check) == []
    assert asked == [] and wq.select_waiting_queue() is None
    assert _ids(wq.running) == ["r"]


@pytest.mark.parametrize(
    ("layout", "ran", "left_waiting"),
    [
        ("vllm-0.30", [], ["w"]),  # no loop under any pause (the KV request is in skipped)
        ("vllm-0.31", [], ["w"]),  # no loop under any pause
        ("vllm-0.32", ["k"], ["w"]),  # kv_holding_waiting drains, waiting does not
        ("vllm-0.33", ["k"], ["w"]),
    ],
)
def test_paused_new_by_release(layout: str, ran: list[str], left_waiting: list[str]) -> None:
    """WL-REL-1: PAUSED_NEW: 0.30.0 and 0.31.0 take nothing; 0.32.0 and 0.33.0 take only
    the requests holding KV blocks."""
    wq = _with_kv_and_waiting(layout)
    wq.set_pause_state("paused_new")

    def check(request: Any) -> StepDecision:
        return RUN

    ran_now = wq.schedule_step(check, lambda r: True)
    assert _ids(ran_now) == ran
    assert _ids(wq.waiting) == left_waiting
    # Unpaused, the same step takes the rest.
    wq.set_pause_state(PauseState.UNPAUSED)
    wq.schedule_step(check, lambda r: True)
    assert sorted(_ids(wq.running)) == ["k", "r", "w"]


@pytest.mark.parametrize(
    ("layout", "paused_new"),
    [
        ("vllm-0.30", 1),  # len(running)
        ("vllm-0.31", 1),
        ("vllm-0.32", 2),  # running + kv_holding_waiting (k, s) - paused sessions (s)
        ("vllm-0.33", 2),
    ],
)
def test_num_unfinished_by_release(layout: str, paused_new: int) -> None:
    """WL-REL-2: `get_num_unfinished_requests` of each release, in each pause state."""
    wq = WaitingQueues("fcfs", layout=layout)
    wq.enqueue(Request("r"))
    wq.enqueue(Request("s"))
    wq.schedule_step(lambda r: RUN)
    wq.await_stream(wq.running[1])  # s: a paused session, no longer running
    wq.enqueue(Request("w", arrival_time=1.0))
    wq.enqueue(Request("k", arrival_time=2.0, status=KV))
    assert _ids(wq.running) == ["r"] and wq.num_paused_sessions == 1
    assert wq.num_unfinished == 3  # r, w, k (s is a paused session: not counted)
    wq.set_pause_state(PauseState.PAUSED_NEW)
    assert wq.num_unfinished == paused_new
    wq.set_pause_state(PauseState.PAUSED_ALL)
    assert wq.num_unfinished == 0


@pytest.mark.parametrize(
    ("layout", "paused_new"),
    [("vllm-0.30", 2), ("vllm-0.31", 2), ("vllm-0.32", 3), ("vllm-0.33", 3)],
)
def test_num_unfinished_adds_the_places_and_takes_the_sessions_away(
    layout: str, paused_new: int
) -> None:
    """WL-REL-2: the count is a sum of the places less the paused sessions, whatever
    their sizes. Two running (r, q), one in waiting (w), and aside a paused session
    (s) and a blocked request (k): unpaused 2 + 1 + 2 - 1 = 4; under PAUSED_NEW
    0.30.0 and 0.31.0 count the two running, 0.32.0 and 0.33.0 2 + 2 - 1 = 3."""
    wq = WaitingQueues("fcfs", layout=layout)
    for rid in ("r", "q", "s"):
        wq.enqueue(Request(rid, arrival_time=float(ord(rid))))
    wq.schedule_step(lambda r: RUN)
    wq.await_stream(wq.running[2])  # s: a paused session, no longer running
    wq.enqueue(Request("w", arrival_time=200.0))
    wq.enqueue(Request("k", arrival_time=201.0, status=KV))
    assert (_ids(wq.running), _ids(wq.waiting)) == (["r", "q"], ["w"])
    assert sorted(_ids(wq._aside)) == ["k", "s"] and wq.num_paused_sessions == 1
    assert wq.num_unfinished == 4
    wq.set_pause_state(PauseState.PAUSED_NEW)
    assert wq.num_unfinished == paused_new


def test_bad_pause_state_changes_nothing() -> None:
    """WL-REL-1: an unknown pause state is refused in one line; the state is unchanged."""
    wq = WaitingQueues("fcfs", layout="vllm-0.32")
    wq.set_pause_state(PauseState.PAUSED_NEW)
    with pytest.raises(ValueError, match="WL-REL-1: unknown pause state 'paused'; valid states"):
        wq.set_pause_state("paused")
    assert wq.pause_state is PauseState.PAUSED_NEW


PauseIgnored = broken_variant(
    "PauseIgnored",
    Change(
        "_loop_runs",
        "runs the waiting loop whatever the pause state",
        "if self.pause_state is PauseState.UNPAUSED:",
        "if True:",
    ),
)
PausedNewTakesWaiting = broken_variant(
    "PausedNewTakesWaiting",
    Change(
        "_select",
        "under PAUSED_NEW falls back to waiting once kv_holding_waiting is empty",
        "return self.kv_holding_waiting or None",
        "return self.kv_holding_waiting or self.waiting or None",
    ),
)


@pytest.mark.parametrize(
    ("variant", "layout", "state"),
    [
        (PauseIgnored, "vllm-0.30", PauseState.PAUSED_ALL),
        (PauseIgnored, "vllm-0.31", PauseState.PAUSED_NEW),
        (PausedNewTakesWaiting, "vllm-0.32", PauseState.PAUSED_NEW),
    ],
)
def test_a_step_that_ignores_the_pause_is_caught(variant: Any, layout: str, state: Any) -> None:
    """WL-REL-1: the contracts catch a step that takes what the pause forbids."""
    wq = variant("fcfs", layout=layout)
    wq.enqueue(Request("w"))
    wq.enqueue(Request("k", arrival_time=1.0, status=KV))
    wq.set_pause_state(state)
    with pytest.raises(icontract.ViolationError, match="WL-REL-1"):
        wq.schedule_step(lambda r: RUN, lambda r: True)


# -- WL-REL-3: a head with no tokens


@pytest.mark.parametrize(
    ("layout", "ran", "waiting", "deferred"),
    [
        ("vllm-0.30", [], ["z", "b"], None),  # STOP: z stays at the head, the step ends
        ("vllm-0.31", [], ["z", "b"], []),
        ("vllm-0.32", [], ["z", "b"], []),
        ("vllm-0.33", ["b"], ["z"], ["z"]),  # SKIP: z deferred, b runs
    ],
)
def test_no_tokens_by_release(
    layout: str, ran: list[str], waiting: list[str], deferred: list[str] | None
) -> None:
    """WL-REL-3: NO_TOKENS ends the step up to 0.32.0 and skips the head in 0.33.0."""
    wq = WaitingQueues("fcfs", layout=layout)
    wq.enqueue(Request("z"))
    wq.enqueue(Request("b", arrival_time=1.0))
    got = wq.schedule_step(lambda r: NO_TOKENS if r.request_id == "z" else RUN)
    assert _ids(got) == ran and _ids(wq.waiting) == waiting
    if deferred is not None:
        assert sorted(wq.deferred_waiting) == deferred
    assert [e.decision for e in wq._last_step][:1] == [SKIP if ran else STOP]


class _EqualToAnything:
    """An answer that claims to equal every value (as `unittest.mock.ANY` does)."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "<equal to anything>"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_release_decision_takes_only_no_tokens_itself_as_no_tokens(layout: str) -> None:
    """WL-REL-3, WL-STEP-9: only the member NO_TOKENS is the release's to decide; an
    answer of `check` that merely claims to equal it (equal to anything) is not
    taken as a STOP or a SKIP: it is passed on and refused as not a StepDecision,
    and the head stays where it was."""
    wq = WaitingQueues("fcfs", layout=layout)
    wq.enqueue(Request("z"))
    with pytest.raises(TypeError, match="WL-STEP-9: check returned <equal to anything>, not a"):
        wq.schedule_step(lambda r: _EqualToAnything())  # type: ignore[arg-type, return-value]
    assert _ids(wq.waiting) == ["z"] and not wq.running


# -- WL-PRE-3: vLLM's victim


def _running(policy: str, specs: list[tuple[str, int, float]]) -> WaitingQueues:
    wq = WaitingQueues(policy, layout="vllm-0.33")
    for rid, priority, arrival in specs:
        wq.enqueue(Request(rid, priority, arrival))
    wq.schedule_step(lambda r: RUN)
    return wq


def test_priority_victim_is_the_largest_key_first_on_a_tie() -> None:
    """WL-PRE-3: PRIORITY takes the largest (priority, arrival_time); on a tie the first
    of those in `running` (vLLM's `max`), whatever the request_id."""
    wq = _running("priority", [("a", 0, 0.0), ("c", 2, 1.0), ("b", 2, 1.0), ("d", 1, 5.0)])
    assert _ids(wq.running) == ["a", "d", "b", "c"]  # key order: b before c (request_id)
    victim = wq.preempt()
    assert victim.request_id == "b" and victim.status is RequestStatus.PREEMPTED
    assert _ids(wq.running) == ["a", "d", "c"]
    assert wq.preempt().request_id == "c"
    assert wq.preempt().request_id == "d"


def test_fcfs_victim_is_the_last_running() -> None:
    """WL-PRE-3: FCFS takes the last in `running`, whatever its priority."""
    wq = _running("fcfs", [("a", 5, 0.0), ("b", 0, 1.0), ("c", 0, 2.0)])
    assert wq.preempt().request_id == "c"
    assert _ids(wq.waiting) == ["c"] and _ids(wq.running) == ["a", "b"]
    named = wq.running[0]
    assert wq.preempt(named) is named  # a request named is still the one preempted


def test_no_victim_when_nothing_runs() -> None:
    """WL-PRE-3: with nothing running, preempt() refuses in one line and changes nothing."""
    wq = WaitingQueues("priority")
    wq.enqueue(Request("w"))
    with pytest.raises(ValueError, match="WL-PRE-3: preempt.. with no request named"):
        wq.preempt()
    assert _ids(wq.waiting) == ["w"]


VictimFirstRunning = broken_variant(
    "VictimFirstRunning",
    Change(
        "_victim",
        "FCFS takes the first in running",
        "return self.running[-1]",
        "return self.running[0]",
    ),
)
VictimLastOnTie = broken_variant(
    "VictimLastOnTie",
    Change(
        "_victim",
        "PRIORITY breaks a tie to the last in running",
        "max(self.running, key",
        "max(reversed(self.running), key",
    ),
)


@pytest.mark.parametrize(
    ("variant", "policy"), [(VictimFirstRunning, "fcfs"), (VictimLastOnTie, "priority")]
)
def test_a_wrong_victim_is_caught(variant: Any, policy: str) -> None:
    """WL-PRE-3: the contract states vLLM's rule apart from the body and catches a wrong one."""
    wq = variant(policy, layout="vllm-0.31")
    for rid, arrival in [("a", 0.0), ("b", 1.0), ("c", 1.0)]:
        wq.enqueue(Request(rid, 1, arrival))
    wq.schedule_step(lambda r: RUN)
    with pytest.raises(icontract.ViolationError, match="WL-PRE-3: with no request named"):
        wq.preempt()
