"""WL-STEP-10 on vLLM's real `Scheduler`: a spent token budget ends the waiting loop
before the next head is examined, so a blocked head is not promoted.

`tests/waiting/test_waiting_guard.py` states vLLM 0.30.0's outcome by hand (no
vLLM needed); this runs the same two requests through the installed release:
PRIORITY, `a` (priority 0, a prompt as long as the token budget) and `g`
(priority 1, structured output, its grammar compiled). vLLM schedules `a`,
the budget is spent, and `g` stays WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR.
queueref with `should_continue` ends the same way; emulating the guard with
`check` answering STOP does not (it offers `g` to try_promote).
"""

from __future__ import annotations

from typing import Any

import pytest
import vllm_side

from queueref import Request, RequestStatus, StepDecision, WaitingQueues

pytestmark = pytest.mark.upstream

BUDGET = 8
# Written by hand from reading each release's `Scheduler.schedule()`
# (vllm/v1/core/sched/scheduler.py: `while ... token_budget > 0` in 0.30.0-0.33.0).
EXPECTED = {"a": "RUNNING", "g": "WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR"}


def vllm_outcome() -> tuple[dict[str, int], dict[str, str]]:
    shape = vllm_side.SchedulerShape(
        policy="priority",
        num_blocks=16,
        block_size=4,
        max_num_seqs=4,
        max_num_batched_tokens=BUDGET,
    )
    scheduler = vllm_side.build_scheduler(shape)
    a = vllm_side.make_request(
        "a",
        priority=0,
        arrival_time=0.0,
        num_prompt_tokens=BUDGET,
        max_tokens=4,
        structured=False,
    )
    g = vllm_side.make_request(
        "g", priority=1, arrival_time=0.0, num_prompt_tokens=2, max_tokens=4, structured=True
    )
    scheduler.add_request(a)
    scheduler.add_request(g)
    vllm_side.make_grammar_ready(g)
    output = scheduler.schedule()
    return dict(output.num_scheduled_tokens), {"a": a.status.name, "g": g.status.name}


def queueref_outcome(use_guard: bool) -> tuple[dict[str, str], list[str]]:
    wq = WaitingQueues(
        "priority", layout="vllm-0.30" if not vllm_side.KV_HOLDING_LAYOUT else "vllm-0.33"
    )
    a = Request("a", priority=0)
    g = Request("g", priority=1, status=RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR)
    wq.enqueue(a)
    wq.enqueue(g)
    budget = [BUDGET]
    offered: list[str] = []

    def check(request: Any) -> StepDecision:
        if budget[0] <= 0:  # the emulation: STOP once the budget is spent
            return StepDecision.STOP
        budget[0] -= BUDGET
        return StepDecision.RUN

    def promote(request: Any) -> bool:
        offered.append(request.request_id)
        request.status = RequestStatus.WAITING  # its grammar has compiled
        return True

    guard = (lambda: budget[0] > 0) if use_guard else None
    wq.schedule_step(check, promote, should_continue=guard)
    return {"a": a.status.name, "g": g.status.name}, offered


def test_a_spent_budget_ends_the_step_in_vllm_as_written() -> None:
    """WL-STEP-10: the real Scheduler schedules only `a` and leaves `g` blocked."""
    scheduled, statuses = vllm_outcome()
    assert scheduled == {"a": BUDGET}
    assert statuses == EXPECTED


def test_queueref_with_the_guard_agrees_and_check_alone_does_not() -> None:
    """WL-STEP-10: with should_continue queueref ends as vLLM does; with `check`
    answering STOP it promotes `g`, which vLLM never examines."""
    _, statuses = vllm_outcome()
    with_guard, offered = queueref_outcome(use_guard=True)
    assert with_guard == statuses and offered == []
    without, offered = queueref_outcome(use_guard=False)
    assert without != statuses and without["g"] == "WAITING" and offered == ["g"]
