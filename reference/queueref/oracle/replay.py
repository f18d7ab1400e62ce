"""Replay the test vectors of `queueref.oracle.vectors` against queueref's reference.

`replay_case(case)` runs one case and returns the mismatches (an empty list
when the reference agrees); `replay_request_queue(case, factory)` runs a
request-queue case on any queue factory, so a Python implementation can be
checked against the vectors too (ORC-VEC-3).

Models no vLLM file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from queueref.oracle.vectors import SLOT, Case, Expect


def _outcome(call: Callable[[], Any]) -> Expect:
    try:
        return {"result": call()}
    except Exception as exc:  # compared by name with the expectation
        return {"error": type(exc).__name__}


def _queue_call(queue: Any, record: dict[str, Any], objects: dict[str, Any], queues: Any) -> Any:
    """One operation of a request_queue case, on the queue under replay."""
    op = record["op"]
    if op in ("add_request", "prepend_request", "remove_request"):
        argument = record.get("not_a_request")
        if argument is None:
            argument = objects[record["request"]]
        return getattr(queue, op)(argument)
    if op == "remove_requests":
        return queue.remove_requests([objects[n] for n in record["requests"]])
    if op == "prepend_requests":
        return queue.prepend_requests(queues[record["other"]])
    if op in ("pop_request", "peek_request"):
        return getattr(queue, op)()
    observe: dict[str, Callable[[Any], Any]] = {"len": len, "bool": bool, "iter": list}
    return observe[op](queue)


def replay_request_queue(case: Case, factory: Callable[[], Any] | None = None) -> list[str]:
    """Replay a request_queue case on `factory()` queues (default: the reference); mismatches."""
    from queueref.queues.factory import create_request_queue
    from queueref.request import Request

    make = factory if factory is not None else (lambda: create_request_queue(case["policy"]))
    objects = {
        name: Request(
            spec["request_id"], priority=spec["priority"], arrival_time=spec["arrival_time"]
        )
        for name, spec in case["requests"].items()
    }
    names = {id(obj): name for name, obj in objects.items()}
    queues = {name: make() for name in case["queues"]}
    problems: list[str] = []

    def named(value: Any) -> Any:
        if isinstance(value, list):
            return [named(item) for item in value]
        if value is None or isinstance(value, (bool, int)):
            return value
        return names.get(id(value), repr(value))

    for number, record in enumerate(case["operations"], start=1):
        queue = queues[record["queue"]]
        op = record["op"]
        outcome = _outcome(partial(_queue_call, queue, record, objects, queues))
        if "result" in outcome:
            outcome = {"result": named(outcome["result"])}
        if outcome != record["expect"]:
            problems.append(
                f"operation {number} ({op}): expected {record['expect']}, got {outcome}"
            )
        after = named(list(queue))
        if after != record["after"]:
            problems.append(
                f"operation {number} ({op}): contents {after}, expected {record['after']}"
            )
    return problems


class _RecordingBuffer(list[int]):
    """A counter buffer that records the index of every read (ADM-CTL-7)."""

    reads: list[int]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            self.reads.append(index)
        return super().__getitem__(index)


def _replay_check(case: Case) -> list[str]:
    from queueref.admission.controller import AdmissionController
    from queueref.admission.shared_stats import SharedAdmissionStats
    from queueref.admission.tracker import RequestTracker

    setup, n = case["setup"], case["n"]
    shared = setup["num_servers"] is not None
    buffer = _RecordingBuffer([0] * (SLOT * (setup["num_servers"] or 1)))
    buffer.reads = []
    stats = SharedAdmissionStats(buffer, setup["num_servers"], setup["server"]) if shared else None
    tracker = RequestTracker(stats)
    own = setup["slots"][setup["server"]] if shared else setup["unfinished"]
    for index in range(own):
        tokens = setup["queued_tokens"] if index == 0 else 0
        tracker.add(f"u{index}", num_prompt_tokens=tokens)
    if own == 0 and setup["queued_tokens"]:
        return ["a vector with queued tokens needs an unfinished request to carry them"]
    if shared:
        for index, value in enumerate(setup["slots"]):
            if index != setup["server"]:
                list.__setitem__(buffer, index * SLOT, value)
            list.__setitem__(buffer, index * SLOT + 1, setup["padding"][index])
    controller = AdmissionController(
        setup["max_num_queued_reqs"],
        setup["max_num_queued_tokens"],
        tracker=tracker,
        shared_stats=stats,
        mode=setup["mode"],
        token_scope="local",  # the vectors state vLLM 0.30.0: its token check is per process
    )
    buffer.reads = []
    try:
        outcome: Expect = {"result": controller.check_admission(n)}
    except Exception as exc:
        outcome = {"error": type(exc).__name__}
        for name in ("http_status", "view", "n", "limit"):
            if name in case["expect"]:
                outcome[name] = getattr(exc, name, None)
    problems = []
    if outcome != case["expect"]:
        problems.append(f"expected {case['expect']}, got {outcome}")
    if shared:
        own_reads = [index for index in buffer.reads if index % SLOT == 0]
        if own_reads != case["reads"]:
            problems.append(f"reads {own_reads}, expected {case['reads']}")
        slots = [list.__getitem__(buffer, i * SLOT) for i in range(setup["num_servers"])]
        if slots != case["slots_after"]:
            problems.append(f"slots after {slots}, expected {case['slots_after']}")
    else:
        count = tracker.get_num_unfinished_requests() + tracker.num_reserved
        if count != case["count_after"]:
            problems.append(f"count after {count}, expected {case['count_after']}")
    return problems


def _replay_schedule(case: Case) -> list[str]:
    from queueref.admission.controller import AdmissionController
    from queueref.admission.shared_stats import SharedAdmissionStats
    from queueref.admission.tracker import RequestTracker

    setup = case["setup"]
    servers = setup["num_servers"]
    counters = [0] * (SLOT * servers)
    controllers = []
    for index in range(servers):
        stats = SharedAdmissionStats(counters, servers, index)
        controllers.append(
            AdmissionController(
                setup["max_num_queued_reqs"],
                tracker=RequestTracker(stats),
                shared_stats=stats,
                mode=setup["mode"],
            )
        )
    checks: dict[int, Any] = {}
    problems = []
    for number, step in enumerate(case["steps"], start=1):
        controller = controllers[step["server"]]
        op = step["op"]
        outcome: Expect | None = None
        if op == "admit":
            outcome = _outcome(partial(controller.check_admission, step["n"]))
            if "result" in outcome:
                controller.tracker.add(step["request_id"], step["n"])
        elif op == "start_check":
            checks[step["server"]] = controller.start_check(step["n"])
        elif op == "read_all":
            check = checks[step["server"]]
            while not check.done:
                check.read_next()
            outcome = {"result": check.view}
        elif op == "decide":
            outcome = _outcome(checks[step["server"]].decide)
        elif op == "register":
            controller.tracker.add(step["request_id"], step["n"])
        if outcome is not None and outcome != step["expect"]:
            problems.append(f"step {number} ({op}): expected {step['expect']}, got {outcome}")
    final = sum(counters[i * SLOT] for i in range(servers))
    if final != case["expect"]["global_count"]:
        problems.append(f"global count {final}, expected {case['expect']['global_count']}")
    if final > case["expect"]["bound"]:
        problems.append(f"global count {final} exceeds the bound {case['expect']['bound']}")
    return problems


def _tracker_call(tracker: Any, op: str, arguments: dict[str, Any]) -> Any:
    """One step of a tracker case."""
    if op == "abort":
        return tracker.abort(arguments["request_ids"])
    if op == "add":
        return tracker.add(**arguments)
    return getattr(tracker, op)(*arguments.values())


def _replay_tracker(case: Case) -> list[str]:
    from queueref.admission.shared_stats import SharedAdmissionStats
    from queueref.admission.tracker import RequestTracker

    counters = [0] * (SLOT * case["num_servers"])
    stats = SharedAdmissionStats(counters, case["num_servers"], case["server"])
    tracker = RequestTracker(stats)
    problems = []
    for number, step in enumerate(case["steps"], start=1):
        op = step["op"]
        arguments = {k: v for k, v in step.items() if k not in ("op", "expect", "after")}
        outcome = _outcome(partial(_tracker_call, tracker, op, arguments))
        state = {
            "unfinished": tracker.get_num_unfinished_requests(),
            "queued_tokens": tracker.get_num_queued_tokens(),
            "reserved": tracker.num_reserved,
            "slot": counters[case["server"] * SLOT],
        }
        if outcome != step["expect"]:
            problems.append(f"step {number} ({op}): expected {step['expect']}, got {outcome}")
        if state != step["after"]:
            problems.append(f"step {number} ({op}): state {state}, expected {step['after']}")
    return problems


def _replay_misc(case: Case) -> list[str]:
    from queueref.admission.controller import AdmissionController
    from queueref.admission.shared_stats import SharedAdmissionStats, allocate_admission_counters
    from queueref.queues.factory import create_request_queue
    from queueref.request import Request
    from queueref.trace.events import AdmissionEvent, max_admitted_in_flight, max_in_flight

    kind = case["kind"]
    outcome: Any
    if kind == "create_request_queue":

        def create() -> dict[str, Any]:
            queue = create_request_queue(case["policy"])
            policy = "fcfs" if type(queue).__name__ == "FCFSRequestQueue" else "priority"
            return {"policy": policy, "len": len(queue)}

        outcome = _outcome(create)
    elif kind == "request_order":
        objects = {
            n: Request(s["request_id"], priority=s["priority"], arrival_time=s["arrival_time"])
            for n, s in case["requests"].items()
        }
        by_id = {id(obj): n for n, obj in objects.items()}
        outcome = {
            "sorted": [by_id[id(r)] for r in sorted(objects.values())],
            "less_than": [[x, y, objects[x] < objects[y]] for x, y, _ in case["less_than"]],
        }
        expected = {"sorted": case["sorted"], "less_than": case["less_than"]}
        return [] if outcome == expected else [f"expected {expected}, got {outcome}"]
    elif kind == "admission_layout":
        outcome = {name: getattr(SharedAdmissionStats, name) for name in case["constants"]}
        return [] if outcome == case["constants"] else [f"constants {outcome}"]
    elif kind == "num_counters":
        outcome = _outcome(lambda: SharedAdmissionStats.num_counters(case["client_count"]))
    elif kind == "allocate_admission_counters":

        def allocate() -> Any:
            buffer = allocate_admission_counters(case["num_servers"], case["max_num_queued_reqs"])
            if buffer is None:
                return None
            return {"length": len(buffer), "zeroed": all(v == 0 for v in buffer)}

        outcome = _outcome(allocate)
    elif kind == "shared_stats_init":
        outcome = _outcome(
            lambda: (
                SharedAdmissionStats(
                    [0] * case["buffer_length"], case["client_count"], case["client_index"]
                )
                and None
            )
        )
    elif kind == "shared_stats":
        counters = [0] * (SLOT * case["num_servers"])
        servers = [
            SharedAdmissionStats(counters, case["num_servers"], i)
            for i in range(case["num_servers"])
        ]
        problems = []
        for number, step in enumerate(case["steps"], start=1):
            stats = servers[step["server"]]
            if step["op"] == "set_num_requests":
                result = _outcome(partial(stats.set_num_requests, step["count"]))
            elif step["op"] == "get_num_requests":
                result = _outcome(stats.get_num_requests)
            else:
                result = _outcome(partial(stats.read_slot, step["slot"]))
            if result != step["expect"]:
                problems.append(f"step {number}: expected {step['expect']}, got {result}")
            if "counters_after" in step and counters != step["counters_after"]:
                problems.append(f"step {number}: counters {counters}")
        return problems
    elif kind == "admission_controller":
        outcome = _outcome(
            lambda: (
                AdmissionController(
                    case["max_num_queued_reqs"], case["max_num_queued_tokens"], mode=case["mode"]
                )
                and None
            )
        )
    elif kind == "event_json":
        outcome = _outcome(lambda: AdmissionEvent.from_json(case["line"]).to_json())
    elif kind == "event_sweep":
        events = [AdmissionEvent.from_json(json.dumps(e)) for e in case["events"]]
        outcome = {
            "max_in_flight": max_in_flight(events),
            "max_admitted_in_flight": max_admitted_in_flight(events),
        }
    else:
        return [f"unknown kind {kind!r}"]
    return [] if outcome == case["expect"] else [f"expected {case['expect']}, got {outcome}"]


def replay_case(case: Case) -> list[str]:
    """ORC-VEC-3: replay one case against the reference; the list of mismatches (empty: agree)."""
    kind = case["kind"]
    if kind == "request_queue":
        return replay_request_queue(case)
    if kind == "check_admission":
        return _replay_check(case)
    if kind == "admission_schedule":
        return _replay_schedule(case)
    if kind == "tracker":
        return _replay_tracker(case)
    return _replay_misc(case)
