"""The waiting loop's budget guard: `schedule_step(..., should_continue=...)` (WL-STEP-10).

vLLM 0.30.0's loop is `while (waiting or skipped_waiting) and token_budget > 0`:
a spent budget ends the step before the next head is peeked, promoted or
skipped. These tests pin where the guard is asked, show that `check` alone
cannot stand in for it (against vLLM 0.30.0's outcome, written here by hand
from its wheel; `tests/upstream/test_budget_guard.py` runs the same two
requests through the real `Scheduler` of every installed release), and that
the contracts catch loops that ask it in the wrong place.
"""

from __future__ import annotations

from typing import Any

import icontract
import pytest
from waiting_variants import AsksTheGuardTwice, IgnoresTheGuard, NeverAsksTheGuard

from queueref import Request, RequestStatus, SchedulingPolicy, StepDecision, WaitingQueues

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
GRAMMAR = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
LAYOUTS = ["vllm-0.30", "vllm-0.33"]
POLICIES = [SchedulingPolicy.FCFS, SchedulingPolicy.PRIORITY]


def _ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("policy", POLICIES)
def test_guard_is_asked_before_every_examination(policy: SchedulingPolicy, layout: str) -> None:
    """WL-STEP-10: one True answer before each examined request, then the False that ends it."""
    wq = WaitingQueues(policy, layout=layout)
    for i in range(4):
        wq.enqueue(Request(f"w{i}", arrival_time=float(i)))
    wq.enqueue(Request("b", arrival_time=9.0, status=KV))
    calls: list[str] = []
    answers = iter([True, True, False])

    def should_continue() -> bool:
        calls.append("guard")
        return next(answers)

    def check(request: Any) -> StepDecision:
        calls.append(request.request_id)
        return RUN

    def promote(request: Any) -> bool:
        calls.append(f"promote {request.request_id}")
        return False

    ran = wq.schedule_step(check, promote, should_continue=should_continue)
    if layout == "vllm-0.30" and policy is SchedulingPolicy.PRIORITY:  # b has the largest key
        assert _ids(ran) == ["w0", "w1"]
        assert calls == ["guard", "w0", "guard", "w1", "guard"]
    else:  # b is examined first: skipped_waiting (FCFS) or kv_holding_waiting (vllm-0.33)
        assert _ids(ran) == ["w0"]
        assert calls == ["guard", "promote b", "guard", "w0", "guard"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_guard_false_at_once_touches_nothing(layout: str) -> None:
    """WL-STEP-10: a False first answer ends the step before any queue is selected."""
    wq = WaitingQueues("fcfs", layout=layout)
    wq.enqueue(Request("g", status=GRAMMAR))
    wq.enqueue(Request("a", arrival_time=1.0))
    asked: list[str] = []

    def promote(request: Any) -> bool:
        asked.append(request.request_id)
        return True

    assert wq.schedule_step(lambda r: RUN, promote, should_continue=lambda: False) == []
    assert asked == []
    assert wq.select_waiting_queue() is not None and wq.running == []
    assert {r.request_id: r.status for r in [*wq.waiting]} | {
        r.request_id: r.status
        for r in (wq.skipped_waiting if layout == "vllm-0.30" else wq.kv_holding_waiting)
    } == {"g": GRAMMAR, "a": RequestStatus.WAITING}


def test_guard_not_asked_on_empty_queues() -> None:
    """WL-STEP-10: the guard is asked only while a queue is not empty (vLLM 0.30.0 tests
    `waiting or skipped_waiting` first)."""
    wq = WaitingQueues("priority")
    asked: list[int] = []

    def ask(answer: bool) -> bool:
        asked.append(1)
        return answer

    assert wq.schedule_step(lambda r: RUN, should_continue=lambda: ask(False)) == []
    assert asked == []
    wq.enqueue(Request("a"))
    assert _ids(wq.schedule_step(lambda r: RUN, should_continue=lambda: ask(True))) == ["a"]
    assert asked == [1]  # asked once; afterwards both queues were empty


def test_guard_must_answer_a_bool_and_the_step_stays_consistent() -> None:
    """WL-STEP-9, WL-STEP-10: a non-bool answer is a TypeError; skipped ones are parked."""
    wq = WaitingQueues("fcfs")
    wq.enqueue(Request("a"))
    wq.enqueue(Request("b", arrival_time=1.0))
    answers = iter([True, 1])
    with pytest.raises(TypeError, match="WL-STEP-9: should_continue returned 1"):
        wq.schedule_step(lambda r: SKIP, should_continue=lambda: next(answers))  # type: ignore[arg-type,return-value]
    assert _ids(wq.skipped_waiting) == ["a"] and _ids(wq.waiting) == ["b"]
    with pytest.raises(TypeError, match="WL-STEP-1"):
        wq.schedule_step(lambda r: RUN, should_continue=3)  # type: ignore[arg-type]


def test_guard_callback_cannot_reenter() -> None:
    """WL-STEP-9: should_continue may not call a mutating method of the instance."""
    wq = WaitingQueues("fcfs")
    wq.enqueue(Request("a"))

    def sneaky() -> bool:
        wq.enqueue(Request("x"))
        return True

    with pytest.raises(RuntimeError, match="WL-STEP-9"):
        wq.schedule_step(lambda r: RUN, should_continue=sneaky)
    assert _ids(wq.waiting) == ["a"]


# ---------------------------------------------------------------------------
# check alone cannot emulate the guard (against vLLM 0.30.0's loop)


# vLLM 0.30.0 (`vllm/v1/core/sched/scheduler.py`, `Scheduler.schedule()`, read from the
# wheel): PRIORITY, `a` (priority 0) in `waiting` and a grammar-blocked `g` (priority 1,
# its grammar compiled) in `skipped_waiting`; the heads' keys pick `waiting`, `a` takes
# the whole one-token budget and `while (self.waiting or self.skipped_waiting) and
# token_budget > 0` ends the step before `g` is peeked: `_try_promote_blocked_waiting_request`
# never runs for it. Written by hand; tests/upstream/test_budget_guard.py checks the same
# outcome on the real Scheduler.
VLLM_030_OUTCOME = {"a": RequestStatus.RUNNING, "g": GRAMMAR}


def _queueref(use_guard: bool, promote_answer: bool) -> tuple[dict[str, RequestStatus], list[str]]:
    wq = WaitingQueues("priority")
    a, g = Request("a", priority=0), Request("g", priority=1, status=GRAMMAR)
    wq.enqueue(a)
    wq.enqueue(g)
    budget = [1]
    offered: list[str] = []

    def check(request: Any) -> StepDecision:
        if budget[0] <= 0:  # the emulation: STOP once the budget is spent
            return STOP
        budget[0] -= 1
        return RUN

    def promote(request: Any) -> bool:
        offered.append(request.request_id)
        if promote_answer:
            request.status = RequestStatus.WAITING
        return promote_answer

    wq.schedule_step(check, promote, should_continue=(lambda: budget[0] > 0) if use_guard else None)
    return {"a": a.status, "g": g.status}, offered


def test_check_alone_cannot_emulate_the_guard() -> None:
    """WL-STEP-10: with the guard, queueref ends as vLLM 0.30.0 does and never offers `g`
    to try_promote. Without it, whatever try_promote answers, the outcome differs: the
    truthful answer (the grammar compiled) leaves `g` WAITING where vLLM leaves it
    WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR, and any answer means the promotion (with its
    side effects in vLLM, e.g. recording a grammar error) ran for a head vLLM never
    reaches."""
    vllm = VLLM_030_OUTCOME
    with_guard, offered = _queueref(use_guard=True, promote_answer=True)
    assert with_guard == vllm and offered == []
    truthful, offered = _queueref(use_guard=False, promote_answer=True)
    assert truthful != vllm and truthful["g"] is RequestStatus.WAITING and offered == ["g"]
    untruthful, offered = _queueref(use_guard=False, promote_answer=False)
    assert offered == ["g"]  # the emulation consults try_promote where vLLM does not


# ---------------------------------------------------------------------------
# broken loops (tests/helpers/waiting_variants.py): the contracts catch a guard asked
# in the wrong place


@pytest.mark.contracts
@pytest.mark.parametrize("variant", [IgnoresTheGuard, NeverAsksTheGuard, AsksTheGuardTwice])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_contracts_catch_a_misplaced_guard(variant: type[WaitingQueues], layout: str) -> None:
    """WL-STEP-10: each broken guard is caught by the WL-STEP-10 contracts."""

    def scenario(wq: WaitingQueues) -> None:
        for rid in ["a", "b", "c"]:
            wq.enqueue(Request(rid, arrival_time=float(ord(rid))))
        answers = iter([True, False, True, True, True, True, True])
        wq.schedule_step(lambda r: RUN, should_continue=lambda: next(answers))

    scenario(WaitingQueues("fcfs", layout=layout))
    with pytest.raises(icontract.ViolationError, match="WL-STEP-10"):
        scenario(variant("fcfs", layout=layout))
