"""Gaps in the tests of queueref.waiting.stream, found by `make mutation`.

`waiting_stream` holds the lifecycle's streaming sessions: `await_stream` (a
running request stops with no update queued and becomes a paused session) and
`continue_stream` (the update arrives), with their contracts. Three kinds of test:

* a broken `WaitingQueues` (`tests/helpers/waiting_variants.py`: the real method with one
  named change; the subclass inherits the method's contracts) caught by the clause
  that states the rule, with that clause's ID and text. Each operation has a cheap
  postcondition (status, place, counts) and below it a deep one (every queue's
  contents, under deep checks); postconditions run bottom-up, so a cheap clause is
  shown with deep checks off (`cheap_contracts`), where it is the only check, and a
  deep clause with a bug the cheap one cannot see;
* the preconditions' own messages, and the check `continue_stream` keeps in its body
  for `python -O` (called without the contracts, `inspect.unwrap`): what is neither
  running nor a paused session is refused with a ValueError that says where it is,
  and nothing changes;
* valid runs the contracts must accept: counts past CPython's small-int cache.
"""

from __future__ import annotations

import inspect
import pickle
from typing import Any

import pytest
from waiting_gap_helpers import (
    built_name,
    enqueue_ids,
    ids_of,
    places_of,
    refused_in_a_callback,
    run_all,
    violation_message,
)
from waiting_variants import Change, RequeuesPausedSession, broken_variant

import queueref.config
from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.waiting.model import LAYOUT_V030, LAYOUT_V033
from queueref.waiting.places import IN_RUNNING

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
STREAM = RequestStatus.WAITING_FOR_STREAMING_REQ
LAYOUTS = [LAYOUT_V030, LAYOUT_V033]

# The clauses, by their descriptions.
AWAIT_CHEAP = (
    "WL-STR-1: the request leaves running as WAITING_FOR_STREAMING_REQ, a paused session, "
    "for skipped_waiting (vllm-0.30) or kv_holding_waiting, deferred (vllm-0.33)"
)
AWAIT_DEEP = "WL-STR-1: the session is added with add_request; the other requests keep their places"
CONTINUE_CHEAP = (
    "WL-STR-2: the request is WAITING: a running one is enqueued by the layout's rule, "
    "a paused session stays where it waits and is no longer paused"
)
CONTINUE_DEEP = (
    "WL-STR-2: a running request is added with add_request; a paused session keeps its "
    "place; every other request keeps its place"
)

# -- broken variants of await_stream, each the real method with one named change

_AWAIT_ENQUEUE = "self._enqueue_waiting(request)"
_AWAIT_TAKE = "self._take_running(request)"

PausesAsPreempted = broken_variant(
    "PausesAsPreempted",
    Change(
        "await_stream",
        "leaves the paused session PREEMPTED",
        _AWAIT_ENQUEUE,
        _AWAIT_ENQUEUE + "\n    request.status = RequestStatus.PREEMPTED",
    ),
)
PausesAsWaiting = broken_variant(
    "PausesAsWaiting",
    Change(
        "await_stream",
        "leaves the paused session WAITING",
        _AWAIT_ENQUEUE,
        _AWAIT_ENQUEUE + "\n    request.status = RequestStatus.WAITING",
    ),
)
PausesWithAnInt = broken_variant(
    "PausesWithAnInt",
    Change(
        "await_stream",
        "sets the status to the int value of WAITING_FOR_STREAMING_REQ, not the member",
        "request.status = STREAMING",
        "request.status = int(STREAMING)",
    ),
)
PausesInWaiting = broken_variant(
    "PausesInWaiting",
    Change(
        "await_stream",
        "vllm-0.30: puts the paused session in waiting instead of skipped_waiting",
        _AWAIT_ENQUEUE,
        "self.waiting.add_request(request)\n    self._place(request, IN_WAITING)",
    ),
)
PausesWithoutPlace = broken_variant(
    "PausesWithoutPlace",
    Change(
        "await_stream",
        "adds the paused session to skipped_waiting but leaves it recorded as running",
        _AWAIT_ENQUEUE,
        "self._aside.add_request(request)",
    ),
)
PausesAndRunsTheHead = broken_variant(
    "PausesAndRunsTheHead",
    Change(
        "await_stream",
        "runs the waiting head in the slot the session leaves",
        _AWAIT_TAKE,
        _AWAIT_TAKE + "\n    self._run(self.waiting, self.waiting.peek_request())",
    ),
)
PausesAndPreemptsAnother = broken_variant(
    "PausesAndPreemptsAnother",
    Change(
        "await_stream",
        "vllm-0.30: also preempts the last running request",
        _AWAIT_TAKE,
        _AWAIT_TAKE + "\n    other = self.running.pop()"
        "\n    other.status = RequestStatus.PREEMPTED"
        "\n    self.waiting.prepend_request(other)"
        "\n    self._where[other.request_id] = IN_WAITING",
    ),
)
PausesTheSecondQueue = broken_variant(
    "PausesTheSecondQueue",
    Change(
        "await_stream",
        "counts every request of the layout's second queue as a paused session",
        _AWAIT_ENQUEUE,
        _AWAIT_ENQUEUE + "\n    self._paused.update(r.request_id for r in self._aside)",
    ),
)
PausesUndeferred = broken_variant(
    "PausesUndeferred",
    Change(
        "await_stream",
        "vllm-0.33: the paused session is not deferred",
        _AWAIT_ENQUEUE,
        _AWAIT_ENQUEUE + "\n    self.deferred_waiting.discard(request.request_id)",
    ),
)
PausesInFront = broken_variant(
    "PausesInFront",
    Change(
        "await_stream",
        "vllm-0.30: puts the paused session in front of skipped_waiting, not with add_request",
        _AWAIT_ENQUEUE,
        "self._aside.prepend_request(request)\n    self._place(request, self._aside_place)",
    ),
)

# -- broken variants of continue_stream

_SESSION_WAITING = "    request.status = RequestStatus.WAITING\n    self._paused.discard"
_END_PAUSE = "    self._paused.discard(request.request_id)"
_RUNNING_ENQUEUE = "        self._enqueue_waiting(request)\n        return"

ContinuesStreaming = broken_variant(
    "ContinuesStreaming",
    Change(
        "continue_stream",
        "ends the pause but leaves the session WAITING_FOR_STREAMING_REQ",
        _SESSION_WAITING,
        "    self._paused.discard",
    ),
)
ContinuesWithTheName = broken_variant(
    "ContinuesWithTheName",
    Change(
        "continue_stream",
        "sets the session's status to the name 'WAITING', not the member",
        _SESSION_WAITING,
        "    request.status = RequestStatus.WAITING.name\n    self._paused.discard",
    ),
)
ContinuesPaused = broken_variant(
    "ContinuesPaused",
    Change("continue_stream", "sets WAITING but forgets to end the pause", _END_PAUSE, "    pass"),
)
ContinuesAndRuns = broken_variant(
    "ContinuesAndRuns",
    Change(
        "continue_stream",
        "moves the paused session to running, WAITING",
        _END_PAUSE,
        _END_PAUSE + "\n    self._aside.remove_request(request)"
        "\n    self.running.append(request)"
        "\n    self._where[request.request_id] = IN_RUNNING",
    ),
)
ContinuesIntoWaiting = broken_variant(
    "ContinuesIntoWaiting",
    Change(
        "continue_stream",
        "enqueues a running request into waiting whatever the layout's rule",
        _RUNNING_ENQUEUE,
        "        self.waiting.add_request(request)\n"
        "        self._place(request, IN_WAITING)\n"
        "        return",
    ),
)
ContinuesAside = broken_variant(
    "ContinuesAside",
    Change(
        "continue_stream",
        "enqueues a running request into the layout's second queue whatever the rule",
        _RUNNING_ENQUEUE,
        "        self._aside.add_request(request)\n"
        "        self._place(request, self._aside_place)\n"
        "        return",
    ),
)
EndsEveryPause = broken_variant(
    "EndsEveryPause",
    Change(
        "continue_stream",
        "the update of one session ends the pause of every session",
        _END_PAUSE,
        "    self._paused.clear()",
    ),
)
RecountsPauses = broken_variant(
    "RecountsPauses",
    Change(
        "continue_stream",
        "counts every waiting WAITING_FOR_STREAMING_REQ request as a paused session",
        _END_PAUSE,
        "    self._paused = {r.request_id for r in [*self.waiting, *self._aside]"
        " if r.status is STREAMING}",
    ),
)
ContinuesInFront = broken_variant(
    "ContinuesInFront",
    Change(
        "continue_stream",
        "puts a running request in front of the queue the layout's rule picks",
        _RUNNING_ENQUEUE,
        "        queue, place = self._queue_for(request)\n"
        "        queue.prepend_request(request)\n"
        "        self._place(request, place)\n"
        "        return",
    ),
)
MovesTheSessionToTheFront = broken_variant(
    "MovesTheSessionToTheFront",
    Change(
        "continue_stream",
        "moves the session to the front of its queue",
        _END_PAUSE,
        _END_PAUSE + "\n    self._aside.remove_request(request)"
        "\n    self._aside.prepend_request(request)",
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


# -- the preconditions


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_await_stream_refuses_by_its_preconditions(layout: str) -> None:
    """WL-STR-3, WL-STEP-9: `await_stream` of a waiting request, of a non-request and
    from a step's callback are refused by the preconditions (ValueError, TypeError,
    RuntimeError), each in its own words, before anything changes."""
    wq = WaitingQueues("fcfs", layout=layout)
    (r,) = run_all(wq, "r")
    enqueue_ids(wq, "w")
    (w,) = list(wq.waiting)
    before = places_of(wq)
    with pytest.raises(
        ValueError, match="WL-STR-3: only a running request can wait for its stream"
    ):
        wq.await_stream(w)
    with pytest.raises(
        TypeError,
        match="WL-STR-3: the request has request_id, priority, arrival_time and a RequestStatus",
    ):
        wq.await_stream(object())  # type: ignore[arg-type]
    assert places_of(wq) == before
    refused_in_a_callback(wq, lambda: wq.await_stream(r), "await_stream")
    assert places_of(wq) == before


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_continue_stream_refuses_by_its_preconditions(layout: str) -> None:
    """WL-STR-3, WL-STEP-9: `continue_stream` of a waiting request that is no paused
    session is refused by "only a running request or a paused streaming session can
    continue" (a ValueError), a non-request by the shape precondition (a TypeError, not
    a ValueError), a call from a step's callback by WL-STEP-9 (a RuntimeError), each in
    its own words, before anything changes."""
    wq = WaitingQueues("fcfs", layout=layout)
    (r,) = run_all(wq, "r")
    enqueue_ids(wq, "w")
    (w,) = list(wq.waiting)
    before = places_of(wq)
    with pytest.raises(
        ValueError,
        match="WL-STR-3: only a running request or a paused streaming session can continue",
    ):
        wq.continue_stream(w)
    with pytest.raises(
        TypeError,
        match="WL-STR-3: the request has request_id, priority, arrival_time and a RequestStatus",
    ):
        wq.continue_stream(object())  # type: ignore[arg-type]
    assert places_of(wq) == before
    refused_in_a_callback(wq, lambda: wq.continue_stream(r), "continue_stream")
    assert places_of(wq) == before


@pytest.mark.guard
@pytest.mark.parametrize("layout", LAYOUTS)
def test_continue_stream_refuses_a_preempted_waiting_request(layout: str) -> None:
    """WL-STR-3: a waiting request is a paused session only when it is
    WAITING_FOR_STREAMING_REQ: `continue_stream` of a PREEMPTED request waiting in
    `waiting` (a status after WAITING_FOR_STREAMING_REQ in the enum's order) raises a
    ValueError naming the rule, and the request stays PREEMPTED where it is."""
    wq = WaitingQueues("fcfs", layout=layout)
    run_all(wq, "p")
    enqueue_ids(wq, "w")
    (p,) = wq.running
    wq.preempt(p)
    assert p.status is RequestStatus.PREEMPTED and ids_of(wq.waiting) == ["p", "w"]
    before = places_of(wq)
    with pytest.raises(ValueError, match="WL-STR-3"):
        wq.continue_stream(p)
    assert places_of(wq) == before and p.status is RequestStatus.PREEMPTED


def _everywhere(layout: str) -> tuple[WaitingQueues, dict[str, Any]]:
    """A request in every place a stream operation must refuse: `f` finished, `w`
    waiting (WAITING), `p` waiting (PREEMPTED), `k` (WAITING_FOR_REMOTE_KVS) in the
    layout's second queue; `r` runs."""
    wq = WaitingQueues("fcfs", layout=layout)
    f, p, _ = run_all(wq, "f", "p", "r")
    wq.finish(f)
    wq.preempt(p)
    enqueue_ids(wq, "w")
    enqueue_ids(wq, "k", status=KV)
    requests = {x.request_id: x for x in [*wq.waiting, *wq._aside, *wq.running]} | {"f": f}
    return wq, requests


@pytest.mark.guard
@pytest.mark.parametrize(
    ("layout", "rid", "where"),
    [
        (LAYOUT_V030, "f", "in finished as FINISHED_STOPPED"),
        (LAYOUT_V033, "f", "in finished as FINISHED_STOPPED"),
        (LAYOUT_V030, "w", "in waiting as WAITING"),
        (LAYOUT_V030, "p", "in waiting as PREEMPTED"),
        (LAYOUT_V033, "p", "in waiting as PREEMPTED"),
        (LAYOUT_V030, "k", "in skipped_waiting as WAITING_FOR_REMOTE_KVS"),
        (LAYOUT_V033, "k", "in kv_holding_waiting as WAITING_FOR_REMOTE_KVS"),
        (LAYOUT_V030, "u", "unknown"),  # never enqueued
    ],
)
def test_continue_stream_refuses_without_contracts(layout: str, rid: str, where: str) -> None:
    """WL-STR-3: without the contracts (`python -O`), `continue_stream` of a request that
    is neither running nor a paused session -- finished, waiting, preempted, blocked in
    the layout's second queue, or unknown -- raises a ValueError that names the rule and
    says where the request is and as what, and nothing changes (no status is set to
    WAITING)."""
    wq, requests = _everywhere(layout)
    request = requests.get(rid) or Request(rid)
    status = request.status
    before = places_of(wq)
    body = inspect.unwrap(WaitingQueues.continue_stream)
    with pytest.raises(ValueError) as raised:
        body(wq, request)
    assert str(raised.value) == (
        f"WL-STR-3: {request!r} is neither running nor a paused streaming session (it is {where})"
    )
    assert places_of(wq) == before and request.status is status


# -- a copy through pickle (WL-COPY-1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_continue_stream_on_a_pickled_copy_takes_its_running_request(layout: str) -> None:
    """WL-STR-2, WL-STR-3, WL-COPY-1: a copy made through pickle records its running
    request under a place name equal to "running" but not the module's object; its
    `continue_stream` still finds the request running (no WL-STR-3 refusal) and
    enqueues it WAITING by the layout's rule (its postcondition tells a running
    request from a paused session by the same name), its contracts passing."""
    original = WaitingQueues("fcfs", layout=layout)
    run_all(original, "r")
    wq = pickle.loads(pickle.dumps(original))
    (r,) = wq.running
    assert wq._where["r"] == IN_RUNNING and wq._where["r"] is not IN_RUNNING
    wq.continue_stream(r)
    # vllm-0.33: it holds KV blocks, so it goes to kv_holding_waiting (WL-L33-1)
    queue = wq.waiting if layout == LAYOUT_V030 else wq.kv_holding_waiting
    assert r.status is RequestStatus.WAITING and ids_of(queue) == ["r"]
    assert wq.running == [] and wq.num_paused_sessions == 0


# -- counts past the small-int cache


def test_three_hundred_sessions_pause_and_continue(cheap_contracts: None) -> None:
    """WL-STR-1, WL-STR-2, WL-STR-4: 300 running requests each stop with no update
    (await_stream), then each update arrives (continue_stream): the counts of running
    requests and of paused sessions the postconditions compare pass 256, where equal
    ints are distinct objects, and each comparison is `==`: every call passes its
    contracts."""
    wq = WaitingQueues("fcfs")
    for i in range(300):
        wq.enqueue(Request(f"s{i:03}", arrival_time=float(i)))
    sessions = wq.schedule_step(lambda r: RUN)
    assert len(sessions) == 300
    for session in sessions:
        wq.await_stream(session)
    assert wq.num_paused_sessions == 300 and not wq.running
    for session in sessions:
        wq.continue_stream(session)
    assert wq.num_paused_sessions == 0
    assert all(s.status is RequestStatus.WAITING for s in sessions)
    assert ids_of(wq.skipped_waiting) == [f"s{i:03}" for i in range(300)]


# -- await_stream: the cheap clause (WL-STR-1), deep checks off


@pytest.mark.contracts
@pytest.mark.parametrize(
    "variant",
    [PausesAsPreempted, PausesAsWaiting, PausesWithAnInt],
    ids=["preempted", "waiting", "int"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_session_paused_with_the_wrong_status_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str
) -> None:
    """WL-STR-1: a paused session is WAITING_FOR_STREAMING_REQ, that member: one left
    PREEMPTED (after it in the enum) or WAITING (before it), in its right place and
    counted, is caught by the cheap clause; so is one given the int equal to it (with
    no RequestStatus it is no lifecycle request, so not where a session must be)."""
    wq = variant("fcfs", layout=layout)
    (s,) = run_all(wq, "s")
    message = violation_message(lambda: wq.await_stream(s))
    assert AWAIT_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    "variant", [PausesInWaiting, PausesWithoutPlace], ids=["in-waiting", "recorded-running"]
)
def test_a_session_paused_in_the_wrong_place_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues]
) -> None:
    """WL-STR-1: vllm-0.30 puts a paused session in skipped_waiting: one put in waiting
    (a place name after "skipped_waiting"), or added to skipped_waiting but still
    recorded as running (a name before it), is caught by the cheap clause."""
    wq = variant("fcfs")
    (s,) = run_all(wq, "s")
    message = violation_message(lambda: wq.await_stream(s))
    assert AWAIT_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "running"),
    [(PausesAndRunsTheHead, ("s",)), (PausesAndPreemptsAnother, ("s", "t"))],
    ids=["runs-the-head", "preempts-another"],
)
def test_a_pause_that_changes_running_otherwise_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], running: tuple[str, ...]
) -> None:
    """WL-STR-1: the session leaves running and nothing else does or enters it: a pause
    that also runs the waiting head (running keeps its length) or also preempts another
    running request (running loses two) -- each keeping every request in one place --
    is caught by the cheap clause, the only check with deep checks off."""
    wq = variant("fcfs")
    s, *_ = run_all(wq, *running)
    enqueue_ids(wq, "w")
    message = violation_message(lambda: wq.await_stream(s))
    assert AWAIT_CHEAP in message


@pytest.mark.contracts
def test_a_pause_that_pauses_other_requests_is_caught(cheap_contracts: None) -> None:
    """WL-STR-1, WL-STR-4: a pause adds one paused session: a pause that also counts the
    blocked request waiting in skipped_waiting as a paused session (two more) is caught
    by the cheap clause."""
    wq = PausesTheSecondQueue("fcfs")
    (s,) = run_all(wq, "s")
    enqueue_ids(wq, "k", status=KV)
    message = violation_message(lambda: wq.await_stream(s))
    assert AWAIT_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(LAYOUT_V033, id="vllm-0.33"),
        pytest.param(built_name(LAYOUT_V033), id="vllm-0.33-built"),
    ],
)
def test_a_session_paused_undeferred_is_caught(cheap_contracts: None, layout: str) -> None:
    """WL-STR-1, WL-L33-1: vllm-0.33 defers a paused session: one left out of
    deferred_waiting is caught by the cheap clause, also on an instance whose layout
    name is equal to "vllm-0.33" but not the constant."""
    wq = PausesUndeferred("fcfs", layout=layout)
    (s,) = run_all(wq, "s")
    message = violation_message(lambda: wq.await_stream(s))
    assert AWAIT_CHEAP in message


# -- await_stream: the deep clause (WL-STR-1)


@pytest.mark.contracts
def test_a_session_paused_in_front_is_caught() -> None:
    """WL-STR-1: the session is added with add_request (FCFS: at the back): one put in
    front of the blocked request already in skipped_waiting -- in the right place,
    status and counts, nothing else moved -- is caught by the deep clause."""
    wq = PausesInFront("fcfs")
    (s,) = run_all(wq, "s")
    enqueue_ids(wq, "k", status=KV)
    enqueue_ids(wq, "w")
    message = violation_message(lambda: wq.await_stream(s))
    assert AWAIT_DEEP in message


# -- continue_stream: the cheap clause (WL-STR-2), deep checks off


def _paused(wq: WaitingQueues, *rids: str) -> list[Any]:
    """`rids` run, then stop with no update: paused sessions."""
    sessions = run_all(wq, *rids)
    for session in sessions:
        wq.await_stream(session)
    assert wq.num_paused_sessions == len(rids)
    return sessions


@pytest.mark.contracts
@pytest.mark.parametrize(
    "variant", [ContinuesStreaming, ContinuesWithTheName], ids=["streaming", "name"]
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_session_continued_with_the_wrong_status_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str
) -> None:
    """WL-STR-2: the update makes the session WAITING, that member: one left
    WAITING_FOR_STREAMING_REQ (after WAITING in the enum), or set to the str "WAITING"
    (no RequestStatus, not even comparable with one) -- in its place, no longer paused
    -- is reported as a violation of the cheap clause, not as an error of the check."""
    wq = variant("fcfs", layout=layout)
    (s,) = _paused(wq, "s")
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_session_continued_but_still_paused_is_caught(cheap_contracts: None, layout: str) -> None:
    """WL-STR-2: the update ends the pause: a session set WAITING but still counted as
    paused is caught by the cheap clause."""
    wq = ContinuesPaused("fcfs", layout=layout)
    (s,) = _paused(wq, "s")
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    "variant", [RequeuesPausedSession, ContinuesAndRuns], ids=["to-waiting", "to-running"]
)
def test_a_session_continued_elsewhere_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues]
) -> None:
    """WL-STR-2: a paused session stays where it waits: one moved from skipped_waiting
    to the back of waiting, or into running (WAITING, no longer paused, counted right)
    is caught by the cheap clause."""
    wq = variant("fcfs")
    (s,) = _paused(wq, "s")
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "layout"),
    [(ContinuesIntoWaiting, LAYOUT_V033), (ContinuesAside, LAYOUT_V030)],
    ids=["vllm-0.33-into-waiting", "vllm-0.30-into-skipped"],
)
def test_a_running_request_continued_into_the_wrong_queue_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str
) -> None:
    """WL-STR-2, WL-ENQ-1, WL-L33-1: a running request whose update is queued is
    enqueued by the layout's rule: vllm-0.33 into kv_holding_waiting (it ran, so it
    holds KV blocks), vllm-0.30 into waiting. One enqueued into the other queue is
    caught by the cheap clause."""
    wq = variant("fcfs", layout=layout)
    (s,) = run_all(wq, "s")
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_update_that_ends_every_pause_is_caught(layout: str) -> None:
    """WL-STR-2, WL-STR-4: the update of one paused session ends its pause only: one that
    ends the pause of both sessions (the other stays WAITING_FOR_STREAMING_REQ, waiting)
    is caught by the cheap clause's count."""
    wq = EndsEveryPause("fcfs", layout=layout)
    a, s = _paused(wq, "a", "s")
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_CHEAP in message


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_update_that_pauses_an_enqueued_streaming_request_is_caught(layout: str) -> None:
    """WL-STR-2, WL-STR-4: a request enqueued as WAITING_FOR_STREAMING_REQ is no paused
    session: an update that recounts the paused sessions from the statuses (so counts
    it) is caught by the cheap clause's count."""
    wq = RecountsPauses("fcfs", layout=layout)
    (s,) = _paused(wq, "s")
    enqueue_ids(wq, "e", status=STREAM)
    assert wq.num_paused_sessions == 1
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_CHEAP in message


# -- continue_stream: the deep clause (WL-STR-2)


@pytest.mark.contracts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_running_request_continued_in_front_is_caught(layout: str) -> None:
    """WL-STR-2: a running request is added with add_request (FCFS: at the back of the
    queue the layout's rule picks): one put in front of the request already there --
    right queue, status and counts, running without it -- is caught by the deep
    clause."""
    wq = ContinuesInFront("fcfs", layout=layout)
    (s,) = run_all(wq, "s")
    if layout == LAYOUT_V030:
        enqueue_ids(wq, "w")  # s goes to waiting
    else:
        enqueue_ids(wq, "k", status=KV)  # s holds KV blocks: kv_holding_waiting
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_DEEP in message


@pytest.mark.contracts
def test_a_session_continued_in_front_of_its_queue_is_caught() -> None:
    """WL-STR-2: a paused session keeps its place: one moved to the front of
    skipped_waiting, before the session paused first (same queue, status and counts),
    is caught by the deep clause."""
    wq = MovesTheSessionToTheFront("fcfs")
    _, s = _paused(wq, "a", "s")
    assert ids_of(wq.skipped_waiting) == ["a", "s"]
    message = violation_message(lambda: wq.continue_stream(s))
    assert CONTINUE_DEEP in message
