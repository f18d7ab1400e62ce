"""Gaps in the tests of queueref.waiting.leave, found by `make mutation`.

`waiting_leave` holds the lifecycle's ways out: `preempt` (running -> the front of
`waiting`), `finish` (running -> `finished`) and `abort` (wherever a named request
is -> `finished`), with their contracts. Three kinds of test:

* a broken `WaitingQueues` (`tests/helpers/waiting_variants.py`: the real method with one
  named change; the subclass inherits the method's contracts) caught by the clause
  that states the rule, with that clause's ID and text. Each operation has a cheap
  postcondition (status, place, counts) and below it a deep one (every queue's
  contents, under deep checks); postconditions run bottom-up, so a cheap clause is
  shown with deep checks off (`cheap_contracts`), where it is the only check that
  can see the bug, and a deep clause with a bug the cheap ones cannot see;
* the preconditions' own messages: `finish`'s status and running checks and
  `abort`'s check of its ids come before the body's checks, in their own words
  (the body's checks, kept for `python -O`, word them otherwise);
* valid runs the contracts must accept: counts past CPython's small-int cache, a
  vllm-0.30 preempt whose KV record (read only in vllm-0.33) is kept.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from waiting_gap_helpers import (
    enqueue_ids,
    ids_of,
    places_of,
    refused_in_a_callback,
    run_all,
    violation_message,
)
from waiting_variants import (
    AbortMissesSkipped,
    Change,
    PreemptKeepsKV,
    PreemptsToBack,
    broken_variant,
)

import queueref.config
from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.waiting.model import LAYOUT_V030, LAYOUT_V033

RUN, STOP = StepDecision.RUN, StepDecision.STOP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
LAYOUTS = [LAYOUT_V030, LAYOUT_V033]

# The clauses, by their descriptions.
PRE_CHEAP = "WL-PRE-1: the request leaves running for waiting with status PREEMPTED"
PRE_FRONT = "WL-PRE-1: FCFS: the preempted request is at the front of waiting"
PRE_DEEP = (
    "WL-PRE-1: waiting.prepend_request (FCFS: in front; PRIORITY: in key order); the "
    "other requests keep their places"
)
PRE_KV = "WL-L33-4: a preempted request holds no KV blocks: it goes to waiting"
FIN_CHEAP = "WL-FIN-1: the request leaves running for finished with the given status"
FIN_DEEP = "WL-FIN-1: the other requests keep their places"
ABT_CHEAP = "WL-ABT-1: each returned request left its place for finished as FINISHED_ABORTED"
ABT_NAMED = (
    "WL-ABT-2: exactly the known unfinished requests named are aborted, in the order "
    "of first mention; unknown and finished ids are ignored"
)
ABT_DEEP = "WL-ABT-1: the other requests keep their places and their order"

# -- broken variants of preempt, each the real method with one named change

_PRE_STATUS = "request.status = RequestStatus.PREEMPTED"
_PRE_PLACE = "self._where[request.request_id] = IN_WAITING"
_PRE_TAKE = "self._take_running(request)"
_PRE_PREPEND = "self.waiting.prepend_request(request)"

PreemptsAsWaiting = broken_variant(
    "PreemptsAsWaiting",
    Change(
        "preempt",
        "leaves the preempted request WAITING",
        _PRE_STATUS,
        "request.status = RequestStatus.WAITING",
    ),
)
PreemptsAsFinished = broken_variant(
    "PreemptsAsFinished",
    Change(
        "preempt",
        "sets FINISHED_ABORTED (after PREEMPTED) and queues the request",
        _PRE_STATUS,
        "request.status = RequestStatus.FINISHED_ABORTED",
    ),
)
PreemptLeavesItRunning = broken_variant(
    "PreemptLeavesItRunning",
    Change("preempt", "queues the request but leaves it recorded as running", _PRE_PLACE, "pass"),
)
PreemptKnowsACopy = broken_variant(
    "PreemptKnowsACopy",
    Change(
        "preempt",
        "queues the request but records a copy of it as the request known under its id",
        _PRE_PLACE,
        _PRE_PLACE + "\n    import copy\n    self._known[request.request_id] = copy.copy(request)",
    ),
)
PreemptRunsTheHead = broken_variant(
    "PreemptRunsTheHead",
    Change(
        "preempt",
        "runs the waiting head in the slot the preempted request leaves",
        _PRE_TAKE,
        _PRE_TAKE + "\n    self._run(self.waiting, self.waiting.peek_request())",
    ),
)
PreemptsAnotherToo = broken_variant(
    "PreemptsAnotherToo",
    Change(
        "preempt",
        "also preempts the last running request (behind the one named)",
        _PRE_TAKE,
        _PRE_TAKE + "\n    other = self.running.pop()"
        "\n    other.status = RequestStatus.PREEMPTED"
        "\n    self.waiting.prepend_request(other)"
        "\n    self._where[other.request_id] = IN_WAITING",
    ),
)
PreemptQueuesACopy = broken_variant(
    "PreemptQueuesACopy",
    Change(
        "preempt",
        "puts a copy of the request in front of waiting, not the request",
        _PRE_PREPEND,
        "import copy\n    self.waiting.prepend_request(copy.copy(request))",
    ),
)
PreemptReversesRunning = broken_variant(
    "PreemptReversesRunning",
    Change(
        "preempt",
        "takes the request out of running and reverses the others' order",
        _PRE_TAKE,
        _PRE_TAKE + "\n    self.running.reverse()",
    ),
)

# -- broken variants of finish

_FIN_STATUS = "request.status = status"
_FIN_PLACE = "self._where[request.request_id] = IN_FINISHED"
_FIN_TAKE = "self._take_running(request)"
_FIN_KEEP = "self.finished[request.request_id] = request"

FinishesAsAborted = broken_variant(
    "FinishesAsAborted",
    Change(
        "finish",
        "ignores the status given: always FINISHED_ABORTED",
        _FIN_STATUS,
        "request.status = RequestStatus.FINISHED_ABORTED",
    ),
)
FinishLeavesItRunning = broken_variant(
    "FinishLeavesItRunning",
    Change(
        "finish",
        "puts the request in finished but leaves it recorded as running",
        _FIN_PLACE,
        "pass",
    ),
)
FinishKnowsACopy = broken_variant(
    "FinishKnowsACopy",
    Change(
        "finish",
        "finishes the request but records a copy of it as the request known under its id",
        _FIN_PLACE,
        _FIN_PLACE + "\n    import copy\n    self._known[request.request_id] = copy.copy(request)",
    ),
)
FinishRunsTheHead = broken_variant(
    "FinishRunsTheHead",
    Change(
        "finish",
        "runs the waiting head in the slot the finished request leaves",
        _FIN_TAKE,
        _FIN_TAKE + "\n    self._run(self.waiting, self.waiting.peek_request())",
    ),
)
FinishPreemptsAnother = broken_variant(
    "FinishPreemptsAnother",
    Change(
        "finish",
        "also preempts the last running request",
        _FIN_TAKE,
        _FIN_TAKE + "\n    other = self.running.pop()"
        "\n    other.status = RequestStatus.PREEMPTED"
        "\n    self.waiting.prepend_request(other)"
        "\n    self._where[other.request_id] = IN_WAITING",
    ),
)
FinishAbortsTheWaitingHead = broken_variant(
    "FinishAbortsTheWaitingHead",
    Change(
        "finish",
        "also moves the waiting head to finished, aborted",
        _FIN_TAKE,
        _FIN_TAKE + "\n    other = self.waiting.pop_request()"
        "\n    other.status = RequestStatus.FINISHED_ABORTED"
        "\n    self.finished[other.request_id] = other"
        "\n    self._where[other.request_id] = IN_FINISHED",
    ),
)
FinishDropsAnOldOne = broken_variant(
    "FinishDropsAnOldOne",
    Change(
        "finish",
        "frees the request finished first to make room for this one (and forgets it)",
        _FIN_KEEP,
        "gone = next(iter(self.finished))"
        "\n    del self.finished[gone], self._known[gone], self._where[gone]"
        "\n    " + _FIN_KEEP,
    ),
)
FinishKeepsACopy = broken_variant(
    "FinishKeepsACopy",
    Change(
        "finish",
        "puts a copy of the request in finished, not the request",
        _FIN_KEEP,
        "import copy\n    self.finished[request.request_id] = copy.copy(request)",
    ),
)
FinishReversesRunning = broken_variant(
    "FinishReversesRunning",
    Change(
        "finish",
        "takes the request out of running and reverses the others' order",
        _FIN_TAKE,
        _FIN_TAKE + "\n    self.running.reverse()",
    ),
)
FinishRotatesWaiting = broken_variant(
    "FinishRotatesWaiting",
    Change(
        "finish",
        "also moves the waiting head to the back of waiting",
        _FIN_TAKE,
        _FIN_TAKE + "\n    self.waiting.add_request(self.waiting.pop_request())",
    ),
)

# -- broken variants of abort

_ABT_STATUS = "request.status = RequestStatus.FINISHED_ABORTED"
_ABT_KEEP = "self.finished[request.request_id] = request"
_ABT_RETURN = "return targets"

AbortsInReverse = broken_variant(
    "AbortsInReverse",
    Change(
        "abort",
        "returns the aborted requests last mention first",
        _ABT_RETURN,
        "return targets[::-1]",
    ),
)
AbortsAsStopped = broken_variant(
    "AbortsAsStopped",
    Change(
        "abort",
        "finishes the aborted requests as FINISHED_STOPPED (before ABORTED)",
        _ABT_STATUS,
        "request.status = RequestStatus.FINISHED_STOPPED",
    ),
)
AbortsAsError = broken_variant(
    "AbortsAsError",
    Change(
        "abort",
        "finishes the aborted requests as FINISHED_ERROR (after ABORTED)",
        _ABT_STATUS,
        "request.status = RequestStatus.FINISHED_ERROR",
    ),
)
AbortsWithAnInt = broken_variant(
    "AbortsWithAnInt",
    Change(
        "abort",
        "sets the status to the int value of FINISHED_ABORTED, not the member",
        _ABT_STATUS,
        "request.status = int(RequestStatus.FINISHED_ABORTED)",
    ),
)
AbortKeepsACopy = broken_variant(
    "AbortKeepsACopy",
    Change(
        "abort",
        "puts a copy of each aborted request in finished, not the request",
        _ABT_KEEP,
        "import copy\n        self.finished[request.request_id] = copy.copy(request)",
    ),
)
AbortInventsTheUnknown = broken_variant(
    "AbortInventsTheUnknown",
    Change(
        "abort",
        "records an unknown id it is given as an aborted request of its own",
        _ABT_RETURN,
        "if isinstance(request_ids, str) and request_ids not in self._known:"
        "\n        from queueref.request import Request"
        "\n        ghost = Request(request_ids, status=RequestStatus.FINISHED_ABORTED)"
        "\n        self.finished[request_ids] = ghost"
        "\n        self._place(ghost, IN_FINISHED)"
        "\n    " + _ABT_RETURN,
    ),
)
AbortDropsAnOldOne = broken_variant(
    "AbortDropsAnOldOne",
    Change(
        "abort",
        "frees the request finished first (and forgets it)",
        _ABT_RETURN,
        "gone = next(iter(self.finished))"
        "\n    del self.finished[gone], self._known[gone], self._where[gone]"
        "\n    " + _ABT_RETURN,
    ),
)
AbortDropsTheWaitingHead = broken_variant(
    "AbortDropsTheWaitingHead",
    Change(
        "abort",
        "also drops the waiting head, forgetting it",
        _ABT_RETURN,
        "head = self.waiting.pop_request()"
        "\n    del self._known[head.request_id], self._where[head.request_id]"
        "\n    " + _ABT_RETURN,
    ),
)
AbortReversesRunning = broken_variant(
    "AbortReversesRunning",
    Change(
        "abort",
        "takes the aborted requests out of running and reverses the others' order",
        "self.running[:] = without(self.running, by_place[IN_RUNNING])",
        "self.running[:] = without(self.running, by_place[IN_RUNNING])[::-1]",
    ),
)
AbortRotatesWaiting = broken_variant(
    "AbortRotatesWaiting",
    Change(
        "abort",
        "takes the aborted requests out of waiting and moves its head to the back",
        "self.waiting.remove_requests(by_place[IN_WAITING])",
        "self.waiting.remove_requests(by_place[IN_WAITING])"
        "\n        self.waiting.add_request(self.waiting.pop_request())",
    ),
)


# -- helpers


@pytest.fixture(autouse=True)
def deep_contracts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks on (as tests/conftest.py sets them), whatever the environment says."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)


@pytest.fixture
def cheap_contracts(deep_contracts: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks off: the default contracts, without the queues' contents."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)


def _everywhere(wq: WaitingQueues) -> dict[str, Any]:
    """`f` finished, `r` and `s` running, `w` and `x` waiting, `k`
    (WAITING_FOR_REMOTE_KVS) in the layout's second queue; the requests by id."""
    f, _, _ = run_all(wq, "f", "r", "s")
    WaitingQueues.finish(wq, f)  # the real finish, also on a variant that breaks it
    enqueue_ids(wq, "w", "x")
    enqueue_ids(wq, "k", status=KV)
    assert ids_of(wq.waiting) == ["w", "x"] and ids_of(wq._aside) == ["k"]
    return {r.request_id: r for r in [*wq.waiting, *wq._aside, *wq.running]} | {"f": f}


class _ValueRequest:
    """A request that compares equal to any request with the same fields (a value type,
    as a dataclass is): RQ-REQ-3 accepts one, and only queueref's own `Request` keeps
    identity equality (RQ-REQ-2)."""

    def __init__(self, request_id: str, arrival_time: float = 0.0) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, 0, arrival_time
        self.status = RequestStatus.WAITING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ValueRequest) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(self.request_id)

    def __repr__(self) -> str:
        return f"_ValueRequest({self.request_id!r})"


def _value_requests(wq: WaitingQueues, *rids: str) -> list[Any]:
    """Enqueue value-equal requests `rids` in this order."""
    requests: list[Any] = [_ValueRequest(rid, float(i)) for i, rid in enumerate(rids)]
    for request in requests:
        wq.enqueue(request)
    return requests


# -- preempt: the cheap clause (WL-PRE-1), deep checks off


@pytest.mark.contracts
@pytest.mark.parametrize(
    "variant",
    [
        PreemptsAsWaiting,
        PreemptsAsFinished,
        PreemptLeavesItRunning,
        PreemptKnowsACopy,
        PreemptRunsTheHead,
        PreemptsAnotherToo,
    ],
    ids=["waiting", "finished", "recorded-running", "known-copy", "runs-the-head", "two-leave"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_preempt_that_leaves_the_request_wrong_is_caught_by_the_cheap_clause(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str
) -> None:
    """WL-PRE-1: the request leaves running for waiting as PREEMPTED, that member, and
    nothing else leaves or enters running. Each preempt below puts the request at the
    front of waiting (so the FCFS front clause passes) and keeps every request counted,
    and is caught by the cheap clause, the only check with deep checks off: the
    request left WAITING (before PREEMPTED in the enum) or FINISHED_ABORTED (after
    it); recorded as running ("running" < "waiting"); known under its id as a copy
    (its place is then unknown); running the waiting head in its slot (running keeps
    its length); or preempting a second running request (running loses two)."""
    wq = variant("fcfs", layout=layout)
    r, _ = run_all(wq, "r", "s")
    enqueue_ids(wq, "w")
    message = violation_message(lambda: wq.preempt(r))
    assert PRE_CHEAP in message
    assert wq.waiting.peek_request() is r


# -- preempt: the FCFS front clause (WL-PRE-1)


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_preempt_to_the_back_of_waiting_is_caught_by_the_front_clause(
    cheap_contracts: None, layout: str
) -> None:
    """WL-PRE-1: FCFS puts the preempted request at the front of waiting: one added at
    the back with add_request (PREEMPTED, in waiting, counted: the cheap clause passes)
    is caught by the FCFS front clause, the only check with deep checks off."""
    wq = PreemptsToBack("fcfs", layout=layout)
    (r,) = run_all(wq, "r")
    enqueue_ids(wq, "w")
    message = violation_message(lambda: wq.preempt(r))
    assert PRE_FRONT in message
    assert ids_of(wq.waiting) == ["w", "r"]


@pytest.mark.contracts
def test_a_preempt_that_queues_a_copy_is_caught_by_the_front_clause(cheap_contracts: None) -> None:
    """WL-PRE-1, WL-CONS-1: the front of waiting is the preempted request itself: a
    preempt that puts an equal copy of it there (a value-equal request type, which
    RQ-REQ-3 accepts) -- the request itself PREEMPTED and recorded in waiting, every
    count right -- is caught by the FCFS front clause, which compares by identity."""
    wq = PreemptQueuesACopy("fcfs")
    a, b = _value_requests(wq, "a", "b")
    assert wq.schedule_step(lambda r: RUN if r is a else STOP) == [a]
    message = violation_message(lambda: wq.preempt(a))
    assert PRE_FRONT in message
    front = wq.waiting.peek_request()
    assert front == a and front is not a and a.status is RequestStatus.PREEMPTED


# -- preempt: the deep clause (WL-PRE-1)


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_preempt_that_reorders_running_is_caught_by_the_deep_clause(layout: str) -> None:
    """WL-PRE-1: every other request keeps its place: a preempt that puts the request
    in front of waiting and reverses the order of the other running requests (each
    still running, every count right) is caught by the deep clause, which compares
    waiting, running and the second queue with their contents before."""
    wq = PreemptReversesRunning("fcfs", layout=layout)
    _, r, _ = run_all(wq, "a", "r", "b")
    enqueue_ids(wq, "k", status=KV)
    message = violation_message(lambda: wq.preempt(r))
    assert PRE_DEEP in message
    assert ids_of(wq.running) == ["b", "a"] and ids_of(wq.waiting) == ["r"]


# -- preempt: the KV rule of vllm-0.33 (WL-L33-4)


@pytest.mark.contracts
@pytest.mark.parametrize("policy", ["fcfs", "priority"])
def test_a_vllm_033_preempt_that_keeps_the_kv_blocks_is_caught(
    cheap_contracts: None, policy: str
) -> None:
    """WL-L33-4: in vllm-0.33 a preempted request holds no KV blocks: a preempt that
    records it as still holding them (PREEMPTED, at the front of waiting, counted) is
    caught by the WL-L33-4 clause."""
    wq = PreemptKeepsKV(policy, layout=LAYOUT_V033)
    (r,) = run_all(wq, "r")
    message = violation_message(lambda: wq.preempt(r))
    assert PRE_KV in message
    assert wq._holds_kv(r)


def test_a_vllm_030_preempt_that_keeps_the_kv_record_is_accepted(cheap_contracts: None) -> None:
    """WL-L33-4, WL-PRE-1: the KV rule is vllm-0.33's: vllm-0.30 has no KV-holding
    queue and never reads the record, so a vllm-0.30 preempt that keeps it (the
    request PREEMPTED at the front of waiting, everything else right) passes every
    contract, and a later step runs the request as usual."""
    wq = PreemptKeepsKV("fcfs")
    (r,) = run_all(wq, "r")
    enqueue_ids(wq, "w")
    wq.preempt(r)
    assert wq._holds_kv(r) and r.status is RequestStatus.PREEMPTED
    assert ids_of(wq.waiting) == ["r", "w"] and not wq.running
    assert ids_of(wq.schedule_step(lambda x: RUN)) == ["r", "w"]


# -- preempt with no request named: vLLM's victim (WL-PRE-3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_preempt_takes_the_last_running_down_to_the_only_one(layout: str) -> None:
    """WL-PRE-3: under FCFS `preempt()` takes the last request of `running` each time,
    down to a single running request, which is taken too (a running request is enough
    for a victim); only with none running is it refused. Each victim goes to the front
    of `waiting`, so they queue in the order they ran."""
    wq = WaitingQueues("fcfs", layout=layout)
    run_all(wq, "a", "b", "c")
    assert [wq.preempt().request_id for _ in range(3)] == ["c", "b", "a"]
    assert ids_of(wq.waiting) == ["a", "b", "c"] and wq.running == []
    assert all(r.status is RequestStatus.PREEMPTED for r in wq.waiting)
    with pytest.raises(ValueError, match="WL-PRE-3: preempt.. with no request named"):
        wq.preempt()


# -- finish: the preconditions (WL-FIN-2, WL-STEP-9)


@pytest.mark.contracts
def test_finish_refuses_by_its_preconditions() -> None:
    """WL-FIN-2, WL-STEP-9: `finish` of a running request with a status that is not
    FINISHED_* (RUNNING, PREEMPTED) is refused by the precondition "the status is a
    FINISHED_* status"; of a waiting request by "only a running request can be finished";
    of a non-request by the shape precondition (a TypeError); from a step's callback by
    WL-STEP-9 (a RuntimeError): each in its own words, not the body's, and nothing
    changes."""
    wq = WaitingQueues("fcfs")
    requests = _everywhere(wq)
    r, w = requests["r"], requests["w"]
    before = places_of(wq)
    for status in [RequestStatus.RUNNING, RequestStatus.PREEMPTED]:
        with pytest.raises(
            ValueError, match=re.escape("WL-FIN-2: the status is a FINISHED_* status")
        ):
            wq.finish(r, status)
    with pytest.raises(ValueError, match="WL-FIN-2: only a running request can be finished"):
        wq.finish(w)
    with pytest.raises(
        TypeError,
        match="WL-FIN-2: the request has request_id, priority, arrival_time and a RequestStatus",
    ):
        wq.finish(object())  # type: ignore[arg-type]
    assert places_of(wq) == before
    refused_in_a_callback(wq, lambda: wq.finish(r), "finish")
    assert places_of(wq) == before


@pytest.mark.guard
def test_finish_and_abort_refuse_bad_input_without_contracts() -> None:
    """WL-FIN-2, WL-ABT-2: without the contracts (`python -O`), `finish` with a status
    that is not FINISHED_* raises a ValueError naming the status, and `abort` of
    something that is not a str, an iterable of str or None a TypeError naming its
    type, or the id that is not a str; nothing changes."""
    wq = WaitingQueues("fcfs")
    requests = _everywhere(wq)
    before = places_of(wq)
    finish = inspect.unwrap(WaitingQueues.finish)
    abort = inspect.unwrap(WaitingQueues.abort)
    with pytest.raises(ValueError) as raised:
        finish(wq, requests["r"], RequestStatus.PREEMPTED)
    assert str(raised.value) == (
        f"WL-FIN-2: {RequestStatus.PREEMPTED!r} is not a FINISHED_* status"
    )
    with pytest.raises(TypeError) as refused:
        abort(wq, 5)
    assert str(refused.value) == (
        "WL-ABT-2: request_ids must be a str, an iterable of str or None, got int"
    )
    with pytest.raises(TypeError) as refused:
        abort(wq, ["w", 5])
    assert str(refused.value) == "WL-ABT-2: request ids are str, got 5"
    assert places_of(wq) == before


# -- finish: the cheap clause (WL-FIN-1), deep checks off


@pytest.mark.contracts
@pytest.mark.parametrize(
    "status",
    [RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_ERROR],
    ids=["stopped", "error"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_finish_with_another_status_than_given_is_caught(
    cheap_contracts: None, status: RequestStatus, layout: str
) -> None:
    """WL-FIN-1: the request finishes with the status given, that member: a finish that
    sets FINISHED_ABORTED whatever it is given (a finished status, so WL-CONS-2 is
    content; in finished, counted) is caught by the cheap clause, given
    FINISHED_STOPPED (before ABORTED in the enum) or FINISHED_ERROR (after it)."""
    wq = FinishesAsAborted("fcfs", layout=layout)
    (r,) = run_all(wq, "r")
    message = violation_message(lambda: wq.finish(r, status))
    assert FIN_CHEAP in message
    assert wq.finished["r"] is r and r.status is RequestStatus.FINISHED_ABORTED


@pytest.mark.contracts
@pytest.mark.parametrize(
    "variant",
    [
        FinishLeavesItRunning,
        FinishKnowsACopy,
        FinishRunsTheHead,
        FinishPreemptsAnother,
        FinishAbortsTheWaitingHead,
        FinishDropsAnOldOne,
    ],
    ids=["recorded-running", "known-copy", "runs-the-head", "two-leave", "two-finish", "one-gone"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_finish_that_leaves_the_request_wrong_is_caught_by_the_cheap_clause(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str
) -> None:
    """WL-FIN-1, WL-CONS-1: the request leaves running for finished, and nothing else
    leaves or enters running or finished. Each finish below sets the status given and
    puts the request in finished, every request counted, and is caught by the cheap
    clause, the only check with deep checks off: the request recorded as running
    ("running" > "finished"); known under its id as a copy (its place is then
    unknown); running the waiting head in its slot (running keeps its length);
    preempting a second running request (running loses two); aborting the waiting
    head too (finished gains two); dropping the request finished before (finished
    keeps its length)."""
    wq = variant("fcfs", layout=layout)
    requests = _everywhere(wq)
    r = requests["r"]
    message = violation_message(lambda: wq.finish(r))
    assert FIN_CHEAP in message
    assert wq.finished["r"] is r and r.status is RequestStatus.FINISHED_STOPPED


@pytest.mark.contracts
def test_a_finish_that_keeps_a_copy_is_caught_by_the_cheap_clause(cheap_contracts: None) -> None:
    """WL-FIN-1, WL-CONS-1: finished holds the request itself: a finish that puts an
    equal copy of it there (a value-equal request type) -- the request itself
    FINISHED_STOPPED and recorded in finished, every count right -- is caught by the
    cheap clause, which compares by identity."""
    wq = FinishKeepsACopy("fcfs")
    (a,) = _value_requests(wq, "a")
    assert wq.schedule_step(lambda r: RUN) == [a]
    message = violation_message(lambda: wq.finish(a))
    assert FIN_CHEAP in message
    kept = wq.finished["a"]
    assert kept == a and kept is not a and a.status is RequestStatus.FINISHED_STOPPED


# -- finish: the deep clause (WL-FIN-1)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "running"),
    [(FinishReversesRunning, ("a", "r", "b")), (FinishRotatesWaiting, ("r",))],
    ids=["reverses-running", "rotates-waiting"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_finish_that_moves_other_requests_is_caught_by_the_deep_clause(
    variant: type[WaitingQueues], running: tuple[str, ...], layout: str
) -> None:
    """WL-FIN-1: every other request keeps its place: a finish that reverses the order
    of the other running requests, or moves the waiting head to the back of waiting
    (each request still in its place, every count right) is caught by the deep
    clause."""
    wq = variant("fcfs", layout=layout)
    ran = run_all(wq, *running)
    r = ran[running.index("r")]
    enqueue_ids(wq, "w", "x")
    enqueue_ids(wq, "k", status=KV)
    message = violation_message(lambda: wq.finish(r))
    assert FIN_DEEP in message
    assert wq.finished["r"] is r


# -- abort: the preconditions (WL-ABT-2, WL-STEP-9)


@pytest.mark.contracts
@pytest.mark.parametrize("ids", [5, 2.5, ["w", 5]], ids=["int", "float", "int-id"])
def test_abort_refuses_ids_of_the_wrong_type_by_its_precondition(ids: object) -> None:
    """WL-ABT-2: `abort` of something that is neither a str, an iterable of str nor
    None -- an int, a float, a list holding an int -- is refused by the precondition
    "request_ids is a str, an iterable of str or None" (a TypeError in its words, not
    the body's), before anything changes."""
    wq = WaitingQueues("fcfs")
    _everywhere(wq)
    before = places_of(wq)
    with pytest.raises(
        TypeError, match="WL-ABT-2: request_ids is a str, an iterable of str or None"
    ):
        wq.abort(ids)  # type: ignore[arg-type]
    assert places_of(wq) == before


@pytest.mark.contracts
def test_abort_from_a_callback_is_refused_by_its_precondition() -> None:
    """WL-STEP-9: `abort` called from a step's callback is refused by the precondition
    "abort is not called from a step's callbacks" (a RuntimeError in its words, not the
    body's), and nothing changes."""
    wq = WaitingQueues("fcfs")
    requests = _everywhere(wq)
    before = places_of(wq)
    refused_in_a_callback(wq, lambda: wq.abort("r"), "abort")
    assert places_of(wq) == before and requests["r"].status is RequestStatus.RUNNING


# -- abort: the clause on what is aborted (WL-ABT-2)


@pytest.mark.contracts
@pytest.mark.parametrize(
    "ids",
    [["w", "r"], ("w", "r"), {"w": 1, "r": 2}, None],
    ids=["list", "tuple", "dict", "none"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_abort_that_returns_another_order_is_caught(ids: Any, layout: str) -> None:
    """WL-ABT-1, WL-ABT-2: `abort` returns the requests in the order of their first
    mention (for None: the order they were enqueued): one that returns them last first
    (each aborted, in finished, nothing else moved) is caught by the WL-ABT-2 clause,
    whatever collection names them."""
    wq = AbortsInReverse("fcfs", layout=layout)
    run_all(wq, "w", "r")
    message = violation_message(lambda: wq.abort(ids))
    assert ABT_NAMED in message
    assert sorted(wq.finished) == ["r", "w"]


# -- abort: the cheap clause (WL-ABT-1), deep checks off


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "ids"),
    [
        (AbortsAsStopped, ["w", "r"]),
        (AbortsAsError, ["w", "r"]),
        (AbortsWithAnInt, ["w", "r"]),
        (AbortInventsTheUnknown, "ghost"),
        (AbortDropsAnOldOne, ["w"]),
        (AbortMissesSkipped, ["k"]),
        (AbortDropsTheWaitingHead, ["r"]),
    ],
    ids=["stopped", "error", "int", "invents", "drops-finished", "misses-aside", "drops-head"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_abort_that_leaves_requests_wrong_is_caught_by_the_cheap_clause(
    cheap_contracts: None, variant: type[WaitingQueues], ids: Any, layout: str
) -> None:
    """WL-ABT-1, WL-CONS-2: each request aborted leaves its place for finished as
    FINISHED_ABORTED, that member, and finished gains and the unfinished lose exactly
    the requests returned. Each abort below returns what it must and is caught by the
    cheap clause, the only check on it with deep checks off: the requests finished as
    FINISHED_STOPPED (before ABORTED) or FINISHED_ERROR (after it), or with the int
    equal to FINISHED_ABORTED; an unknown id recorded as a finished request of its own
    (finished gains one more than returned); the request finished before dropped
    (finished gains one less); the aborted request left in the second queue (the
    unfinished lose none: the O(1) count of WL-CONS-1 would see it only after); the
    waiting head dropped too (the unfinished lose one more)."""
    wq = variant("fcfs", layout=layout)
    _everywhere(wq)
    message = violation_message(lambda: wq.abort(ids))
    assert ABT_CHEAP in message


@pytest.mark.contracts
def test_an_abort_that_keeps_a_copy_is_caught_by_the_cheap_clause(cheap_contracts: None) -> None:
    """WL-ABT-1, WL-CONS-1: finished holds each aborted request itself: an abort that
    puts an equal copy there (a value-equal request type) -- the request itself
    FINISHED_ABORTED and recorded in finished, every count right, the requests named
    returned -- is caught by the cheap clause, which compares by identity."""
    wq = AbortKeepsACopy("fcfs")
    a, _ = _value_requests(wq, "a", "b")
    message = violation_message(lambda: wq.abort("a"))
    assert ABT_CHEAP in message
    kept = wq.finished["a"]
    assert kept == a and kept is not a and a.status is RequestStatus.FINISHED_ABORTED


# -- abort: the deep clause (WL-ABT-1)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "ids"),
    [(AbortReversesRunning, "r"), (AbortRotatesWaiting, "w")],
    ids=["reverses-running", "rotates-waiting"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_abort_that_moves_other_requests_is_caught_by_the_deep_clause(
    variant: type[WaitingQueues], ids: str, layout: str
) -> None:
    """WL-ABT-1: every other request keeps its place and its order: an abort that
    reverses the other running requests, or moves the head of waiting to its back
    (each request still in its place, every count right, the request named returned)
    is caught by the deep clause."""
    wq = variant("fcfs", layout=layout)
    run_all(wq, "a", "r", "b")
    enqueue_ids(wq, "w", "x", "y")
    enqueue_ids(wq, "k", status=KV)
    message = violation_message(lambda: wq.abort(ids))
    assert ABT_DEEP in message


# -- counts past the small-int cache


def test_preempt_and_abort_past_three_hundred_are_accepted(cheap_contracts: None) -> None:
    """WL-PRE-1, WL-ABT-1: 600 requests wait and 300 run; one is preempted (running
    goes from 300 to 299), then the 300 never run are aborted (finished gains 300, the
    unfinished go from 600 to 300): the counts the postconditions compare pass 256,
    where equal ints are distinct objects, and each comparison is `==`: every call
    passes its contracts."""
    wq = WaitingQueues("fcfs")
    for i in range(600):
        wq.enqueue(Request(f"q{i:03}", arrival_time=float(i)))
    ran = wq.schedule_step(lambda r: RUN, max_running=300)
    assert len(ran) == 300
    wq.preempt(ran[0])
    assert len(wq.running) == 299 and wq.waiting.peek_request() is ran[0]
    named = [f"q{i:03}" for i in range(300, 600)]
    aborted = wq.abort(named)
    assert ids_of(aborted) == named and len(wq.finished) == 300
    assert len(wq.running) + len(wq.waiting) == 300
