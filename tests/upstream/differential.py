"""Differential scheduling: vLLM's real `Scheduler` beside queueref's `WaitingQueues`.

Each seeded scenario (`scenarios.py`) is given to both sides, event by event:

* vLLM: the installed release's `Scheduler` (`vllm_side.py`): `add_request`,
  `schedule()`, `update_from_output` with a `ModelRunnerOutput`,
  `finish_requests`, and a grammar made ready on the request's own
  `structured_output_request`.
* queueref: `WaitingQueues(policy, layout=...)` of the layout that models the
  release, with the test's bookkeeping around it. What queueref's lifecycle
  leaves to its callbacks is answered from vLLM's own step (the waiting loop's
  per-request checks: a request runs when vLLM gave it tokens, else the step
  stops; the token budget left), and the harness states vLLM's preemption rule
  itself (vLLM 0.30.0-0.33.0 `schedule()`: PRIORITY preempts
  `max(running, key=(priority, arrival_time))`, FCFS `running[-1]`; no waiting
  request is scheduled in a step that preempted). Which requests are examined,
  in what order, where skipped and preempted requests go, and every status are
  queueref's own.

After every event the two must agree on: the requests a step scheduled from
the waiting queues (in order), the victims it preempted, `running` (in order),
every waiting queue (in order), `deferred_waiting`, and every request's
status. The first difference ends its scenario and is reported with the seed
and the event; an exception raised by vLLM's own code is reported as a crash,
never counted as agreement.

Run as a script (tools/upstream.py does, once per release) it writes one
release's entry of `build/upstream-report.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import vllm_side
from scenarios import (
    STOP_CHANCE,
    Abort,
    Arrive,
    GrammarReady,
    RequestSpec,
    Scenario,
    Step,
    scenario,
)

import queueref
from queueref import Request, RequestStatus, StepDecision, WaitingQueues

# The layout of WaitingQueues that models each release. 0.31.0 and 0.32.0 have no
# layout of their own yet: they are compared with the nearest, vllm-0.33.
LAYOUT_OF_RELEASE = {
    "0.30.0": "vllm-0.30",
    "0.31.0": "vllm-0.33",
    "0.32.0": "vllm-0.33",
    "0.33.0": "vllm-0.33",
}
MODELLED_RELEASES = frozenset({"0.30.0", "0.33.0"})
# Planted divergences of the harness itself, for the tests with teeth: vLLM's
# victim rule replaced by "the first in running"; every other request's arrival
# time moved by half a unit on queueref's side (ties broken differently).
TAMPERS = ("victim-first-running", "arrival-tie-broken")
BLOCKED = RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR

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
        self.exercised: set[str] = set()

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
        self.wq.enqueue(request)

    def try_promote(self, request: Any) -> bool:
        self.exercised.add("blocked")
        if request.request_id not in self.grammar_ready:
            return False
        self.exercised.add("grammar-promoted")
        request.status = RequestStatus.WAITING
        return True

    def preempt(self, count: int) -> list[str]:
        """vLLM's victims, one at a time: PRIORITY the largest (priority, arrival_time)
        (the first in running on a tie), FCFS the last in running."""
        victims = []
        for _ in range(count):
            running = self.wq.running
            if self.tamper == "victim-first-running":
                victim = running[0]
            elif self.policy == "priority":
                victim = max(running, key=lambda r: (r.priority, r.arrival_time))
            else:
                victim = running[-1]
            self.wq.preempt(victim)
            self.computed[victim.request_id] = 0
            victims.append(victim.request_id)
        return victims

    def schedule_waiting(
        self, from_waiting: dict[str, int], token_budget: int, running_cap: int, cap_class: str
    ) -> list[str]:
        """The waiting loop; `from_waiting`: the tokens vLLM gave each request it ran."""
        budget = [token_budget]

        def check(request: Any) -> StepDecision:
            tokens = from_waiting.get(request.request_id)
            if tokens is None:
                return StepDecision.STOP
            budget[0] -= tokens
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

    def after_output(self, scheduled: dict[str, int], stops: set[str]) -> None:
        """Advance each scheduled request; finish the ones that stop or reach max_tokens."""
        for request_id, tokens in scheduled.items():
            spec = self.specs[request_id]
            self.computed[request_id] += tokens
            if self.computed[request_id] < spec.num_prompt_tokens + self.outputs[request_id]:
                self.exercised.add("chunked-prefill")
                continue
            self.outputs[request_id] += 1
            if request_id in stops:
                status = RequestStatus.FINISHED_STOPPED
            elif self.outputs[request_id] >= spec.max_tokens:
                status = RequestStatus.FINISHED_LENGTH_CAPPED
            else:
                continue
            self.exercised.add("finish")
            self.wq.finish(self.requests[request_id], status)

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
    keys: Counter[tuple[int, float]] = Counter()
    for index, event in enumerate(item.events):
        where = {
            "seed": item.seed,
            "policy": shape.policy,
            "event_index": index,
            "event": repr(event),
        }
        try:
            expected = _vllm_event(scheduler, theirs, event)
        except Exception as error:
            outcome.crash = {**where, "error": _error_line(error)}
            return outcome
        try:
            got = _queueref_event(ours, event, expected, shape)
            compare(expected["step"], got)
            compare(
                vllm_side.snapshot(scheduler, theirs), ours.snapshot(vllm_side.KV_HOLDING_LAYOUT)
            )
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
        if isinstance(event, Arrive):
            for spec in event.requests:
                keys[(spec.priority, spec.arrival_time)] += 1
            if any(n > 1 for n in keys.values()):
                ours.exercised.add("priority-ties" if shape.policy == "priority" else "ties")
        elif isinstance(event, Abort):
            ours.exercised.add("abort")
        elif isinstance(event, Step) and expected["step"]["victims"]:
            ours.exercised.add("preempt")
    return outcome


def _vllm_event(
    scheduler: vllm_side.Scheduler, requests: dict[str, Any], event: Any
) -> dict[str, Any]:
    """Apply `event` to vLLM; return what the queueref side needs and must match."""
    result: dict[str, Any] = {"step": {}}
    if isinstance(event, Arrive):
        for spec in event.requests:
            request = vllm_side.make_request(
                spec.request_id,
                priority=spec.priority,
                arrival_time=spec.arrival_time,
                num_prompt_tokens=spec.num_prompt_tokens,
                max_tokens=spec.max_tokens,
                structured=spec.structured,
            )
            requests[spec.request_id] = request
            scheduler.add_request(request)
    elif isinstance(event, GrammarReady):
        vllm_side.make_grammar_ready(requests[event.request_id])
    elif isinstance(event, Abort):
        scheduler.finish_requests(list(event.request_ids), vllm_side.RequestStatus.FINISHED_ABORTED)
    else:
        running_before = {r.request_id for r in scheduler.running}
        output = scheduler.schedule()
        scheduled = dict(output.num_scheduled_tokens)
        from_waiting = {r: n for r, n in scheduled.items() if r not in running_before}
        victims = sorted(output.preempted_req_ids or ())
        draws = dict(event.stop_draws)
        stops = {r for r in scheduled if draws.get(r, 1.0) < STOP_CHANCE}
        scheduler.update_from_output(output, vllm_side.model_output(scheduler, scheduled, stops))
        result.update(
            scheduled=scheduled,
            from_waiting=from_waiting,
            stops=stops,
            running_tokens=sum(n for r, n in scheduled.items() if r in running_before),
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
    if isinstance(event, Abort):
        ours.wq.abort([r for r in event.request_ids])
        return {}
    victims = ours.preempt(len(expected["step"]["victims"]))
    ran: list[str] = []
    if not victims:  # vLLM runs no waiting loop in a step that preempted
        ran = ours.schedule_waiting(
            expected["from_waiting"],
            shape.max_num_batched_tokens - expected["running_tokens"],
            shape.running_cap,
            "max-num-seqs" if shape.running_cap == shape.max_num_seqs else "max-num-active-seqs",
        )
    ours.after_output(expected["scheduled"], expected["stops"])
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


# Planted divergences: (broken WaitingQueues of tests/waiting_variants.py, the layouts
# it breaks, the fields the comparison must report). Run with contracts off
# (python -O), so that the comparison, not a contract, has to catch each.
VARIANTS: tuple[tuple[str, tuple[str, ...], frozenset[str]], ...] = (
    ("PreemptsToBack", ("vllm-0.30", "vllm-0.33"), frozenset({"waiting", "from_waiting"})),
    ("WaitingFirst", ("vllm-0.30",), frozenset({"skipped_waiting", "waiting", "from_waiting"})),
    (
        "SkippedFirstPriority",
        ("vllm-0.30",),
        frozenset({"skipped_waiting", "waiting", "from_waiting"}),
    ),
    ("PromotesWithoutAsking", ("vllm-0.30", "vllm-0.33"), frozenset({"statuses", "from_waiting"})),
    ("EnqueueIgnoresBlocked", ("vllm-0.30",), frozenset({"skipped_waiting", "waiting"})),
    ("ParksWithoutReversal", ("vllm-0.30",), frozenset({"skipped_waiting"})),
    ("ForgetsToDefer", ("vllm-0.33",), frozenset({"deferred_waiting"})),
    ("AbortMissesSkipped", ("vllm-0.30",), frozenset({"skipped_waiting"})),
    ("AbortMissesWaiting", ("vllm-0.30", "vllm-0.33"), frozenset({"waiting"})),
    ("FinishLosesRequest", ("vllm-0.30", "vllm-0.33"), frozenset({"finished"})),
)
# Planted divergences of the harness: the field each must be caught in.
TAMPER_FIELDS = {"victim-first-running": "victims", "arrival-tie-broken": "waiting"}


def planted(seeds: range, layout: str) -> dict[str, Any]:
    """The baseline and every planted divergence that applies to `layout`, on `seeds`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    waiting_variants = importlib.import_module("waiting_variants")

    # Made here: waiting_variants has no abort bug that the vllm-0.33 runs reach
    # (kv_holding_waiting stays empty without remote KV loads or streaming).
    extra = {
        "AbortMissesWaiting": waiting_variants.broken_variant(
            "AbortMissesWaiting",
            waiting_variants.Change(
                "abort",
                "aborts requests in waiting without taking them out of the queue",
                "self.waiting.remove_requests(by_place[IN_WAITING])",
                "pass",
            ),
        )
    }
    results = {"baseline": sweep(seeds, layout)}
    for name, layouts, _ in VARIANTS:
        if layout in layouts:
            factory = extra.get(name) or getattr(waiting_variants, name)
            results[name] = sweep(seeds, layout, factory)
    for tamper in TAMPERS:
        results[tamper] = sweep(seeds, layout, tamper=tamper)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--layout",
        choices=sorted(set(LAYOUT_OF_RELEASE.values())),
        help="the WaitingQueues layout (default: the release's)",
    )
    parser.add_argument(
        "--planted",
        action="store_true",
        help="the baseline and every planted divergence (run under python -O)",
    )
    args = parser.parse_args(argv)
    layout = args.layout or LAYOUT_OF_RELEASE[vllm_side.RELEASE]
    seeds = range(args.first_seed, args.first_seed + args.scenarios)
    if args.planted:
        with open(args.out, "w") as out:
            json.dump(planted(seeds, layout), out, indent=2)
        return 0
    print(
        f"upstream: vllm=={vllm_side.RELEASE} against WaitingQueues layout {layout!r}: "
        f"{args.scenarios} scenarios",
        flush=True,
    )
    entry = sweep(seeds, layout, progress=True)
    with open(args.out, "w") as out:
        json.dump(entry, out, indent=2)
    for item in entry["first_differences"] + entry["first_crashes"]:
        print(f"  {item}", flush=True)
    failed = entry["crashes"] or (entry["differences"] and entry["layout_models_release"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
