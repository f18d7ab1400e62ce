"""Gaps in the tests of queueref.waiting.step, found by `make mutation`.

`waiting_step` holds the lifecycle's queue selection (`select_waiting_queue`) and
its scheduling step (`schedule_step`), with their contracts. Four kinds of test:

* a broken `WaitingQueues` (`tests/helpers/waiting_variants.py`: the real method with one
  named change; a hand-written subclass where the bug needs a name the method's
  module does not have) caught by the clause that states the rule, with that
  clause's ID and text. Postconditions run bottom-up, and the deep ones (the list
  model of a step, the examination order) catch most bugs first, so a cheap clause
  is shown with deep checks off (`cheap_contracts`);
* the same bug on an instance whose layout name was built at run time (equal to
  "vllm-0.30" or "vllm-0.33", not the constant's object): a clause must not skip
  its check for it;
* the preconditions' own messages, and the checks the method keeps in its body for
  `python -O` (called without the contracts, `inspect.unwrap`);
* valid runs the contracts must accept: counts past CPython's small-int cache,
  numpy arrival times (whose comparisons answer `numpy.bool_`, not `bool`).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from waiting_gap_helpers import answering, built_name, enqueue_ids, ids_of, violation_message
from waiting_variants import (
    Change,
    ParksWithoutReversal,
    SkippedFirstPriority,
    WaitingBeforeKVHolding,
    WaitingFirst,
    broken_variant,
)

import queueref.config
from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.queues.base import RequestQueue
from queueref.waiting.model import LAYOUT_V030, LAYOUT_V033

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS

# -- broken variants, each the real method with one named change

_PRIORITY_TIE = "return self.waiting or self.skipped_waiting or None"
_PRIORITY_SKIPPED = "        return self.skipped_waiting\n"

SelectsNothing = broken_variant(
    "SelectsNothing",
    Change(
        "_select",
        "PRIORITY selects no queue when only waiting holds requests",
        _PRIORITY_TIE,
        "return self.skipped_waiting or None",
    ),
)
SelectsAnEmptyQueue = broken_variant(
    "SelectsAnEmptyQueue",
    Change(
        "_select",
        "PRIORITY selects waiting when both queues are empty",
        _PRIORITY_TIE,
        "return self.waiting or self.skipped_waiting or self.waiting",
    ),
)
WaitingFirstPriority = broken_variant(
    "WaitingFirstPriority",
    Change(
        "_select",
        "PRIORITY selects waiting whatever the heads' keys",
        _PRIORITY_SKIPPED,
        "        return self.waiting\n",
    ),
)
SelectsANewQueue = broken_variant(
    "SelectsANewQueue",
    Change(
        "_select",
        "PRIORITY selects a new queue instead of skipped_waiting",
        _PRIORITY_SKIPPED,
        "        return create_request_queue(self.policy)\n",
    ),
)
StopMovesTheHeadAside = broken_variant(
    "StopMovesTheHeadAside",
    Change(
        "schedule_step",
        "on STOP moves the head to the front of the layout's second queue",
        "StepDecision.STOP:\n                break\n",
        "StepDecision.STOP:\n"
        "                queue.pop_request()\n"
        "                self._aside.prepend_request(request)\n"
        "                self._where[request.request_id] = self._aside_place\n"
        "                break\n",
    ),
)
RunStaysDeferred = broken_variant(
    "RunStaysDeferred",
    Change(
        "_run",
        "vllm-0.33: a request that runs stays in deferred_waiting",
        "self.deferred_waiting.discard(request.request_id)",
        "pass",
    ),
)
ParksInWaiting = broken_variant(
    "ParksInWaiting",
    Change(
        "_skip",
        "vllm-0.30: records a skipped request as waiting",
        "self._where[request.request_id] = IN_SKIPPED",
        "self._where[request.request_id] = IN_WAITING",
    ),
    Change(
        "_park",
        "and parks the skipped requests in front of waiting",
        "self.skipped_waiting.prepend_requests(step_skipped)",
        "self.waiting.prepend_requests(step_skipped)",
    ),
)
DropsTheUnexaminedHead = broken_variant(
    "DropsTheUnexaminedHead",
    Change(
        "schedule_step",
        "when the budget ends the step, drops the head it did not examine (and forgets it)",
        "self._slots_full(max_running):\n",
        "self._slots_full(max_running):\n"
        "                dropped = self.waiting.pop_request()\n"
        "                del self._known[dropped.request_id], self._where[dropped.request_id]\n",
    ),
)
RequeuesARunningRequest = broken_variant(
    "RequeuesARunningRequest",
    Change(
        "schedule_step",
        "a step that runs nothing puts the last running request back in front of waiting",
        "    return scheduled",
        "    if not scheduled and self.running:\n"
        "        moved = self.running.pop()\n"
        "        moved.status = RequestStatus.PREEMPTED\n"
        "        self.waiting.prepend_request(moved)\n"
        "        self._where[moved.request_id] = IN_WAITING\n"
        "    return scheduled",
    ),
)
FinishesARunningRequest = broken_variant(
    "FinishesARunningRequest",
    Change(
        "schedule_step",
        "a step that runs nothing finishes the last running request",
        "    return scheduled",
        "    if not scheduled and self.running:\n"
        "        done = self.running.pop()\n"
        "        done.status = RequestStatus.FINISHED_STOPPED\n"
        "        self.finished[done.request_id] = done\n"
        "        self._where[done.request_id] = 'finished'\n"
        "    return scheduled",
    ),
)
ForgetsAFinishedRequest = broken_variant(
    "ForgetsAFinishedRequest",
    Change(
        "schedule_step",
        "a step forgets the first finished request",
        "    return scheduled",
        "    for gone in list(self.finished)[:1]:\n"
        "        del self.finished[gone], self._known[gone], self._where[gone]\n"
        "    return scheduled",
    ),
)


class _StandIn:
    """Not the queue it stands for, but equal to it (a value-like view of it)."""

    def __init__(self, queue: RequestQueue) -> None:
        self.queue = queue

    def __eq__(self, other: object) -> bool:
        return other is self.queue

    __hash__ = None  # type: ignore[assignment]


SelectsAStandIn = broken_variant(
    "SelectsAStandIn",
    Change(
        "_select",
        "PRIORITY with at most one queue non-empty selects an object equal to the right "
        "queue instead of the queue itself",
        "return self.waiting or self.skipped_waiting or None",
        "chosen = self.waiting or self.skipped_waiting or None\n"
        "    return None if chosen is None else _StandIn(chosen)",
    ),
    uses={"_StandIn": _StandIn},
)


# -- helpers


@pytest.fixture(autouse=True)
def deep_contracts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks on (as tests/conftest.py sets them), whatever the environment says."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)


@pytest.fixture
def cheap_contracts(deep_contracts: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks off: the default contracts, without the list model of a step."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)


#: Each layout by its constant and by a name built at run time.
V030_NAMES = [
    pytest.param(LAYOUT_V030, id="vllm-0.30"),
    pytest.param(built_name(LAYOUT_V030), id="vllm-0.30-built"),
]
V033_NAMES = [
    pytest.param(LAYOUT_V033, id="vllm-0.33"),
    pytest.param(built_name(LAYOUT_V033), id="vllm-0.33-built"),
]


def _run(request: Any) -> StepDecision:
    return RUN


# -- select_waiting_queue


@pytest.mark.contracts
def test_no_queue_selected_while_one_holds_requests_is_caught() -> None:
    """WL-SEL-1: a selection of no queue while waiting holds a request (PRIORITY, only
    waiting non-empty: no other clause speaks) is caught by "no queue is selected
    exactly when both are empty"."""
    wq = SelectsNothing("priority")
    enqueue_ids(wq, "a")
    message = violation_message(wq.select_waiting_queue)
    assert "WL-SEL-1: no queue is selected exactly when both are empty" in message


@pytest.mark.contracts
def test_a_queue_selected_while_both_are_empty_is_caught() -> None:
    """WL-SEL-1: selecting the empty waiting queue when both queues are empty (PRIORITY:
    the only clause on an empty instance) is caught by "no queue is selected exactly
    when both are empty"."""
    wq = SelectsAnEmptyQueue("priority")
    message = violation_message(wq.select_waiting_queue)
    assert "WL-SEL-1: no queue is selected exactly when both are empty" in message


@pytest.mark.contracts
@pytest.mark.parametrize("layout", V030_NAMES)
def test_fcfs_selecting_waiting_first_is_caught(layout: str) -> None:
    """WL-SEL-1: FCFS selecting waiting while skipped_waiting holds a request is caught
    by "FCFS selects skipped_waiting whenever it is not empty", also on an instance
    whose layout name is equal to "vllm-0.30" but not the constant."""
    wq = WaitingFirst("fcfs", layout=layout)
    enqueue_ids(wq, "w")
    enqueue_ids(wq, "g", status=KV)
    message = violation_message(wq.select_waiting_queue)
    assert "WL-SEL-1: FCFS selects skipped_waiting whenever it is not empty" in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "waiting_priority", "layout"),
    [
        # skipped_waiting despite a smaller waiting head
        pytest.param(SkippedFirstPriority, 0, LAYOUT_V030, id="skipped-first"),
        pytest.param(SkippedFirstPriority, 0, built_name(LAYOUT_V030), id="skipped-first-built"),
        # waiting despite a smaller skipped head
        pytest.param(WaitingFirstPriority, 5, LAYOUT_V030, id="waiting-first"),
    ],
)
def test_priority_selecting_against_the_keys_is_caught(
    variant: type[WaitingQueues], waiting_priority: int, layout: str
) -> None:
    """WL-SEL-2: with both queues non-empty PRIORITY selects waiting exactly when its
    head's key is strictly smaller: a selection of skipped_waiting against a smaller
    waiting head, or of waiting against a smaller skipped head, is caught by
    "PRIORITY selects waiting exactly when its head is strictly smaller"."""
    wq = variant("priority", layout=layout)
    enqueue_ids(wq, "w", priority=waiting_priority)
    enqueue_ids(wq, "g", status=KV, priority=1)
    message = violation_message(wq.select_waiting_queue)
    assert "WL-SEL-2: PRIORITY selects waiting exactly when its head is strictly smaller" in (
        message
    )


def test_priority_selection_with_numpy_arrival_times_is_accepted() -> None:
    """WL-SEL-2: arrival times may be numpy floats (`numpy.float64` is a float, which
    the shape check admits), and their comparison answers `numpy.bool_`, not `bool`:
    the selection is still judged by the truth of "waiting's head is smaller"."""
    for waiting_time, skipped_time in ((1.0, 2.0), (2.0, 1.0)):
        wq = WaitingQueues("priority")
        wq.enqueue(Request("w", 0, np.float64(waiting_time)))
        wq.enqueue(Request("g", 0, np.float64(skipped_time), KV))
        expected = wq.waiting if waiting_time < skipped_time else wq.skipped_waiting
        assert wq.select_waiting_queue() is expected


@pytest.mark.contracts
@pytest.mark.parametrize("layout", V033_NAMES)
def test_vllm_033_selecting_waiting_first_is_caught(layout: str) -> None:
    """WL-L33-2: vllm-0.33 selecting waiting while kv_holding_waiting holds a request is
    caught by "vllm-0.33 selects kv_holding_waiting whenever it is not empty", also on
    an instance whose layout name is equal to "vllm-0.33" but not the constant."""
    wq = WaitingBeforeKVHolding("fcfs", layout=layout)
    enqueue_ids(wq, "w")
    enqueue_ids(wq, "k", status=KV)
    message = violation_message(wq.select_waiting_queue)
    assert "WL-L33-2: vllm-0.33 selects kv_holding_waiting whenever it is not empty" in message


@pytest.mark.contracts
def test_a_selection_of_another_queue_is_caught() -> None:
    """WL-SEL-1: PRIORITY selecting a new queue where skipped_waiting's head is the
    smaller (the PRIORITY clause asks only whether waiting was chosen) is caught by
    "the selection is one of the two queues"."""
    wq = SelectsANewQueue("priority")
    enqueue_ids(wq, "w", priority=5)
    enqueue_ids(wq, "g", status=KV, priority=1)
    message = violation_message(wq.select_waiting_queue)
    assert "WL-SEL-1: the selection is one of the two queues" in message


@pytest.mark.contracts
@pytest.mark.parametrize("status", [RequestStatus.WAITING, KV], ids=["waiting", "skipped"])
def test_a_selection_equal_to_a_queue_but_not_it_is_caught(status: RequestStatus) -> None:
    """WL-SEL-1: the selection is one of the two queues themselves: an object equal to
    waiting (or to skipped_waiting) that is not it -- PRIORITY with one queue
    non-empty, where no other clause speaks -- is caught by "the selection is one of
    the two queues"."""
    wq = SelectsAStandIn("priority")
    enqueue_ids(wq, "a", status=status)
    chosen = wq.waiting if status is RequestStatus.WAITING else wq.skipped_waiting
    assert _StandIn(chosen) == chosen
    message = violation_message(wq.select_waiting_queue)
    assert "WL-SEL-1: the selection is one of the two queues" in message


# -- schedule_step: the preconditions and the checks kept in the body


@pytest.mark.contracts
def test_a_bad_max_running_is_refused_by_the_precondition() -> None:
    """WL-STEP-1: max_running is None or an int >= 0: -1 is refused by the precondition
    (the ValueError names it), before anything changes."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "a")
    with pytest.raises(ValueError, match="WL-STEP-1: max_running is None or an int >= 0"):
        wq.schedule_step(_run, max_running=-1)
    assert ids_of(wq.waiting) == ["a"] and not wq.running


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("check", "try_promote", "should_continue"),
    [(5, None, None), (_run, 5, None), (_run, None, 5)],
    ids=["check", "try_promote", "should_continue"],
)
def test_a_callback_that_is_not_callable_is_refused_by_the_precondition(
    check: Any, try_promote: Any, should_continue: Any
) -> None:
    """WL-STEP-1: check, try_promote and should_continue (when given) are callables:
    each one that is not is refused by the precondition (the TypeError names it),
    before anything changes."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "a")
    with pytest.raises(
        TypeError,
        match=r"WL-STEP-1: check \(and try_promote, should_continue, when given\) are callables",
    ):
        wq.schedule_step(check, try_promote, should_continue=should_continue)
    assert ids_of(wq.waiting) == ["a"] and not wq.running


@pytest.mark.contracts
def test_a_step_while_a_step_is_in_progress_is_refused_by_the_precondition() -> None:
    """WL-STEP-9: schedule_step is not called while a step is in progress. icontract does
    not check a method's contracts again on a call from inside that very method (the
    body's own check refuses that one), so the precondition speaks for a call from
    another thread, started by a callback: it is refused by "schedule_step is not
    called from a step's callbacks" (a RuntimeError), and the step goes on."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "a")
    errors: list[BaseException] = []

    def step_from_another_thread() -> None:
        try:
            wq.schedule_step(_run)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            errors.append(error)

    def check(request: Any) -> StepDecision:
        thread = threading.Thread(target=step_from_another_thread)
        thread.start()
        thread.join()
        return RUN

    assert ids_of(wq.schedule_step(check)) == ["a"] and len(errors) == 1
    assert isinstance(errors[0], RuntimeError)
    assert "WL-STEP-9: schedule_step is not called from a step's callbacks" in str(errors[0])


@pytest.mark.guard
def test_a_try_promote_that_is_not_callable_is_refused_without_contracts() -> None:
    """WL-STEP-1: without the contracts (`python -O`) the body refuses a try_promote
    that is not callable even when check is, with a TypeError naming the rule, before
    anything runs."""
    body = inspect.unwrap(WaitingQueues.schedule_step)
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "a")
    with pytest.raises(TypeError, match="WL-STEP-1: check .* must be callables"):
        body(wq, _run, 5)
    assert ids_of(wq.waiting) == ["a"] and not wq.running


def test_max_running_and_should_continue_are_keyword_only() -> None:
    """WL-STEP-1: the signature is `schedule_step(check, try_promote=None, *,
    max_running=None, should_continue=None)`: check may be passed by name, and a third
    positional argument is refused rather than read as max_running."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "a", "b")
    with pytest.raises(TypeError, match="positional argument"):
        wq.schedule_step(_run, None, 0)  # type: ignore[call-arg]
    assert ids_of(wq.waiting) == ["a", "b"]
    assert ids_of(wq.schedule_step(check=_run, max_running=1)) == ["a"]


# -- schedule_step: the callbacks' rules (WL-STEP-9)


@pytest.mark.guard
def test_a_try_promote_that_raises_leaves_the_status_it_found() -> None:
    """WL-STEP-9: when try_promote raises, its error propagates and the examined
    request keeps the status it had before the callback (here try_promote set WAITING
    first), back in skipped_waiting."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "g", status=KV)
    (g,) = list(wq.skipped_waiting)

    def promote(request: Any) -> bool:
        request.status = RequestStatus.WAITING
        raise LookupError("no KV transfer for g")

    with pytest.raises(LookupError, match="no KV transfer for g"):
        wq.schedule_step(_run, promote)
    assert g.status is KV
    assert list(wq.skipped_waiting) == [g] and not wq.waiting and not wq.running


@pytest.mark.guard
def test_a_check_that_lowers_the_status_is_refused() -> None:
    """WL-STEP-9: check does not change the status (except to a blocked one with SKIP):
    a check that sets a PREEMPTED head back to WAITING and answers RUN is refused with
    a ValueError, the head keeps PREEMPTED and its place, nothing runs."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "p", status=RequestStatus.PREEMPTED)
    (p,) = list(wq.waiting)

    def check(request: Any) -> StepDecision:
        request.status = RequestStatus.WAITING
        return RUN

    with pytest.raises(ValueError, match=r"WL-STEP-9: check changed the status to WAITING \(RUN\)"):
        wq.schedule_step(check)
    assert p.status is RequestStatus.PREEMPTED
    assert list(wq.waiting) == [p] and not wq.running


# -- schedule_step: WL-STEP-1's counts


def test_a_step_over_three_hundred_waiting_and_finished_requests_is_accepted(
    cheap_contracts: None,
) -> None:
    """WL-STEP-1: 300 finished and 300 waiting requests, then a step that stops at the
    first head: the waiting and finished counts the postcondition compares are past
    256, where equal ints are distinct objects, and each comparison is `==`: the step
    passes its contracts."""
    wq = WaitingQueues("fcfs")
    for i in range(300):
        wq.enqueue(Request(f"f{i:03}", arrival_time=float(i)))
    for request in wq.schedule_step(_run):
        wq.finish(request)
    for i in range(300):
        wq.enqueue(Request(f"w{i:03}", arrival_time=float(i)))
    assert wq.schedule_step(lambda r: STOP) == []
    assert len(wq.finished) == 300 and len(wq.waiting) == 300 and not wq.running


def _running_x(wq: WaitingQueues) -> None:
    """`x` running, nothing waiting."""
    enqueue_ids(wq, "x")
    assert ids_of(wq.schedule_step(_run)) == ["x"]


def _finished_f(wq: WaitingQueues) -> None:
    """`f` finished, nothing waiting or running."""
    enqueue_ids(wq, "f")
    (f,) = wq.schedule_step(_run)
    wq.finish(f)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "set_up", "answers"),
    [
        # fewer waiting, more waiting, more finished, fewer finished
        (DropsTheUnexaminedHead, lambda wq: enqueue_ids(wq, "a", "b"), (True, False)),
        (RequeuesARunningRequest, _running_x, ()),
        (FinishesARunningRequest, _running_x, ()),
        (ForgetsAFinishedRequest, _finished_f, ()),
    ],
    ids=["drops", "requeues", "finishes", "forgets"],
)
def test_a_step_that_moves_requests_it_did_not_run_is_caught(
    cheap_contracts: None,
    variant: type[WaitingQueues],
    set_up: Callable[[WaitingQueues], None],
    answers: tuple[bool, ...],
) -> None:
    """WL-STEP-1: nothing but the requests that ran leaves the waiting queues, and no
    request is finished or forgotten by a step: a step that drops a head it did not
    examine, puts a running request back in waiting, finishes one, or forgets a
    finished one (each keeping the O(1) count of known requests) is caught by "the
    requests that ran were popped ...; nothing else left the waiting queues"."""
    wq = variant("fcfs")
    set_up(wq)
    guard = answering(*answers) if answers else None
    message = violation_message(lambda: wq.schedule_step(_run, should_continue=guard))
    assert (
        "WL-STEP-1: the requests that ran were popped, in order, onto the end of running, "
        "with status RUNNING; nothing else left the waiting queues" in message
    )


# -- schedule_step: the layout's clauses, also for a layout name built at run time


@pytest.mark.contracts
@pytest.mark.parametrize("layout", V030_NAMES)
def test_a_skipped_request_parked_in_waiting_is_caught(cheap_contracts: None, layout: str) -> None:
    """WL-STEP-4: vllm-0.30 parks the skipped requests in skipped_waiting: a step that
    parks them in front of waiting is caught by "every request skipped in the step
    (WL-STEP-3) ends in skipped_waiting", also for a layout name equal to
    "vllm-0.30" but not the constant."""
    wq = ParksInWaiting("fcfs", layout=layout)
    enqueue_ids(wq, "a")
    message = violation_message(lambda: wq.schedule_step(lambda r: SKIP))
    assert "WL-STEP-4: every request skipped in the step (WL-STEP-3) ends in skipped_waiting" in (
        message
    )


@pytest.mark.contracts
@pytest.mark.parametrize("layout", [*V030_NAMES, *V033_NAMES])
def test_a_stopped_head_moved_aside_is_caught_by_the_model(layout: str) -> None:
    """WL-STEP-1, WL-L33-3: STOP leaves its request where it was. A step that moves the
    stopped head from waiting to the front of the layout's second queue keeps every
    other rule (the examination order, the log, the FCFS concatenation of WL-STEP-5:
    the head moves to the same place in it) and is caught by the comparison with the
    list model of the step (deep checks), for either layout name."""
    clause = (
        "WL-STEP-1: waiting, skipped_waiting and running are what the list model"
        if layout == LAYOUT_V030
        else "WL-L33-3: waiting, kv_holding_waiting and running are what the list model"
    )
    wq = StopMovesTheHeadAside("fcfs", layout=layout)
    enqueue_ids(wq, "a", "b")
    message = violation_message(lambda: wq.schedule_step(lambda r: STOP))
    assert clause in message


@pytest.mark.contracts
@pytest.mark.parametrize("layout", V030_NAMES)
def test_fcfs_skipped_requests_parked_out_of_order_are_caught(layout: str) -> None:
    """WL-STEP-5: FCFS keeps the order of skipped_waiting + waiting: a park without the
    second reversal (two skipped requests come back in the reverse order) is caught by
    "FCFS: skipped_waiting + waiting keeps its order minus the requests that ran"
    before the list model, for either layout name."""
    wq = ParksWithoutReversal("fcfs", layout=layout)
    enqueue_ids(wq, "a", "b", "c")
    message = violation_message(
        lambda: wq.schedule_step(lambda r: RUN if r.request_id == "c" else SKIP)
    )
    assert "WL-STEP-5: FCFS: skipped_waiting + waiting keeps its order minus the requests" in (
        message
    )


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "policy", "clause"),
    [
        (SkippedFirstPriority, "priority", "WL-STEP-6: PRIORITY: each examined request"),
        (WaitingFirst, "fcfs", "WL-STEP-8: FCFS: every skipped request is examined before"),
    ],
    ids=["priority", "fcfs"],
)
@pytest.mark.parametrize("layout", V030_NAMES)
def test_an_examination_out_of_order_is_caught(
    variant: type[WaitingQueues], policy: str, clause: str, layout: str
) -> None:
    """WL-STEP-6, WL-STEP-8: a step that examines the blocked skipped request before a
    smaller waiting head (PRIORITY), or a waiting request before the skipped one
    (FCFS), is caught by that policy's examination-order clause, for either layout
    name."""
    wq = variant(policy, layout=layout)
    enqueue_ids(wq, "w")
    enqueue_ids(wq, "g", status=KV, priority=1)
    message = violation_message(lambda: wq.schedule_step(_run, lambda r: False))
    assert clause in message


@pytest.mark.contracts
@pytest.mark.parametrize("layout", V033_NAMES)
def test_a_request_that_runs_and_stays_deferred_is_caught(
    cheap_contracts: None, layout: str
) -> None:
    """WL-L33-3: a request that runs leaves deferred_waiting: a step that runs a blocked
    (so deferred) request after its promotion and leaves it deferred is caught by
    "vllm-0.33: a request that runs is no longer deferred", for either layout name."""
    wq = RunStaysDeferred("fcfs", layout=layout)
    enqueue_ids(wq, "g", status=KV)
    assert wq.deferred_waiting == {"g"}
    message = violation_message(lambda: wq.schedule_step(_run, lambda r: True))
    assert "WL-L33-3: vllm-0.33: a request that runs is no longer deferred" in message


# -- the step ends when no queue is selectable (WL-SEL-1, WL-REL-1)


@pytest.mark.parametrize("layout", ["vllm-0.32", LAYOUT_V033])
def test_schedule_step_ends_when_no_queue_is_selectable(layout: str) -> None:
    """WL-SEL-1, WL-REL-1: under PAUSED_NEW from 0.32.0 the loop runs while a queue
    holds a request, but only kv_holding_waiting may be selected: with it empty and a
    request in waiting the step ends at once, having asked should_continue once (a
    step that went on would ask again and again: it is cut short at 100 answers)."""
    wq = WaitingQueues("fcfs", layout=layout)
    enqueue_ids(wq, "w")
    wq.set_pause_state("paused_new")
    asked: list[int] = []

    def should_continue() -> bool:
        asked.append(1)
        return len(asked) < 100  # bounded: a step that never ends stops here

    assert wq.schedule_step(lambda r: RUN, should_continue=should_continue) == []
    assert len(asked) == 1 and ids_of(wq.waiting) == ["w"] and wq._last_step == []
