"""Gaps in the tests of queueref.waiting.checks, found by `make mutation`.

`waiting_checks` holds what the waiting lifecycle's contracts ask. Three kinds of
test give those predicates teeth:

* a broken `WaitingQueues` (`tests/helpers/waiting_variants.py`: the real method with one
  named change; `tests/helpers/method_variants.py` for `__init__`, whose postconditions a
  subclass does not inherit) caught by the clause that states the rule, with that
  clause's ID and text. Postconditions run bottom-up and the deep ones (the list
  model of a step, the examination order) sit below the cheap ones and catch most
  bugs first, so the cheap clauses are shown with deep checks off
  (`cheap_contracts`): the default contracts, where they are the only check;
* a directly corrupted state for the consistency checks of internal state (the
  class invariants), as `test_tracker_clauses.py` does for the tracker;
* a valid run the predicates must accept: counts past CPython's small-int cache,
  a layout and request ids that are equal strings but not the constants' objects.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable
from typing import Any

import pytest
from method_variants import method_variant
from waiting_gap_helpers import answering, enqueue_ids, violation_message
from waiting_variants import (
    AsksTheGuardTwice,
    Change,
    ForgetsToPark,
    IgnoresTheGuard,
    PromotesWithoutAsking,
    SkipsBackToWaiting,
    broken_variant,
)

import queueref.config
from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.queues.factory import SchedulingPolicy
from queueref.waiting.checks import (
    _conserved,
    _contents,
    _is_vllm_victim,
    _sessions_consistent,
    _step_matches_model,
)
from queueref.waiting.model import LAYOUT_V030, LAYOUT_V033
from queueref.waiting.places import IN_RUNNING, IN_WAITING, StepEntry

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
STREAM = RequestStatus.WAITING_FOR_STREAMING_REQ

# -- broken variants, each the real method with one named change

_BLOCKED_HEAD = "if self._is_blocked(request.status) and not self._promote(ask_promote, request):"

NeverOffersPromotion = broken_variant(
    "NeverOffersPromotion",
    Change(
        "schedule_step", "never offers a blocked head to try_promote", _BLOCKED_HEAD, "if False:"
    ),
)
PromotesEveryHead = broken_variant(
    "PromotesEveryHead",
    Change(
        "schedule_step",
        "offers every head to try_promote, blocked or not",
        _BLOCKED_HEAD,
        "if not self._promote(ask_promote, request):",
    ),
)
LogsStatusAfterCallbacks = broken_variant(
    "LogsStatusAfterCallbacks",
    Change(
        "schedule_step",
        "logs the status the callbacks left instead of the one examined",
        "status_before,",
        "request.status,",
    ),
)
LogsStatusAsInt = broken_variant(
    "LogsStatusAsInt",
    Change(
        "schedule_step", "logs the status as a plain int", "status_before,", "int(status_before),"
    ),
)
LogsTwice = broken_variant(
    "LogsTwice",
    Change(
        "schedule_step",
        "logs every examination twice",
        "if decision is StepDecision.STOP:",
        "log.append(log[-1])\n            if decision is StepDecision.STOP:",
    ),
)
RunsToFront = broken_variant(
    "RunsToFront",
    Change(
        "_run",
        "puts a request that runs at the front of running",
        "self.running.append(request)",
        "self.running.insert(0, request)",
    ),
)
RunsWithoutStatus = broken_variant(
    "RunsWithoutStatus",
    Change(
        "_run",
        "moves the request to running without setting RUNNING",
        "request.status = RequestStatus.RUNNING",
        "pass",
    ),
)
RunsAsPreempted = broken_variant(
    "RunsAsPreempted",
    Change(
        "_run",
        "runs the request as PREEMPTED",
        "request.status = RequestStatus.RUNNING",
        "request.status = RequestStatus.PREEMPTED",
    ),
)
RunsWithoutPlace = broken_variant(
    "RunsWithoutPlace",
    Change(
        "_run",
        "forgets to record that the request is running",
        "self._where[request.request_id] = IN_RUNNING",
        "pass",
    ),
)
SkipsToWaiting = broken_variant(
    "SkipsToWaiting",
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
SkipsToKVHolding = broken_variant(
    "SkipsToKVHolding",
    Change(
        "_skip_v033",
        "vllm-0.33: parks every skipped request in kv_holding_waiting, whatever its KV state",
        "if self._holds_kv(request):",
        "if True:",
    ),
)
UnpausesEveryExamined = broken_variant(
    "UnpausesEveryExamined",
    Change(
        "_note_status",
        "ends the pause of every examined session, promoted or not",
        "if request.status is not STREAMING:",
        "if True:",
    ),
)
AbortKeepsRecords = broken_variant(
    "AbortKeepsRecords",
    Change(
        "abort",
        "forgets to drop an aborted request's session and deferred records",
        "self._forget_state(request)",
        "pass",
    ),
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


def _verdict(check: Callable[[], bool]) -> bool | str:
    """A predicate's answer, or the name of what it raised."""
    try:
        return check()
    except Exception as error:  # noqa: BLE001 - the answer must be a bool, not an error
        return type(error).__name__


def _paused_session(wq: WaitingQueues) -> Any:
    """A running request `s` that stopped with no update: a paused session."""
    enqueue_ids(wq, "s")
    (session,) = wq.schedule_step(lambda r: RUN)
    wq.await_stream(session)
    assert wq.num_paused_sessions == 1 and session.status is STREAM
    return session


# -- lifecycle_operation: the precondition "the request is running"


@pytest.mark.contracts
def test_preempt_refuses_a_waiting_request_in_its_precondition() -> None:
    """WL-PRE-2: `preempt` of a waiting request is refused by the precondition "only a
    running request can be preempted" (the body's own check words it otherwise), and
    an object that is no request is refused as such, a TypeError, not as "not running"."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "a")
    (a,) = list(wq.waiting)
    with pytest.raises(ValueError, match="WL-PRE-2: only a running request can be preempted"):
        wq.preempt(a)
    with pytest.raises(TypeError, match="WL-PRE-2: the request has request_id"):
        wq.preempt("a")  # type: ignore[arg-type]
    assert list(wq.waiting) == [a] and a.status is RequestStatus.WAITING


# -- the statuses snapshot (deep checks)


@pytest.mark.contracts
@pytest.mark.parametrize("scenario", ["promoted", "parked by check", "plain int"])
def test_a_step_log_with_the_wrong_statuses_is_caught(scenario: str) -> None:
    """WL-STEP-7: the log records the status each request had when examined: a log
    written after the callbacks (a promoted request logged WAITING instead of its
    blocked status; a request `check` parked as WAITING_FOR_REMOTE_KVS logged with
    it) or as a plain int (equal, not the RequestStatus member) is caught by "the
    step's log records the statuses the requests had" (deep checks: the statuses
    snapshot)."""
    if scenario == "promoted":
        wq: WaitingQueues = LogsStatusAfterCallbacks("fcfs")
        enqueue_ids(wq, "g", status=KV)
        step = lambda: wq.schedule_step(lambda r: RUN, lambda r: True)  # noqa: E731
    elif scenario == "parked by check":
        wq = LogsStatusAfterCallbacks("fcfs")
        enqueue_ids(wq, "a")

        def park(request: Any) -> StepDecision:
            request.status = KV
            return SKIP

        step = lambda: wq.schedule_step(park)  # noqa: E731
    else:
        wq = LogsStatusAsInt("fcfs")
        enqueue_ids(wq, "a")
        step = lambda: wq.schedule_step(lambda r: RUN)  # noqa: E731
    message = violation_message(step)
    assert "WL-STEP-7: the step's log records the statuses the requests had" in message


# -- the step's log against the callbacks' answers (cheap clauses)


@pytest.mark.contracts
@pytest.mark.parametrize("variant", [PromotesWithoutAsking, NeverOffersPromotion])
def test_a_blocked_request_run_without_its_promotion_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues]
) -> None:
    """WL-STEP-7: a blocked request that runs although try_promote answered False, or
    without being offered to try_promote at all, is caught by "a blocked request never
    runs without a successful promotion" (checked before WL-STEP-2's clause)."""
    wq = variant("fcfs")
    enqueue_ids(wq, "g", status=KV)
    message = violation_message(lambda: wq.schedule_step(lambda r: RUN, lambda r: False))
    assert "WL-STEP-7: a blocked request never runs without a successful promotion" in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "status", "decision"),
    [
        (NeverOffersPromotion, KV, SKIP),  # a blocked head not offered to try_promote
        (PromotesEveryHead, RequestStatus.WAITING, RUN),  # a ready head offered to it
        (PromotesWithoutAsking, KV, STOP),  # not promoted, yet check was asked
    ],
)
def test_a_blocked_head_handled_wrongly_is_caught(
    cheap_contracts: None,
    variant: type[WaitingQueues],
    status: RequestStatus,
    decision: StepDecision,
) -> None:
    """WL-STEP-2: try_promote is asked exactly for the blocked heads, and a head it did
    not promote is skipped without asking check: a step that breaks either half, with
    nothing running, is caught by "a blocked head is offered to try_promote; if not
    promoted it is skipped"."""
    wq = variant("fcfs")
    enqueue_ids(wq, "h", status=status)
    message = violation_message(
        lambda: wq.schedule_step(lambda r: decision, lambda r: status is RequestStatus.WAITING)
    )
    assert "WL-STEP-2: a blocked head is offered to try_promote" in message


@pytest.mark.contracts
@pytest.mark.parametrize("variant", [UnpausesEveryExamined, NeverOffersPromotion])
@pytest.mark.parametrize("layout", [LAYOUT_V030, LAYOUT_V033])
def test_a_paused_session_handled_wrongly_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str
) -> None:
    """WL-STR-5: a paused session offered to try_promote and not promoted stays paused,
    and a paused session is offered to try_promote like any blocked head: a step that
    ends the pause without a promotion, or never offers the session, is caught by
    "a paused session is offered to try_promote like any blocked head"."""
    wq = variant("fcfs", layout=layout)
    _paused_session(wq)
    message = violation_message(lambda: wq.schedule_step(lambda r: SKIP, lambda r: False))
    assert "WL-STR-5: a paused session is offered to try_promote" in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "answers"),
    [
        (IgnoresTheGuard, (True, False)),  # examines again after the False
        (AsksTheGuardTwice, (True, True, False)),  # two answers for one examination
    ],
)
def test_an_examination_out_of_step_with_a_false_answer_is_caught(
    variant: type[WaitingQueues], answers: tuple[bool, ...]
) -> None:
    """WL-STEP-10: after should_continue answers False the step has examined exactly one
    request fewer than it asked: a step that goes on after the False, or asks twice an
    iteration, is caught by "after should_continue answers False no request is
    examined" (checked before the clause on the answers themselves)."""
    wq = variant("fcfs")
    enqueue_ids(wq, "a", "b")
    message = violation_message(
        lambda: wq.schedule_step(lambda r: RUN, should_continue=answering(*answers))
    )
    assert "WL-STEP-10: after should_continue answers False no request is examined" in message


@pytest.mark.contracts
@pytest.mark.parametrize("decision", [SKIP, STOP])
def test_a_request_logged_twice_is_caught(cheap_contracts: None, decision: StepDecision) -> None:
    """WL-STEP-1: a log that holds one examination twice (skipped, or stopped: then the
    STOP is not the last entry alone) is caught by "each request is examined at most
    once; STOP ends the step and leaves its request where it was"."""
    wq = LogsTwice("fcfs")
    enqueue_ids(wq, "a")
    message = violation_message(lambda: wq.schedule_step(lambda r: decision))
    assert "WL-STEP-1: each request is examined at most once; STOP ends the step" in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "layout", "status"),
    [
        (RunsToFront, LAYOUT_V030, RequestStatus.WAITING),  # running out of order
        (RunsWithoutStatus, LAYOUT_V030, RequestStatus.WAITING),  # still WAITING
        (RunsAsPreempted, LAYOUT_V030, RequestStatus.WAITING),  # PREEMPTED, after RUNNING
        (RunsWithoutPlace, LAYOUT_V030, RequestStatus.WAITING),  # recorded in waiting
        (RunsWithoutPlace, LAYOUT_V033, KV),  # recorded in kv_holding_waiting
    ],
)
def test_a_run_that_leaves_the_request_wrong_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str, status: RequestStatus
) -> None:
    """WL-STEP-1: the requests that ran are the end of running, in order, each RUNNING
    and recorded as running: a step that breaks any of these is caught by "the requests
    that ran were popped, in order, onto the end of running, with status RUNNING"."""
    wq = variant("fcfs", layout=layout)
    enqueue_ids(wq, "a", "b", status=status)
    message = violation_message(lambda: wq.schedule_step(lambda r: RUN, lambda r: True))
    assert "WL-STEP-1: the requests that ran were popped, in order, onto the end of running" in (
        message
    )


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "layout", "status", "clause"),
    [
        (ForgetsToPark, LAYOUT_V030, RequestStatus.WAITING, "WL-STEP-4: every request skipped"),
        (SkipsToWaiting, LAYOUT_V030, RequestStatus.WAITING, "WL-STEP-4: every request skipped"),
        (SkipsToKVHolding, LAYOUT_V033, RequestStatus.WAITING, "WL-L33-3: every request skipped"),
        (SkipsBackToWaiting, LAYOUT_V033, KV, "WL-L33-3: every request skipped"),
    ],
)
def test_a_skipped_request_parked_in_the_wrong_place_is_caught(
    cheap_contracts: None,
    variant: type[WaitingQueues],
    layout: str,
    status: RequestStatus,
    clause: str,
) -> None:
    """WL-STEP-4, WL-L33-3: a skipped request ends in a queue, the one its layout picks
    (vllm-0.30: skipped_waiting; vllm-0.33: kv_holding_waiting exactly when it holds KV
    blocks): dropped, or parked in the other queue, it is caught by that clause."""
    wq = variant("fcfs", layout=layout)
    enqueue_ids(wq, "a", status=status)
    assert violation_message(lambda: wq.schedule_step(lambda r: SKIP)).count(clause) == 1


# -- a valid run past CPython's small-int cache


def test_a_step_of_three_hundred_requests_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """WL-CONS-1, WL-STEP-1, WL-STEP-10: 301 requests known, 300 of them run in one step
    that ends on a False answer: every count the contracts compare (known and placed,
    examined and distinct, answers and examinations) is past 256, where equal ints are
    distinct objects, and each comparison is `==`: the step passes its contracts."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)  # a fast set-up
    wq = WaitingQueues("fcfs")
    for i in range(301):
        wq.enqueue(Request(f"r{i:03}", arrival_time=float(i)))
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)
    ran = wq.schedule_step(lambda r: RUN, should_continue=answering(*[True] * 300, False))
    assert [r.request_id for r in ran] == [f"r{i:03}" for i in range(300)]
    assert [r.request_id for r in wq.waiting] == ["r300"] and len(wq.running) == 300


# -- the class invariants, over a corrupted state


def _three_places() -> tuple[WaitingQueues, Any, Any, Any]:
    """One request waiting (`w`), one running (`r`), one finished (`f`)."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "f", "r", "w")
    f, r = wq.schedule_step(lambda x: STOP if x.request_id == "w" else RUN)
    wq.finish(f)
    (w,) = list(wq.waiting)
    assert _conserved(wq)
    return wq, w, r, f


def test_conservation_catches_a_request_out_of_place() -> None:
    """WL-CONS-1: each known request is in exactly one place, the one recorded for it,
    and is the very object known under its id; `finished` is keyed by request_id. Each
    corruption breaks one of these and the invariant's check answers False."""
    wq, _, r, _ = _three_places()
    wq.running.append(r)  # twice in running
    assert not _conserved(wq)
    wq, _, _, _ = _three_places()
    wq._where["w"] = IN_RUNNING  # waiting, recorded as running
    assert not _conserved(wq)
    wq, _, _, _ = _three_places()
    wq._where["r"] = IN_WAITING  # running, recorded as waiting
    assert not _conserved(wq)
    wq, _, _, _ = _three_places()
    wq._known["g"] = Request("g")  # known, in no place
    wq._where["g"] = IN_WAITING
    assert not _conserved(wq)
    for key in ("e", "g"):  # the finished request `f` under an id before, then after, its own
        wq, _, _, f = _three_places()
        wq.finished = {key: f}
        assert not _conserved(wq)


class _ValueRequest:
    """A request that compares equal to any request with the same fields (a value type)."""

    def __init__(self, request_id: str) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, 0, 0.0
        self.status = RequestStatus.WAITING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ValueRequest) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(self.request_id)


def test_conservation_knows_each_request_by_identity() -> None:
    """WL-CONS-1: the request known under an id must be the very object in its place; an
    equal copy (a request type with value equality) known instead is not conserved."""
    wq = WaitingQueues("fcfs")
    original = _ValueRequest("v")
    wq.enqueue(original)
    assert _conserved(wq)
    copy = _ValueRequest("v")
    assert copy == original and copy is not original
    wq._known["v"] = copy
    assert not _conserved(wq)


class _NumberedRequest:
    """A request whose id is formatted from its number on every read: equal strings,
    never the same object (a RequestLike need not store its id)."""

    def __init__(self, number: int) -> None:
        self.number, self.priority, self.arrival_time = number, 0, float(number)
        self.status = RequestStatus.WAITING

    @property
    def request_id(self) -> str:
        return f"req-{self.number}"


def test_finished_requests_with_computed_ids_are_conserved() -> None:
    """WL-CONS-1, WL-FIN-1: a request whose request_id is computed on each read (equal,
    not identical strings) runs, finishes and is aborted: `finished` is keyed by an
    equal id and the invariants accept every state."""
    wq = WaitingQueues("fcfs")
    first: Any = _NumberedRequest(1)
    second: Any = _NumberedRequest(2)
    wq.enqueue(first)
    wq.enqueue(second)
    assert first.request_id == "req-1" and first.request_id is not first.request_id
    wq.schedule_step(lambda r: RUN if r is first else STOP)
    wq.finish(first)
    assert wq.abort("req-2") == [second]
    assert list(wq.finished) == ["req-1", "req-2"] and _conserved(wq)


class _ForeignStatus(enum.IntEnum):
    """Another IntEnum with queueref's values (vLLM's own RequestStatus is one)."""

    WAITING_FOR_STREAMING_REQ = int(STREAM)


@pytest.mark.parametrize(
    "status",
    [RequestStatus.WAITING, RequestStatus.PREEMPTED, _ForeignStatus.WAITING_FOR_STREAMING_REQ],
)
def test_a_paused_session_that_is_not_waiting_for_its_stream_is_inconsistent(
    status: enum.IntEnum,
) -> None:
    """WL-STR-1: every paused session waits as WAITING_FOR_STREAMING_REQ, queueref's
    member itself: a paused session whose status was set to another one (ready,
    preempted, or an equal member of another enum) is inconsistent."""
    wq = WaitingQueues("fcfs")
    session = _paused_session(wq)
    assert _sessions_consistent(wq)
    session.status = status
    assert not _sessions_consistent(wq)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("layout", "status", "clause"),
    [
        (LAYOUT_V030, STREAM, "WL-STR-1: every paused session waits"),
        (LAYOUT_V033, KV, "WL-L33-3: deferred_waiting names waiting requests only"),
        ("".join(["vllm-", "0.33"]), KV, "WL-L33-3: deferred_waiting names waiting requests only"),
    ],
)
def test_an_abort_that_keeps_the_records_is_caught(
    layout: str, status: RequestStatus, clause: str
) -> None:
    """WL-STR-1, WL-L33-3: an abort that leaves the aborted request among the paused
    sessions (vllm-0.30) or in deferred_waiting (vllm-0.33, also for a layout name
    built at run time: equal to the constant, not the same object) is caught by the
    class invariant that names the record."""
    wq = AbortKeepsRecords("fcfs", layout=layout)
    if status is STREAM:
        _paused_session(wq)
        rid = "s"
    else:
        enqueue_ids(wq, "g", status=KV)
        rid = "g"
    message = violation_message(lambda: wq.abort(rid))
    assert clause in message


# -- __init__: the layout's queues


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("layout", "change"),
    [
        (
            LAYOUT_V030,
            Change(
                "__init__",
                "vllm-0.30 also gets a kv_holding_waiting",
                "self.skipped_waiting = self._aside",
                "self.skipped_waiting = self._aside\n        self.kv_holding_waiting = self._aside",
            ),
        ),
        (
            LAYOUT_V033,
            Change(
                "__init__",
                "vllm-0.33 starts with a request deferred",
                "self.deferred_waiting = set()",
                "self.deferred_waiting = {'x'}",
            ),
        ),
        (
            LAYOUT_V033,
            Change(
                "__init__",
                "vllm-0.33 keeps deferred_waiting in a list",
                "self.deferred_waiting = set()",
                "self.deferred_waiting = []",
            ),
        ),
    ],
)
def test_a_layout_with_the_wrong_queues_is_caught(layout: str, change: Change) -> None:
    """WL-LAY-1: vllm-0.30 has skipped_waiting and no kv_holding_waiting; vllm-0.33 has
    kv_holding_waiting and deferred_waiting, an empty set: `__init__` breaking one of
    these is caught by its postcondition."""
    broken = method_variant(WaitingQueues, "__init__", change)
    wq = WaitingQueues.__new__(WaitingQueues)
    message = violation_message(lambda: broken(wq, "fcfs", layout))
    assert "WL-LAY-1: the layout's queues" in message


# -- the list model of a step


def test_the_model_comparison_refuses_a_request_examined_twice() -> None:
    """WL-STEP-1: the list model refuses a log that skipped one request twice; the
    comparison answers False (not the model's ValueError). In a step the examination
    order clauses (WL-STEP-6, WL-STEP-8, WL-L33-2), checked first, catch such a log
    before, so the comparison is asked directly."""
    wq = WaitingQueues("fcfs")
    enqueue_ids(wq, "a", "b")
    before = _contents(wq)
    (a, _) = list(wq.waiting)
    wq._last_step = [StepEntry(a, RequestStatus.WAITING, None, SKIP)] * 2
    assert _verdict(lambda: _step_matches_model(wq, before)) is False


# -- vLLM's victim (WL-PRE-3)


@pytest.mark.parametrize("policy", list(SchedulingPolicy))
def test_is_vllm_victim_refuses_a_request_not_running(policy: SchedulingPolicy) -> None:
    """WL-PRE-3: the victim is one of the running requests, by identity: neither a
    request that is not running nor an equal copy of the one vLLM would take is it,
    under either policy (the rule's own answer, `running[-1]` or the largest key, is)."""
    wq = WaitingQueues(policy)
    enqueue_ids(wq, "a", "b")
    wq.schedule_step(lambda r: RUN)
    running = list(wq.running)
    assert _is_vllm_victim(policy, running, running[-1])
    outsider = Request("z", 9, 99.0, RequestStatus.RUNNING)
    assert not _is_vllm_victim(policy, running, outsider)
    assert not _is_vllm_victim(policy, running, copy.copy(running[-1]))


class _SelfDoubtingPriority(int):
    """An int equal to nothing, itself included, and never `<=`: a priority made anew on
    each read that the rule's comparisons (`<` before the victim, `<=` after it) must
    never compare with the victim's own."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    def __le__(self, other: object) -> bool:
        return False

    __hash__ = int.__hash__


class _RereadRequest:
    """A request whose priority is made anew on each read (a `_SelfDoubtingPriority`)."""

    def __init__(self, request_id: str, priority: int) -> None:
        self.request_id, self._priority = request_id, priority
        self.arrival_time, self.status = 0.0, RequestStatus.WAITING

    @property
    def priority(self) -> int:
        return _SelfDoubtingPriority(self._priority)


def test_is_vllm_victim_compares_the_victim_only_with_the_others() -> None:
    """WL-PRE-3: under PRIORITY the victim has no larger key after it and no equal key
    before it: the rule compares it with the other running requests, never with
    itself. A lone running request whose priority is made anew on each read and is
    equal to nothing (not even itself) is still the victim: `preempt()` takes it."""
    wq = WaitingQueues("priority")
    request: Any = _RereadRequest("r", 1)
    wq.enqueue(request)
    assert wq.schedule_step(lambda r: RUN) == [request]
    assert _is_vllm_victim(SchedulingPolicy.PRIORITY, [request], request)
    assert wq.preempt() is request
    assert list(wq.waiting) == [request] and request.status is RequestStatus.PREEMPTED
