"""A Hypothesis state machine: `WaitingQueues` against a model made of plain lists.

The model (`waiting`, `skipped`, `running`, `finished` lists and a status per
request id) is written from specs/waiting-lifecycle.md without any queue: a
FCFS list appends and prepends, a PRIORITY list is kept sorted by key, and a
step walks the requests in the order the spec says it examines them. The rules
interleave enqueue (ready and blocked), promotion, steps with random decisions
and `max_running`, preempt, finish and abort, including the bad calls, and the
invariants compare the real thing with the model after every rule.

The last tests run the same machine against broken variants and show that it
fails on each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import icontract
import pytest
from hypothesis import HealthCheck, Phase, event, note, settings
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
from waiting_variants import ForgetsToPark, ParksWithoutReversal, SkippedFirstPriority

import queueref.config
from queueref import Request, RequestStatus, SchedulingPolicy, StepDecision, WaitingQueues
from queueref.request import request_key

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
BLOCKED = (
    RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR,
    RequestStatus.WAITING_FOR_REMOTE_KVS,
    RequestStatus.WAITING_FOR_STREAMING_REQ,
)
FINISHED = [s for s in RequestStatus if RequestStatus.is_finished(s)]


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


class WaitingLifecycleMachine(RuleBasedStateMachine):
    """Drives `factory(policy)` and a list model side by side."""

    policy: SchedulingPolicy = SchedulingPolicy.FCFS
    factory: Callable[[SchedulingPolicy], WaitingQueues] = WaitingQueues

    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.wq = type(self).factory(self.policy)
        self.waiting: list[Any] = []
        self.skipped: list[Any] = []
        self.running: list[Any] = []
        self.finished: list[Any] = []
        self.status: dict[str, RequestStatus] = {}
        self.promotable: set[str] = set()
        self.paused: set[str] = set()  # streaming sessions waiting for input (WL-STR-1)
        self.count = 0

    # -- the list model of a queue

    def _add(self, queue: list[Any], request: Any) -> list[Any]:
        queue = [*queue, request]
        return sorted(queue, key=request_key) if self.policy is SchedulingPolicy.PRIORITY else queue

    def _prepend(self, queue: list[Any], request: Any) -> list[Any]:
        if self.policy is SchedulingPolicy.PRIORITY:
            return self._add(queue, request)
        return [request, *queue]

    def _place_of(self, request: Any) -> str | None:
        for name, held in [
            ("waiting", self.waiting),
            ("skipped", self.skipped),
            ("running", self.running),
            ("finished", self.finished),
        ]:
            if any(r is request for r in held):
                return name
        return None

    def _observed(self) -> tuple[Any, ...]:
        wq = self.wq
        everything = [*wq.waiting, *wq.skipped_waiting, *wq.running, *wq.finished.values()]
        return (
            [id(r) for r in wq.waiting],
            [id(r) for r in wq.skipped_waiting],
            [id(r) for r in wq.running],
            {k: id(r) for k, r in wq.finished.items()},
            {r.request_id: r.status for r in everything},
        )

    def _rejected(self, error: type[Exception], call: Callable[[], object]) -> None:
        before = self._observed()
        with pytest.raises(error):
            call()
        assert self._observed() == before, "model: a rejected call changed the state"

    # -- rules

    @rule(
        target=requests,
        status=st.sampled_from([*[RequestStatus.WAITING] * 3, *BLOCKED]),
        priority=st.integers(0, 2),
        arrival=st.integers(0, 3),
    )
    def enqueue(self, status: RequestStatus, priority: int, arrival: int) -> Any:
        """WL-ENQ-1: blocked to skipped_waiting, the others to waiting (add_request)."""
        request = Request(
            f"r{self.count}", priority=priority, arrival_time=float(arrival), status=status
        )
        self.count += 1
        note(f"wq.enqueue({request!r})")
        self.wq.enqueue(request)
        self.status[request.request_id] = status
        if status in BLOCKED:
            self.skipped = self._add(self.skipped, request)
        else:
            self.waiting = self._add(self.waiting, request)
        return request

    @initialize(
        target=requests,
        first=st.lists(
            st.tuples(st.sampled_from([RequestStatus.WAITING, *BLOCKED]), st.integers(0, 2)),
            min_size=1,
            max_size=5,
        ),
    )
    def first_requests(self, first: list[tuple[RequestStatus, int]]) -> Any:
        """WL-ENQ-1: start with a few requests, so that every rule has some to work on."""
        return multiple(*(self.enqueue(status, priority, 0) for status, priority in first))

    @rule(request=requests)
    def make_promotable(self, request: Any) -> None:
        """WL-STEP-2: from now on try_promote answers True for this request."""
        note(f"promotable: {request.request_id}")
        self.promotable.add(request.request_id)

    @rule(
        decisions=st.lists(st.sampled_from([RUN, RUN, SKIP, STOP]), max_size=6),
        then=st.sampled_from([RUN, RUN, SKIP, STOP]),
        room=st.none() | st.integers(0, 3),
        with_promote=st.booleans(),
        budget=st.none() | st.integers(0, 4),
    )
    def schedule_step(
        self,
        decisions: list[StepDecision],
        then: StepDecision,
        room: int | None,
        with_promote: bool,
        budget: int | None = None,
    ) -> None:
        """WL-STEP-1 .. WL-STEP-8: one step against the model.

        The model walks the waiting requests in the order the spec gives --
        FCFS: skipped then waiting, each front to back (WL-STEP-8); PRIORITY:
        ascending key across both (WL-STEP-6) -- and the real step must ask
        its callbacks about the same requests in the same order, move the same
        requests to running, and leave the same queues (WL-STEP-1, WL-STEP-5).
        With `budget`, should_continue answers True that many times (WL-STEP-10);
        paused sessions take running slots (WL-STR-4) and are offered to
        try_promote like any blocked head (WL-STR-5).
        """
        # max_running: None, or room for 0..3 more requests than are running now.
        max_running = None if room is None else len(self.running) + room
        note(
            f"decisions={decisions} then {then}, max_running={max_running}, promote={with_promote}"
        )
        before_waiting, before_skipped = list(self.waiting), list(self.skipped)
        blocked_before = {r.request_id for r in [*before_waiting, *before_skipped]} & {
            rid for rid, s in self.status.items() if s in BLOCKED
        }

        # The model.
        if self.policy is SchedulingPolicy.FCFS:
            order = [*before_skipped, *before_waiting]
        else:
            order = sorted([*before_skipped, *before_waiting], key=request_key)
        feed = iter(decisions)
        ran: list[Any] = []
        skipped_now: list[Any] = []
        asked: list[Any] = []  # the requests a callback is asked about, in order
        guard = budget
        for request in order:
            if guard is not None:
                if guard == 0:
                    break
                guard -= 1
            slots = len(self.running) + len(ran) + len(self.paused)
            if max_running is not None and slots >= max_running:
                break
            rid = request.request_id
            if self.status[rid] in BLOCKED:
                if with_promote:
                    asked.append(request)
                if not (with_promote and rid in self.promotable):
                    skipped_now.append(request)
                    continue
                self.status[rid] = RequestStatus.WAITING
                self.paused.discard(rid)
            else:
                asked.append(request)
            decision = next(feed, then)
            if decision is STOP:
                break
            if decision is SKIP:
                skipped_now.append(request)
                continue
            ran.append(request)
            self.status[rid] = RequestStatus.RUNNING
        gone = {id(r) for r in [*ran, *skipped_now]}
        self.waiting = [r for r in before_waiting if id(r) not in gone]
        rest = [r for r in before_skipped if id(r) not in gone]
        if self.policy is SchedulingPolicy.FCFS:
            self.skipped = [*skipped_now, *rest]
        else:
            self.skipped = sorted([*skipped_now, *rest], key=request_key)
        self.running = [*self.running, *ran]

        # The real thing.
        real_feed = iter(decisions)
        real_asked: list[Any] = []

        def check(request: Any) -> StepDecision:
            if not real_asked or real_asked[-1] is not request:
                real_asked.append(request)
            return next(real_feed, then)

        def try_promote(request: Any) -> bool:
            real_asked.append(request)
            return request.request_id in self.promotable

        answers = [budget]

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
        note(f"ran {_ids(result)}, asked {_ids(real_asked)}")
        event(f"step: ran {min(len(ran), 3)}{'+' if len(ran) > 3 else ''}")
        event(f"step: skipped {min(len(skipped_now), 3)}{'+' if len(skipped_now) > 3 else ''}")
        if any(r.request_id in blocked_before for r in ran):
            event("step: a promoted request ran")
        assert _same(real_asked, asked), (
            f"model: WL-STEP-6/WL-STEP-8: the step examined {_ids(real_asked)}, "
            f"the spec's order gives {_ids(asked)}"
        )
        assert _same(result, ran), f"model: WL-STEP-1: ran {_ids(result)}, expected {_ids(ran)}"
        # WL-STEP-7: a blocked request runs only if try_promote said True for it.
        assert all(
            r.request_id not in blocked_before or (with_promote and r.request_id in self.promotable)
            for r in result
        ), "model: WL-STEP-7: a blocked request ran without a promotion"

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        """WL-PRE-1: running -> waiting.prepend_request (FCFS: front; PRIORITY: key order)."""
        request = data.draw(st.sampled_from(self.running), label="running request")
        note(f"wq.preempt({request.request_id!r})")
        event("preempt: a running request")
        self.wq.preempt(request)
        self.running = [r for r in self.running if r is not request]
        self.waiting = self._prepend(self.waiting, request)
        self.status[request.request_id] = RequestStatus.PREEMPTED

    @precondition(lambda self: self.running)
    @rule(data=st.data(), status=st.sampled_from(FINISHED))
    def finish(self, data: st.DataObject, status: RequestStatus) -> None:
        """WL-FIN-1: running -> finished with the given status."""
        request = data.draw(st.sampled_from(self.running), label="running request")
        note(f"wq.finish({request.request_id!r}, {status.name})")
        event("finish: a running request")
        self.wq.finish(request, status)
        self.running = [r for r in self.running if r is not request]
        self.finished.append(request)
        self.status[request.request_id] = status

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def await_stream(self, data: st.DataObject) -> None:
        """WL-STR-1: running -> WAITING_FOR_STREAMING_REQ, skipped_waiting.add_request."""
        request = data.draw(st.sampled_from(self.running), label="running request")
        note(f"wq.await_stream({request.request_id!r})")
        self.wq.await_stream(request)
        self.running = [r for r in self.running if r is not request]
        self.skipped = self._add(self.skipped, request)
        self.status[request.request_id] = RequestStatus.WAITING_FOR_STREAMING_REQ
        self.paused.add(request.request_id)

    @rule(data=st.data())
    def continue_stream(self, data: st.DataObject) -> None:
        """WL-STR-2: running -> WAITING in waiting; a waiting streaming one: WAITING in place."""
        streaming = [
            r
            for r in [*self.waiting, *self.skipped]
            if self.status[r.request_id] is RequestStatus.WAITING_FOR_STREAMING_REQ
        ]
        if not [*self.running, *streaming]:
            return
        request = data.draw(st.sampled_from([*self.running, *streaming]), label="target")
        note(f"wq.continue_stream({request.request_id!r})")
        was_running = any(r is request for r in self.running)
        self.wq.continue_stream(request)
        self.status[request.request_id] = RequestStatus.WAITING
        self.paused.discard(request.request_id)
        if was_running:
            self.running = [r for r in self.running if r is not request]
            self.waiting = self._add(self.waiting, request)

    @rule(
        named=st.lists(st.one_of(requests, st.sampled_from(["ghost", "r999"])), max_size=3),
        as_str=st.booleans(),
    )
    def abort(self, named: list[Any], as_str: bool) -> None:
        """WL-ABT-1: abort wherever it waits or runs; WL-ABT-2: unknown/finished ignored.

        With `as_str`, a single id is passed as a plain str.
        """
        request_ids: list[str] | str = [x if isinstance(x, str) else x.request_id for x in named]
        if as_str and len(request_ids) == 1:
            request_ids = request_ids[0]
        note(f"wq.abort({request_ids!r})")
        expected: list[Any] = []
        for x in named:
            if isinstance(x, str) or any(x is e for e in expected):
                continue
            if self._place_of(x) in ("waiting", "skipped", "running"):
                expected.append(x)
        result = self.wq.abort(request_ids)
        event(f"abort: {len(result)} aborted")
        assert _same(result, expected), f"model: WL-ABT-1: aborted {_ids(result)}"
        for x in expected:
            self.waiting = [r for r in self.waiting if r is not x]
            self.skipped = [r for r in self.skipped if r is not x]
            self.running = [r for r in self.running if r is not x]
            self.finished.append(x)
            self.status[x.request_id] = RequestStatus.FINISHED_ABORTED
            self.paused.discard(x.request_id)

    @rule(
        request=requests,
        call=st.sampled_from(["enqueue", "preempt", "finish"]),
        twin=st.booleans(),
        status=st.sampled_from(list(RequestStatus)),
    )
    def rejected_call(self, request: Any, call: str, twin: bool, status: RequestStatus) -> None:
        """WL-ENQ-2, WL-PRE-2, WL-FIN-2: bad calls raise ValueError and change nothing.

        The target is a known request or, with `twin`, a new object with its id
        (which the instance does not know, whatever its status says).
        """
        target = Request(request.request_id, status=RequestStatus.RUNNING) if twin else request
        running = self._place_of(target) == "running"
        if call == "enqueue":  # a known id (WL-ENQ-2)
            self._rejected(ValueError, lambda: self.wq.enqueue(target))
        elif call == "preempt" and not running:  # not running (WL-PRE-2)
            self._rejected(ValueError, lambda: self.wq.preempt(target))
        elif call == "finish" and not (running and RequestStatus.is_finished(status)):
            self._rejected(ValueError, lambda: self.wq.finish(target, status))  # WL-FIN-2

    # -- invariants

    @invariant()
    def check_matches_model(self) -> None:
        """WL-CONS-1, WL-CONS-2, WL-STEP-5: every place holds what the model holds, in order."""
        wq = self.wq
        assert _same(list(wq.waiting), self.waiting), (
            f"model: waiting is {_ids(wq.waiting)}, expected {_ids(self.waiting)}"
        )
        assert _same(list(wq.skipped_waiting), self.skipped), (
            f"model: skipped_waiting is {_ids(wq.skipped_waiting)}, expected {_ids(self.skipped)}"
        )
        assert _same(wq.running, self.running), (
            f"model: running is {_ids(wq.running)}, expected {_ids(self.running)}"
        )
        assert _same(list(wq.finished.values()), self.finished), "model: finished differs"
        assert wq.num_paused_sessions == len(self.paused), "model: WL-STR-1: paused sessions"
        for r in [*self.waiting, *self.skipped, *self.running, *self.finished]:
            assert r.status is self.status[r.request_id], (
                f"model: {r.request_id} is {r.status.name}, "
                f"expected {self.status[r.request_id].name}"
            )

    @invariant()
    def check_conservation(self) -> None:
        """WL-CONS-1: every request ever enqueued is in exactly one place."""
        wq = self.wq
        places = [*wq.waiting, *wq.skipped_waiting, *wq.running, *wq.finished.values()]
        assert len({id(r) for r in places}) == len(places) == self.count, (
            "model: WL-CONS-1: a request was lost or duplicated"
        )


class FCFSMachine(WaitingLifecycleMachine):
    policy = SchedulingPolicy.FCFS


class PriorityMachine(WaitingLifecycleMachine):
    policy = SchedulingPolicy.PRIORITY


# Hypothesis profiles (tests/conftest.py) decide max_examples; only these are fixed here.
_MACHINE_SETTINGS = settings(deadline=None, stateful_step_count=30)
FCFSMachine.TestCase.settings = _MACHINE_SETTINGS
PriorityMachine.TestCase.settings = _MACHINE_SETTINGS
TestFCFSMachine = FCFSMachine.TestCase
TestPriorityMachine = PriorityMachine.TestCase


# ---------------------------------------------------------------------------
# The machine has teeth: it fails on broken variants (tests/helpers/waiting_variants.py).


def _machine(factory: type[WaitingQueues], policy: SchedulingPolicy) -> type[RuleBasedStateMachine]:
    return type(
        f"{factory.__name__}Machine",
        (WaitingLifecycleMachine,),
        {"factory": factory, "policy": policy},
    )


# Enough fixed examples to reach each bug; no shrinking (the failure, not its minimum, is
# what these tests are about), derandomized so the run is the same on every machine.
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
        (ParksWithoutReversal, SchedulingPolicy.FCFS),
        (SkippedFirstPriority, SchedulingPolicy.PRIORITY),
    ],
)
def test_machine_catches_what_cheap_contracts_miss(
    variant: type[WaitingQueues], policy: SchedulingPolicy
) -> None:
    """WL-STEP-5, WL-STEP-6: with deep checks off (as in production), the cheap contracts
    do not see these order bugs; the model does."""
    previous = queueref.config.deep_checks()
    queueref.config.set_deep_checks(False)
    try:
        with pytest.raises(AssertionError) as info:
            run_state_machine_as_test(_machine(variant, policy), settings=_HUNT)
    finally:
        queueref.config.set_deep_checks(previous)
    assert not isinstance(info.value, icontract.ViolationError)
    assert "model:" in str(info.value)


@pytest.mark.contracts
def test_machine_with_deep_checks_reports_the_contract() -> None:
    """WL-STEP-4, WL-CONS-1: with deep checks on, a lost step_skipped is a contract violation."""
    with pytest.raises(icontract.ViolationError, match="WL-"):
        run_state_machine_as_test(_machine(ForgetsToPark, SchedulingPolicy.FCFS), settings=_HUNT)
