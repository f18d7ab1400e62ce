"""Test vectors: the queue and admission semantics as JSON cases, and their replay.

`write_vectors(out)` writes a tree of JSON cases (the format is in
`specs/oracle.md`, for implementers in other languages);
`queueref.oracle.replay.replay_case(case)` runs one case against queueref's
reference and returns the mismatches. Like
the consensus-spec vectors, a case is its inputs, the operations and the
expected outcome of each; its name encodes its inputs; random cases use fixed
seeds; sizes run through 0, 1, 2, 3 and limits through the limit minus one,
the limit and the limit plus one (ORC-VEC-1).

The expected values are computed here, independently of the reference: queue
cases by `queueref.models.queue_model.ListQueueModel` (a plain list), and
admission cases by the few lines of arithmetic of `specs/admission.md`
written out below (the `expect_*` functions never call `queueref.admission`
or `queueref.tracker`). The replay then runs the reference, so a vector that
replays clean is an agreement between two independent statements of the
semantics (ORC-VEC-3). Every case lists the requirement IDs it covers
(ORC-VEC-2).

Models no vLLM file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queueref.models.queue_model import ListQueueModel

#: The vector format; bumped when a field changes meaning (ORC-VEC-1).
FORMAT_VERSION = 1

Case = dict[str, Any]
Expect = dict[str, Any]

#: Python's exception names in `expect.error`; what each means elsewhere (ORC-VEC-1).
ERROR_MEANINGS = {
    "IndexError": "the queue is empty",
    "ValueError": "invalid argument (duplicate, taken id, absent request, bad limit, ...)",
    "TypeError": "the argument is not a request",
    "KeyError": "unknown internal request id",
    "QueueOverflowError": "rejected: the request limit would be exceeded (HTTP 503)",
    "MaxQueuedTokensError": "rejected: the queued prompt tokens reached the limit (HTTP 503)",
    "AdmissionCounterError": "a slot holds a value no server could have written",
}


def _case(kind: str, name: str, requirements: Iterable[str], **fields: Any) -> Case:
    return {
        "format": FORMAT_VERSION,
        "kind": kind,
        "name": name,
        "requirements": sorted(set(requirements)),
        **fields,
    }


# ===========================================================================
# Request queues


@dataclass
class _QueueScenario:
    """Builds one request-queue case, computing every expectation with the list model."""

    policy: str
    name: str
    description: str
    seed: int | None = None
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    objects: dict[str, Any] = field(default_factory=dict)
    models: dict[str, ListQueueModel] = field(default_factory=dict)
    operations: list[dict[str, Any]] = field(default_factory=list)
    requirements: set[str] = field(default_factory=lambda: {"RQ-POL-1"})

    def __post_init__(self) -> None:
        self.queue("q")

    @property
    def fcfs(self) -> bool:
        return self.policy == "fcfs"

    def queue(self, name: str) -> None:
        self.models[name] = ListQueueModel(self.policy)

    def request(
        self, name: str, priority: int = 0, arrival_time: float = 0.0, request_id: str = ""
    ) -> str:
        from queueref.request import Request

        request_id = request_id or name
        self.requests[name] = {
            "request_id": request_id,
            "priority": priority,
            "arrival_time": arrival_time,
        }
        self.objects[name] = Request(request_id, priority=priority, arrival_time=arrival_time)
        return name

    def _name_of(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._name_of(item) for item in value]
        for name, obj in self.objects.items():
            if obj is value:
                return name
        return value

    def op(self, op: str, queue: str = "q", **arguments: Any) -> Expect:
        """Run `op` on the model; record the operation, its outcome and the contents after."""
        model = self.models[queue]
        record: dict[str, Any] = {"queue": queue, "op": op, **arguments}
        call: Callable[[], Any]
        if op in ("add_request", "prepend_request", "remove_request"):
            if "not_a_request" in arguments:
                value: Any = arguments["not_a_request"]
            else:
                value = self.objects[arguments["request"]]
            call = lambda: getattr(model, op)(value)  # noqa: E731
        elif op == "remove_requests":
            named = [self.objects[n] for n in arguments["requests"]]
            call = lambda: model.remove_requests(named)  # noqa: E731
        elif op == "prepend_requests":
            other = self.models[arguments["other"]]
            call = lambda: model.prepend_requests(other)  # noqa: E731
        elif op in ("pop_request", "peek_request"):
            call = getattr(model, op)
        elif op == "len":
            call = lambda: len(model)  # noqa: E731
        elif op == "bool":
            call = lambda: bool(model)  # noqa: E731
        elif op == "iter":
            call = lambda: list(model)  # noqa: E731
        else:  # pragma: no cover - the scenarios below use only the ops above
            raise ValueError(f"unknown op {op!r}")
        duplicate = op in ("add_request", "prepend_request") and any(
            queued is self.objects.get(arguments.get("request", "")) for queued in model
        )
        try:
            expect: Expect = {"result": self._name_of(call())}
        except (IndexError, ValueError, TypeError) as exc:
            expect = {"error": type(exc).__name__}
        record["expect"] = expect
        record["after"] = self._name_of(list(model))
        self.operations.append(record)
        self.requirements.update(_queue_requirements(self.policy, record, self.requests, duplicate))
        return expect

    def case(self) -> Case:
        return _case(
            "request_queue",
            f"request_queue/{self.policy}/{self.name}",
            self.requirements,
            description=self.description,
            policy=self.policy,
            seed=self.seed,
            requests=self.requests,
            queues=list(self.models),
            operations=self.operations,
        )


def _queue_requirements(
    policy: str, record: dict[str, Any], requests: dict[str, dict[str, Any]], duplicate: bool
) -> set[str]:
    """ORC-VEC-2: the requirements one recorded operation exercises."""
    op, expect = record["op"], record["expect"]
    fcfs = policy == "fcfs"
    error = expect.get("error")
    found: set[str] = set()
    if op in ("add_request", "prepend_request"):
        if error == "TypeError":
            found.add("RQ-REQ-3")
        elif error == "ValueError":
            found.add("RQ-ALL-2" if duplicate else "RQ-ALL-3")
        elif op == "add_request":
            found.update({"RQ-ALL-1", "RQ-FCFS-1" if fcfs else "RQ-PRI-1"})
        else:
            found.update({"RQ-ALL-1", "RQ-FCFS-3" if fcfs else "RQ-PRI-3"})
        if not fcfs and error is None:
            found.add("RQ-REQ-1")
    elif op == "pop_request":
        found.update({"RQ-ALL-4"} if error else {"RQ-ALL-4", "RQ-FCFS-2" if fcfs else "RQ-PRI-2"})
    elif op == "peek_request":
        found.add("RQ-ALL-5")
    elif op == "remove_request":
        found.add("RQ-ALL-6")
        name = record.get("request")
        if name is not None and any(
            other != name and spec["request_id"] == requests[name]["request_id"]
            for other, spec in requests.items()
        ):
            found.add("RQ-REQ-2")  # a twin with the same fields is another request
    elif op == "remove_requests":
        found.add("RQ-ALL-7")
    elif op == "prepend_requests":
        found.update({"RQ-ALL-8"} if error else {"RQ-ALL-8", "RQ-FCFS-4" if fcfs else "RQ-PRI-4"})
    elif op == "iter":
        found.update({"RQ-ALL-9", "RQ-FCFS-5" if fcfs else "RQ-PRI-5"})
    elif op in ("len", "bool"):
        found.add("RQ-ALL-10")
    return found


# Keys chosen so that the priority order differs from the arrival order, with ties.
_KEYS = [(1, 2.0), (0, 1.0), (0, 1.0), (-1, 3.0), (0, 0.0)]


def _filled(policy: str, name: str, description: str, size: int) -> _QueueScenario:
    scenario = _QueueScenario(policy, name, description)
    for index in range(size):
        priority, arrival_time = _KEYS[index % len(_KEYS)]
        scenario.request(f"r{index + 1}", priority, arrival_time)
        scenario.op("add_request", request=f"r{index + 1}")
    return scenario


def _queue_scenarios(policy: str) -> Iterator[_QueueScenario]:
    """ORC-VEC-1: the hand-made request-queue cases of one policy, sizes 0 to 3."""
    for size in range(4):
        s = _filled(policy, f"add_pop/size_{size}", f"add {size}, look, pop until empty", size)
        s.op("iter")
        s.op("len")
        s.op("bool")
        for _ in range(size + 1):
            s.op("pop_request")
        s.op("bool")
        yield s

        s = _filled(policy, f"peek/size_{size}", f"peek at a queue of {size}", size)
        s.op("peek_request")
        s.op("peek_request")
        s.op("len")
        yield s

        s = _filled(policy, f"prepend_request/size_{size}", f"prepend to a queue of {size}", size)
        s.request("p", 0, 1.5)
        s.op("prepend_request", request="p")
        s.op("peek_request")
        s.op("iter")
        yield s

        for queued in (0, 2):
            s = _filled(
                policy,
                f"prepend_requests/queued_{queued}_other_{size}",
                f"prepend another queue of {size} to a queue of {queued}",
                queued,
            )
            s.queue("other")
            for index in range(size):
                priority, arrival_time = _KEYS[(index + 2) % len(_KEYS)]
                s.request(f"o{index + 1}", priority, arrival_time)
                s.op("add_request", "other", request=f"o{index + 1}")
            s.op("iter", "other")
            s.op("prepend_requests", other="other")
            s.op("iter")
            s.op("iter", "other")
            s.op("len")
            yield s

        s = _filled(policy, f"remove_request/absent_size_{size}", "remove an absent one", size)
        s.request("gone", 0, 0.5)
        s.op("remove_request", request="gone")
        yield s

        s = _filled(
            policy, f"remove_requests/size_{size}", "remove present, absent and repeats", size
        )
        s.request("absent", 0, 0.5)
        named = ["absent"] + [f"r{i + 1}" for i in range(size) if i % 2 == 0]
        s.op("remove_requests", requests=named + named[-1:])
        s.op("len")
        s.op("remove_requests", requests=[])
        yield s

    for size in (1, 2, 3):
        for position, index in (("front", 0), ("middle", size // 2), ("back", size - 1)):
            if size < 3 and position == "middle":
                continue
            s = _filled(
                policy, f"remove_request/{position}_of_{size}", f"remove the {position}", size
            )
            victim = [r.request_id for r in s.models["q"]][index]
            s.op("remove_request", request=victim)
            s.op("remove_request", request=victim)
            s.op("iter")
            yield s

    s = _filled(policy, "remove_request/twin", "a request with the same fields is another", 1)
    s.request("r1_twin", *_KEYS[0], request_id="r1")
    s.op("remove_request", request="r1_twin")
    s.op("remove_requests", requests=["r1_twin"])
    s.op("len")
    yield s

    s = _filled(policy, "errors/duplicate", "a request queued twice", 2)
    s.op("add_request", request="r1")
    s.op("prepend_request", request="r2")
    s.op("iter")
    yield s

    s = _filled(policy, "errors/taken_id", "another request with a queued id", 2)
    s.request("r2_twin", 5, 9.0, request_id="r2")
    s.op("add_request", request="r2_twin")
    s.op("prepend_request", request="r2_twin")
    s.op("pop_request")
    s.op("pop_request")
    s.op("add_request", request="r2_twin")
    yield s

    s = _filled(policy, "errors/not_a_request", "a string is not a request", 1)
    s.op("add_request", not_a_request="r9")
    s.op("prepend_request", not_a_request="r9")
    s.op("len")
    yield s

    s = _filled(policy, "errors/prepend_self", "a queue prepended to itself", 2)
    s.op("prepend_requests", other="q")
    s.op("iter")
    yield s

    s = _filled(policy, "errors/prepend_shared", "another queue holding a queued request", 2)
    s.queue("other")
    s.request("o1", 0, 0.0)
    s.op("add_request", "other", request="o1")
    s.op("add_request", "other", request="r1")
    s.op("prepend_requests", other="other")
    s.op("iter")
    s.op("iter", "other")
    yield s

    s = _QueueScenario(policy, "ties/priority_then_arrival_then_id", "keys that tie")
    for name, priority, arrival_time in (
        ("c", 0, 1.0),
        ("b", 0, 1.0),
        ("late", 0, 2.0),
        ("a", 0, 1.0),
        ("urgent", -1, 5.0),
    ):
        s.request(name, priority, arrival_time)
        s.op("add_request", request=name)
    s.op("iter")
    for _ in range(5):
        s.op("pop_request")
    yield s

    for seed in range(5):
        yield _random_scenario(policy, seed)


def _random_scenario(policy: str, seed: int, steps: int = 30) -> _QueueScenario:
    """ORC-VEC-1: a fixed-seed random sequence of every operation."""
    rng = random.Random(seed)
    s = _QueueScenario(policy, f"random/seed_{seed}", f"{steps} random operations, seed {seed}")
    s.seed = seed
    made: list[str] = []
    for step in range(steps):
        choice = rng.choice(
            ["add", "add", "prepend", "pop", "peek", "remove", "remove_many", "others", "look"]
        )
        if choice in ("add", "prepend"):
            name = s.request(f"r{step}", rng.randint(-1, 1), float(rng.randint(0, 2)))
            made.append(name)
            s.op("add_request" if choice == "add" else "prepend_request", request=name)
        elif choice == "pop":
            s.op("pop_request")
        elif choice == "peek":
            s.op("peek_request")
        elif choice == "remove" and made:
            s.op("remove_request", request=rng.choice(made))
        elif choice == "remove_many" and made:
            s.op("remove_requests", requests=rng.sample(made, min(len(made), rng.randint(0, 3))))
        elif choice == "others":
            other = f"other{step}"
            s.queue(other)
            for index in range(rng.randint(0, 3)):
                name = s.request(f"o{step}_{index}", rng.randint(-1, 1), float(rng.randint(0, 2)))
                made.append(name)
                s.op("add_request", other, request=name)
            s.op("prepend_requests", other=other)
        else:
            s.op(rng.choice(["iter", "len", "bool"]))
    return s


def request_queue_cases() -> list[Case]:
    """Every request-queue case (both policies) and the factory cases."""
    cases = [s.case() for policy in ("fcfs", "priority") for s in _queue_scenarios(policy)]
    for policy, expect in (
        ("fcfs", {"result": {"policy": "fcfs", "len": 0}}),
        ("priority", {"result": {"policy": "priority", "len": 0}}),
        ("lifo", {"error": "ValueError"}),
        ("FCFS", {"error": "ValueError"}),
        ("", {"error": "ValueError"}),
    ):
        cases.append(
            _case(
                "create_request_queue",
                f"create_request_queue/policy_{policy or 'empty'}",
                ["RQ-POL-1"] if "result" in expect else ["RQ-POL-2"],
                description="create a queue from the policy's string value",
                policy=policy,
                expect=expect,
            )
        )
    order = [
        ("a", 0, 2.0),
        ("b", 0, 1.0),
        ("c", -1, 9.0),
        ("d", 0, 1.0),
        ("e", 1, 0.0),
    ]
    cases.append(
        _case(
            "request_order",
            "request_order/priority_arrival_id",
            ["RQ-REQ-1"],
            description="a < b compares (priority, arrival_time, request_id)",
            requests={n: {"request_id": n, "priority": p, "arrival_time": t} for n, p, t in order},
            sorted=[n for n, _, _ in sorted(order, key=lambda r: (r[1], r[2], r[0]))],
            less_than=[
                [x, y, (px, tx, x) < (py, ty, y)]
                for (x, px, tx) in order
                for (y, py, ty) in order
                if x != y
            ],
        )
    )
    return cases


# ===========================================================================
# Admission: the expected values, from specs/admission.md, by hand

SLOT = 8  # COUNTERS_PER_SLOT: counter 0 of slot i is counter 8 * i (ADM-LAYOUT-3)


def expect_num_counters(client_count: Any) -> Expect:
    """ADM-LAYOUT-2: client_count * 8 for an int >= 1, else ValueError."""
    if isinstance(client_count, int) and not isinstance(client_count, bool) and client_count >= 1:
        return {"result": client_count * SLOT}
    return {"error": "ValueError"}


def expect_check(
    setup: dict[str, Any], n: int
) -> tuple[Expect, list[int] | None, list[int] | None, int | None]:
    """ADM-CTL-2..9: (outcome, reads, slots after, local count after) of one check."""
    limit = setup["max_num_queued_reqs"]
    token_limit = setup["max_num_queued_tokens"]
    reserve = setup["mode"] == "reserve"
    shared = setup["num_servers"] is not None
    slots = list(setup["slots"]) if shared else [setup["unfinished"]]
    own = setup["server"] if shared else 0
    before = list(slots)
    reads: list[int] = []

    def outcome(expect: Expect, kept: bool) -> tuple[Expect, list[int] | None, Any, Any]:
        after = slots if kept else before
        if shared:
            return expect, reads, after, None
        return expect, None, None, after[0]

    if n < 1:
        return outcome({"error": "ValueError"}, False)
    view = None
    if limit is not None:
        if reserve:
            slots[own] += n  # the reservation is written before the first read
        view = 0
        for index, value in enumerate(slots):
            if shared:
                reads.append(index * SLOT)
            if value < 0:
                return outcome({"error": "AdmissionCounterError"}, False)
            view += value
        fits = view <= limit if reserve else view + n <= limit
        if not fits:
            return outcome(
                {
                    "error": "QueueOverflowError",
                    "http_status": 503,
                    "view": view,
                    "n": n,
                    "limit": limit,
                },
                False,
            )
    if token_limit is not None and setup["queued_tokens"] >= token_limit:
        return outcome({"error": "MaxQueuedTokensError", "http_status": 503}, False)
    return outcome({"result": view}, True)


def _check_case(
    name: str, requirements: Iterable[str], description: str, setup: dict[str, Any], n: int
) -> Case:
    expect, reads, slots_after, count_after = expect_check(setup, n)
    found = set(requirements) | {"ADM-CTL-3"}
    if setup["num_servers"] is not None:
        found.add("ADM-CTL-7")  # the reads are recorded only on a shared buffer
    if "error" in expect:
        found.add("ADM-CTL-6")
    if expect.get("http_status") == 503:
        found.add("ADM-ERR-1")
    if setup["mode"] == "reserve":
        found.add("ADM-CTL-9")
    fields: dict[str, Any] = {"setup": setup, "n": n, "expect": expect}
    if reads is not None:
        fields["reads"] = reads
        fields["slots_after"] = slots_after
    else:
        fields["count_after"] = count_after
    return _case(
        "check_admission", f"admission/check/{name}", found, description=description, **fields
    )


def _setup(
    mode: str,
    limit: int | None,
    *,
    slots: Sequence[int] | None = None,
    server: int = 0,
    unfinished: int = 0,
    tokens: int = 0,
    token_limit: int | None = None,
    padding: Sequence[int] | None = None,
) -> dict[str, Any]:
    setup: dict[str, Any] = {
        "mode": mode,
        "max_num_queued_reqs": limit,
        "max_num_queued_tokens": token_limit,
        "num_servers": len(slots) if slots is not None else None,
        "queued_tokens": tokens,
    }
    if slots is not None:
        setup["server"] = server
        setup["slots"] = list(slots)
        setup["padding"] = list(padding) if padding is not None else [0] * len(slots)
    else:
        setup["unfinished"] = unfinished
    return setup


def check_cases() -> list[Case]:
    """ORC-VEC-1: check_admission at the limit minus one, the limit and plus one."""
    cases: list[Case] = []
    for mode in ("shared", "reserve"):
        for limit in (0, 1, 2, 3):
            for n in (1, 2):
                for current in sorted({max(0, limit - n - 1), max(0, limit - n), limit, limit + 1}):
                    name = f"{mode}/one_server/m{limit}_count{current}_n{n}"
                    cases.append(
                        _check_case(
                            name,
                            ["ADM-CTL-5"] if limit == 0 else [],
                            f"one server, own count {current}, cap {limit}, n {n}",
                            _setup(mode, limit, unfinished=current),
                            n,
                        )
                    )
                    other = max(0, current - 1)
                    own = current - other
                    name = f"{mode}/three_servers/m{limit}_slots{own}_{other}_0_server0_n{n}"
                    cases.append(
                        _check_case(
                            name,
                            ["ADM-STATS-3"] + (["ADM-CTL-5"] if limit == 0 else []),
                            f"three servers, slots ({own}, {other}, 0), cap {limit}, n {n}",
                            _setup(mode, limit, slots=[own, other, 0], unfinished=own),
                            n,
                        )
                    )
        cases.append(
            _check_case(
                f"{mode}/no_limit",
                ["ADM-CTL-3"],
                "no request limit: nothing is read, the view is null",
                _setup(mode, None, slots=[5, 7]),
                3,
            )
        )
        for tokens in (9, 10, 11):
            cases.append(
                _check_case(
                    f"{mode}/tokens/t10_queued{tokens}",
                    ["ADM-CTL-4", "ADM-RISK-2"],
                    f"token limit 10, own queued tokens {tokens}",
                    _setup(mode, 5, slots=[1, 0], unfinished=1, tokens=tokens, token_limit=10),
                    1,
                )
            )
        cases.append(
            _check_case(
                f"{mode}/tokens/both_limits_hit",
                ["ADM-CTL-4"],
                "both limits hit: the request limit is reported",
                _setup(mode, 1, slots=[1, 0], tokens=50, token_limit=10),
                1,
            )
        )
        cases.append(
            _check_case(
                f"{mode}/tokens/counter1_not_read",
                ["ADM-RISK-2", "ADM-LAYOUT-3"],
                "counter 1 of every slot holds junk; the check reads counter 0 only",
                _setup(mode, 4, slots=[1, 1], tokens=0, token_limit=10, padding=[99, 99]),
                1,
            )
        )
        cases.append(
            _check_case(
                f"{mode}/corrupt_slot",
                ["ADM-CTL-8"],
                "another server's slot holds -1: an error, never an admission",
                _setup(mode, 5, slots=[0, -1, 0]),
                1,
            )
        )
        cases.append(
            _check_case(
                f"{mode}/stale_slot_of_dead_server",
                ["ADM-RISK-1"],
                "a dead server's stale slot holds the whole cap: every request is rejected",
                _setup(mode, 2, slots=[0, 2]),
                1,
            )
        )
        for n in (0, -1):
            cases.append(
                _check_case(
                    f"{mode}/bad_n_{n}",
                    ["ADM-CTL-2"],
                    f"n = {n} is not a request weight",
                    _setup(mode, 2, slots=[0, 0]),
                    n,
                )
            )
    for limits in ((-1, None), (None, -1)):
        cases.append(
            _case(
                "admission_controller",
                f"admission/controller/limits_{limits[0]}_{limits[1]}",
                ["ADM-CTL-1"],
                description="a negative limit is a configuration error",
                max_num_queued_reqs=limits[0],
                max_num_queued_tokens=limits[1],
                mode="shared",
                expect={"error": "ValueError"},
            )
        )
    cases.append(
        _case(
            "admission_controller",
            "admission/controller/mode_atomic",
            ["ADM-CTL-1"],
            description="an unknown mode",
            max_num_queued_reqs=1,
            max_num_queued_tokens=None,
            mode="atomic",
            expect={"error": "ValueError"},
        )
    )
    return cases


def layout_cases() -> list[Case]:
    """ORC-VEC-1: the constants, num_counters, allocation and the shared stats."""
    cases: list[Case] = [
        _case(
            "admission_layout",
            "admission/layout/constants",
            ["ADM-LAYOUT-1"],
            description="one 64-byte slot of eight 8-byte counters per server",
            constants={"CACHE_LINE_BYTES": 64, "COUNTER_BYTES": 8, "COUNTERS_PER_SLOT": 8},
        )
    ]
    for count in (-1, 0, 1, 2, 3, 4):
        cases.append(
            _case(
                "num_counters",
                f"admission/layout/num_counters_{count}",
                ["ADM-LAYOUT-2"],
                description=f"num_counters({count})",
                client_count=count,
                expect=expect_num_counters(count),
            )
        )
    for servers in (0, 1, 2, 3):
        for limit in (None, 0, 1, -1):
            if servers < 1 or (limit is not None and limit < 0):
                expect: Expect = {"error": "ValueError"}
            elif servers == 1 or limit is None:
                expect = {"result": None}
            else:
                expect = {"result": {"length": servers * SLOT, "zeroed": True}}
            cases.append(
                _case(
                    "allocate_admission_counters",
                    f"admission/allocate/servers_{servers}_limit_{limit}",
                    ["ADM-ALLOC-1"],
                    description="a buffer only for several servers with a request limit",
                    num_servers=servers,
                    max_num_queued_reqs=limit,
                    expect=expect,
                )
            )
    for count, index, length in (
        (2, 0, 16),
        (2, 1, 16),
        (2, 2, 16),
        (2, -1, 16),
        (0, 0, 8),
        (3, 0, 16),
        (3, 2, 24),
    ):
        ok = count >= 1 and 0 <= index < count and length >= count * SLOT
        cases.append(
            _case(
                "shared_stats_init",
                f"admission/shared_stats/init_count{count}_index{index}_len{length}",
                ["ADM-STATS-1"],
                description="the constructor checks count, index and the buffer length",
                client_count=count,
                client_index=index,
                buffer_length=length,
                expect={"result": None} if ok else {"error": "ValueError"},
            )
        )
    cases.append(_shared_stats_case())
    return cases


def _shared_stats_case() -> Case:
    """ADM-STATS-2/3/4, ADM-LAYOUT-3: writes go to counter 0 of the own slot only."""
    counters = [0] * (3 * SLOT)
    steps: list[dict[str, Any]] = []

    def write(server: int, count: int) -> None:
        if count < 0:
            steps.append(
                {
                    "server": server,
                    "op": "set_num_requests",
                    "count": count,
                    "expect": {"error": "ValueError"},
                    "counters_after": list(counters),
                }
            )
            return
        counters[server * SLOT] = count
        steps.append(
            {
                "server": server,
                "op": "set_num_requests",
                "count": count,
                "expect": {"result": None},
                "counters_after": list(counters),
            }
        )

    def total(server: int) -> None:
        steps.append(
            {
                "server": server,
                "op": "get_num_requests",
                "expect": {"result": sum(counters[i * SLOT] for i in range(3))},
            }
        )

    for server, count in ((0, 2), (1, 3), (2, 0)):
        write(server, count)
    total(0)
    write(0, 1)
    total(2)
    write(1, -1)
    for slot in range(3):
        steps.append(
            {
                "server": 2,
                "op": "read_slot",
                "slot": slot,
                "expect": {"result": counters[slot * SLOT]},
            }
        )
    steps.append({"server": 0, "op": "read_slot", "slot": 3, "expect": {"error": "IndexError"}})
    return _case(
        "shared_stats",
        "admission/shared_stats/three_servers",
        ["ADM-STATS-2", "ADM-STATS-3", "ADM-STATS-4", "ADM-LAYOUT-3"],
        description="three servers write their own slot and read the sum",
        num_servers=3,
        steps=steps,
    )


# --- the tracker ------------------------------------------------------------------


class _TrackerModel:
    """ADM-TRK-1..7 as plain dictionaries (no queueref.tracker)."""

    def __init__(self) -> None:
        self.states: dict[str, list[Any]] = {}  # internal id -> [parent, tokens, prefilling]
        self.parents: dict[str, list[str]] = {}
        self.reserved = 0

    def children(self, request_id: str, n: int) -> list[str]:
        return [request_id] if n == 1 else [f"{i}_{request_id}" for i in range(n)]

    def add(self, request_id: str, n: int, tokens: int) -> Expect:
        if n < 1 or tokens < 0:
            return {"error": "ValueError"}
        ids = self.children(request_id, n)
        if any(rid in self.states or rid in self.parents for rid in {request_id, *ids}):
            return {"error": "ValueError"}
        parent = request_id if n > 1 else None
        for rid in ids:
            self.states[rid] = [parent, tokens, True]
        if parent is not None:
            self.parents[parent] = list(ids)
        self.reserved -= min(self.reserved, n)
        return {"result": ids}

    def _drop(self, rid: str) -> None:
        parent = self.states.pop(rid)[0]
        if parent is not None:
            self.parents[parent].remove(rid)
            if not self.parents[parent]:
                del self.parents[parent]

    def abort(self, ids: list[str]) -> Expect:
        ended: list[str] = []
        for request_id in ids:
            if request_id in self.parents:
                targets = [rid for rid in self.states if rid in self.parents[request_id]]
            elif request_id in self.states:
                targets = [request_id]
            else:
                targets = []
            for rid in targets:
                self._drop(rid)
                ended.append(rid)
        return {"result": ended}

    def finish(self, rid: str) -> Expect:
        if rid not in self.states:
            return {"error": "KeyError"}
        self._drop(rid)
        return {"result": None}

    def prefill_done(self, rid: str) -> Expect:
        if rid not in self.states:
            return {"error": "KeyError"}
        self.states[rid][2] = False
        return {"result": None}

    def reserve(self, n: int) -> Expect:
        if n < 1:
            return {"error": "ValueError"}
        self.reserved += n
        return {"result": None}

    def release_reservation(self, n: int) -> Expect:
        if n < 1 or n > self.reserved:
            return {"error": "ValueError"}
        self.reserved -= n
        return {"result": None}

    def state(self) -> dict[str, int]:
        unfinished = len(self.states)
        return {
            "unfinished": unfinished,
            "queued_tokens": sum(s[1] for s in self.states.values() if s[2]),
            "reserved": self.reserved,
            "slot": unfinished + self.reserved,
        }


def tracker_cases() -> list[Case]:
    """ORC-VEC-1: the tracker's bookkeeping and slot refresh, step by step."""
    scripts: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "add_finish_abort": [
            ("add", {"request_id": "solo", "n": 1, "num_prompt_tokens": 100}),
            ("add", {"request_id": "fan", "n": 3, "num_prompt_tokens": 10}),
            ("prefill_done", {"request_id": "solo"}),
            ("finish", {"request_id": "0_fan"}),
            ("abort", {"request_ids": ["fan"]}),
            ("abort", {"request_ids": ["fan", "nobody"]}),
            ("finish", {"request_id": "solo"}),
            ("finish", {"request_id": "solo"}),
            ("prefill_done", {"request_id": "solo"}),
        ],
        "taken_ids": [
            ("add", {"request_id": "a", "n": 2, "num_prompt_tokens": 1}),
            ("add", {"request_id": "a", "n": 1, "num_prompt_tokens": 1}),
            ("add", {"request_id": "0_a", "n": 1, "num_prompt_tokens": 1}),
            ("add", {"request_id": "b", "n": 0, "num_prompt_tokens": 1}),
            ("add", {"request_id": "b", "n": 1, "num_prompt_tokens": -1}),
            ("abort", {"request_ids": ["1_a"]}),
            ("finish", {"request_id": "0_a"}),
            ("add", {"request_id": "a", "n": 1, "num_prompt_tokens": 0}),
        ],
        "reservations": [
            ("reserve", {"n": 2}),
            ("add", {"request_id": "x", "n": 1, "num_prompt_tokens": 3}),
            ("release_reservation", {"n": 2}),
            ("release_reservation", {"n": 1}),
            ("reserve", {"n": 0}),
            ("reserve", {"n": 3}),
            ("add", {"request_id": "y", "n": 3, "num_prompt_tokens": 0}),
            ("abort", {"request_ids": []}),
        ],
    }
    requirements = {
        "add": {"ADM-TRK-1", "ADM-TRK-5", "ADM-TRK-6"},
        "abort": {"ADM-TRK-2", "ADM-TRK-5"},
        "finish": {"ADM-TRK-3", "ADM-TRK-5"},
        "prefill_done": {"ADM-TRK-4"},
        "reserve": {"ADM-TRK-7"},
        "release_reservation": {"ADM-TRK-7"},
    }
    cases = []
    for name, script in scripts.items():
        model = _TrackerModel()
        steps = []
        found: set[str] = {"ADM-TRK-4", "ADM-TRK-6"}
        for op, arguments in script:
            if op == "add":
                expect = model.add(
                    arguments["request_id"], arguments["n"], arguments["num_prompt_tokens"]
                )
            elif op == "abort":
                expect = model.abort(arguments["request_ids"])
            else:
                expect = getattr(model, op)(*arguments.values())
            found |= requirements[op]
            steps.append({"op": op, **arguments, "expect": expect, "after": model.state()})
        cases.append(
            _case(
                "tracker",
                f"admission/tracker/{name}",
                found,
                description="one server's tracker (server 1 of 2 sharing counters)",
                num_servers=2,
                server=1,
                steps=steps,
            )
        )
    return cases


# --- the bound ----------------------------------------------------------------------


def bound_cases() -> list[Case]:
    """ADM-BOUND-1/2: the schedule that reaches M + (N-1)*min(M, W), in both modes."""
    cases = []
    for mode in ("shared", "reserve"):
        for servers in (1, 2, 3):
            for limit in (0, 1, 2, 3):
                for weight in (1, 2):
                    cases.append(_bound_case(mode, servers, limit, weight))
    return cases


def _bound_case(mode: str, servers: int, limit: int, weight: int) -> Case:
    """Server 0 fills up to M - w alone; then all check w, all read, all decide, all register."""
    w = max(1, min(limit, weight))  # with M = 0 nothing fits; try weight 1
    slots = [0] * servers
    steps: list[dict[str, Any]] = []
    reserve = mode == "reserve"

    def fits(view: int, n: int) -> bool:
        return view <= limit if reserve else view + n <= limit

    for index in range(max(0, limit - w)):
        view = sum(slots) + (1 if reserve else 0)
        admitted = fits(view, 1)
        steps.append(
            {
                "server": 0,
                "op": "admit",
                "request_id": f"warm{index}",
                "n": 1,
                "expect": {"result": view} if admitted else {"error": "QueueOverflowError"},
            }
        )
        if admitted:
            slots[0] += 1
    if reserve:
        for server in range(servers):
            slots[server] += w
    for server in range(servers):
        steps.append({"server": server, "op": "start_check", "n": w})
    views = [sum(slots)] * servers
    for server in range(servers):
        steps.append({"server": server, "op": "read_all", "expect": {"result": views[server]}})
    admitted_servers = []
    for server in range(servers):
        if fits(views[server], w):
            admitted_servers.append(server)
            expect: Expect = {"result": views[server]}
        else:
            if reserve:
                slots[server] -= w
            expect = {"error": "QueueOverflowError"}
        steps.append({"server": server, "op": "decide", "expect": expect})
    for server in admitted_servers:
        if not reserve:
            slots[server] += w
        steps.append({"server": server, "op": "register", "request_id": f"r{server}", "n": w})
    if reserve:
        requirements, bound = ["ADM-BOUND-2", "ADM-CTL-7", "ADM-CTL-9"], limit
    else:
        requirements, bound = (
            ["ADM-BOUND-1", "ADM-CTL-7"],
            limit + (servers - 1) * min(limit, weight),
        )
    return _case(
        "admission_schedule",
        f"admission/bound/{mode}/n{servers}_m{limit}_w{weight}",
        requirements,
        description="every server reads every slot before any of them writes",
        setup={"num_servers": servers, "max_num_queued_reqs": limit, "mode": mode},
        steps=steps,
        expect={"global_count": sum(slots), "bound": bound},
    )


# --- events ---------------------------------------------------------------------------


def _sweep(points: list[tuple[float, int, int]]) -> int:
    level = best = 0
    for _t, _rank, delta in sorted(points, key=lambda point: (point[0], point[1])):
        level += delta
        best = max(best, level)
    return best


def event_cases() -> list[Case]:
    """ADM-EV-1/2/4/5: event lines (valid and not) and the two sweeps."""
    cases: list[Case] = []
    lines: list[tuple[str, str, Expect]] = [
        (
            "admit",
            '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":2,"view":0}',
            {"result": "same"},
        ),
        (
            "finish_with_t_before",
            '{"t":2.0,"server":1,"event":"finish","request_id":"0_a","n":1,"view":null,'
            '"t_before":1.5}',
            {"result": "same"},
        ),
        ("bad_kind", '{"t":1.0,"server":0,"event":"admitted","request_id":"a","n":1}', {}),
        ("n_zero", '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":0}', {}),
        ("negative_server", '{"t":1.0,"server":-1,"event":"admit","request_id":"a","n":1}', {}),
        (
            "view_on_departure",
            '{"t":1.0,"server":0,"event":"abort","request_id":"a","n":1,"view":3}',
            {},
        ),
        (
            "t_before_after_t",
            '{"t":1.0,"server":0,"event":"finish","request_id":"a","n":1,"t_before":2.0}',
            {},
        ),
        ("missing_n", '{"t":1.0,"server":0,"event":"admit","request_id":"a"}', {}),
        ("unknown_key", '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"x":1}', {}),
    ]
    for name, line, expect in lines:
        if not expect:
            expect = {"error": "ValueError"}
        elif name == "finish_with_t_before":
            expect = {
                "result": '{"t":2.0,"server":1,"event":"finish","request_id":"0_a","n":1,'
                '"view":null,"t_before":1.5}'
            }
        else:
            expect = {"result": line}
        cases.append(
            _case(
                "event_json",
                f"admission/events/json_{name}",
                ["ADM-EV-1", "ADM-EV-2"],
                description="parse one line; a valid event writes back as the same line",
                line=line,
                expect=expect,
            )
        )
    traces: dict[str, list[dict[str, Any]]] = {
        "spec_example": [
            {"t": 1.0, "server": 0, "event": "admit", "request_id": "a", "n": 2, "view": 0},
            {"t": 2.0, "server": 1, "event": "admit", "request_id": "b", "n": 1, "view": 2},
            {
                "t": 2.0,
                "server": 0,
                "event": "finish",
                "request_id": "0_a",
                "n": 1,
                "view": None,
                "t_before": 1.9,
            },
            {"t": 3.0, "server": 1, "event": "reject", "request_id": "c", "n": 1, "view": 2},
        ],
        "ties_and_early_release": [
            {"t": 1.0, "server": 0, "event": "admit", "request_id": "a", "n": 1, "view": 0},
            {
                "t": 3.0,
                "server": 0,
                "event": "finish",
                "request_id": "a",
                "n": 1,
                "view": None,
                "t_before": 2.0,
            },
            {"t": 2.0, "server": 1, "event": "admit", "request_id": "b", "n": 1, "view": 0},
            {"t": 3.0, "server": 1, "event": "admit", "request_id": "c", "n": 1, "view": 1},
        ],
        "empty": [],
    }
    for name, events in traces.items():
        in_flight = [
            (
                e["t"],
                0 if e["event"] == "admit" else 1,
                e["n"] if e["event"] == "admit" else -e["n"],
            )
            for e in events
            if e["event"] != "reject"
        ]
        admitted = [
            (e["t"], 1, e["n"]) if e["event"] == "admit" else (e["t_before"], 0, -e["n"])
            for e in events
            if e["event"] != "reject"
        ]
        cases.append(
            _case(
                "event_sweep",
                f"admission/events/sweep_{name}",
                ["ADM-EV-4", "ADM-EV-5"],
                description="max_in_flight and max_admitted_in_flight of a trace",
                events=events,
                expect={
                    "max_in_flight": _sweep(in_flight),
                    "max_admitted_in_flight": _sweep(admitted),
                },
            )
        )
    return cases


# ===========================================================================
# All cases, writing and replay


def all_cases() -> list[Case]:
    """ORC-VEC-1: every case, in a fixed order."""
    return [
        *request_queue_cases(),
        *layout_cases(),
        *check_cases(),
        *tracker_cases(),
        *bound_cases(),
        *event_cases(),
    ]


def write_vectors(out: str | Path) -> list[Path]:
    """ORC-VEC-1: write every case to `out/<name>.json` and an `index.json`; return the paths.

    The output is deterministic: the same queueref writes the same bytes.
    """
    from queueref import __version__

    root = Path(out)
    written: list[Path] = []
    index = []
    for case in all_cases():
        path = root / f"{case['name']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(case, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
        index.append(
            {"name": case["name"], "kind": case["kind"], "requirements": case["requirements"]}
        )
    root.mkdir(parents=True, exist_ok=True)
    (root / "index.json").write_text(
        json.dumps(
            {"format": FORMAT_VERSION, "queueref": __version__, "cases": index},
            indent=1,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    return written


def read_vectors(root: str | Path) -> list[Case]:
    """The cases listed in `root/index.json`, in its order."""
    base = Path(root)
    index = json.loads((base / "index.json").read_text(encoding="utf-8"))
    return [
        json.loads((base / f"{entry['name']}.json").read_text(encoding="utf-8"))
        for entry in index["cases"]
    ]
