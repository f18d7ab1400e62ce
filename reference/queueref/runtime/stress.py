"""The stress run: N real server processes under a randomized admit / finish / abort load.

queueref's own (models no vLLM file): each process of a `queueref.runtime.servers.ServerGroup`
runs a randomized loop and records every event, so the overshoot
bound of `specs/admission.md` can be checked on what real processes did.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import icontract

from queueref.admission.protocol import Protocol, overshoot_bound
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.admission.tracker import RequestTracker
from queueref.errors import AdmissionRejected
from queueref.runtime.servers import START_METHOD, ProtocolName, ServerGroup, ServerSpec
from queueref.trace.events import (
    AdmissionEvent,
    max_admitted_in_flight,
    max_in_flight,
    read_jsonl,
    write_jsonl,
)


@dataclass(frozen=True)
class StressConfig:
    """A bounded randomized load on N real server processes.

    Each server first tries `burst` admissions in a row (default: the bound
    plus one, so a server that hides its own count overshoots by itself),
    then loops until `seconds` have passed: admit with probability
    `admit_probability` (or when idle), otherwise end one of its requests --
    abort a whole request with probability `abort_probability`, else finish
    one child. At the end every server aborts what it still holds.
    """

    num_servers: int = 3
    max_num_queued_reqs: int = 4
    max_n: int = 2
    protocol: ProtocolName = Protocol.CHECK_THEN_WRITE
    seconds: float = 1.0
    seed: int = 0
    admit_probability: float = 0.55
    abort_probability: float = 0.2
    burst: int | None = None
    tracker_factory: Callable[[SharedAdmissionStats | None], RequestTracker] = RequestTracker

    @property
    def bound(self) -> int:
        """The overshoot bound of check-then-write for this configuration."""
        return overshoot_bound(self.num_servers, self.max_num_queued_reqs, self.max_n)

    @property
    def burst_attempts(self) -> int:
        """How many admissions each server tries before its random loop."""
        return self.bound + 1 if self.burst is None else self.burst


@dataclass
class StressResult:
    """What the servers of a stress run recorded."""

    config: StressConfig
    events: list[AdmissionEvent]
    slots_after: list[int]
    exitcodes: list[int | None]
    latencies_ns: list[list[int]] = field(default_factory=list)

    @property
    def max_in_flight(self) -> int:
        """The conservative global maximum of the records."""
        return max_in_flight(self.events)

    @property
    def max_admitted_in_flight(self) -> int:
        """The decided-and-not-released maximum of the records."""
        return max_admitted_in_flight(self.events)

    @property
    def admitted(self) -> int:
        """Requests admitted."""
        return sum(1 for event in self.events if event.event == "admit")

    @property
    def rejected(self) -> int:
        """Requests rejected."""
        return sum(1 for event in self.events if event.event == "reject")

    @property
    def rejection_rate(self) -> float:
        """Rejected / attempted."""
        attempts = self.admitted + self.rejected
        return self.rejected / attempts if attempts else 0.0

    def slots_admitted(self) -> int:
        """Slots admitted in all (sum of n)."""
        return sum(event.n for event in self.events if event.event == "admit")

    def slots_released(self) -> int:
        """Slots given back in all (finish + abort)."""
        return sum(event.n for event in self.events if event.event in ("finish", "abort"))


def stress_worker(
    spec: ServerSpec, barrier: Any, stress: StressConfig, out_dir: str
) -> None:  # pragma: no cover - runs in the spawned children
    """One server of `run_stress`: the randomized loop, then its records to `out_dir`."""
    events: list[AdmissionEvent] = []
    latencies: list[int] = []
    server = spec.build(tracker_factory=stress.tracker_factory, record=events.append)
    tracker = server.tracker
    rng = random.Random(stress.seed * 1_000_003 + spec.index)
    live: list[str] = []
    counter = 0

    def attempt() -> None:
        nonlocal counter
        counter += 1
        request_id = f"s{spec.index}-{counter}"
        n = rng.randint(1, stress.max_n)
        started = time.perf_counter_ns()
        try:
            server.admit(request_id, n)
        except AdmissionRejected:
            pass
        else:
            live.append(request_id)
        latencies.append(time.perf_counter_ns() - started)

    barrier.wait(60)
    deadline = time.monotonic() + stress.seconds
    for _ in range(stress.burst_attempts):
        attempt()
    while time.monotonic() < deadline:
        if not live or rng.random() < stress.admit_probability:
            attempt()
            continue
        position = rng.randrange(len(live))
        request_id = live[position]
        if rng.random() < stress.abort_probability:
            server.abort(request_id)
        else:
            children = tracker.children_of(request_id)
            server.finish(children[rng.randrange(len(children))])
        if not tracker.children_of(request_id):
            live[position] = live[-1]
            live.pop()
    for request_id in live:
        server.abort(request_id)
    base = Path(out_dir)
    write_jsonl(events, base / f"events-{spec.index}.jsonl")
    (base / f"latency-{spec.index}.json").write_text(json.dumps(latencies), encoding="utf-8")


@icontract.require(
    lambda stress: stress.num_servers >= 1 and stress.max_n >= 1 and stress.seconds > 0,
    "ADM-BOUND-1: a stress run has servers, weights and a duration",
    error=ValueError,
)
def run_stress(stress: StressConfig, *, timeout: float | None = None) -> StressResult:
    """Run `stress` on real spawned processes and collect their records.

    Every process is joined (or stopped) before this returns.
    """
    limit = stress.seconds + 60.0 if timeout is None else timeout
    with tempfile.TemporaryDirectory(prefix="queueref-stress-") as out_dir:
        barrier = multiprocessing.get_context(START_METHOD).Barrier(stress.num_servers)
        group = ServerGroup(
            stress_worker,
            stress.num_servers,
            max_num_queued_reqs=stress.max_num_queued_reqs,
            protocol=stress.protocol,
            args=(barrier, stress, out_dir),
        )
        with group:
            group.start()
            codes = group.join(limit)
            slots = group.slot_counts()
        if any(code != 0 for code in codes):
            raise RuntimeError(f"stress servers failed: exit codes {codes}")
        events: list[AdmissionEvent] = []
        latencies: list[list[int]] = []
        for index in range(stress.num_servers):
            events.extend(read_jsonl(os.path.join(out_dir, f"events-{index}.jsonl")))
            latency_path = Path(out_dir, f"latency-{index}.json")
            latencies.append(json.loads(latency_path.read_text(encoding="utf-8")))
    events.sort(key=lambda event: event.t)
    return StressResult(stress, events, slots, codes, latencies)
