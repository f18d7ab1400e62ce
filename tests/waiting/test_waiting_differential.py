"""Differential tests: `WaitingQueues` against distillations of vLLM's own waiting loops.

For each layout, 1,500 random scenarios (3,000 in all, about 42,000 events)
drive two systems with the same events: `WaitingQueues(policy, layout=...)`
with the test's callbacks, and the
distillation of that vLLM version's scheduler (tests/helpers/vllm_distill_030.py for
vLLM 0.30.0, tests/helpers/vllm_distill_033.py for vLLM 0.33.0), which has the
per-request checks inline as vLLM does. A scenario mixes arrivals (ready and
grammar-blocked, some with a LoRA, some streaming sessions), grammars that
compile, async KV loads that complete, steps with random token budgets (zero
included), connector skips, a small block pool, a `max_num_running_reqs`,
preemptions, stops (finished, continued or paused streaming sessions),
streaming updates and aborts. After every event the two must agree on every
queue (in order), `running`, every status, the paused-session count, the
deferred set (0.33), the blocks and what each step scheduled.

The last tests give the comparison teeth: without `should_continue` (the
budget guard emulated by `check` answering STOP) the 0.30.0 comparison finds
differences, and so does running one layout's scenarios against the other
version's loop.
"""

from __future__ import annotations

import copy
import random
import zlib
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from vllm_distill_030 import Scheduler030, World
from vllm_distill_033 import Scheduler033
from vllm_distill_queues import DistilledRequest

import queueref.config
from queueref import Request, RequestStatus, StepDecision, WaitingQueues

GRAMMAR = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
REMOTE_KVS = RequestStatus.WAITING_FOR_REMOTE_KVS
STREAMING = RequestStatus.WAITING_FOR_STREAMING_REQ
RUN, SKIP, STOP = StepDecision.RUN, StepDecision.SKIP, StepDecision.STOP


@dataclass
class Info:
    """What vLLM's Request carries beyond the queue fields, kept by the test for queueref."""

    num_tokens: int
    lora_int_id: int
    resumable: bool
    num_computed_tokens: int = 0
    num_preemptions: int = 0
    grammar_ready: bool = False
    streaming_queue: deque[int | None] = field(default_factory=deque)


class QueuerefSide:
    """`WaitingQueues` driven through its callbacks, with the same world as the distillation."""

    def __init__(
        self, policy: str, layout: str, world: World, coverage: Counter[str], guard: bool = True
    ) -> None:
        self.wq = WaitingQueues(policy, layout=layout)
        self.coverage = coverage  # how often each path was taken, over all scenarios
        self.world = world
        self.guard = guard  # False: the old emulation, check answers STOP on a spent budget
        self.info: dict[str, Info] = {}
        self.requests: dict[str, Request] = {}

    def add_request(self, r: DistilledRequest) -> None:
        request = Request(r.request_id, r.priority, r.arrival_time, status=r.status)
        self.info[r.request_id] = Info(r.num_tokens, r.lora_int_id, r.resumable)
        self.requests[r.request_id] = request
        self.wq.enqueue(request)

    def _try_promote(self, request: Any) -> bool:
        info = self.info[request.request_id]
        if request.status is REMOTE_KVS:
            if request.request_id not in self.world.finished_recving:
                return False
            self.coverage["promoted a completed KV load"] += 1
            if info.num_computed_tokens == info.num_tokens:
                info.num_computed_tokens = info.num_tokens - 1
            self.world.finished_recving.discard(request.request_id)
            request.status = (
                RequestStatus.PREEMPTED if info.num_preemptions else RequestStatus.WAITING
            )
            return True
        if request.status is GRAMMAR:
            if info.grammar_ready:
                self.coverage["promoted a compiled grammar"] += 1
                request.status = RequestStatus.WAITING
            return info.grammar_ready
        self.coverage["offered a paused session to try_promote"] += 1
        return False  # a paused streaming session: its update comes through continue_stream

    def schedule(self, token_budget: int) -> dict[str, int]:
        world = self.world
        budget = [token_budget]
        scheduled: dict[str, int] = {}
        loras = {self.info[r.request_id].lora_int_id for r in self.wq.running} - {0}

        def check(request: Any) -> StepDecision:
            if not self.guard and budget[0] <= 0:
                return STOP
            info = self.info[request.request_id]
            if info.lora_int_id and len(loras) == world.max_loras and info.lora_int_id not in loras:
                self.coverage["LoRA cap skip"] += 1
                return SKIP
            load_async = False
            if info.num_computed_tokens == 0:
                if request.request_id in world.connector_unknown:
                    self.coverage["connector skip"] += 1
                    return SKIP
                load_async = request.request_id in world.async_load
                computed = info.num_tokens - 1 if load_async else 0
            else:
                computed = info.num_computed_tokens
            new = 0
            if not load_async:
                new = info.num_tokens - computed
                if not world.chunked_prefill and new > budget[0]:
                    self.coverage["STOP: no chunked prefill"] += 1
                    return STOP
                new = min(new, budget[0])
            if not world.allocate(request.request_id):
                self.coverage["STOP: no free block"] += 1
                return STOP
            info.num_computed_tokens = computed
            if load_async:
                self.coverage["async KV load"] += 1
                request.status = REMOTE_KVS
                return SKIP
            if info.lora_int_id:
                loras.add(info.lora_int_id)
            scheduled[request.request_id] = new
            budget[0] -= new
            return RUN

        def should_continue() -> bool:
            if budget[0] <= 0:
                self.coverage["budget guard ended a step with requests waiting"] += 1
            return budget[0] > 0

        self.wq.schedule_step(
            check,
            self._try_promote,
            max_running=world.max_num_running_reqs,
            should_continue=should_continue if self.guard else None,
        )
        wq = self.wq
        if wq.waiting or (
            wq.skipped_waiting if wq.layout == "vllm-0.30" else wq.kv_holding_waiting
        ):
            if len(wq.running) + wq.num_paused_sessions >= world.max_num_running_reqs:
                self.coverage["max_running ended a step"] += 1
        return scheduled

    def preempt(self, request_id: str) -> None:
        info = self.info[request_id]
        self.wq.preempt(self.requests[request_id])
        self.world.free(request_id)
        info.num_computed_tokens = 0
        info.num_preemptions += 1

    def _finished(self, request_id: str) -> None:
        self.world.free(request_id)
        del self.info[request_id]

    def stop(self, request_id: str) -> None:
        request, info = self.requests[request_id], self.info[request_id]
        if info.resumable and not info.streaming_queue:
            self.coverage["await_stream"] += 1
            self.wq.await_stream(request)
            return
        update = info.streaming_queue.popleft() if info.resumable else None
        if update is None:
            self.wq.finish(request)
            self._finished(request_id)
            return
        info.num_tokens += update
        self.coverage["continue_stream of a running request"] += 1
        self.wq.continue_stream(request)

    def add_streaming_update(self, request_id: str, tokens: int | None) -> None:
        request, info = self.requests[request_id], self.info[request_id]
        if request.status is not STREAMING:
            info.streaming_queue.append(tokens)
        elif tokens is not None:
            info.num_tokens += tokens
            self.coverage["continue_stream of a paused session"] += 1
            self.wq.continue_stream(request)
        else:
            self.finish_requests([request_id])

    def finish_requests(self, request_ids: list[str]) -> list[str]:
        aborted = self.wq.abort(request_ids)
        for request in aborted:
            self._finished(request.request_id)
        return sorted(r.request_id for r in aborted)


# ---------------------------------------------------------------------------
# observation


def _ids(requests: Any) -> list[str]:
    return [r.request_id for r in requests]


def observe_vllm(s: Scheduler030 | Scheduler033) -> dict[str, Any]:
    queues = (
        {"skipped_waiting": _ids(s.skipped_waiting)}
        if isinstance(s, Scheduler030)
        else {
            "kv_holding_waiting": _ids(s.kv_holding_waiting),
            "deferred_waiting": sorted(r.request_id for r in s.deferred_waiting),
        }
    )
    return {
        "waiting": _ids(s.waiting),
        **queues,
        "running": _ids(s.running),
        "status": {rid: r.status for rid, r in s.requests.items()},
        "computed": {rid: r.num_computed_tokens for rid, r in s.requests.items()},
        "paused": s.num_waiting_for_streaming_input,
        "free_blocks": s.world.free_blocks,
        "recving": sorted(s.world.finished_recving),
    }


def observe_queueref(q: QueuerefSide) -> dict[str, Any]:
    wq = q.wq
    queues = (
        {"skipped_waiting": _ids(wq.skipped_waiting)}
        if wq.layout == "vllm-0.30"
        else {
            "kv_holding_waiting": _ids(wq.kv_holding_waiting),
            "deferred_waiting": sorted(wq.deferred_waiting),
        }
    )
    aside = wq.skipped_waiting if wq.layout == "vllm-0.30" else wq.kv_holding_waiting
    unfinished = [*wq.waiting, *aside, *wq.running]
    return {
        "waiting": _ids(wq.waiting),
        **queues,
        "running": _ids(wq.running),
        "status": {r.request_id: r.status for r in unfinished},
        "computed": {r.request_id: q.info[r.request_id].num_computed_tokens for r in unfinished},
        "paused": wq.num_paused_sessions,
        "free_blocks": q.world.free_blocks,
        "recving": sorted(q.world.finished_recving),
    }


# ---------------------------------------------------------------------------
# scenarios


@dataclass
class Scenario:
    seed: int
    policy: str
    world: World
    events: list[tuple[Any, ...]]


def scenario(seed: int) -> Scenario:
    """A random scenario, chosen by `seed` alone (so a failure names its seed)."""
    rng = random.Random(seed)
    world = World(
        max_num_running_reqs=rng.choice([1, 2, 3, 4, 100]),
        max_loras=rng.choice([1, 2]),
        chunked_prefill=rng.random() < 0.6,
        free_blocks=rng.randint(1, 8),
    )
    events: list[tuple[Any, ...]] = []
    for _ in range(rng.randint(6, 22)):
        roll = rng.random()
        if roll < 0.3:
            events.append(
                (
                    "arrive",
                    rng.randint(0, 2),  # priority
                    float(rng.randint(0, 4)),  # arrival time (ties on purpose)
                    GRAMMAR if rng.random() < 0.25 else RequestStatus.WAITING,
                    rng.randint(2, 6),  # prompt tokens
                    rng.choice([0, 0, 1, 2, 3]),  # LoRA id
                    rng.random() < 0.3,  # a streaming session
                )
            )
        elif roll < 0.6:
            events.append(
                (
                    "step",
                    rng.choice([0, 1, 2, 3, 4, 6, 10]),  # token budget
                    rng.random(),  # picks the connector's unknown matches
                    rng.random(),  # picks the async loads
                )
            )
        else:
            kind = rng.choice(["grammar", "kv_done", "preempt", "stop", "stop", "update", "abort"])
            events.append((kind, rng.random(), rng.random()))
    return Scenario(seed, rng.choice(["fcfs", "priority"]), world, events)


def _chosen(request_id: str, u: float, modulus: int) -> bool:
    """A choice of some requests by `u`, the same in every process (unlike hash())."""
    return zlib.crc32(f"{request_id}/{u}".encode()) % modulus == 0


def _pick(candidates: list[str], u: float) -> str | None:
    return sorted(candidates)[int(u * len(candidates))] if candidates else None


def run(sc: Scenario, vllm: Any, ours: QueuerefSide) -> str | None:
    """Play the scenario on both; the first difference, described, or None."""
    count = 0
    for number, event in enumerate(sc.events):
        kind = event[0]
        known = sorted(vllm.requests)
        if kind == "arrive":
            _, priority, arrival, status, tokens, lora, resumable = event
            rid = f"r{count}"
            count += 1
            for side in (vllm, ours):
                side.add_request(
                    DistilledRequest(rid, priority, arrival, status, tokens, lora, resumable)
                )
        elif kind == "step":
            _, budget, u_unknown, u_async = event
            for world in (vllm.world, ours.world):
                world.connector_unknown = {r for r in known if _chosen(r, u_unknown, 5)}
                world.async_load = {r for r in known if _chosen(r, u_async, 4)}
            got, want = ours.schedule(budget), vllm.schedule(budget)
            if got != want:
                return f"event {number} {event}: scheduled {got}, vLLM {want}"
            # _update_after_schedule, then one output token for a finished prefill.
            for rid, new in want.items():
                vllm.requests[rid].num_computed_tokens += new
                ours.info[rid].num_computed_tokens += new
                if vllm.requests[rid].num_computed_tokens == vllm.requests[rid].num_tokens:
                    vllm.requests[rid].num_tokens += 1
                    ours.info[rid].num_tokens += 1
        else:
            _, u, v = event
            by_status = {r: vllm.requests[r].status for r in known}
            if kind == "grammar":
                picked = _pick([r for r, s in by_status.items() if s is GRAMMAR], u)
                if picked is not None:
                    vllm.requests[picked].grammar_ready = ours.info[picked].grammar_ready = True
            elif kind == "kv_done":
                picked = _pick([r for r, s in by_status.items() if s is REMOTE_KVS], u)
                if picked is not None:
                    vllm.world.finished_recving.add(picked)
                    ours.world.finished_recving.add(picked)
            elif kind in ("preempt", "stop"):
                picked = _pick(_ids(vllm.running), u)
                if picked is not None:
                    getattr(vllm, kind)(vllm.requests[picked])
                    getattr(ours, kind)(picked)
            elif kind == "update":
                sessions = [r for r in known if vllm.requests[r].resumable]
                paused = [r for r in sessions if by_status[r] is STREAMING]
                picked = _pick(paused or sessions, u)  # mostly for a paused session
                if picked is not None:
                    tokens = None if v < 0.2 else 1 + int(v * 3)
                    vllm.add_streaming_update(picked, tokens)
                    ours.add_streaming_update(picked, tokens)
            else:  # abort: some known ids, maybe an unknown one
                ids = [r for r in known if _chosen(r, u, 3)] + (["ghost"] if v < 0.3 else [])
                got_ids = ours.finish_requests(ids)
                want_ids = vllm.finish_requests(ids, RequestStatus.FINISHED_ABORTED)
                if got_ids != want_ids:
                    return f"event {number} {event}: aborted {got_ids}, vLLM {want_ids}"
        got_state, want_state = observe_queueref(ours), observe_vllm(vllm)
        if set(got_state) != set(want_state):  # another version's loop: compare what both have
            got_state, want_state = _layout_free(got_state), _layout_free(want_state)
        if got_state != want_state:
            diff = {
                k: (got_state.get(k), w) for k, w in want_state.items() if got_state.get(k) != w
            }
            return f"seed {sc.seed} {sc.policy}, event {number} {event}: (queueref, vLLM) {diff}"
    return None


def _layout_free(state: dict[str, Any]) -> dict[str, Any]:
    """The observation without the queue layout: which requests wait, not in which queue."""
    queues = ("waiting", "skipped_waiting", "kv_holding_waiting", "deferred_waiting")
    waiting = sorted(
        rid
        for key in ("waiting", "skipped_waiting", "kv_holding_waiting")
        for rid in state.get(key, [])
    )
    return {"all waiting": waiting} | {k: v for k, v in state.items() if k not in queues}


def differences(
    layout: str,
    seeds: range,
    *,
    guard: bool = True,
    loop: str | None = None,
    coverage: Counter[str] | None = None,
) -> list[str]:
    """Run the scenarios of `seeds` on `layout` against vLLM `loop` (default: the layout's)."""
    distilled = {"vllm-0.30": Scheduler030, "vllm-0.33": Scheduler033}[loop or layout]
    coverage = Counter() if coverage is None else coverage
    found = []
    for seed in seeds:
        sc = scenario(seed)
        vllm = distilled(sc.policy, copy.deepcopy(sc.world))
        ours = QueuerefSide(sc.policy, layout, copy.deepcopy(sc.world), coverage, guard=guard)
        problem = run(sc, vllm, ours)
        if problem is not None:
            found.append(problem)
    return found


@contextmanager
def deep_checks(on: bool) -> Iterator[None]:
    previous = queueref.config.deep_checks()
    queueref.config.set_deep_checks(on)
    try:
        yield
    finally:
        queueref.config.set_deep_checks(previous)


# ---------------------------------------------------------------------------
# the tests

LAYOUTS = ["vllm-0.30", "vllm-0.33"]
SCENARIOS = 1500  # per layout
PATHS = [
    "promoted a completed KV load",
    "promoted a compiled grammar",
    "offered a paused session to try_promote",
    "LoRA cap skip",
    "connector skip",
    "STOP: no chunked prefill",
    "STOP: no free block",
    "async KV load",
    "budget guard ended a step with requests waiting",
    "max_running ended a step",
    "await_stream",
    "continue_stream of a running request",
    "continue_stream of a paused session",
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_agrees_with_vllm_loop(layout: str) -> None:
    """WL-STEP-1, WL-STEP-10, WL-STR-1, WL-STR-2, WL-STR-4, WL-STR-5, WL-LAY-1, WL-L33-1,
    WL-L33-2, WL-L33-3, WL-L33-4: 1,500 random scenarios per layout, zero differences
    from the distilled vLLM loop of the layout's version (cheap contracts on), and every
    path of the loop taken at least 20 times."""
    coverage: Counter[str] = Counter()
    with deep_checks(False):
        found = differences(layout, range(SCENARIOS), coverage=coverage)
    assert found == [], f"{len(found)} of {SCENARIOS} scenarios differ; first: {found[:3]}"
    # The scenarios reach every path of the loop, many times.
    missing = {path for path in PATHS if coverage[path] < 20}
    assert not missing, f"paths taken fewer than 20 times: {missing} ({dict(coverage)})"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_agrees_with_vllm_loop_under_deep_contracts(layout: str) -> None:
    """WL-STEP-1, WL-L33-3: a slice of the scenarios with the whole-structure contracts on."""
    found = differences(layout, range(SCENARIOS, SCENARIOS + 60))
    assert found == [], found[:3]


def test_without_the_budget_guard_vllm_030_differs() -> None:
    """WL-STEP-10: the teeth: emulating `token_budget > 0` with `check` answering STOP
    (no should_continue) ends differently from vLLM 0.30.0 in many scenarios."""
    with deep_checks(False):
        found = differences("vllm-0.30", range(800), guard=False)
    assert len(found) >= 20, f"only {len(found)} of 800 scenarios differ"
    assert any("WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR" in f for f in found), found[:3]


@pytest.mark.parametrize(
    ("layout", "loop"), [("vllm-0.30", "vllm-0.33"), ("vllm-0.33", "vllm-0.30")]
)
def test_each_layout_differs_from_the_other_versions_loop(layout: str, loop: str) -> None:
    """WL-LAY-1: the scenarios tell the two versions apart: each layout disagrees with
    the other version's loop, so agreement with its own is not a coincidence."""
    with deep_checks(False):
        found = differences(layout, range(300), loop=loop)
    # Compared without the queue layout (which requests wait, run, with which status).
    assert len(found) >= 6, f"only {len(found)} of 300 scenarios differ"
