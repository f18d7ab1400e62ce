"""Request-queue cases: every expectation computed with the list model.

Models no vLLM file.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from queueref.oracle.vectors.common import Case, Expect, make_case
from queueref.queues.model import ListQueueModel


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
        return make_case(
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
    """The requirements one recorded operation exercises."""
    # ORC-VEC-2: every case lists the requirement IDs it covers.
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
    """The hand-made request-queue cases of one policy, sizes 0 to 3."""
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
    """A fixed-seed random sequence of every operation."""
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
            make_case(
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
        make_case(
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
