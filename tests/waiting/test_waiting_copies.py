"""WL-COPY-1: a `WaitingQueues` copied through `pickle` or `deepcopy` goes on as the original.

Issue 25's adversarial inputs for the mutants called equivalent: after `pickle`, the
place and layout strings a copy holds are equal to the module's constants but no
longer the same objects, so a place compared with `is` where the code says `==`
(or the other way round) changes what the copy does -- an operation refused, a
contract broken, a request put in the wrong queue. Each scenario runs seeded random
operations (enqueue ready and blocked requests, steps with random decisions and
`max_running`, preempt, finish, abort, streaming stops and updates) on an original;
at a random point it copies the queues with their requests, then applies the same
operations, by request id, to the original and the copy, and after each one compares
every queue in order, `running`, the finished requests, every status and the paused
sessions, and the error raised, if any. Contracts are on: a condition that holds on
the original must hold on the copy.
"""

from __future__ import annotations

import copy
import pickle
import random
from collections.abc import Callable
from typing import Any

import pytest

from queueref import Request, RequestStatus, SchedulingPolicy, StepDecision, WaitingQueues
from queueref.waiting.places import IN_RUNNING, LAYOUTS

BLOCKED = (
    RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR,
    RequestStatus.WAITING_FOR_REMOTE_KVS,
)
DECISIONS = (StepDecision.RUN, StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP)
Copier = Callable[[Any], Any]
COPIERS: dict[str, Copier] = {
    "pickle": lambda state: pickle.loads(pickle.dumps(state)),
    "deepcopy": copy.deepcopy,
}


class System:
    """One `WaitingQueues` and its requests by id: the operations name requests by id."""

    def __init__(self, wq: WaitingQueues, requests: dict[str, Request]) -> None:
        self.wq, self.requests = wq, requests

    def copied(self, copier: Copier) -> System:
        wq, requests = copier((self.wq, self.requests))  # one copy: identities kept
        return System(wq, requests)

    def observe(self) -> tuple[Any, ...]:
        wq = self.wq
        aside = wq.skipped_waiting if hasattr(wq, "skipped_waiting") else wq.kv_holding_waiting
        return (
            [r.request_id for r in wq.waiting],
            [r.request_id for r in aside],
            [r.request_id for r in wq.running],
            sorted(wq.finished),
            sorted((rid, r.status.name) for rid, r in self.requests.items()),
            wq.num_paused_sessions,
        )

    def apply(self, op: tuple[Any, ...]) -> str:
        """Run one operation; what it raised (type and message), or 'ok' and its result."""
        try:
            return "ok " + repr(self._apply(op))
        except Exception as error:  # compared between the two systems, never ignored
            return f"{type(error).__name__}: {error}"

    def _apply(self, op: tuple[Any, ...]) -> Any:
        kind, *args = op
        wq, requests = self.wq, self.requests
        if kind == "enqueue":
            rid, priority, arrival, status = args
            requests[rid] = Request(rid, priority, arrival, status=status)
            return wq.enqueue(requests[rid])
        if kind == "step":
            decisions, promote, max_running = args

            def check(request: Any) -> StepDecision:
                decision: StepDecision = decisions.get(request.request_id, StepDecision.RUN)
                return decision

            def try_promote(request: Any) -> bool:
                if request.request_id in promote:
                    request.status = RequestStatus.WAITING
                    return True
                return False

            ran = wq.schedule_step(check, try_promote, max_running=max_running)
            return [r.request_id for r in ran]
        rid = args[0]
        request = requests.get(rid, Request(rid))
        if kind == "abort":
            return [r.request_id for r in wq.abort(rid)]
        if kind == "preempt_victim":  # vLLM's victim (WL-PRE-3)
            return wq.preempt().request_id
        methods: dict[str, Callable[[Any], Any]] = {
            "preempt": wq.preempt,
            "finish": wq.finish,
            "await_stream": wq.await_stream,
            "continue_stream": wq.continue_stream,
        }
        return methods[kind](request)


def operations(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    """`count` operations; the ids they name are those enqueued so far (and one unknown)."""
    ids: list[str] = []
    ops: list[tuple[Any, ...]] = []
    for number in range(count):
        kind = rng.choice(
            ["enqueue"] * 4
            + ["step"] * 3
            + ["preempt", "preempt_victim", "finish", "abort", "await_stream", "continue_stream"]
        )
        if kind == "enqueue" or not ids:
            rid = f"r{number}"
            ids.append(rid)
            status = rng.choice([RequestStatus.WAITING] * 3 + list(BLOCKED))
            ops.append(("enqueue", rid, rng.randint(0, 2), float(rng.randint(0, 5)), status))
        elif kind == "step":
            decisions = {rid: rng.choice(DECISIONS) for rid in ids}
            promote = {rid for rid in ids if rng.random() < 0.5}
            ops.append(("step", decisions, promote, rng.choice([None, 1, 2, 3])))
        else:
            ops.append((kind, rng.choice([*ids, "unknown"])))
    return ops


@pytest.mark.parametrize("copier", sorted(COPIERS))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("policy", [SchedulingPolicy.FCFS, SchedulingPolicy.PRIORITY])
def test_a_copied_waiting_queues_goes_on_as_the_original(
    policy: SchedulingPolicy, layout: str, copier: str
) -> None:
    for seed in range(40):
        rng = random.Random(f"{policy.name}-{layout}-{copier}-{seed}")
        ops = operations(rng, 40)
        split = rng.randint(5, 30)
        original = System(WaitingQueues(policy, layout=layout), {})
        for op in ops[:split]:
            original.apply(op)
        twin = original.copied(COPIERS[copier])
        assert twin.observe() == original.observe()
        for op in ops[split:]:
            said = original.apply(op)
            assert twin.apply(op) == said, (seed, op)
            assert twin.observe() == original.observe(), (seed, op)


def test_a_pickled_copy_holds_equal_but_not_identical_places() -> None:
    """The copies above are the adversarial input they claim to be: after pickle, a
    running request's place is equal to `IN_RUNNING` but another object."""
    wq = WaitingQueues(SchedulingPolicy.FCFS)
    wq.enqueue(Request("a"))
    wq.schedule_step(lambda request: StepDecision.RUN)
    twin = System(wq, {}).copied(COPIERS["pickle"]).wq
    (place,) = twin._where.values()
    assert place == IN_RUNNING and place is not IN_RUNNING
