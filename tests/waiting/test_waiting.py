"""Unit tests of `queueref.waiting.lifecycle`: the lifecycle clauses of specs/waiting-lifecycle.md.

Each test cites the WL- clause it exercises. Bad input is checked with
`assert_rejected`: the call raises the documented error and the state is
exactly what it was. The last part runs deliberately broken variants and
shows that the contracts catch each one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import icontract
import pytest
from waiting_variants import (
    AbortMissesSkipped,
    EnqueueIgnoresBlocked,
    FinishLosesRequest,
    ForgetsToPark,
    ParksWithoutReversal,
    PreemptsToBack,
    PromotesWithoutAsking,
    SkippedFirstPriority,
    WaitingFirst,
)

import queueref.config
from queueref import Request, RequestStatus, SchedulingPolicy, StepDecision, WaitingQueues
from queueref.request import request_key
from queueref.waiting.places import IN_RUNNING, IN_WAITING

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
GRAMMAR = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
STREAM = RequestStatus.WAITING_FOR_STREAMING_REQ
BLOCKED = [GRAMMAR, KV, STREAM]
POLICIES = [SchedulingPolicy.FCFS, SchedulingPolicy.PRIORITY]


# ---------------------------------------------------------------------------
# helpers


def ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


def state(wq: WaitingQueues) -> tuple[Any, ...]:
    """Everything observable: each place in order (by identity) and every status."""
    everything = [*wq.waiting, *wq.skipped_waiting, *wq.running, *wq.finished.values()]
    return (
        [id(r) for r in wq.waiting],
        [id(r) for r in wq.skipped_waiting],
        [id(r) for r in wq.running],
        {k: id(r) for k, r in wq.finished.items()},
        {r.request_id: r.status for r in everything},
    )


def assert_rejected(
    wq: WaitingQueues, error: type[BaseException], call: Callable[[], object]
) -> BaseException:
    """The call raises `error` and leaves the state exactly as it was."""
    before = state(wq)
    with pytest.raises(error) as info:
        call()
    assert state(wq) == before
    wq.select_waiting_queue()  # a public call: the invariants (WL-CONS-1, WL-CONS-2) hold
    return info.value


def decisions(mapping: dict[str, StepDecision], default: StepDecision = STOP) -> Any:
    """A `check` callback that answers by request id and records what it was asked."""
    asked: list[str] = []

    def check(request: Any) -> StepDecision:
        asked.append(request.request_id)
        return mapping.get(request.request_id, default)

    check.asked = asked  # type: ignore[attr-defined]
    return check


def populated(policy: SchedulingPolicy) -> WaitingQueues:
    """waiting: w1 w2; skipped_waiting: s (blocked); running: r1 r2; finished: f."""
    wq = WaitingQueues(policy)
    for i, rid in enumerate(["r1", "r2", "f", "w1", "w2"]):
        wq.enqueue(Request(rid, arrival_time=float(i)))
    wq.enqueue(Request("s", arrival_time=9.0, status=KV))
    wq.schedule_step(decisions({"r1": RUN, "r2": RUN, "f": RUN}))
    wq.finish(wq.running[2])
    assert ids(wq.waiting) == ["w1", "w2"] and ids(wq.skipped_waiting) == ["s"]
    assert ids(wq.running) == ["r1", "r2"] and list(wq.finished) == ["f"]
    return wq


@pytest.fixture(params=POLICIES, ids=lambda p: p.value)
def policy(request: pytest.FixtureRequest) -> SchedulingPolicy:
    return request.param  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------
# construction, conservation


@pytest.mark.parametrize("given", ["fcfs", "priority", *POLICIES])
def test_construction(given: SchedulingPolicy | str) -> None:
    """WL-POL-1: the policy as enum or value; both queues of that policy, all empty."""
    wq = WaitingQueues(given)
    assert wq.policy is SchedulingPolicy(given)
    assert type(wq.waiting) is type(wq.skipped_waiting)
    assert type(wq.waiting).__name__.startswith(
        "FCFS" if wq.policy is SchedulingPolicy.FCFS else "Priority"
    )
    assert not wq.waiting and not wq.skipped_waiting and wq.running == [] and wq.finished == {}


def test_exported_from_the_package() -> None:
    """WL-POL-1: `WaitingQueues` and `StepDecision` are public names of `queueref`."""
    import queueref

    assert {"WaitingQueues", "StepDecision"} <= set(queueref.__all__)
    assert queueref.WaitingQueues is WaitingQueues and queueref.StepDecision is StepDecision
    assert [d.name for d in StepDecision] == ["RUN", "SKIP", "STOP", "NO_TOKENS"]


def test_each_public_name_imports_from_the_module_that_defines_it() -> None:
    """WL-POL-1: the lifecycle is built from one module per job; `lifecycle` exports
    `WaitingQueues` only; the vocabulary is in `places`, the layout names in `model`."""
    import queueref.waiting.lifecycle as lifecycle
    import queueref.waiting.model as model
    import queueref.waiting.places as places

    assert lifecycle.__all__ == ["WaitingQueues"]
    assert places.LAYOUTS == ("vllm-0.30", "vllm-0.31", "vllm-0.32", "vllm-0.33")
    assert places.IN_SKIPPED == "skipped_waiting"
    assert (
        model.LAYOUT_V030,
        model.LAYOUT_V031,
        model.LAYOUT_V032,
        model.LAYOUT_V033,
    ) == places.LAYOUTS


@pytest.mark.parametrize("module", ["queueref.waiting.lifecycle", "queueref.waiting.places"])
def test_the_examples_in_the_lifecycle_docstrings_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.guard
def test_construction_rejects_unknown_policy() -> None:
    """WL-POL-1: an unknown policy is a ValueError (RQ-POL-2)."""
    with pytest.raises(ValueError, match="RQ-POL-2"):
        WaitingQueues("lifo")


@pytest.mark.contracts
def test_invariants_catch_tampering(policy: SchedulingPolicy) -> None:
    """WL-CONS-1, WL-CONS-2: state changed behind the class's back is reported."""
    wq = populated(policy)
    wq.waiting.add_request(Request("stray"))  # known nowhere
    with pytest.raises(icontract.ViolationError, match="WL-CONS-1"):
        wq.select_waiting_queue()

    wq = populated(policy)
    wq.waiting.add_request(wq.running[0])  # duplicated
    with pytest.raises(icontract.ViolationError, match="WL-CONS-1"):
        wq.select_waiting_queue()

    wq = populated(policy)
    wq.running[0].status = RequestStatus.WAITING  # a running request that is not RUNNING
    with pytest.raises(icontract.ViolationError, match="WL-CONS-2"):
        wq.select_waiting_queue()


@pytest.mark.contracts
def test_cheap_contracts_still_count(policy: SchedulingPolicy) -> None:
    """WL-CONS-1: without deep checks, the O(1) count still catches a lost request."""
    previous = queueref.config.deep_checks()
    queueref.config.set_deep_checks(False)
    try:
        wq = populated(policy)
        wq.waiting.pop_request()
        with pytest.raises(icontract.ViolationError, match="WL-CONS-1"):
            wq.select_waiting_queue()
    finally:
        queueref.config.set_deep_checks(previous)


# ---------------------------------------------------------------------------
# enqueue


@pytest.mark.parametrize("status", BLOCKED, ids=lambda s: s.name)
def test_enqueue_blocked_goes_to_skipped(policy: SchedulingPolicy, status: RequestStatus) -> None:
    """WL-ENQ-1: each of the three blocked statuses goes to skipped_waiting."""
    wq = WaitingQueues(policy)
    wq.enqueue(Request("a"))
    wq.enqueue(Request("b", status=status))
    assert ids(wq.waiting) == ["a"] and ids(wq.skipped_waiting) == ["b"]


def test_enqueue_order(policy: SchedulingPolicy) -> None:
    """WL-ENQ-1: add_request: FCFS at the back, PRIORITY in key order; PREEMPTED is ready."""
    wq = WaitingQueues(policy)
    reqs = [
        Request("x", priority=2, arrival_time=0.0),
        Request("y", priority=0, arrival_time=1.0),
        Request("z", priority=1, arrival_time=2.0, status=RequestStatus.PREEMPTED),
    ]
    for r in reqs:
        wq.enqueue(r)
    expected = reqs if policy is SchedulingPolicy.FCFS else sorted(reqs, key=request_key)
    assert ids(wq.waiting) == ids(expected)


class _NotARequest:
    request_id = "n"
    priority = 0  # no arrival_time


class _ForeignStatus:
    request_id = "fs"
    priority = 0
    arrival_time = 0.0
    status = "WAITING"  # not a queueref RequestStatus


@pytest.mark.guard
@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda wq: wq.waiting.peek_request(), ValueError),  # the same object again
        (lambda wq: Request("w1"), ValueError),  # another object, a waiting id
        (lambda wq: Request("s", status=KV), ValueError),  # a skipped id
        (lambda wq: Request("r1"), ValueError),  # a running id
        (lambda wq: Request("f"), ValueError),  # a finished id
        (lambda wq: Request("new", status=RequestStatus.RUNNING), ValueError),
        (lambda wq: Request("new", status=RequestStatus.FINISHED_ABORTED), ValueError),
        (lambda wq: _NotARequest(), TypeError),
        (lambda wq: _ForeignStatus(), TypeError),
        (lambda wq: "w1", TypeError),
    ],
)
def test_enqueue_rejects(
    policy: SchedulingPolicy, make: Callable[[WaitingQueues], Any], error: type[Exception]
) -> None:
    """WL-ENQ-2: known ids, RUNNING/finished statuses and non-requests; nothing changes."""
    wq = populated(policy)
    bad = make(wq)
    assert_rejected(wq, error, lambda: wq.enqueue(bad))


# ---------------------------------------------------------------------------
# selection


def test_select_fcfs() -> None:
    """WL-SEL-1: skipped_waiting or waiting or None."""
    wq = WaitingQueues("fcfs")
    assert wq.select_waiting_queue() is None
    wq.enqueue(Request("a", priority=-5))
    assert wq.select_waiting_queue() is wq.waiting
    wq.enqueue(Request("b", priority=9, status=KV))  # a larger key, but skipped comes first
    assert wq.select_waiting_queue() is wq.skipped_waiting


def test_select_priority() -> None:
    """WL-SEL-2: the strictly smaller head wins; else skipped_waiting; one queue, that one."""
    wq = WaitingQueues("priority")
    assert wq.select_waiting_queue() is None
    wq.enqueue(Request("s", priority=1, arrival_time=0.0, status=KV))
    assert wq.select_waiting_queue() is wq.skipped_waiting
    wq.enqueue(Request("w", priority=1, arrival_time=1.0))
    assert wq.select_waiting_queue() is wq.skipped_waiting  # (1, 0.0, 's') < (1, 1.0, 'w')
    wq.enqueue(Request("v", priority=1, arrival_time=0.0))
    assert wq.select_waiting_queue() is wq.skipped_waiting  # (1, 0.0, 's') < (1, 0.0, 'v')
    wq.enqueue(Request("u", priority=0, arrival_time=5.0))
    assert wq.select_waiting_queue() is wq.waiting  # (0, ...) is strictly smaller


# ---------------------------------------------------------------------------
# the step


def test_step_on_empty_queues_calls_nothing(policy: SchedulingPolicy) -> None:
    """WL-STEP-1: no queue selected: an empty step, no callback called."""
    wq = WaitingQueues(policy)

    def never(request: Any) -> Any:
        raise AssertionError("no callback on an empty step")

    assert wq.schedule_step(never, never) == []


def test_step_runs_in_order_and_stops_in_place(policy: SchedulingPolicy) -> None:
    """WL-STEP-1: RUN pops into running (RUNNING), STOP leaves the head and ends the step."""
    wq = WaitingQueues(policy)
    reqs = [Request(f"r{i}", arrival_time=float(i)) for i in range(4)]
    for r in reqs:
        wq.enqueue(r)
    check = decisions({"r0": RUN, "r1": RUN, "r2": STOP, "r3": RUN})
    ran = wq.schedule_step(check)
    assert ran == reqs[:2] and wq.running == reqs[:2]
    assert all(r.status is RequestStatus.RUNNING for r in ran)
    assert check.asked == ["r0", "r1", "r2"]  # r3 never examined
    assert ids(wq.waiting) == ["r2", "r3"] and reqs[2].status is RequestStatus.WAITING


def test_step_examines_each_request_once(policy: SchedulingPolicy) -> None:
    """WL-STEP-1: every head skipped: the loop drains both queues and ends."""
    wq = WaitingQueues(policy)
    for i in range(3):
        wq.enqueue(Request(f"w{i}", arrival_time=float(i)))
        wq.enqueue(Request(f"b{i}", arrival_time=float(i) + 0.5, status=KV))
    check = decisions({}, default=SKIP)
    assert wq.schedule_step(check) == []
    assert sorted(check.asked) == ["w0", "w1", "w2"]
    assert not wq.waiting and len(wq.skipped_waiting) == 6


def test_step_max_running(policy: SchedulingPolicy) -> None:
    """WL-STEP-1: no request reaches running once it holds max_running; 0 examines nothing."""
    wq = WaitingQueues(policy)
    for i in range(3):
        wq.enqueue(Request(f"w{i}", arrival_time=float(i)))
    wq.enqueue(Request("b", arrival_time=-1.0, status=KV))
    asked: list[str] = []

    def promote(request: Any) -> bool:
        asked.append(request.request_id)
        return False

    before = state(wq)
    assert wq.schedule_step(decisions({}, RUN), promote, max_running=0) == []
    assert asked == [] and state(wq) == before  # not even the blocked head is skipped
    assert ids(wq.schedule_step(decisions({}, RUN), max_running=2)) == ["w0", "w1"]
    assert wq.schedule_step(decisions({}, RUN), max_running=2) == []
    assert ids(wq.schedule_step(decisions({}, RUN), max_running=3)) == ["w2"]


@pytest.mark.guard
@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_running": -1}, ValueError),
        ({"max_running": 1.5}, ValueError),
        ({"max_running": True}, ValueError),
        ({"try_promote": "yes"}, TypeError),
    ],
)
def test_step_rejects_bad_arguments(
    policy: SchedulingPolicy, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    """WL-STEP-1: max_running is None or an int >= 0; the callbacks are callables."""
    wq = populated(policy)
    assert_rejected(wq, error, lambda: wq.schedule_step(decisions({}, RUN), **kwargs))
    assert_rejected(wq, TypeError, lambda: wq.schedule_step("RUN"))  # type: ignore[arg-type]


def test_blocked_not_promoted_is_skipped_without_check(policy: SchedulingPolicy) -> None:
    """WL-STEP-2: a blocked head goes to try_promote; False: skipped, check not asked."""
    wq = WaitingQueues(policy)
    blocked = Request("b", arrival_time=0.0, status=GRAMMAR)
    wq.enqueue(blocked)
    wq.enqueue(Request("w", arrival_time=1.0))
    offered: list[str] = []

    def promote(request: Any) -> bool:
        offered.append(request.request_id)
        return False

    check = decisions({}, RUN)
    assert ids(wq.schedule_step(check, promote)) == ["w"]
    assert offered == ["b"] and check.asked == ["w"]
    assert ids(wq.skipped_waiting) == ["b"] and blocked.status is GRAMMAR


def test_promoted_request_is_checked_in_place(policy: SchedulingPolicy) -> None:
    """WL-STEP-2: after a promotion check decides in place; STOP leaves it, now WAITING."""
    wq = WaitingQueues(policy)
    blocked = Request("b", status=KV)
    wq.enqueue(blocked)
    check = decisions({"b": STOP})
    assert wq.schedule_step(check, lambda r: True) == []
    assert check.asked == ["b"]
    assert ids(wq.skipped_waiting) == ["b"] and blocked.status is RequestStatus.WAITING
    # next step: not blocked any more, so try_promote is not asked again
    assert wq.schedule_step(decisions({}, RUN), lambda r: pytest.fail("asked again")) == [blocked]


def test_promotion_may_choose_preempted(policy: SchedulingPolicy) -> None:
    """WL-STEP-2: a promotion that sets PREEMPTED keeps it (vLLM: preempted before)."""
    wq = WaitingQueues(policy)
    blocked = Request("b", status=KV)
    wq.enqueue(blocked)

    def promote(request: Any) -> bool:
        request.status = RequestStatus.PREEMPTED
        return True

    statuses: list[RequestStatus] = []

    def check(request: Any) -> StepDecision:
        statuses.append(request.status)
        return SKIP

    wq.schedule_step(check, promote)
    assert statuses == [RequestStatus.PREEMPTED] and blocked.status is RequestStatus.PREEMPTED


def test_skip_takes_the_blocked_path(policy: SchedulingPolicy) -> None:
    """WL-STEP-3: SKIP pops the head into skipped_waiting; check may park it blocked."""
    wq = WaitingQueues(policy)
    lora = Request("lora", arrival_time=0.0)
    kv = Request("kv", arrival_time=1.0)
    wq.enqueue(lora)
    wq.enqueue(kv)

    def check(request: Any) -> StepDecision:
        if request is kv:  # vLLM's async KV load: parked as WAITING_FOR_REMOTE_KVS
            request.status = KV
        return SKIP

    assert wq.schedule_step(check) == []
    assert not wq.waiting and ids(wq.skipped_waiting) == ["lora", "kv"]
    assert lora.status is RequestStatus.WAITING and kv.status is KV


def test_step_parks_skipped_requests_when_a_callback_raises(policy: SchedulingPolicy) -> None:
    """WL-STEP-4, WL-STEP-9: the final prepend_requests also runs when check raises."""
    wq = WaitingQueues(policy)
    for i in range(4):
        wq.enqueue(Request(f"w{i}", arrival_time=float(i)))

    def check(request: Any) -> StepDecision:
        if request.request_id == "w2":
            request.status = RequestStatus.FINISHED_ERROR  # restored: the head keeps its status
            raise KeyError("boom")
        return SKIP if request.request_id == "w0" else RUN

    with pytest.raises(KeyError):
        wq.schedule_step(check)
    assert ids(wq.skipped_waiting) == ["w0"] and ids(wq.running) == ["w1"]
    assert ids(wq.waiting) == ["w2", "w3"] and wq.waiting.peek_request().status is WAITING_STATUS
    wq.select_waiting_queue()  # invariants hold


WAITING_STATUS = RequestStatus.WAITING


def test_fcfs_two_reversals_cancel() -> None:
    """WL-STEP-5: skipped keep their order and go ahead of older unexamined skipped ones."""
    wq = WaitingQueues("fcfs")
    for rid in ["o1", "o2", "o3"]:  # older skipped requests
        wq.enqueue(Request(rid, status=KV))
    wq.schedule_step(decisions({}, RUN))  # all three skipped (not promoted)
    assert ids(wq.skipped_waiting) == ["o1", "o2", "o3"]

    promotable = {"o2", "o3"}
    check = decisions({"o2": SKIP, "o3": STOP})
    wq.schedule_step(check, lambda r: r.request_id in promotable)
    # o1 skipped (blocked), o2 skipped (check), o3 stopped the step
    assert ids(wq.skipped_waiting) == ["o1", "o2", "o3"]

    for rid in ["a", "b", "c", "d", "e"]:
        wq.enqueue(Request(rid))
    check = decisions({"o2": SKIP, "o3": SKIP, "a": SKIP, "b": RUN, "c": SKIP, "d": STOP})
    assert ids(wq.schedule_step(check)) == ["b"]
    assert ids(wq.skipped_waiting) == ["o1", "o2", "o3", "a", "c"]  # not reversed
    assert ids(wq.waiting) == ["d", "e"]
    assert ids([*wq.skipped_waiting, *wq.waiting]) == ["o1", "o2", "o3", "a", "c", "d", "e"]


def test_fcfs_new_skips_go_ahead_of_unexamined_old_ones() -> None:
    """WL-STEP-5: a step that stops early puts what it skipped before the rest."""
    wq = WaitingQueues("fcfs")
    for rid in ["s1", "s2", "s3", "s4"]:
        wq.enqueue(Request(rid, status=STREAM))
    check = decisions({"s2": SKIP, "s3": STOP})
    wq.schedule_step(check, lambda r: r.request_id != "s1")
    assert ids(wq.skipped_waiting) == ["s1", "s2", "s3", "s4"]


def test_priority_takes_the_smallest_head() -> None:
    """WL-STEP-6: PRIORITY examines both queues together in ascending key order."""
    wq = WaitingQueues("priority")
    keys = [(3, 0.0), (0, 2.0), (1, 1.0), (0, 1.0), (2, 0.0), (1, 1.5)]
    reqs = []
    for i, (prio, arrival) in enumerate(keys):
        status = KV if i % 2 else RequestStatus.WAITING
        reqs.append(Request(f"r{i}", priority=prio, arrival_time=arrival, status=status))
        wq.enqueue(reqs[-1])
    order: list[str] = []

    def promote(request: Any) -> bool:
        order.append(request.request_id)
        return True

    def check(request: Any) -> StepDecision:
        if not order or order[-1] != request.request_id:
            order.append(request.request_id)
        return RUN

    ran = wq.schedule_step(check, promote)
    assert order == ids(sorted(reqs, key=request_key)) == ids(ran)


def test_priority_skipped_requests_compete_on_key() -> None:
    """WL-STEP-6: a skipped request takes its key's place in skipped_waiting."""
    wq = WaitingQueues("priority")
    wq.enqueue(Request("late", priority=5))
    wq.enqueue(Request("early", priority=1))
    wq.enqueue(Request("kv", priority=3, status=KV))
    assert wq.schedule_step(decisions({}, SKIP)) == []
    assert ids(wq.skipped_waiting) == ["early", "kv", "late"]


def test_blocked_request_never_runs_unpromoted(policy: SchedulingPolicy) -> None:
    """WL-STEP-7: check says RUN to everything, but a blocked request needs a promotion."""
    wq = WaitingQueues(policy)
    blocked = [Request(f"b{i}", status=BLOCKED[i]) for i in range(3)]
    for r in blocked:
        wq.enqueue(r)
    wq.enqueue(Request("ready", arrival_time=3.0))
    check = decisions({}, RUN)
    for _ in range(3):
        wq.schedule_step(check)
    assert ids(wq.running) == ["ready"] and "b0" not in check.asked
    assert all(r.status in BLOCKED for r in blocked)
    ran = wq.schedule_step(check, lambda r: r.request_id == "b1")
    assert ids(ran) == ["b1"]


def test_fcfs_no_starvation() -> None:
    """WL-STEP-8: once runnable, a skipped request runs before anyone who arrived after it."""
    wq = WaitingQueues("fcfs")
    wq.enqueue(Request("early", status=KV))
    for i in range(5):
        wq.enqueue(Request(f"late{i}"))
    budget_one = {"n": 0}

    def check(request: Any) -> StepDecision:  # room for one request per step
        budget_one["n"] += 1
        return RUN if budget_one["n"] == 1 else STOP

    budget_one["n"] = 0
    assert ids(wq.schedule_step(check)) == ["late0"]  # still blocked: late0 may go
    budget_one["n"] = 0
    assert ids(wq.schedule_step(check, lambda r: True)) == ["early"]  # before late1..late4
    budget_one["n"] = 0
    assert ids(wq.schedule_step(check)) == ["late1"]


def test_fcfs_examines_skipped_before_waiting() -> None:
    """WL-STEP-8: every skipped request is examined before any waiting one."""
    wq = WaitingQueues("fcfs")
    wq.enqueue(Request("w0", priority=-9))
    for rid in ["s0", "s1"]:
        wq.enqueue(Request(rid, priority=9, status=KV))
    wq.enqueue(Request("w1"))
    check = decisions({}, RUN)
    ran = wq.schedule_step(check, lambda r: True)
    assert ids(ran) == check.asked == ["s0", "s1", "w0", "w1"]


# -- callback rules (WL-STEP-9)


def _check_returning(value: Any) -> Callable[[Any], Any]:
    return lambda request: value


@pytest.mark.parametrize(
    ("check", "promote", "error"),
    [
        (_check_returning("RUN"), None, TypeError),
        (_check_returning(None), None, TypeError),
        (lambda r: setattr(r, "status", RequestStatus.RUNNING) or RUN, None, ValueError),
        (lambda r: setattr(r, "status", KV) or RUN, None, ValueError),  # blocked, but not SKIP
        (lambda r: setattr(r, "status", RequestStatus.PREEMPTED) or STOP, None, ValueError),
        (_check_returning(RUN), _check_returning(1), TypeError),
        (
            _check_returning(RUN),
            lambda r: setattr(r, "status", WAITING_STATUS) or False,
            ValueError,
        ),
        (
            _check_returning(RUN),
            lambda r: setattr(r, "status", RequestStatus.FINISHED_ABORTED) or True,
            ValueError,
        ),
        # A status equal to a member but not one: the int of a blocked or ready status.
        (lambda r: setattr(r, "status", int(KV)) or SKIP, None, TypeError),
        (_check_returning(RUN), lambda r: setattr(r, "status", int(KV)) or False, TypeError),
        (
            _check_returning(RUN),
            lambda r: setattr(r, "status", int(WAITING_STATUS)) or True,
            TypeError,
        ),
    ],
)
def test_callback_rules(
    policy: SchedulingPolicy,
    check: Callable[[Any], Any],
    promote: Callable[[Any], Any] | None,
    error: type[Exception],
) -> None:
    """WL-STEP-9: a callback that breaks the rules is reported; the state stays consistent."""
    wq = WaitingQueues(policy)
    head = Request("h", arrival_time=0.0, status=KV if promote else WAITING_STATUS)
    wq.enqueue(head)
    wq.enqueue(Request("t", arrival_time=1.0))
    before = state(wq)
    with pytest.raises(error, match="WL-STEP-9"):
        wq.schedule_step(check, promote)
    assert state(wq) == before  # the head kept its place and its status
    wq.select_waiting_queue()


@pytest.mark.guard
def test_a_status_set_by_hand_to_an_int_is_named_not_a_crash(
    policy: SchedulingPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WL-STEP-9: a status changed behind the lifecycle's back to an int equal to a blocked
    status reaches try_promote in the vLLM 0.33 layout (with deep checks on, WL-CONS-2
    reports it first: see the next test); the step refuses it with a TypeError that says
    the status came in so (not that try_promote set it), and the request's repr in the
    message shows the int instead of failing on `.name`."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)
    wq = WaitingQueues(policy, layout="vllm-0.33")
    head = Request("h")
    wq.enqueue(head)
    head.status = cast(Any, int(KV))
    with pytest.raises(TypeError) as raised:
        wq.schedule_step(_check_returning(RUN))
    assert str(raised.value) == (
        "WL-STEP-9: status 3 is not a RequestStatus (set before try_promote was asked) "
        "for Request('h', status=3)"
    )
    assert head.status == 3 and type(head.status) is int and wq.running == []
    assert (
        repr(Request("h", status=KV)) == "Request('h', status=RequestStatus.WAITING_FOR_REMOTE_KVS)"
    )


@pytest.mark.guard
def test_a_callback_that_sets_the_int_of_the_status_it_found_is_blamed(
    policy: SchedulingPolicy,
) -> None:
    """WL-STEP-9: try_promote replaces the blocked status it was given by the equal int:
    the error says try_promote set it (the status it found was a member), not that it
    came in so; the request keeps its member status and its place."""
    wq = WaitingQueues(policy)
    head = Request("h", status=KV)
    wq.enqueue(head)
    with pytest.raises(TypeError) as raised:
        wq.schedule_step(_check_returning(RUN), lambda r: setattr(r, "status", int(KV)) or False)
    assert str(raised.value) == (
        "WL-STEP-9: try_promote set status 3, not a RequestStatus for "
        "Request('h', status=RequestStatus.WAITING_FOR_REMOTE_KVS)"
    )
    assert head.status is KV and list(wq.skipped_waiting) == [head]


@pytest.mark.contracts
def test_an_int_status_behind_the_lifecycles_back_breaks_the_invariant(
    policy: SchedulingPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WL-CONS-2: a queued request whose status was replaced by the int of an allowed
    status (equal to the member, not the member) is reported at the next operation, by
    "every request has a status allowed where it is" (a deep check)."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    wq = WaitingQueues(policy)
    other = Request("o", arrival_time=1.0)
    wq.enqueue(Request("h"))
    wq.enqueue(other)
    other.status = cast(Any, int(RequestStatus.WAITING))
    with pytest.raises(
        icontract.ViolationError, match="WL-CONS-2: every request has a status allowed where it is"
    ):
        wq.enqueue(Request("n", arrival_time=2.0))


@pytest.mark.parametrize(
    "reenter",
    [
        lambda wq, r: wq.enqueue(Request("x")),
        lambda wq, r: wq.abort(["t"]),
        lambda wq, r: wq.abort([]),
        lambda wq, r: wq.preempt(wq.running[0]),
        lambda wq, r: wq.finish(wq.running[0]),
        lambda wq, r: wq.schedule_step(_check_returning(RUN)),
    ],
)
def test_callbacks_cannot_reenter(
    policy: SchedulingPolicy, reenter: Callable[[WaitingQueues, Any], Any]
) -> None:
    """WL-STEP-9: mutating the instance from a callback is a RuntimeError; reading is fine."""
    wq = WaitingQueues(policy)
    wq.enqueue(Request("r", arrival_time=-1.0))
    wq.schedule_step(_check_returning(RUN))
    wq.enqueue(Request("h", arrival_time=0.0))
    wq.enqueue(Request("t", arrival_time=1.0))
    seen: list[Any] = []

    def check(request: Any) -> StepDecision:
        seen.append(wq.select_waiting_queue())  # reading is allowed
        reenter(wq, request)
        return RUN

    before = state(wq)
    with pytest.raises(RuntimeError, match="WL-STEP-9"):
        wq.schedule_step(check)
    assert seen == [wq.waiting] and state(wq) == before


# ---------------------------------------------------------------------------
# preempt, finish, abort


def test_preempt(policy: SchedulingPolicy) -> None:
    """WL-PRE-1: running -> waiting.prepend_request: FCFS in front, PRIORITY in key order."""
    wq = WaitingQueues(policy)
    for rid, arrival in [("late", 5.0), ("early", 1.0), ("mid", 3.0)]:
        wq.enqueue(Request(rid, arrival_time=arrival))
    wq.enqueue(Request("blocked", arrival_time=0.0, status=KV))
    wq.schedule_step(decisions({}, RUN))
    by_id = {r.request_id: r for r in wq.running}
    late, early, mid = by_id["late"], by_id["early"], by_id["mid"]
    wq.preempt(mid)
    wq.preempt(late)
    assert mid.status is late.status is RequestStatus.PREEMPTED and wq.running == [early]
    expected = ["late", "mid"] if policy is SchedulingPolicy.FCFS else ["mid", "late"]
    assert ids(wq.waiting) == expected and ids(wq.skipped_waiting) == ["blocked"]


@pytest.mark.guard
@pytest.mark.parametrize(
    ("pick", "error"),
    [
        (lambda wq: wq.waiting.peek_request(), ValueError),
        (lambda wq: wq.skipped_waiting.peek_request(), ValueError),
        (lambda wq: wq.finished["f"], ValueError),
        (lambda wq: Request("r1", status=RequestStatus.RUNNING), ValueError),  # unknown twin
        (lambda wq: Request("zz", status=RequestStatus.RUNNING), ValueError),  # unknown id
        (lambda wq: "r1", TypeError),
    ],
)
def test_preempt_rejects(
    policy: SchedulingPolicy, pick: Callable[[WaitingQueues], Any], error: type[Exception]
) -> None:
    """WL-PRE-2: only a running request can be preempted; nothing changes otherwise."""
    wq = populated(policy)
    bad = pick(wq)
    assert_rejected(wq, error, lambda: wq.preempt(bad))


@pytest.mark.parametrize(
    "status",
    [s for s in RequestStatus if RequestStatus.is_finished(s)],
    ids=lambda s: s.name,
)
def test_finish(policy: SchedulingPolicy, status: RequestStatus) -> None:
    """WL-FIN-1: a running request goes to finished with the given status."""
    wq = populated(policy)
    r1, r2 = wq.running
    wq.finish(r1, status)
    assert r1.status is status and wq.finished["r1"] is r1 and wq.running == [r2]


def test_finish_default_status(policy: SchedulingPolicy) -> None:
    """WL-FIN-1: the default status is FINISHED_STOPPED."""
    wq = populated(policy)
    r1 = wq.running[0]
    wq.finish(r1)
    assert r1.status is RequestStatus.FINISHED_STOPPED


@pytest.mark.guard
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (lambda wq: (wq.waiting.peek_request(),), ValueError),  # waiting: use abort
        (lambda wq: (wq.skipped_waiting.peek_request(),), ValueError),
        (lambda wq: (wq.finished["f"],), ValueError),  # finished twice
        (lambda wq: (Request("r1", status=RequestStatus.RUNNING),), ValueError),  # unknown twin
        (lambda wq: (Request("nobody", status=RequestStatus.RUNNING),), ValueError),
        (lambda wq: (wq.running[0], RequestStatus.WAITING), ValueError),
        (lambda wq: (wq.running[0], RequestStatus.RUNNING), ValueError),
        (lambda wq: (wq.running[0], "FINISHED_STOPPED"), ValueError),
        (lambda wq: (object(),), TypeError),
    ],
)
def test_finish_rejects(
    policy: SchedulingPolicy,
    args: Callable[[WaitingQueues], tuple[Any, ...]],
    error: type[Exception],
) -> None:
    """WL-FIN-2: not running, or not a finished status: an error, nothing changes."""
    wq = populated(policy)
    bad = args(wq)
    assert_rejected(wq, error, lambda: wq.finish(*bad))


def test_abort_everywhere(policy: SchedulingPolicy) -> None:
    """WL-ABT-1: from waiting, skipped_waiting and running; order of first mention."""
    wq = populated(policy)
    aborted = wq.abort(["s", "r2", "w1", "s"])
    assert ids(aborted) == ["s", "r2", "w1"]
    assert all(r.status is RequestStatus.FINISHED_ABORTED for r in aborted)
    assert all(wq.finished[r.request_id] is r for r in aborted)
    assert ids(wq.waiting) == ["w2"] and not wq.skipped_waiting and ids(wq.running) == ["r1"]


def test_abort_one_id_an_iterator_or_all(policy: SchedulingPolicy) -> None:
    """WL-ABT-1: a str is one id; any iterable works; None aborts every unfinished request."""
    wq = populated(policy)
    assert ids(wq.abort("w2")) == ["w2"]
    assert ids(wq.abort(iter(["r2"]))) == ["r2"]
    assert ids(wq.abort(None)) == ["r1", "w1", "s"]  # enqueue order, finished ones left out
    assert wq.finished["f"].status is RequestStatus.FINISHED_STOPPED
    assert not wq.waiting and not wq.skipped_waiting and not wq.running


@pytest.mark.parametrize(
    "request_ids", [[], ["nobody"], ["f"], ("f", "nobody", "f"), "nobody", iter(["x"])]
)
def test_abort_ignores_unknown_and_finished(policy: SchedulingPolicy, request_ids: Any) -> None:
    """WL-ABT-2: unknown and finished ids are an explicit no-op, as in vLLM."""
    wq = populated(policy)
    before = state(wq)
    assert wq.abort(request_ids) == []
    assert state(wq) == before


def _ids_then_boom() -> Iterator[Any]:
    yield "w1"
    yield 7


@pytest.mark.guard
@pytest.mark.parametrize(
    "request_ids", [7, ["w1", 7], [b"w1"], b"w1", {"w1": 1, 2: 2}, _ids_then_boom]
)
def test_abort_rejects_malformed_ids(policy: SchedulingPolicy, request_ids: Any) -> None:
    """WL-ABT-2: ids that are not str raise TypeError before anything changes."""
    wq = populated(policy)
    if callable(request_ids):
        request_ids = request_ids()  # a fresh iterator: checked by the body, not the contract
    assert_rejected(wq, TypeError, lambda: wq.abort(request_ids))


def test_lifecycle_round_trip(policy: SchedulingPolicy) -> None:
    """WL-CONS-1: a request through every place is in exactly one place at each point."""
    wq = WaitingQueues(policy)
    r = Request("r", status=STREAM)

    def where() -> list[str]:
        places = {
            "waiting": list(wq.waiting),
            "skipped_waiting": list(wq.skipped_waiting),
            IN_RUNNING: wq.running,
            "finished": list(wq.finished.values()),
        }
        return [name for name, held in places.items() if any(x is r for x in held)]

    wq.enqueue(r)
    assert where() == ["skipped_waiting"]
    wq.schedule_step(decisions({}, RUN))
    assert where() == ["skipped_waiting"]
    wq.schedule_step(decisions({}, RUN), lambda x: True)
    assert where() == [IN_RUNNING]
    wq.preempt(r)
    assert where() == [IN_WAITING]
    wq.schedule_step(decisions({}, RUN))
    wq.finish(r, RequestStatus.FINISHED_LENGTH_CAPPED)
    assert where() == ["finished"]
    assert wq.abort(["r"]) == [] and r.status is RequestStatus.FINISHED_LENGTH_CAPPED


# ---------------------------------------------------------------------------
# broken variants (tests/helpers/waiting_variants.py): the contracts have teeth


def _skip_two_then_run(wq: WaitingQueues) -> Any:
    for rid in ["a", "b", "c"]:
        wq.enqueue(Request(rid, arrival_time=float(ord(rid))))
    return wq.schedule_step(decisions({"a": SKIP, "b": SKIP}, RUN))


def _blocked_then_step(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("w", priority=0, arrival_time=0.0))
    wq.enqueue(Request("b", priority=1, arrival_time=0.0, status=KV))
    return wq.schedule_step(decisions({}, RUN), lambda r: False)


def _preempt_behind(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("a"))
    wq.enqueue(Request("b", arrival_time=1.0))
    (a,) = wq.schedule_step(decisions({"a": RUN}))
    return wq.preempt(a)


def _finish_one(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("a"))
    wq.schedule_step(decisions({}, RUN))
    return wq.finish(wq.running[0])


def _abort_skipped(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("a", status=KV))
    return wq.abort(["a"])


def _enqueue_blocked(wq: WaitingQueues) -> Any:
    return wq.enqueue(Request("a", status=KV))


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "policy", "scenario", "caught_by"),
    [
        (ForgetsToPark, "fcfs", _skip_two_then_run, {"WL-STEP-1", "WL-STEP-4", "WL-STEP-5"}),
        (ForgetsToPark, "priority", _skip_two_then_run, {"WL-STEP-1", "WL-STEP-4", "WL-CONS-1"}),
        (ParksWithoutReversal, "fcfs", _skip_two_then_run, {"WL-STEP-1", "WL-STEP-5"}),
        (WaitingFirst, "fcfs", _blocked_then_step, {"WL-STEP-8", "WL-STEP-1"}),
        (SkippedFirstPriority, "priority", _blocked_then_step, {"WL-STEP-6", "WL-STEP-1"}),
        (PromotesWithoutAsking, "fcfs", _blocked_then_step, {"WL-STEP-2", "WL-STEP-7"}),
        (PromotesWithoutAsking, "priority", _blocked_then_step, {"WL-STEP-2", "WL-STEP-7"}),
        (PreemptsToBack, "fcfs", _preempt_behind, {"WL-PRE-1"}),
        (FinishLosesRequest, "fcfs", _finish_one, {"WL-FIN-1", "WL-CONS-1"}),
        (AbortMissesSkipped, "priority", _abort_skipped, {"WL-ABT-1", "WL-CONS-1"}),
        (EnqueueIgnoresBlocked, "fcfs", _enqueue_blocked, {"WL-ENQ-1"}),
    ],
)
def test_contracts_catch_broken_variants(
    variant: type[WaitingQueues],
    policy: str,
    scenario: Callable[[WaitingQueues], Any],
    caught_by: set[str],
) -> None:
    """WL-CONS-1, WL-STEP-1, WL-STEP-2, WL-STEP-4, WL-STEP-5, WL-STEP-6, WL-STEP-7,
    WL-STEP-8, WL-PRE-1, WL-FIN-1, WL-ABT-1, WL-ENQ-1: each broken variant is caught
    by a contract of the clause it breaks (deep checks on, as in every test run)."""
    assert queueref.config.deep_checks(), "tests/conftest.py turns deep checks on"
    # The correct class passes the same scenario.
    scenario(WaitingQueues(policy))
    with pytest.raises(icontract.ViolationError) as info:
        scenario(variant(policy))
    message = str(info.value)
    assert any(f"{rule}:" in message for rule in caught_by), message


@pytest.mark.contracts
def test_select_contract_catches_wrong_arbitration() -> None:
    """WL-SEL-1, WL-SEL-2: select_waiting_queue's contracts catch a wrong rule."""
    fcfs = WaitingFirst("fcfs")
    fcfs.enqueue(Request("w"))
    fcfs.enqueue(Request("b", status=KV))
    with pytest.raises(icontract.ViolationError, match="WL-SEL-1"):
        fcfs.select_waiting_queue()
    prio = SkippedFirstPriority("priority")
    prio.enqueue(Request("w", priority=0))
    prio.enqueue(Request("b", priority=1, status=KV))
    with pytest.raises(icontract.ViolationError, match="WL-SEL-2"):
        prio.select_waiting_queue()
