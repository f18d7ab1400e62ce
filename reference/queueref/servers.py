"""Real API server processes sharing one admission counter array.

Models `APIServerProcessManager` of `vllm/v1/utils.py` (the parent allocates
`RawArray("q", num_counters(num_servers))` and hands it to every API server
process it spawns) and the child side of `AsyncLLM.__init__` in
`vllm/v1/engine/async_llm.py` (building `SharedAdmissionStats` from it).

Deliberate divergences from vLLM:

* The buffer travels in a frozen `ServerSpec`, not in a mutable config dict
  that the child pops it from: nothing depends on the order of construction
  (ADM-RISK-3).
* The parent resets the slot of a dead child to 0 and reports it
  (`ServerGroup.reap`), so a crashed server cannot leak capacity forever
  (ADM-SRV-2, ADM-RISK-1). Upstream has no such recovery.
* A "locked" protocol (a `multiprocessing.Lock` around check + registration)
  exists as the exact baseline for the benchmark; upstream has only
  check-then-write, queueref adds write-then-check (`mode="reserve"`).
* `run_stress` is queueref's: N processes run randomized admit / finish /
  abort loops and record every event (ADM-EV-3), so the overshoot bound can
  be checked on what real processes did (ADM-BOUND-1, ADM-BOUND-2).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final, Literal

import icontract

from queueref.admission import (
    AdmissionController,
    AdmissionMode,
    AdmissionRejected,
    SharedAdmissionStats,
    allocate_admission_counters,
    is_int_at_least,
    is_limit,
)
from queueref.events import (
    AdmissionEvent,
    max_admitted_in_flight,
    max_in_flight,
    read_jsonl,
    write_jsonl,
)
from queueref.front import APIServer, Recorder
from queueref.tracker import RequestTracker

ProtocolName = Literal["check-then-write", "write-then-check", "locked"]

#: The start method of every server process (ADM-SRV-1).
START_METHOD: Final = "spawn"

#: Protocol name -> the controller mode it runs (ADM-SRV-1).
PROTOCOL_MODES: Final[dict[str, AdmissionMode]] = {
    "check-then-write": "shared",
    "write-then-check": "reserve",
    "locked": "shared",
}


def overshoot_bound(num_servers: int, max_num_queued_reqs: int, max_n: int) -> int:
    """`M + (N - 1) * min(M, W)`: the most check-then-write ever admits (ADM-BOUND-1)."""
    return max_num_queued_reqs + (num_servers - 1) * min(max_num_queued_reqs, max_n)


@dataclass(frozen=True)
class ServerSpec:
    """Everything a server process needs, handed over once at start-up (ADM-SRV-1).

    `counters` is the parent's shared array (None for a single server or no
    request limit: then the local count decides). Frozen: nothing is popped
    from it, so the order in which a child builds its parts does not matter
    (ADM-RISK-3).
    """

    index: int
    num_servers: int
    counters: Any
    max_num_queued_reqs: int | None
    max_num_queued_tokens: int | None = None
    protocol: ProtocolName = "check-then-write"
    lock: Any = None

    def shared_stats(self) -> SharedAdmissionStats | None:
        """This server's view of the shared array, or None."""
        if self.counters is None:
            return None
        return SharedAdmissionStats(self.counters, self.num_servers, self.index)

    def build(
        self,
        *,
        tracker_factory: Callable[[SharedAdmissionStats | None], RequestTracker] = RequestTracker,
        record: Recorder | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> APIServer:
        """The server's front: stats, tracker, controller (ADM-SRV-1)."""
        stats = self.shared_stats()
        tracker = tracker_factory(stats)
        controller = AdmissionController(
            self.max_num_queued_reqs,
            self.max_num_queued_tokens,
            tracker=tracker,
            shared_stats=stats,
            mode=PROTOCOL_MODES[self.protocol],
        )
        return APIServer(
            controller,
            server_index=self.index,
            record=record,
            admission_lock=self.lock,
            clock=clock,
        )


@dataclass(frozen=True)
class SlotReset:
    """The parent reset the slot of a dead server (ADM-SRV-2)."""

    index: int
    pid: int | None
    exitcode: int | None
    stale_count: int


class ServerGroup:
    """N spawned server processes sharing one counter array the parent allocated (ADM-SRV-1).

    `target(spec, *args)` runs in each child; it must be importable (spawn).
    Use as a context manager: leaving it stops every process still running,
    joins them all and reaps their slots (ADM-SRV-3).
    """

    @icontract.require(
        lambda num_servers: is_int_at_least(num_servers, 1),
        "ADM-SRV-1: num_servers is an int >= 1",
        error=ValueError,
    )
    @icontract.require(
        lambda max_num_queued_reqs: is_limit(max_num_queued_reqs),
        "ADM-SRV-1: max_num_queued_reqs is None or an int >= 0",
        error=ValueError,
    )
    @icontract.require(
        lambda protocol: protocol in PROTOCOL_MODES,
        "ADM-SRV-1: a known protocol",
        error=ValueError,
    )
    def __init__(
        self,
        target: Callable[..., object],
        num_servers: int,
        *,
        max_num_queued_reqs: int | None,
        max_num_queued_tokens: int | None = None,
        protocol: ProtocolName = "check-then-write",
        args: Sequence[object] = (),
    ) -> None:
        self._context = multiprocessing.get_context(START_METHOD)
        self._target = target
        self._args = tuple(args)
        # ADM-SRV-1: the parent allocates the one array, before any child exists.
        self._counters = allocate_admission_counters(num_servers, max_num_queued_reqs)
        lock = self._context.Lock() if protocol == "locked" else None
        self._specs = [
            ServerSpec(
                index,
                num_servers,
                self._counters,
                max_num_queued_reqs,
                max_num_queued_tokens,
                protocol,
                lock,
            )
            for index in range(num_servers)
        ]
        self._processes: list[BaseProcess] = []
        self._reaped: set[int] = set()
        self._resets: list[SlotReset] = []
        self._reset_lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._reaper_stop = threading.Event()

    @property
    def context(self) -> Any:
        """The spawn context, for barriers, events and queues shared with the children."""
        return self._context

    @property
    def counters(self) -> Any:
        """The shared array (None for one server or no request limit)."""
        return self._counters

    @property
    def specs(self) -> list[ServerSpec]:
        """The spec of each server."""
        return list(self._specs)

    @property
    def processes(self) -> list[BaseProcess]:
        """The processes started so far."""
        return list(self._processes)

    @property
    def resets(self) -> list[SlotReset]:
        """Every slot reset so far, in order (ADM-SRV-2)."""
        with self._reset_lock:
            return list(self._resets)

    def slot_counts(self) -> list[int]:
        """Counter 0 of every slot (ADM-LAYOUT-3); empty without a shared array."""
        if self._counters is None:
            return []
        per_slot = SharedAdmissionStats.COUNTERS_PER_SLOT
        return [int(self._counters[index * per_slot]) for index in range(len(self._specs))]

    @icontract.require(lambda self: not self.processes, "ADM-SRV-1: a group starts once")
    @icontract.ensure(
        lambda self: len(self.processes) == len(self.specs), "ADM-SRV-1: one process per server"
    )
    def start(self) -> None:
        """Spawn one process per server, handing each its spec (ADM-SRV-1)."""
        for spec in self._specs:
            process = self._context.Process(
                target=self._target,
                args=(spec, *self._args),
                name=f"queueref-server-{spec.index}",
                daemon=True,
            )
            process.start()
            self._processes.append(process)

    def restart(self, index: int) -> BaseProcess:
        """A fresh process for server `index`, whose old one has exited (E2E-SRV-7).

        The old process is reaped first, so its slot is 0 before the new one
        can write it (ADM-SRV-2: one writer per slot at any time).
        """
        old = self._processes[index]
        if old.exitcode is None:
            raise RuntimeError(f"server {index} is still running (pid {old.pid})")
        self.reap()
        spec = self._specs[index]
        process = self._context.Process(
            target=self._target,
            args=(spec, *self._args),
            name=f"queueref-server-{spec.index}",
            daemon=True,
        )
        process.start()
        with self._reset_lock:
            self._processes[index] = process
            self._reaped.discard(index)
        old.close()
        return process

    def join(self, timeout: float) -> list[int | None]:
        """Wait up to `timeout` seconds in all; the exit codes. Raises `TimeoutError`."""
        deadline = time.monotonic() + timeout
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
        codes = [process.exitcode for process in self._processes]
        if any(code is None for code in codes):
            raise TimeoutError(f"ADM-SRV-3: servers still running after {timeout} s: {codes}")
        return codes

    @icontract.ensure(
        lambda self, result: all(
            self.slot_counts()[reset.index] == 0 for reset in result if self.counters is not None
        ),
        "ADM-SRV-2: a dead server's slot is 0 after reaping",
    )
    def reap(self) -> list[SlotReset]:
        """Reset the slot of every server that died since the last call; report them (ADM-SRV-2).

        This is queueref's answer to ADM-RISK-1: without it, a crashed
        server's stale count shrinks the cap forever.

        A dead process can no longer write its slot, so the parent may: the
        single-writer rule holds. Every dead child is reaped once; a reset is
        reported only when the slot held something (a leak).
        """
        found: list[SlotReset] = []
        with self._reset_lock:
            for spec, process in zip(self._specs, self._processes, strict=False):
                if spec.index in self._reaped or process.exitcode is None:
                    continue
                self._reaped.add(spec.index)
                if self._counters is None:
                    continue
                per_slot = SharedAdmissionStats.COUNTERS_PER_SLOT
                start = spec.index * per_slot
                stale = int(self._counters[start])
                for offset in range(per_slot):
                    self._counters[start + offset] = 0
                if stale != 0:
                    found.append(SlotReset(spec.index, process.pid, process.exitcode, stale))
            self._resets.extend(found)
        return found

    def start_reaper(self, interval: float = 0.05) -> None:
        """Reap in a background thread every `interval` seconds until `close` (ADM-SRV-2)."""
        if self._reaper is not None:
            return

        def loop() -> None:
            while not self._reaper_stop.wait(interval):
                self.reap()

        self._reaper = threading.Thread(target=loop, name="queueref-reaper", daemon=True)
        self._reaper.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop every process still running, join all, reap their slots (ADM-SRV-3)."""
        self._reaper_stop.set()
        if self._reaper is not None:
            self._reaper.join(timeout)
            self._reaper = None
        for process in self._processes:
            if process.exitcode is None:
                process.terminate()
        deadline = time.monotonic() + timeout
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                process.kill()
                process.join(timeout)
        self.reap()
        for process in self._processes:
            if process.exitcode is not None:
                process.close()

    def __enter__(self) -> ServerGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# ---------------------------------------------------------------------------
# The stress run
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StressConfig:
    """A bounded randomized load on N real server processes (ADM-BOUND-1, ADM-BOUND-2).

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
    protocol: ProtocolName = "check-then-write"
    seconds: float = 1.0
    seed: int = 0
    admit_probability: float = 0.55
    abort_probability: float = 0.2
    burst: int | None = None
    tracker_factory: Callable[[SharedAdmissionStats | None], RequestTracker] = RequestTracker

    @property
    def bound(self) -> int:
        """The overshoot bound of check-then-write for this configuration (ADM-BOUND-1)."""
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
        """The conservative global maximum of the records (ADM-EV-4)."""
        return max_in_flight(self.events)

    @property
    def max_admitted_in_flight(self) -> int:
        """The decided-and-not-released maximum of the records (ADM-EV-5)."""
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
    """Run `stress` on real spawned processes and collect their records (ADM-BOUND-1).

    Every process is joined (or stopped) before this returns (ADM-SRV-3).
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
