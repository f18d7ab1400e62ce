"""Gaps in the tests of queueref.waiting.state, found by `make mutation`.

`waiting_state` holds the lifecycle's data and the bookkeeping every operation
shares: where each known request is (`place_of`, by identity), the checks the
methods keep in their bodies for `python -O`, taking a request out of `running`,
and enqueue's choice of queue. Two kinds of test:

* the checks in the bodies, called without the contracts (`inspect.unwrap`, as
  `python -O` runs them): a request that is not running is refused with a
  ValueError that says where it is, a non-request with a TypeError, and nothing
  changes;
* request types with value equality (a request is the caller's object, and only
  queueref's own `Request` keeps identity equality, RQ-REQ-2): the lifecycle
  knows each request by identity, so an equal copy is not the request, and of
  two running requests that compare equal the one named leaves `running`.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from waiting_gap_helpers import ids_of, places_of

import queueref.config
from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.waiting.model import LAYOUT_V030, LAYOUT_V033

RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS
STREAM = RequestStatus.WAITING_FOR_STREAMING_REQ

# The operations that take a running request, with the rule whose ID their body's
# check names (WL-PRE-2, WL-FIN-2, WL-STR-3).
RUNNING_ONLY = [("preempt", "WL-PRE-2"), ("finish", "WL-FIN-2"), ("await_stream", "WL-STR-3")]


@pytest.fixture(autouse=True)
def deep_contracts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks on (as tests/conftest.py sets them), whatever the environment says."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)


@pytest.fixture
def cheap_contracts(deep_contracts: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks off: the default contracts, without the whole-structure checks."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)


def _without_contracts(name: str) -> Callable[..., Any]:
    """`WaitingQueues.<name>` as `python -O` runs it: the body alone."""
    body: Callable[..., Any] = inspect.unwrap(getattr(WaitingQueues, name))
    return body


def _four_places(layout: str) -> tuple[WaitingQueues, dict[str, Any]]:
    """One request in each place: `w` waiting, `k` (WAITING_FOR_REMOTE_KVS) in the
    layout's second queue (skipped_waiting, kv_holding_waiting), `r` running, `f`
    finished."""
    wq = WaitingQueues("fcfs", layout=layout)
    wq.enqueue(Request("f", arrival_time=0.0))
    wq.enqueue(Request("r", arrival_time=1.0))
    wq.enqueue(Request("w", arrival_time=2.0))
    wq.enqueue(Request("k", arrival_time=3.0, status=KV))
    f, r = wq.schedule_step(lambda x: STOP if x.request_id == "w" else RUN)
    wq.finish(f)
    requests = {x.request_id: x for x in [*wq.waiting, *wq._aside, *wq.running]} | {"f": f}
    assert ids_of(wq.waiting) == ["w"] and ids_of(wq._aside) == ["k"] and wq.running == [r]
    return wq, requests


# -- the checks in the bodies: a request that is not running (python -O)


@pytest.mark.guard
@pytest.mark.parametrize(("operation", "rule"), RUNNING_ONLY)
@pytest.mark.parametrize(
    ("layout", "rid", "where"),
    [
        (LAYOUT_V030, "w", "in waiting"),
        (LAYOUT_V030, "k", "in skipped_waiting"),
        (LAYOUT_V033, "w", "in waiting"),
        (LAYOUT_V033, "k", "in kv_holding_waiting"),
        (LAYOUT_V030, "f", "in finished"),
        (LAYOUT_V033, "f", "in finished"),
        (LAYOUT_V030, "u", "unknown"),  # never enqueued
        (LAYOUT_V030, "r?", "unknown"),  # the running request's id, another object
    ],
)
def test_a_request_that_is_not_running_is_refused_without_contracts(
    operation: str, rule: str, layout: str, rid: str, where: str
) -> None:
    """WL-PRE-2, WL-FIN-2, WL-STR-3: without the contracts (`python -O`), `preempt`,
    `finish` and `await_stream` of a request that is not running -- waiting, in the
    layout's second queue, finished, or unknown to the instance (also a request with a
    known id that is not the object known under it) -- raise a ValueError that names
    the rule and says where the request is, and nothing changes."""
    wq, requests = _four_places(layout)
    request = requests.get(rid) or Request(rid.rstrip("?"), status=RequestStatus.RUNNING)
    before = places_of(wq)
    status = request.status
    body = _without_contracts(operation)
    with pytest.raises(ValueError) as raised:
        body(wq, request)
    assert str(raised.value) == f"{rule}: {request!r} is not running (it is {where})"
    assert places_of(wq) == before and request.status is status


class _Shaped:
    """An object with a queue's three fields and the given status (any object)."""

    def __init__(self, status: object) -> None:
        self.request_id, self.priority, self.arrival_time = "r", 0, 1.0
        self.status = status


@pytest.mark.guard
@pytest.mark.parametrize("operation", ["preempt", "finish", "await_stream", "continue_stream"])
@pytest.mark.parametrize(
    ("thing", "message"),
    [
        ("r", "RQ-REQ-3: str object is not a request: it has no 'request_id' attribute"),
        (_Shaped(int(RequestStatus.RUNNING)), "WL-ENQ-2: .* has no queueref RequestStatus status"),
    ],
)
def test_a_non_request_is_refused_as_such_without_contracts(
    operation: str, thing: object, message: str
) -> None:
    """WL-PRE-2, WL-FIN-2, WL-STR-3: without the contracts, an operation given something
    that is not a lifecycle request -- a str naming the running request, or an object
    with its id and fields whose status is the int RUNNING, not the RequestStatus --
    raises a TypeError naming what it lacks (the shape is asked before the place), not
    a ValueError saying it is not running; nothing changes."""
    wq, _ = _four_places(LAYOUT_V030)
    before = places_of(wq)
    with pytest.raises(TypeError, match=message):
        _without_contracts(operation)(wq, thing)
    assert places_of(wq) == before


# -- requests with value equality: the lifecycle knows each one by identity


class _ValueRequest:
    """A request that compares equal to any request with the same fields (a value type,
    as a dataclass is)."""

    def __init__(self, request_id: str, arrival_time: float = 0.0) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, 0, arrival_time
        self.status = RequestStatus.WAITING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ValueRequest) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(self.request_id)

    def __repr__(self) -> str:
        return f"_ValueRequest({self.request_id!r}, status={self.status.name})"


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("operation", "precondition"),
    [
        ("preempt", "WL-PRE-2: only a running request can be preempted"),
        ("finish", "WL-FIN-2: only a running request can be finished"),
        ("await_stream", "WL-STR-3: only a running request can wait for its stream"),
        ("continue_stream", "WL-STR-3: only a running request or a paused streaming session"),
    ],
)
def test_an_equal_copy_of_a_running_request_is_not_running(
    operation: str, precondition: str
) -> None:
    """WL-CONS-1, WL-PRE-2, WL-FIN-2, WL-STR-3: the running request is the very object
    known under its id; an equal copy of it (same fields, same status) is unknown to
    the instance, so each operation on a running request refuses it with its
    precondition's ValueError (an icontract condition: `python -O` leaves the body's
    own check, shown below), and the request itself stays running."""
    wq = WaitingQueues("fcfs")
    original: Any = _ValueRequest("v")
    wq.enqueue(original)
    assert wq.schedule_step(lambda r: RUN) == [original]
    stranger = copy.copy(original)
    assert stranger == original and stranger is not original
    before = places_of(wq)
    with pytest.raises(ValueError, match=precondition):
        getattr(wq, operation)(stranger)
    assert places_of(wq) == before
    assert wq.running[0] is original and original.status is RequestStatus.RUNNING


@pytest.mark.guard
def test_an_equal_copy_of_a_paused_session_cannot_continue_it_without_contracts() -> None:
    """WL-STR-2, WL-STR-3: without the contracts, `continue_stream` of an equal copy of
    a paused session (same id, fields and status) refuses it as unknown: the session
    itself stays paused, WAITING_FOR_STREAMING_REQ, counted by num_paused_sessions."""
    wq = WaitingQueues("fcfs")
    session: Any = _ValueRequest("s")
    wq.enqueue(session)
    wq.schedule_step(lambda r: RUN)
    wq.await_stream(session)
    assert wq.num_paused_sessions == 1 and session.status is STREAM
    stranger = copy.copy(session)
    assert stranger == session
    before = places_of(wq)
    with pytest.raises(ValueError) as raised:
        _without_contracts("continue_stream")(wq, stranger)
    assert str(raised.value) == (
        f"WL-STR-3: {stranger!r} is neither running nor a paused streaming session (it is unknown)"
    )
    assert places_of(wq) == before
    assert wq.num_paused_sessions == 1 and session.status is STREAM
    assert stranger.status is STREAM


class _KeyEqualRequest:
    """A request that compares equal to any with the same priority and arrival time:
    `functools.total_ordering` style, ordered and compared by the scheduling key alone."""

    def __init__(self, request_id: str) -> None:
        self.request_id, self.priority, self.arrival_time = request_id, 0, 0.0
        self.status = RequestStatus.WAITING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _KeyEqualRequest) and (self.priority, self.arrival_time) == (
            other.priority,
            other.arrival_time,
        )

    def __hash__(self) -> int:
        return hash((self.priority, self.arrival_time))

    def __repr__(self) -> str:
        return f"_KeyEqualRequest({self.request_id!r}, status={self.status.name})"


@pytest.mark.parametrize("layout", [LAYOUT_V030, LAYOUT_V033])
@pytest.mark.parametrize("operation", ["preempt", "finish", "await_stream", "continue_stream"])
def test_the_running_request_named_leaves_running_not_an_equal_one(
    cheap_contracts: None, operation: str, layout: str
) -> None:
    """WL-CONS-1, WL-PRE-1, WL-FIN-1, WL-STR-1, WL-STR-2: `a` and `b` run and compare
    equal (same priority and arrival time); each operation on `b` takes `b` itself out
    of running and leaves `a` there, running and recorded as running (the default
    contracts, which count but do not look at every place)."""
    wq = WaitingQueues("fcfs", layout=layout)
    a: Any = _KeyEqualRequest("a")
    b: Any = _KeyEqualRequest("b")
    wq.enqueue(a)
    wq.enqueue(b)
    assert wq.schedule_step(lambda r: RUN) == [a, b]
    assert a == b
    getattr(wq, operation)(b)
    assert len(wq.running) == 1 and wq.running[0] is a
    assert a.status is RequestStatus.RUNNING and wq._where["a"] == "running"
    expected = {
        "preempt": (RequestStatus.PREEMPTED, "waiting"),
        "finish": (RequestStatus.FINISHED_STOPPED, "finished"),
        "await_stream": (
            STREAM,
            "skipped_waiting" if layout == LAYOUT_V030 else "kv_holding_waiting",
        ),
        "continue_stream": (
            RequestStatus.WAITING,
            "waiting" if layout == LAYOUT_V030 else "kv_holding_waiting",
        ),
    }[operation]
    assert (b.status, wq._where["b"]) == expected


# -- max_running counts the paused sessions (kept here: this file builds no broken
# variant at import, so it still collects under a mutant of the line a variant of
# `tests/helpers/waiting_variants.py` changes, `_slots_full`'s)


def test_slots_full_counts_running_and_paused_sessions() -> None:
    """WL-STEP-1, WL-STR-4: a step stops taking requests once `running` plus the paused
    sessions reach `max_running`. One running (r) and one paused session (s) with
    max_running 4: two more run (w, x), y stays; with no session paused and
    max_running 1 one runs."""
    wq = WaitingQueues("fcfs")
    for rid in ("r", "s"):
        wq.enqueue(Request(rid, arrival_time=float(ord(rid))))
    wq.schedule_step(lambda r: RUN)
    wq.await_stream(wq.running[1])
    for rid in ("w", "x", "y"):
        wq.enqueue(Request(rid, arrival_time=float(ord(rid))))
    assert ids_of(wq.schedule_step(lambda r: RUN, max_running=4)) == ["w", "x"]
    assert ids_of(wq.running) == ["r", "w", "x"] and wq.num_paused_sessions == 1
    plain = WaitingQueues("fcfs")
    for rid in ("a", "b"):
        plain.enqueue(Request(rid, arrival_time=float(ord(rid))))
    assert ids_of(plain.schedule_step(lambda r: RUN, max_running=1)) == ["a"]
