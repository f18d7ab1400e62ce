"""The vLLM 0.33 layout: `WaitingQueues(policy, layout="vllm-0.33")` (WL-LAY-1, WL-L33-1 to 4).

Unit tests of each clause, broken variants the contracts catch, and a
Hypothesis state machine against a model made of plain lists (written from
specs/waiting-lifecycle.md, section "The vLLM 0.33 layout"), with the budget
guard, async KV loads and streaming sessions among its rules. The machine is
run against broken variants too, with deep checks off, to show it has teeth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import icontract
import pytest
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from waiting_variants import (
    EnqueueIgnoresKV,
    ForgetsToDefer,
    ParksReversed,
    PreemptKeepsKV,
    SkipsBackToWaiting,
    WaitingBeforeKVHolding,
)

import queueref.config
from queueref import Request, RequestStatus, SchedulingPolicy, StepDecision, WaitingQueues
from queueref.request import request_key
from queueref.waiting.places import IN_KV_HOLDING

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
GRAMMAR = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
STREAM = RequestStatus.WAITING_FOR_STREAMING_REQ
BLOCKED = (GRAMMAR, KV, STREAM)
V033 = "vllm-0.33"
ASYNC = "async"  # a decision of the machine: check starts an async KV load and skips


def _ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


# ---------------------------------------------------------------------------
# unit tests


def test_layout_construction() -> None:
    """WL-LAY-1: the default layout is vllm-0.30; vllm-0.33 has its own queues; others fail."""
    assert WaitingQueues("fcfs").layout == "vllm-0.30"
    wq = WaitingQueues("priority", layout=V033)
    assert wq.layout == V033 and wq.deferred_waiting == set()
    assert type(wq.kv_holding_waiting) is type(wq.waiting)
    assert not hasattr(wq, "skipped_waiting")
    assert not hasattr(WaitingQueues("fcfs"), "kv_holding_waiting")
    with pytest.raises(ValueError, match="WL-LAY-1: unknown layout 'vllm-0.34'"):
        WaitingQueues("fcfs", layout="vllm-0.34")
    assert "vllm-0.33" in repr(wq) and "kv_holding_waiting=[]" in repr(wq)


@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_enqueue_by_kv_state(policy: str) -> None:
    """WL-L33-1: KV holders to kv_holding_waiting, the rest to waiting; blocked deferred."""
    wq = WaitingQueues(policy, layout=V033)
    wq.enqueue(Request("a", arrival_time=0.0))
    wq.enqueue(Request("g", arrival_time=1.0, status=GRAMMAR))
    wq.enqueue(Request("s", arrival_time=2.0, status=STREAM))
    wq.enqueue(Request("k", arrival_time=3.0, status=KV))
    assert _ids(wq.waiting) == ["a", "g", "s"] and _ids(wq.kv_holding_waiting) == ["k"]
    assert wq.deferred_waiting == {"g", "s", "k"}


def test_selection_drains_kv_holding_first_under_priority() -> None:
    """WL-L33-2: kv_holding_waiting first whatever the keys (no head comparison)."""
    wq = WaitingQueues("priority", layout=V033)
    wq.enqueue(Request("urgent", priority=0))
    wq.enqueue(Request("k", priority=5, status=KV))
    assert wq.select_waiting_queue() is wq.kv_holding_waiting
    ran = wq.schedule_step(lambda r: RUN, lambda r: True)
    assert _ids(ran) == ["k", "urgent"]


def test_skipped_requests_go_back_by_kv_state() -> None:
    """WL-L33-3: skipped requests return to the front of their KV state's queue, in
    examination order; an async load moves a request to kv_holding_waiting."""
    wq = WaitingQueues("fcfs", layout=V033)
    for i, rid in enumerate(["a", "b", "c", "d"]):
        wq.enqueue(Request(rid, arrival_time=float(i)))

    def check(request: Any) -> StepDecision:
        if request.request_id == "b":
            request.status = KV  # async load: KV blocks allocated
            return SKIP
        return {"a": SKIP, "c": SKIP}.get(request.request_id, STOP)

    assert wq.schedule_step(check) == []
    assert _ids(wq.waiting) == ["a", "c", "d"] and _ids(wq.kv_holding_waiting) == ["b"]
    assert wq.deferred_waiting == {"a", "b", "c"}
    # b's load completes: promoted, it runs from kv_holding_waiting and is no longer deferred.
    ran = wq.schedule_step(lambda r: RUN, lambda r: True)
    assert _ids(ran) == ["b", "a", "c", "d"] and wq.deferred_waiting == set()


def test_preempt_goes_to_waiting_and_frees_kv() -> None:
    """WL-L33-4: a preempted request holds no KV: the front of waiting, and after a skip
    it stays in waiting."""
    wq = WaitingQueues("fcfs", layout=V033)
    wq.enqueue(Request("a"))
    wq.enqueue(Request("b", arrival_time=1.0))
    a, b = wq.schedule_step(lambda r: RUN)
    wq.preempt(b)
    assert _ids(wq.waiting) == ["b"] and not wq.kv_holding_waiting
    wq.schedule_step(lambda r: SKIP)
    assert _ids(wq.waiting) == ["b"] and wq.deferred_waiting == {"b"}


# ---------------------------------------------------------------------------
# broken variants (tests/helpers/waiting_variants.py) caught by the contracts


def _kv_then_ready(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("w"))
    wq.enqueue(Request("k", arrival_time=1.0, status=KV))
    return wq.schedule_step(lambda r: RUN)


def _async_load(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("a"))

    def check(request: Any) -> StepDecision:
        request.status = KV
        return SKIP

    return wq.schedule_step(check)


def _skip_one(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("a"))
    return wq.schedule_step(lambda r: SKIP)


def _enqueue_kv(wq: WaitingQueues) -> Any:
    return wq.enqueue(Request("k", status=KV))


def _preempt(wq: WaitingQueues) -> Any:
    wq.enqueue(Request("a"))
    (a,) = wq.schedule_step(lambda r: RUN)
    return wq.preempt(a)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "scenario", "rule"),
    [
        (WaitingBeforeKVHolding, _kv_then_ready, "WL-L33-2"),
        (SkipsBackToWaiting, _async_load, "WL-L33-3"),
        (ForgetsToDefer, _skip_one, "WL-L33-3"),
        (EnqueueIgnoresKV, _enqueue_kv, "WL-L33-1|WL-ENQ-1"),  # add_request to the wrong queue
        (PreemptKeepsKV, _preempt, "WL-L33-4"),
    ],
)
@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_contracts_catch_broken_v033(
    variant: type[WaitingQueues], scenario: Callable[[WaitingQueues], Any], rule: str, policy: str
) -> None:
    """WL-L33-1, WL-L33-2, WL-L33-3, WL-L33-4: each broken variant is caught by its clause."""
    scenario(WaitingQueues(policy, layout=V033))
    with pytest.raises(icontract.ViolationError, match=f"({rule}):"):
        scenario(variant(policy, layout=V033))


# ---------------------------------------------------------------------------
# the state machine


class V033Machine(RuleBasedStateMachine):
    """Drives `factory(policy, layout="vllm-0.33")` and a list model side by side."""

    policy: SchedulingPolicy = SchedulingPolicy.FCFS
    factory: Callable[..., WaitingQueues] = WaitingQueues

    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.wq = type(self).factory(self.policy, layout=V033)
        self.waiting: list[Any] = []
        self.kv: list[Any] = []
        self.running: list[Any] = []
        self.finished: list[Any] = []
        self.status: dict[str, RequestStatus] = {}
        self.kv_held: set[str] = set()
        self.deferred: set[str] = set()
        self.paused: set[str] = set()
        self.promotable: set[str] = set()
        self.count = 0

    # -- the list model

    def _sorted(self, queue: list[Any]) -> list[Any]:
        return sorted(queue, key=request_key) if self.policy is SchedulingPolicy.PRIORITY else queue

    def _holds(self, request: Any) -> bool:
        return request.request_id in self.kv_held or self.status[request.request_id] is KV

    def _enqueue_model(self, request: Any) -> None:
        if self._holds(request):
            self.kv = self._sorted([*self.kv, request])
        else:
            self.waiting = self._sorted([*self.waiting, request])
        if self.status[request.request_id] in BLOCKED:
            self.deferred.add(request.request_id)

    def _forget(self, request: Any) -> None:
        for bag in (self.kv_held, self.deferred, self.paused):
            bag.discard(request.request_id)

    # -- rules

    @rule(
        target=requests,
        status=st.sampled_from([RequestStatus.WAITING] * 3 + list(BLOCKED)),
        priority=st.integers(0, 2),
        arrival=st.integers(0, 3),
    )
    def enqueue(self, status: RequestStatus, priority: int, arrival: int) -> Any:
        """WL-L33-1: by KV state; blocked ones deferred."""
        request = Request(f"r{self.count}", priority, float(arrival), status=status)
        self.count += 1
        note(f"wq.enqueue({request!r})")
        self.wq.enqueue(request)
        self.status[request.request_id] = status
        if status is KV:
            self.kv_held.add(request.request_id)
        self._enqueue_model(request)
        return request

    @initialize(target=requests, first=st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1))
    def first_requests(self, first: list[int]) -> Any:
        statuses = [RequestStatus.WAITING, GRAMMAR, KV, RequestStatus.WAITING]
        return multiple(*(self.enqueue(statuses[i], i % 3, 0) for i in first[:5]))

    @rule(request=requests)
    def make_promotable(self, request: Any) -> None:
        self.promotable.add(request.request_id)

    @rule(
        decisions=st.lists(st.sampled_from([RUN, RUN, SKIP, STOP, ASYNC]), max_size=6),
        then=st.sampled_from([RUN, SKIP, STOP]),
        room=st.none() | st.integers(0, 3),
        budget=st.none() | st.integers(0, 4),
        with_promote=st.booleans(),
    )
    def schedule_step(
        self,
        decisions: list[Any],
        then: StepDecision,
        room: int | None,
        budget: int | None,
        with_promote: bool,
    ) -> None:
        """WL-L33-2, WL-L33-3, WL-STEP-10, WL-STR-4, WL-STR-5: one step against the model."""
        max_running = None if room is None else len(self.running) + room
        note(f"step {decisions} then {then}, max_running={max_running}, budget={budget}")
        waiting, kv = list(self.waiting), list(self.kv)
        feed = iter(decisions)
        ran: list[Any] = []
        to_waiting: list[Any] = []
        to_kv: list[Any] = []
        asked: list[Any] = []
        guard = budget
        while waiting or kv:
            if guard is not None:
                if guard == 0:
                    break
                guard -= 1
            if max_running is not None and len(self.running) + len(ran) + len(self.paused) >= (
                max_running
            ):
                break
            queue = kv if kv else waiting
            request = queue[0]
            rid = request.request_id
            decision: Any
            if self.status[rid] in BLOCKED:
                if with_promote:
                    asked.append(request)
                if not (with_promote and rid in self.promotable):
                    decision = SKIP
                else:
                    self.status[rid] = RequestStatus.WAITING
                    self.paused.discard(rid)
                    decision = next(feed, then)
            else:
                asked.append(request)
                decision = next(feed, then)
            if decision is STOP:
                break
            queue.pop(0)
            if decision is ASYNC:
                self.status[rid] = KV
                self.kv_held.add(rid)
                decision = SKIP
            if decision is SKIP:
                self.deferred.add(rid)
                (to_kv if self._holds(request) else to_waiting).append(request)
                continue
            ran.append(request)
            self.status[rid] = RequestStatus.RUNNING
            self.kv_held.add(rid)
            self.deferred.discard(rid)
        self.waiting = self._sorted([*to_waiting, *waiting])
        self.kv = self._sorted([*to_kv, *kv])
        self.running = [*self.running, *ran]

        real_feed = iter(decisions)
        real_asked: list[Any] = []
        answers = [budget]

        def check(request: Any) -> StepDecision:
            if not real_asked or real_asked[-1] is not request:
                real_asked.append(request)
            decision = next(real_feed, then)
            if decision is ASYNC:
                request.status = KV
                return SKIP
            return decision

        def try_promote(request: Any) -> bool:
            real_asked.append(request)
            return request.request_id in self.promotable

        def should_continue() -> bool:
            left = answers[0]
            assert left is not None
            answers[0] = left - 1
            return left > 0

        result = self.wq.schedule_step(
            check,
            try_promote if with_promote else None,
            max_running=max_running,
            should_continue=None if budget is None else should_continue,
        )
        assert _same(real_asked, asked), (
            f"model: WL-L33-2: examined {_ids(real_asked)}, the spec's order gives {_ids(asked)}"
        )
        assert _same(result, ran), f"model: ran {_ids(result)}, expected {_ids(ran)}"

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        """WL-L33-4: to the front of waiting; the KV blocks are freed."""
        request = data.draw(st.sampled_from(self.running))
        self.wq.preempt(request)
        self.running = [r for r in self.running if r is not request]
        self.status[request.request_id] = RequestStatus.PREEMPTED
        self.kv_held.discard(request.request_id)
        self.waiting = self._sorted([request, *self.waiting])

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        request = data.draw(st.sampled_from(self.running))
        self.wq.finish(request)
        self.running = [r for r in self.running if r is not request]
        self.finished.append(request)
        self.status[request.request_id] = RequestStatus.FINISHED_STOPPED
        self._forget(request)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def await_stream(self, data: st.DataObject) -> None:
        """WL-STR-1: a paused session, in kv_holding_waiting (it ran), deferred."""
        request = data.draw(st.sampled_from(self.running))
        self.wq.await_stream(request)
        self.running = [r for r in self.running if r is not request]
        self.status[request.request_id] = STREAM
        self.paused.add(request.request_id)
        self._enqueue_model(request)

    @rule(data=st.data())
    def continue_stream(self, data: st.DataObject) -> None:
        """WL-STR-2: running -> enqueued WAITING; a waiting streaming one -> WAITING in place."""
        streaming = [r for r in [*self.waiting, *self.kv] if self.status[r.request_id] is STREAM]
        candidates = [*self.running, *streaming]
        if not candidates:
            return
        request = data.draw(st.sampled_from(candidates))
        self.wq.continue_stream(request)
        rid = request.request_id
        was_running = any(r is request for r in self.running)
        self.status[rid] = RequestStatus.WAITING
        self.paused.discard(rid)
        if was_running:
            self.running = [r for r in self.running if r is not request]
            self._enqueue_model(request)

    @rule(named=st.lists(requests, max_size=3))
    def abort(self, named: list[Any]) -> None:
        result = self.wq.abort([r.request_id for r in named])
        expected: list[Any] = []
        for r in named:
            if all(r is not e for e in expected) and all(r is not f for f in self.finished):
                expected.append(r)
        assert _same(result, expected), f"model: aborted {_ids(result)}"
        for r in expected:
            self.waiting = [x for x in self.waiting if x is not r]
            self.kv = [x for x in self.kv if x is not r]
            self.running = [x for x in self.running if x is not r]
            self.finished.append(r)
            self.status[r.request_id] = RequestStatus.FINISHED_ABORTED
            self._forget(r)

    # -- invariants

    @invariant()
    def matches_model(self) -> None:
        """WL-L33-1, WL-L33-3, WL-STR-1: every place holds what the model holds, in order."""
        wq = self.wq
        for name, real, model in [
            ("waiting", list(wq.waiting), self.waiting),
            ("kv_holding_waiting", list(wq.kv_holding_waiting), self.kv),
            ("running", wq.running, self.running),
            ("finished", list(wq.finished.values()), self.finished),
        ]:
            assert _same(real, model), f"model: {name} is {_ids(real)}, expected {_ids(model)}"
        assert wq.deferred_waiting == self.deferred, (
            f"model: deferred_waiting is {sorted(wq.deferred_waiting)}, "
            f"expected {sorted(self.deferred)}"
        )
        assert wq.num_paused_sessions == len(self.paused), "model: paused sessions differ"
        for r in [*self.waiting, *self.kv, *self.running, *self.finished]:
            assert r.status is self.status[r.request_id], f"model: {r.request_id} status"


class FCFSV033Machine(V033Machine):
    policy = SchedulingPolicy.FCFS


class PriorityV033Machine(V033Machine):
    policy = SchedulingPolicy.PRIORITY


_SETTINGS = settings(deadline=None, stateful_step_count=30)
FCFSV033Machine.TestCase.settings = _SETTINGS
PriorityV033Machine.TestCase.settings = _SETTINGS
TestFCFSV033Machine = FCFSV033Machine.TestCase
TestPriorityV033Machine = PriorityV033Machine.TestCase


_HUNT = settings(
    max_examples=300,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize(
    ("variant", "policy"),
    [
        (ParksReversed, SchedulingPolicy.FCFS),
        (WaitingBeforeKVHolding, SchedulingPolicy.PRIORITY),
    ],
)
def test_wl_l33_2_order_bugs_the_cheap_contracts_miss_are_found_by_the_model(
    variant: type[WaitingQueues], policy: SchedulingPolicy
) -> None:
    """WL-L33-2, WL-L33-3: with deep checks off (as in production) the cheap contracts
    miss these order bugs; the model finds them."""
    machine = type("BrokenMachine", (V033Machine,), {"factory": variant, "policy": policy})
    previous = queueref.config.deep_checks()
    queueref.config.set_deep_checks(False)
    try:
        with pytest.raises(AssertionError) as info:
            run_state_machine_as_test(machine, settings=_HUNT)
    finally:
        queueref.config.set_deep_checks(previous)
    assert not isinstance(info.value, icontract.ViolationError)
    assert "model:" in str(info.value)


def test_kv_holding_place_name() -> None:
    """WL-L33-1: the place of a KV holder is kv_holding_waiting."""
    assert IN_KV_HOLDING == "kv_holding_waiting"
