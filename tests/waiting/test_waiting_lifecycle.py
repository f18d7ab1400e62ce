"""Gaps in the tests of queueref.waiting.lifecycle, found by `make mutation`.

`waiting` holds the `WaitingQueues` class itself: its class invariants, its
construction and `enqueue`, each with its icontract conditions. The survivors
weaken or remove one of those conditions, so every test here gives one condition
teeth:

* a broken `__init__` (`tests/helpers/method_variants.py`: the real method with one named
  change, its postconditions re-applied from its source) caught by the clause that
  states the rule, with that clause's ID and text;
* a broken `WaitingQueues` (`tests/helpers/waiting_variants.py`: a subclass whose private
  method has one named change; it inherits `enqueue`'s conditions and the class
  invariants) caught by the one clause that states the rule. Postconditions run
  bottom-up, and `enqueue`'s deep clause (the two queues' lists) sits below the
  cheap ones and catches most bugs first, so a cheap clause is shown with deep
  checks off (`cheap_contracts`): the default contracts, where it is the only check;
* the same bug on an instance whose layout name was built at run time (equal to
  "vllm-0.30" or "vllm-0.33", not the constant's object): a clause must not skip
  its check for it;
* `enqueue`'s preconditions, whose messages differ from the ones the body's own
  checks (kept for `python -O`) give.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest
from method_variants import method_variant
from waiting_gap_helpers import ids_of, violation_message
from waiting_variants import Change, EnqueueIgnoresBlocked, EnqueueIgnoresKV, broken_variant

import queueref.config
from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.queues.factory import SchedulingPolicy
from queueref.queues.fcfs import FCFSRequestQueue
from queueref.waiting.model import LAYOUT_V030, LAYOUT_V033

RUN, STOP = StepDecision.RUN, StepDecision.STOP
KV = RequestStatus.WAITING_FOR_REMOTE_KVS

# Layout names equal to the constants, built at run time: not the constants' objects.
BUILT_V030 = "".join(["vllm-", "0.30"])
BUILT_V033 = "".join(["vllm-", "0.33"])

# The clauses, by their descriptions (ID and text).
EMPTY = "WL-POL-1: a new instance holds no request"
OF_THE_POLICY = "WL-POL-1: both waiting queues are queues of the policy"
LAYOUT_QUEUES = "WL-LAY-1: the layout's queues"
READY_OR_BLOCKED = (
    "WL-ENQ-2: only a waiting (WAITING, PREEMPTED) or blocked request can be enqueued"
)
NOT_KNOWN = "WL-ENQ-2: the request (or another with its request_id) is not already known"
PLACE_V030 = "WL-ENQ-1: a blocked request goes to skipped_waiting, any other to waiting"
PLACE_V033 = (
    "WL-L33-1: a request holding KV blocks goes to kv_holding_waiting, any other to waiting"
)
DEFERRED = "WL-L33-1: vllm-0.33: a blocked request is deferred on arrival"
ONE_MORE_KNOWN = "WL-CONS-1: enqueue adds exactly one known request"
ADDED_IN_ORDER = (
    "WL-ENQ-1: the request is added with add_request (FCFS: at the back; PRIORITY: "
    "in key order) and the other queue is unchanged"
)
CONSERVED = (
    "WL-CONS-1: every known request is in exactly one of the two waiting queues, running, finished"
)
COUNTED = "WL-CONS-1: as many requests are placed as are known (O(1) count)"

# -- broken variants, each the real method with one named change

EnqueueSkipsReady = broken_variant(
    "EnqueueSkipsReady",
    Change(
        "_queue_for",
        "vllm-0.30: puts every request in skipped_waiting, ready ones too",
        "if self._is_blocked(request.status):",
        "if True:",
    ),
)
EnqueueHoldsEvery = broken_variant(
    "EnqueueHoldsEvery",
    Change(
        "_queue_for",
        "vllm-0.33: puts every request in kv_holding_waiting, whatever its KV state",
        "if self._holds_kv(request):",
        "if True:",
    ),
)
EnqueueForgetsToDefer = broken_variant(
    "EnqueueForgetsToDefer",
    Change(
        "_enqueue_waiting",
        "vllm-0.33: a blocked request arrives without being deferred",
        "self.deferred_waiting.add(request.request_id)",
        "pass",
    ),
)
EnqueueDefersEvery = broken_variant(
    "EnqueueDefersEvery",
    Change(
        "_enqueue_waiting",
        "vllm-0.33: every request is deferred on arrival, ready ones too",
        "if self.layout != LAYOUT_V030 and self._is_blocked(request.status):",
        "if self.layout != LAYOUT_V030:",
    ),
)
EnqueueKnowsTwice = broken_variant(
    "EnqueueKnowsTwice",
    Change(
        "_enqueue_waiting",
        "records the request under a second key too",
        "self._place(request, place)",
        "self._place(request, place)\n    self._known[request.request_id + '~'] = request",
    ),
)
KnowsOnlyTheLast = broken_variant(
    "KnowsOnlyTheLast",
    Change(
        "_place",
        "replaces every known request by the one placed",
        "self._known[request.request_id] = request",
        "self._known = {request.request_id: request}",
    ),
)
EnqueuesToFront = broken_variant(
    "EnqueuesToFront",
    Change(
        "_enqueue_waiting",
        "puts the request at the front of its queue (prepend_request, not add_request)",
        "queue.add_request(request)",
        "queue.prepend_request(request)",
    ),
)
AbortForgets = broken_variant(
    "AbortForgets",
    Change(
        "abort",
        "forgets each aborted request once it is in finished (vLLM frees it)",
        "self._where[request.request_id] = IN_FINISHED",
        "self._where[request.request_id] = IN_FINISHED\n        "
        "del self._known[request.request_id]",
    ),
)


# -- helpers


@pytest.fixture(autouse=True)
def deep_contracts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks on (as tests/conftest.py sets them), whatever the environment says."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", True)


@pytest.fixture
def cheap_contracts(deep_contracts: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep checks off: the default contracts, without the whole-structure checks."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", False)


def _broken_init(bug: str, old: str, new: str, **names: object) -> Callable[..., Any]:
    """`WaitingQueues.__init__` with one named change, its postconditions re-applied;
    `names` are added to the names its module sees (for what the change calls)."""
    broken = method_variant(WaitingQueues, "__init__", Change("__init__", bug, old, new))
    inspect.unwrap(broken).__globals__.update(names)
    return broken


def _construct(broken: Callable[..., Any], *args: object) -> str:
    """The violation a broken `__init__` raises on a fresh instance."""
    wq = WaitingQueues.__new__(WaitingQueues)
    return violation_message(lambda: broken(wq, *args))


# -- __init__: a new instance holds no request (WL-POL-1)

_HOLDS = {
    "waiting": ("self.running = []", "self.running = []\n    self.waiting.add_request(X)"),
    "aside": ("self.running = []", "self.running = []\n    self._aside.add_request(X)"),
    "running": ("self.running = []", "self.running = [X]"),
    "finished": ("self.finished = {}", "self.finished = {X.request_id: X}"),
}


@pytest.mark.contracts
@pytest.mark.parametrize("layout", [LAYOUT_V030, LAYOUT_V033])
@pytest.mark.parametrize("place", sorted(_HOLDS))
def test_a_new_instance_holding_a_request_is_caught(place: str, layout: str) -> None:
    """WL-POL-1: `waiting`, the layout's second queue, `running` and `finished` all start
    empty: an `__init__` that starts with a request in any one of them (the others
    empty) is caught by "a new instance holds no request"."""
    status = {"running": RequestStatus.RUNNING, "finished": RequestStatus.FINISHED_STOPPED}
    request = Request("x", status=status.get(place, RequestStatus.WAITING))
    old, new = _HOLDS[place]
    broken = _broken_init(f"starts with a request in {place}", old, new, X=request)
    assert EMPTY in _construct(broken, "fcfs", layout)


# -- __init__: both waiting queues are queues of the policy (WL-POL-1)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("policy", "other"),
    [(SchedulingPolicy.FCFS, SchedulingPolicy.PRIORITY), ("priority", SchedulingPolicy.FCFS)],
)
@pytest.mark.parametrize("both", [False, True])
def test_a_waiting_queue_of_another_policy_is_caught(
    policy: SchedulingPolicy | str, other: SchedulingPolicy, both: bool
) -> None:
    """WL-POL-1: `waiting` and `skipped_waiting` are queues of the instance's policy: an
    `__init__` that makes the second queue (or both queues) for the other policy is
    caught by "both waiting queues are queues of the policy" (also when `waiting` is
    right and only the other one is wrong)."""
    old = "self._aside = create_request_queue(policy)"
    new = "self._aside = create_request_queue(OTHER)"
    if both:
        old = "self.waiting = create_request_queue(policy)\n    " + old
        new = "self.waiting = create_request_queue(OTHER)\n    " + new
    broken = _broken_init("makes its queues for the other policy", old, new, OTHER=other)
    assert OF_THE_POLICY in _construct(broken, policy)


class _ByName(type(FCFSRequestQueue)):  # type: ignore[misc]
    """A metaclass whose classes compare equal by qualified name (as two copies of one
    class, from a module loaded twice, would if they compared so)."""

    def __eq__(cls, other: object) -> bool:
        return isinstance(other, type) and other.__qualname__ == cls.__qualname__

    def __hash__(cls) -> int:
        return hash(cls.__qualname__)


class _Twin(FCFSRequestQueue, metaclass=_ByName):
    """Another class named FCFSRequestQueue, equal to the real one, not the real one."""


_Twin.__qualname__ = _Twin.__name__ = FCFSRequestQueue.__qualname__


@pytest.mark.contracts
def test_two_queue_classes_that_compare_equal_are_still_two_classes() -> None:
    """WL-POL-1: both waiting queues are of one class (the policy's): an `__init__`
    that makes `skipped_waiting` of another class -- an FCFS queue class that compares
    equal to the real one but is not it -- is caught by "both waiting queues are
    queues of the policy"."""
    assert _Twin == FCFSRequestQueue and _Twin is not FCFSRequestQueue
    broken = _broken_init(
        "makes skipped_waiting of another class, equal to the real one",
        "self._aside = create_request_queue(policy)",
        "self._aside = TWIN()",
        TWIN=_Twin,
    )
    assert OF_THE_POLICY in _construct(broken, "fcfs")


class _PolicyName(str):
    """A policy name that compares equal to the SchedulingPolicy member of its value (as
    another library's policy type might): `SchedulingPolicy(...)` accepts it."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, getattr(other, "value", other)) is True


@pytest.mark.contracts
def test_a_policy_kept_as_given_is_caught() -> None:
    """WL-POL-1: the instance's policy is the `SchedulingPolicy` member: an `__init__`
    that keeps the policy as given (an object equal to SchedulingPolicy.FCFS, not the
    member) has an instance whose queues are not those of its policy, and is caught by
    "both waiting queues are queues of the policy"."""
    fcfs = _PolicyName("fcfs")
    assert fcfs == SchedulingPolicy.FCFS and not isinstance(fcfs, SchedulingPolicy)
    assert WaitingQueues(fcfs).policy is SchedulingPolicy.FCFS  # the real one converts it
    broken = _broken_init(
        "keeps the policy as given",
        "self.policy = SchedulingPolicy(policy)",
        "self.policy = policy",
    )
    assert OF_THE_POLICY in _construct(broken, fcfs)


# -- __init__: the layout asked for (WL-LAY-1)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("asked", "built"), [(LAYOUT_V030, LAYOUT_V033), (LAYOUT_V033, LAYOUT_V030)]
)
def test_an_instance_of_another_layout_than_asked_is_caught(asked: str, built: str) -> None:
    """WL-LAY-1: the instance has the layout it was asked for: an `__init__` that builds
    the other layout, complete with its queues, is caught by "the layout's queues"."""
    broken = _broken_init(
        f"always builds {built}",
        "self.waiting = create_request_queue(policy)",
        "layout = BUILT\n    self.waiting = create_request_queue(policy)",
        BUILT=built,
    )
    assert LAYOUT_QUEUES in _construct(broken, "fcfs", asked)


# -- enqueue's preconditions (WL-ENQ-2)


@pytest.mark.contracts
@pytest.mark.parametrize("status", [RequestStatus.RUNNING, RequestStatus.FINISHED_ABORTED])
def test_enqueue_refuses_a_running_or_finished_request_in_its_precondition(
    status: RequestStatus,
) -> None:
    """WL-ENQ-2: a RUNNING or finished request is refused by the precondition "only a
    waiting (WAITING, PREEMPTED) or blocked request can be enqueued" (declared once, so
    the same check under `python -O`), a ValueError; nothing changes."""
    wq = WaitingQueues("fcfs")
    request = Request("a", status=status)
    with pytest.raises(ValueError, match=re.escape(READY_OR_BLOCKED)):
        wq.enqueue(request)
    assert wq._known == {} and not wq.waiting and request.status is status


@pytest.mark.contracts
@pytest.mark.parametrize("place", ["waiting", "skipped_waiting", "running", "finished"])
def test_enqueue_refuses_a_known_id_in_its_precondition(place: str) -> None:
    """WL-ENQ-2: a request whose id the instance knows (waiting, in skipped_waiting,
    running or finished; here another object with that id) is refused by the
    precondition "the request (or another with its request_id) is not already known"
    (declared once, so the same check under `python -O`), a ValueError; nothing changes."""
    wq = WaitingQueues("fcfs")
    status = KV if place == "skipped_waiting" else RequestStatus.WAITING
    wq.enqueue(Request("a", status=status))
    if place in ("running", "finished"):
        (a,) = wq.schedule_step(lambda r: RUN)
        if place == "finished":
            wq.finish(a)
    before = repr(wq)
    with pytest.raises(ValueError, match=re.escape(NOT_KNOWN)):
        wq.enqueue(Request("a"))
    assert repr(wq) == before and len(wq._known) == 1


# -- enqueue's postconditions


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "layout", "status", "clause"),
    [
        (EnqueueIgnoresBlocked, LAYOUT_V030, KV, PLACE_V030),  # blocked, put in waiting
        (EnqueueIgnoresBlocked, BUILT_V030, KV, PLACE_V030),
        (EnqueueSkipsReady, LAYOUT_V030, RequestStatus.WAITING, PLACE_V030),  # ready, aside
        (EnqueueIgnoresKV, LAYOUT_V033, KV, PLACE_V033),  # holds KV, put in waiting
        (EnqueueIgnoresKV, BUILT_V033, KV, PLACE_V033),
        (EnqueueHoldsEvery, LAYOUT_V033, RequestStatus.WAITING, PLACE_V033),  # no KV, aside
    ],
)
def test_an_enqueue_to_the_wrong_queue_is_caught_by_its_layouts_clause(
    cheap_contracts: None,
    variant: type[WaitingQueues],
    layout: str,
    status: RequestStatus,
    clause: str,
) -> None:
    """WL-ENQ-1, WL-L33-1: vllm-0.30 enqueues a blocked request to skipped_waiting and any
    other to waiting; vllm-0.33 a request holding KV blocks to kv_holding_waiting and
    any other to waiting. An enqueue that picks the wrong queue either way is caught by
    its own layout's clause (also for a layout name built at run time), not by the
    other layout's."""
    wq = variant("fcfs", layout=layout)
    message = violation_message(lambda: wq.enqueue(Request("a", status=status)))
    assert clause in message


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("variant", "layout", "status"),
    [
        (EnqueueForgetsToDefer, LAYOUT_V033, KV),  # blocked, not deferred
        (EnqueueForgetsToDefer, BUILT_V033, KV),
        (EnqueueForgetsToDefer, LAYOUT_V033, RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR),
        (EnqueueDefersEvery, LAYOUT_V033, RequestStatus.WAITING),  # ready, deferred
        (EnqueueDefersEvery, BUILT_V033, RequestStatus.PREEMPTED),
    ],
)
def test_an_enqueue_that_defers_wrongly_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], layout: str, status: RequestStatus
) -> None:
    """WL-L33-1: in vllm-0.33 a request is deferred on arrival exactly when it is
    blocked: an enqueue that leaves a blocked request out of deferred_waiting, or
    defers a ready one, is caught by "a blocked request is deferred on arrival"."""
    wq = variant("fcfs", layout=layout)
    message = violation_message(lambda: wq.enqueue(Request("a", status=status)))
    assert DEFERRED in message


@pytest.mark.contracts
@pytest.mark.parametrize(("variant", "caught"), [(EnqueueKnowsTwice, "a"), (KnowsOnlyTheLast, "b")])
def test_an_enqueue_that_miscounts_the_known_requests_is_caught(
    cheap_contracts: None, variant: type[WaitingQueues], caught: str
) -> None:
    """WL-CONS-1: enqueue adds exactly one known request: an enqueue that records the
    request twice (the first enqueue: two known for one placed), or forgets the
    requests known before (the second enqueue: one known for two placed), is caught by
    "enqueue adds exactly one known request" (before the class invariant on the
    counts)."""
    wq = variant("fcfs")

    def enqueue_two() -> None:
        wq.enqueue(Request("a"))
        wq.enqueue(Request("b", arrival_time=1.0))

    message = violation_message(enqueue_two)
    assert ONE_MORE_KNOWN in message and f"request was Request({caught!r}" in message


@pytest.mark.contracts
@pytest.mark.parametrize("layout", [LAYOUT_V030, LAYOUT_V033])
@pytest.mark.parametrize("status", [RequestStatus.WAITING, KV])
def test_an_enqueue_out_of_the_queues_order_is_caught(layout: str, status: RequestStatus) -> None:
    """WL-ENQ-1, WL-L33-1: enqueue adds with add_request (FCFS: at the back) and leaves
    the other queue unchanged: an enqueue that puts the request at the front of its
    queue (waiting for a ready one; skipped_waiting, kv_holding_waiting for a blocked
    one) is caught by "the request is added with add_request ... and the other queue
    is unchanged" (deep checks)."""
    wq = EnqueuesToFront("fcfs", layout=layout)
    wq.enqueue(Request("a", status=status))
    message = violation_message(lambda: wq.enqueue(Request("b", arrival_time=1.0, status=status)))
    assert ADDED_IN_ORDER in message


# -- the class invariants (WL-CONS-1)


@pytest.mark.contracts
@pytest.mark.parametrize(("deep", "clause"), [(True, CONSERVED), (False, COUNTED)])
def test_an_abort_that_forgets_the_request_is_caught_by_conservation(
    monkeypatch: pytest.MonkeyPatch, deep: bool, clause: str
) -> None:
    """WL-CONS-1: every known request is in exactly one place, and as many are placed as
    are known: an abort that drops the aborted request from the known ones (it is in
    finished, unknown) passes abort's own postconditions and is caught by the class
    invariant, "every known request is in exactly one ..." under deep checks, and
    without them by the O(1) count "as many requests are placed as are known"."""
    monkeypatch.setattr(queueref.config, "DEEP_CHECKS", deep)
    wq = AbortForgets("fcfs")
    wq.enqueue(Request("a"))
    wq.enqueue(Request("b", arrival_time=1.0))
    message = violation_message(lambda: wq.abort("a"))
    assert clause in message
    assert ids_of(wq.finished.values()) == ["a"] and list(wq._known) == ["b"]


# -- repr: the layout is named unless it is the default


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        (LAYOUT_V030, "<WaitingQueues fcfs: waiting=['w'] skipped_waiting=['k']"),
        (BUILT_V030, "<WaitingQueues fcfs: waiting=['w'] skipped_waiting=['k']"),
        (LAYOUT_V033, "<WaitingQueues fcfs vllm-0.33: waiting=['w'] kv_holding_waiting=['k']"),
        (BUILT_V033, "<WaitingQueues fcfs vllm-0.33: waiting=['w'] kv_holding_waiting=['k']"),
    ],
)
def test_the_repr_names_the_layout_unless_it_is_the_default(layout: str, expected: str) -> None:
    """WL-LAY-1: the repr names the layout after the policy, except vllm-0.30 (the
    default), also when the layout name was built at run time; then every place's
    request ids."""
    wq = WaitingQueues("fcfs", layout=layout)
    wq.enqueue(Request("f"))
    wq.enqueue(Request("r", arrival_time=1.0))
    wq.enqueue(Request("w", arrival_time=2.0))
    wq.enqueue(Request("k", arrival_time=3.0, status=KV))
    f, _ = wq.schedule_step(lambda r: STOP if r.request_id == "w" else RUN)
    wq.finish(f)
    assert repr(wq) == expected + " running=['r'] finished=['f']>"


# -- the layout is a name, told apart by equality only


class UnorderedName(str):
    """A layout name that refuses to be ordered: a str whose only comparison is `==`."""

    def _refused(self) -> bool:
        raise TypeError(f"the layout {str(self)!r} was ordered; layouts are names")

    def __lt__(self, other: object) -> bool:
        return self._refused()

    def __le__(self, other: object) -> bool:
        return self._refused()

    def __gt__(self, other: object) -> bool:
        return self._refused()

    def __ge__(self, other: object) -> bool:
        return self._refused()


def _a_run_of_every_operation(wq: WaitingQueues) -> list[object]:
    """enqueue (ready and blocked), a selection, a step, preempt, finish and abort:
    what each left."""
    seen: list[object] = []

    def observe() -> None:
        seen.append(
            (
                ids_of(wq.waiting),
                ids_of(wq._aside),
                ids_of(wq.running),
                {rid: r.status for rid, r in wq.finished.items()},
                sorted(getattr(wq, "deferred_waiting", ())),
            )
        )

    for rid, priority, status in [("a", 1, None), ("k", 0, KV), ("c", 0, None), ("d", 2, None)]:
        request = Request(rid, priority, float(ord(rid)))
        if status is not None:
            request.status = status
        wq.enqueue(request)
        observe()
    seen.append(ids_of(wq.select_waiting_queue() or []))
    seen.append(ids_of(wq.schedule_step(lambda r: RUN, max_running=3)))
    observe()
    seen.append(wq.preempt().request_id)
    observe()
    wq.finish(wq.running[0])
    observe()
    seen.append(ids_of(wq.abort(["k", "d"])))
    observe()
    seen.append(repr(wq))
    return seen


@pytest.mark.parametrize("layout", ["vllm-0.30", "vllm-0.31", "vllm-0.32", "vllm-0.33"])
def test_layout_is_told_apart_by_equality_only(layout: str) -> None:
    """WL-LAY-1: a layout is a name: the lifecycle tells the layouts apart by `==` and
    never orders them ("vllm-0.30" happens to be the least, which a `<=` or a `>`
    in place of `==` or `!=` would lean on). A `WaitingQueues` given its layout as a
    str that refuses ordering goes through enqueue, the selection of a queue, a step,
    preempt, finish and abort (each with its contracts) exactly as one given the plain
    name, and is shown alike."""
    plain = WaitingQueues("priority", layout=layout)
    named = WaitingQueues("priority", layout=UnorderedName(layout))
    expected = _a_run_of_every_operation(plain)
    assert expected[5] == ["c", "a", "d"] and expected[7] == "d"  # a step ran, d preempted
    assert _a_run_of_every_operation(named) == expected
