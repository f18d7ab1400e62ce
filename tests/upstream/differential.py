"""Differential scheduling: vLLM's real `Scheduler` beside queueref's `WaitingQueues`.

Each seeded scenario (`scenarios.py`) is given to both sides, event by event:

* vLLM: the installed release's `Scheduler` (`vllm_side.py`): `add_request`,
  `schedule()`, `update_from_output` with a `ModelRunnerOutput` (finished
  async KV loads in its `kv_connector_output`), `finish_requests`, and a
  grammar made ready on the request's own `structured_output_request`.
* queueref: `WaitingQueues(policy, layout=...)` of the layout that models the
  release, with the test's bookkeeping around it. What queueref's lifecycle
  leaves to its callbacks is answered from vLLM's own step (the waiting loop's
  per-request checks: a request runs when vLLM gave it tokens; it is skipped
  when the scenario's connector answered "not known yet" for it, and skipped
  as WAITING_FOR_REMOTE_KVS when the connector started its async load; else
  the step stops; the token budget left; a load is promoted once a model
  output reported it finished; how many requests the running loop preempted,
  and no waiting request is scheduled in a step that preempted), and the
  harness states the LoRA cap itself (vLLM 0.30.0-0.32.0 `schedule()` counts
  the adapters of the running requests scheduled this step, 0.33.0 those of
  every running request, plus the ones scheduled from waiting; a request
  naming another adapter is skipped once `max_loras` are counted). Which
  requests are examined, in what order, which running request is preempted
  (`preempt()` with none named takes vLLM's victim, WL-PRE-3), where skipped
  and preempted requests go, and every status are queueref's own.

After every event the two must agree on: the requests a step scheduled from
the waiting queues (in order), the victims it preempted, `running` (in order),
every waiting queue (in order), `deferred_waiting`, the finished requests,
the paused streaming sessions, every request's status and the count of
unfinished requests (`get_num_unfinished_requests()` beside `num_unfinished`,
WL-REL-2, under each pause state a `Pause` event sets on both sides,
WL-REL-1). The first
difference ends its scenario and is reported with the seed and the event; an
exception raised by vLLM's own code is reported as a crash, never counted as
agreement.

`test_differential.py` runs the sweeps; `planted.py` the planted divergences.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import scenario_connector
import vllm_side
from scenarios import (
    STOP_CHANCE,
    Abort,
    Arrive,
    GrammarReady,
    Pause,
    RequestSpec,
    Scenario,
    Step,
    StreamUpdate,
    scenario,
)

import queueref
from queueref import Request, RequestStatus, StepDecision, WaitingQueues
from queueref.waiting.places import PauseState

# The layout of WaitingQueues that models each release: its own.
LAYOUT_OF_RELEASE = {
    "0.30.0": "vllm-0.30",
    "0.31.0": "vllm-0.31",
    "0.32.0": "vllm-0.32",
    "0.33.0": "vllm-0.33",
}
MODELLED_RELEASES = frozenset(LAYOUT_OF_RELEASE)
# The fields every layout shares: what a planted run against another release's
# layout (planted.py, NEIGHBOUR_LAYOUT) is compared on, so that a difference it
# reports is one of behaviour, not of a queue's name.
SHARED_FIELDS = ("running", "statuses", "finished", "paused_sessions", "num_unfinished")
# A planted divergence of the harness itself, for the tests with teeth: every
# other request's arrival time moved by half a unit on queueref's side (ties
# broken differently). A wrong victim is planted in WaitingQueues (planted.py).
TAMPERS = ("arrival-tie-broken",)


def queue_family(layout: str) -> str:
    """The layout whose queues `layout` has: vllm-0.31 and vllm-0.32 have vllm-0.33's."""
    return layout if layout == "vllm-0.30" else "vllm-0.33"


# Planted divergences of the answers for the LoRA and connector classes: a LoRA-cap
# skip or a connector skip answered STOP (a model that ends the step at such a
# head); an async load skipped without WAITING_FOR_REMOTE_KVS; a load promoted
# before it finished.
CLASS_TAMPERS = (
    "lora-skip-stops",
    "connector-skip-stops",
    "async-load-not-parked",
    "kv-load-promoted-early",
)


BLOCKED = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
REMOTE_KVS = RequestStatus.WAITING_FOR_REMOTE_KVS
REMOTE = vllm_side.RequestStatus.WAITING_FOR_REMOTE_KVS  # vLLM's own enum
STREAMING = RequestStatus.WAITING_FOR_STREAMING_REQ

WaitingQueuesFactory = Callable[..., WaitingQueues]


class Divergence(Exception):
    """The two sides disagree: `field` names what differs."""

    def __init__(self, field: str, vllm: Any, queueref: Any) -> None:
        super().__init__(f"{field}: vLLM {vllm!r} != queueref {queueref!r}")
        self.field, self.vllm, self.queueref = field, vllm, queueref


class QueuerefSide:
    """`WaitingQueues` and what the harness keeps about each request beside it."""

    def __init__(
        self, policy: str, layout: str, factory: WaitingQueuesFactory, tamper: str | None = None
    ) -> None:
        self.wq = factory(policy, layout=layout)
        self.policy = policy
        self.tamper = tamper  # a planted divergence of the harness (see TAMPERS)
        self.requests: dict[str, Request] = {}
        self.specs: dict[str, RequestSpec] = {}
        self.grammar_ready: set[str] = set()
        self.computed: dict[str, int] = {}
        self.outputs: dict[str, int] = {}
        self.prompts: dict[str, int] = {}
        # A session's chunks that arrived while it was not paused (None: the end).
        self.stream_queues: dict[str, list[int | None]] = {}
        self.exercised: set[str] = set()
        # Async KV loads a model output reported finished, not yet promoted.
        self.recv_done: set[str] = set()
        self.preempted_once: set[str] = set()

    def arrive(self, spec: RequestSpec) -> None:
        status = BLOCKED if spec.structured else RequestStatus.WAITING
        if self.tamper == "arrival-tie-broken":
            spec = dataclasses.replace(
                spec, arrival_time=spec.arrival_time + 0.5 * (int(spec.request_id[1:]) % 2)
            )
        request = Request(spec.request_id, spec.priority, spec.arrival_time, status=status)
        self.requests[spec.request_id] = request
        self.specs[spec.request_id] = spec
        self.computed[spec.request_id] = 0
        self.outputs[spec.request_id] = 0
        self.prompts[spec.request_id] = spec.num_prompt_tokens
        self.stream_queues[spec.request_id] = []
        self.wq.enqueue(request)

    def try_promote(self, request: Any) -> bool:
        if request.status is STREAMING:
            self.exercised.add("streaming-paused-skipped")
            return False  # its next chunk comes through continue_stream
        if request.status is REMOTE_KVS:
            request_id = request.request_id
            if request_id not in self.recv_done and self.tamper != "kv-load-promoted-early":
                return False
            self.exercised.add("kv-load-promoted")
            self.recv_done.discard(request_id)
            preempted = request_id in self.preempted_once
            request.status = RequestStatus.PREEMPTED if preempted else RequestStatus.WAITING
            return True
        self.exercised.add("blocked")
        if request.request_id not in self.grammar_ready:
            return False
        self.exercised.add("grammar-promoted")
        request.status = RequestStatus.WAITING
        return True

    def preempt(self, count: int) -> list[str]:
        """`count` victims, one at a time, each the one WaitingQueues takes (WL-PRE-3)."""
        victims = []
        for _ in range(count):
            keys = [(r.priority, r.arrival_time) for r in self.wq.running]
            if self.policy == "priority" and keys.count(max(keys)) > 1:
                self.exercised.add("victim-tie")  # vLLM's max keeps the first of a tie
            victim = self.wq.preempt()
            self.computed[victim.request_id] = 0
            victims.append(victim.request_id)
        return victims

    def schedule_waiting(
        self,
        from_waiting: dict[str, int],
        token_budget: int,
        running_cap: int,
        cap_class: str,
        step: dict[str, Any] | None = None,
    ) -> list[str]:
        """The waiting loop; `from_waiting`: the tokens vLLM gave each request it ran;
        `step`: the connector's answers this step, the loads it started, the tokens
        the running loop scheduled and `max_loras` (None: no LoRA)."""
        budget = [token_budget]
        step = step or {}
        answers: dict[str, str] = step.get("connector_answers", {})
        loads: set[str] = step.get("load_started", set())
        loras = self._lora_base(step.get("scheduled", {}))

        def check(request: Any) -> StepDecision:
            request_id = request.request_id
            if self._over_lora_cap(request_id, loras, step.get("max_loras")):
                self.exercised.add("lora-cap-skip")
                return StepDecision.STOP if self.tamper == "lora-skip-stops" else StepDecision.SKIP
            tokens = from_waiting.get(request_id)
            if tokens is None:
                return self._not_run(request, answers.get(request_id), loads)
            budget[0] -= tokens
            if self.specs[request_id].lora_id:
                loras.add(self.specs[request_id].lora_id)
            return StepDecision.RUN

        def should_continue() -> bool:
            if budget[0] <= 0 and (self.wq.waiting or self.wq._aside):
                self.exercised.add("token-budget")
            return budget[0] > 0

        ran = self.wq.schedule_step(
            check, self.try_promote, max_running=running_cap, should_continue=should_continue
        )
        if len(self.wq.running) >= running_cap and (self.wq.waiting or self.wq._aside):
            self.exercised.add(cap_class)
        return [r.request_id for r in ran]

    def _lora_base(self, scheduled: dict[str, int]) -> set[int]:
        """The adapters vLLM counts before its waiting loop: of the running requests
        the running loop scheduled (0.30.0-0.32.0), of every running one (0.33.0).
        The two agree in these scenarios: with synchronous scheduling a running
        request goes unscheduled only when the budget is spent or it was
        preempted, and then no waiting loop runs."""
        every = vllm_side.LORA_COUNTS_EVERY_RUNNING
        return {
            self.specs[r.request_id].lora_id
            for r in self.wq.running
            if self.specs[r.request_id].lora_id and (every or r.request_id in scheduled)
        }

    def _over_lora_cap(self, request_id: str, loras: set[int], max_loras: int | None) -> bool:
        lora_id = self.specs[request_id].lora_id
        return bool(max_loras and lora_id and len(loras) == max_loras and lora_id not in loras)

    def _not_run(self, request: Any, answer: str | None, loads: set[str]) -> StepDecision:
        """A request vLLM examined and did not run: skipped for the connector, or
        parked for its async KV load; else the step ended at it."""
        if answer == "unknown":
            self.exercised.add("connector-skip")
            return StepDecision.STOP if self.tamper == "connector-skip-stops" else StepDecision.SKIP
        if request.request_id in loads:
            self.exercised.add("kv-load-async")
            # The connector loads all but the last token (scenario_connector.py).
            rid = request.request_id
            self.computed[rid] = self.prompts[rid] + self.outputs[rid] - 1
            if self.tamper != "async-load-not-parked":
                request.status = REMOTE_KVS
            return StepDecision.SKIP
        return StepDecision.STOP

    def after_output(self, scheduled: dict[str, int], stops: set[str]) -> None:
        """Advance each scheduled request; finish the ones that stop or reach max_tokens."""
        for request_id, tokens in scheduled.items():
            spec = self.specs[request_id]
            self.computed[request_id] += tokens
            if self.computed[request_id] < self.prompts[request_id] + self.outputs[request_id]:
                self.exercised.add("chunked-prefill")
                continue
            self.outputs[request_id] += 1
            if request_id in stops:
                status = RequestStatus.FINISHED_STOPPED
            elif self.outputs[request_id] >= spec.max_tokens:
                status = RequestStatus.FINISHED_LENGTH_CAPPED
            else:
                continue
            self.stopped(request_id, status)

    def stopped(self, request_id: str, status: RequestStatus) -> None:
        """A request stopped: it finishes, or (a session) pauses or takes its next chunk."""
        request, chunks = self.requests[request_id], self.stream_queues[request_id]
        if self.specs[request_id].resumable and not chunks:
            self.exercised.add("streaming-paused")
            self.wq.await_stream(request)
            return
        chunk = chunks.pop(0) if chunks else None
        if chunk is None:
            self.exercised.add("finish")
            self.wq.finish(request, status)
            return
        self.exercised.add("streaming-continued")
        self._take_chunk(request_id, chunk)
        self.wq.continue_stream(request)

    def _take_chunk(self, request_id: str, tokens: int) -> None:
        """vLLM's session update: the computed tokens become the prompt, plus the chunk."""
        self.prompts[request_id] = self.computed[request_id] + tokens
        self.outputs[request_id] = 0

    def stream_update(self, request_id: str, tokens: int | None) -> None:
        request = self.requests[request_id]
        if RequestStatus.is_finished(request.status):
            return  # vLLM would take it for a new request: the scenario has none such
        if request.status is not STREAMING:
            self.stream_queues[request_id].append(tokens)
        elif tokens is not None:
            self.exercised.add("streaming-continued")
            self._take_chunk(request_id, tokens)
            self.wq.continue_stream(request)
        else:
            self.exercised.add("abort")
            self.wq.abort([request_id])

    def snapshot(self, kv_holding_layout: bool) -> dict[str, Any]:
        wq = self.wq
        state: dict[str, Any] = {
            "running": [r.request_id for r in wq.running],
            "waiting": [r.request_id for r in wq.waiting],
        }
        if kv_holding_layout:
            state["kv_holding_waiting"] = [r.request_id for r in wq.kv_holding_waiting]
            state["deferred_waiting"] = sorted(wq.deferred_waiting)
        else:
            state["skipped_waiting"] = [r.request_id for r in wq.skipped_waiting]
        state["statuses"] = {rid: r.status.name for rid, r in self.requests.items()}
        state["finished"] = sorted(wq.finished)
        state["paused_sessions"] = wq.num_paused_sessions
        state["num_unfinished"] = wq.num_unfinished  # WL-REL-2
        return state


@dataclass
class Outcome:
    """One scenario's result."""

    seed: int
    exercised: set[str] = field(default_factory=set)
    difference: dict[str, Any] | None = None
    crash: dict[str, Any] | None = None


def compare(vllm_state: dict[str, Any], queueref_state: dict[str, Any]) -> None:
    for key, value in vllm_state.items():
        if queueref_state.get(key) != value:
            raise Divergence(key, value, queueref_state.get(key))


def run_scenario(
    item: Scenario,
    layout: str,
    factory: WaitingQueuesFactory = WaitingQueues,
    tamper: str | None = None,
) -> Outcome:
    """Drive both sides through `item`; stop at the first difference or crash."""
    outcome = Outcome(item.seed)
    shape = item.shape
    ours = QueuerefSide(shape.policy, layout, factory, tamper)
    outcome.exercised = ours.exercised
    try:
        scheduler = vllm_side.build_scheduler(shape)
    except Exception as error:  # vLLM's own code: a crash, reported
        outcome.crash = {"seed": item.seed, "event": "build", "error": _error_line(error)}
        return outcome
    theirs: dict[str, vllm_side.Request] = {}
    loading: set[str] = set()  # async KV loads started and not yet reported finished
    scenario_connector.reset()
    keys: Counter[tuple[int, float]] = Counter()
    for index, event in enumerate(item.events):
        where = {
            "seed": item.seed,
            "policy": shape.policy,
            "event_index": index,
            "event": repr(event),
        }
        try:
            expected = _vllm_event(scheduler, theirs, event, loading)
        except Exception as error:
            outcome.crash = {**where, "error": _error_line(error)}
            return outcome
        try:
            got = _queueref_event(ours, event, expected, shape)
            compare(expected["step"], got)
            expected_state = vllm_side.snapshot(scheduler, theirs)
            if queue_family(layout) != queue_family(LAYOUT_OF_RELEASE[vllm_side.RELEASE]):
                expected_state = {k: expected_state[k] for k in SHARED_FIELDS}
            compare(expected_state, ours.snapshot(layout != "vllm-0.30"))
        except Divergence as difference:
            outcome.difference = {
                **where,
                "field": difference.field,
                "vllm": difference.vllm,
                "queueref": difference.queueref,
            }
            return outcome
        except Exception as error:  # queueref refused what vLLM did: a difference
            outcome.difference = {
                **where,
                "field": "queueref-error",
                "vllm": None,
                "queueref": _error_line(error),
            }
            return outcome
        if vllm_side.KV_HOLDING_LAYOUT and layout != "vllm-0.30" and ours.wq.kv_holding_waiting:
            ours.exercised.add("kv-holding-waiting")
        if isinstance(event, Arrive):
            for spec in event.requests:
                keys[(spec.priority, spec.arrival_time)] += 1
            if any(n > 1 for n in keys.values()):
                ours.exercised.add("priority-ties" if shape.policy == "priority" else "ties")
        elif isinstance(event, Abort):
            ours.exercised.add("abort")
        elif isinstance(event, Pause):
            ours.exercised.add("pause")
        elif isinstance(event, Step) and expected["step"]["victims"]:
            ours.exercised.add("preempt")
        if isinstance(event, Step) and ours.wq.pause_state is PauseState.PAUSED_NEW:
            ours.exercised.add("paused-new-step")
            if expected["step"]["from_waiting"]:
                ours.exercised.add("paused-new-kv-drained")  # 0.32.0 and later
    return outcome


def _vllm_event(
    scheduler: vllm_side.Scheduler, requests: dict[str, Any], event: Any, loading: set[str]
) -> dict[str, Any]:
    """Apply `event` to vLLM; return what the queueref side needs and must match."""
    result: dict[str, Any] = {"step": {}}
    if isinstance(event, Arrive):
        for spec in event.requests:
            if spec.unknown_asks or spec.async_load:
                scenario_connector.PLANS[spec.request_id] = scenario_connector.Plan(
                    spec.unknown_asks, spec.async_load
                )
            request = vllm_side.make_request(
                spec.request_id,
                priority=spec.priority,
                arrival_time=spec.arrival_time,
                num_prompt_tokens=spec.num_prompt_tokens,
                max_tokens=spec.max_tokens,
                structured=spec.structured,
                resumable=spec.resumable,
                lora_id=spec.lora_id,
            )
            requests[spec.request_id] = request
            scheduler.add_request(request)
    elif isinstance(event, GrammarReady):
        vllm_side.make_grammar_ready(requests[event.request_id])
    elif isinstance(event, StreamUpdate):
        session = requests[event.request_id]
        if not session.is_finished():  # else vLLM would take it for a new request
            scheduler.add_request(
                vllm_side.make_request(
                    event.request_id,
                    priority=session.priority,
                    arrival_time=session.arrival_time,
                    num_prompt_tokens=event.num_prompt_tokens or 1,
                    max_tokens=session.max_tokens,
                    structured=False,
                    resumable=event.num_prompt_tokens is not None,
                    lora_id=session.lora_request.lora_int_id if session.lora_request else 0,
                )
            )
    elif isinstance(event, Abort):
        scheduler.finish_requests(list(event.request_ids), vllm_side.RequestStatus.FINISHED_ABORTED)
    elif isinstance(event, Pause):
        scheduler.set_pause_state(vllm_side.PauseState[event.state.upper()])
    else:
        running_before = {r.request_id for r in scheduler.running}
        scenario_connector.ASKED.clear()
        output = scheduler.schedule()
        answers = dict(scenario_connector.ASKED)
        load_started = {
            r for r, answer in answers.items() if answer == "async" and requests[r].status is REMOTE
        }
        loading |= load_started
        scheduled = dict(output.num_scheduled_tokens)
        from_waiting = {r: n for r, n in scheduled.items() if r not in running_before}
        victims = sorted(output.preempted_req_ids or ())
        draws = dict(event.stop_draws)
        stops = {r for r in scheduled if draws.get(r, 1.0) < STOP_CHANCE}
        recv = dict(event.recv_draws)
        finished_recving = {r for r in loading if recv.get(r, 1.0) < 0.5}
        loading -= finished_recving
        recv_done = {r for r in finished_recving if requests[r].status is REMOTE}
        scheduler.update_from_output(
            output, vllm_side.model_output(scheduler, scheduled, stops, finished_recving)
        )
        result.update(
            scheduled=scheduled,
            from_waiting=from_waiting,
            stops=stops,
            running_tokens=sum(n for r, n in scheduled.items() if r in running_before),
            connector_answers=answers,
            load_started=load_started,
            recv_done=recv_done,
        )
        result["step"] = {"victims": victims, "from_waiting": list(from_waiting)}
    return result


def _queueref_event(
    ours: QueuerefSide, event: Any, expected: dict[str, Any], shape: vllm_side.SchedulerShape
) -> dict[str, Any]:
    if isinstance(event, Arrive):
        for spec in event.requests:
            ours.arrive(spec)
        return {}
    if isinstance(event, GrammarReady):
        ours.grammar_ready.add(event.request_id)
        return {}
    if isinstance(event, StreamUpdate):
        ours.stream_update(event.request_id, event.num_prompt_tokens)
        return {}
    if isinstance(event, Abort):
        ours.wq.abort([r for r in event.request_ids])
        return {}
    if isinstance(event, Pause):
        ours.wq.set_pause_state(event.state)  # WL-REL-1
        return {}
    victims = ours.preempt(len(expected["step"]["victims"]))
    ours.preempted_once.update(victims)
    ran: list[str] = []
    if not victims:  # vLLM runs no waiting loop in a step that preempted
        # Under PAUSED_ALL vLLM's step starts with a token budget of 0.
        paused_all = ours.wq.pause_state is PauseState.PAUSED_ALL
        ran = ours.schedule_waiting(
            expected["from_waiting"],
            0 if paused_all else shape.max_num_batched_tokens - expected["running_tokens"],
            shape.running_cap,
            "max-num-seqs" if shape.running_cap == shape.max_num_seqs else "max-num-active-seqs",
            {**expected, "max_loras": shape.max_loras},
        )
    ours.after_output(expected["scheduled"], expected["stops"])
    ours.recv_done |= expected["recv_done"]
    return {"victims": sorted(victims), "from_waiting": ran}


def _error_line(error: BaseException) -> str:
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" at {frame.filename.rsplit('/', 3)[-1]}:{frame.lineno}" if frame else ""
    return f"{type(error).__name__}: {error}{at}".splitlines()[0][:300]


def sweep(
    seeds: range,
    layout: str,
    factory: WaitingQueuesFactory = WaitingQueues,
    tamper: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Run every seed; the release's entry of the report."""
    classes: Counter[str] = Counter()
    difference_classes: Counter[str] = Counter()
    differences, crashes = [], []
    started = time.monotonic()
    for done, seed in enumerate(seeds, 1):
        outcome = run_scenario(scenario(seed), layout, factory, tamper)
        if outcome.crash is not None:
            crashes.append(outcome.crash)
        elif outcome.difference is not None:
            differences.append(outcome.difference)
            difference_classes[outcome.difference["field"]] += 1
        else:
            classes.update(outcome.exercised)
        if progress and done % 100 == 0:
            print(
                f"  vllm=={vllm_side.RELEASE} {layout}: {done}/{len(seeds)} scenarios, "
                f"{len(differences)} differences, {len(crashes)} crashes, "
                f"{time.monotonic() - started:.0f} s",
                flush=True,
            )
    return {
        "version": vllm_side.RELEASE,
        "layout": layout,
        "layout_models_release": vllm_side.RELEASE in MODELLED_RELEASES,
        "scenarios": len(seeds),
        "agreeing": len(seeds) - len(differences) - len(crashes),
        "differences": len(differences),
        "crashes": len(crashes),
        "classes": dict(sorted(classes.items())),
        "difference_classes": dict(sorted(difference_classes.items())),
        "first_differences": differences[:5],
        "first_crashes": crashes[:5],
        "seconds": round(time.monotonic() - started, 1),
        "queueref": queueref.__file__,
    }
