"""Real API server processes sharing one admission counter array.

Models `APIServerProcessManager` of `vllm/v1/utils.py` (the parent allocates
`RawArray("q", num_counters(num_servers))` and hands it to every API server
process it spawns) and the child side of `AsyncLLM.__init__` in
`vllm/v1/engine/async_llm.py` (building `SharedAdmissionStats` from it).

Deliberate divergences from vLLM:

* The buffer travels in a frozen `ServerSpec`, not in a mutable config dict
  that the child pops it from: nothing depends on the order of construction.
* The parent resets the slot of a dead child to 0 and reports it
  (`ServerGroup.reap`), so a crashed server cannot leak capacity forever.
  vLLM 0.30.0 has no such recovery.
* A "locked" protocol (a `multiprocessing.Lock` around check + registration)
  exists as the exact baseline for the benchmark; vLLM 0.30.0 has only
  check-then-write, queueref adds write-then-check.

The randomized stress run on such a group is `queueref.runtime.stress`.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any, Final

import icontract

from queueref.admission.controller import AdmissionController, TokenRuleName, TokenScope
from queueref.admission.front import APIServer, Recorder
from queueref.admission.protocol import Protocol, TokenRule, parse_protocol
from queueref.admission.shared_stats import SharedAdmissionStats, allocate_admission_counters
from queueref.admission.tracker import RequestTracker
from queueref.validators import is_int_at_least, is_limit

#: A protocol of a server group: a `Protocol` or its name.
ProtocolName = Protocol | str

#: The start method of every server process (ADM-SRV-1).
START_METHOD: Final = "spawn"


def controller_protocol(protocol: ProtocolName) -> Protocol:
    """The protocol each server's controller runs: locked and local run check-then-write.

    >>> controller_protocol("locked").value, controller_protocol("write-then-check").value
    ('check-then-write', 'write-then-check')
    """
    if parse_protocol(protocol) is Protocol.WRITE_THEN_CHECK:
        return Protocol.WRITE_THEN_CHECK
    return Protocol.CHECK_THEN_WRITE


def _is_protocol(protocol: object) -> bool:
    try:
        parse_protocol(protocol)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class ServerSpec:
    """Everything a server process needs, handed over once at start-up.

    `counters` is the parent's shared array (None for a single server or no
    request limit: then the local count decides). Frozen: nothing is popped
    from it, so the order in which a child builds its parts does not matter.
    `build` is the one place a server's controller is made.
    """

    index: int
    num_servers: int
    counters: Any
    max_num_queued_reqs: int | None
    max_num_queued_tokens: int | None = None
    protocol: ProtocolName = Protocol.CHECK_THEN_WRITE
    lock: Any = None
    token_rule: TokenRuleName | TokenRule = "ge"
    token_scope: TokenScope | None = None

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
        """The server's front: stats, tracker, controller.

        `local` decides on the server's own count: its controller and tracker
        get no shared stats (the slot, if any, is only a display).
        """
        local = parse_protocol(self.protocol) is Protocol.LOCAL
        stats = None if local else self.shared_stats()
        tracker = tracker_factory(stats)
        controller = AdmissionController(
            self.max_num_queued_reqs,
            self.max_num_queued_tokens,
            tracker=tracker,
            shared_stats=stats,
            mode=controller_protocol(self.protocol),
            token_rule=self.token_rule,
            token_scope=self.token_scope,
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
    """The parent reset the slot of a dead server."""

    index: int
    pid: int | None
    exitcode: int | None
    stale_count: int


class ServerGroup:
    """N spawned server processes sharing one counter array the parent allocated.

    `target(spec, *args)` runs in each child; it must be importable (spawn).
    Use as a context manager: leaving it stops every process still running,
    joins them all and reaps their slots.
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
        lambda protocol: _is_protocol(protocol),
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
        protocol: ProtocolName = Protocol.CHECK_THEN_WRITE,
        args: Sequence[object] = (),
        token_rule: TokenRuleName | TokenRule = "ge",
        token_scope: TokenScope | None = None,
    ) -> None:
        self._context = multiprocessing.get_context(START_METHOD)
        self._target = target
        self._args = tuple(args)
        # ADM-SRV-1: the parent allocates the one array, before any child exists.
        self._counters = allocate_admission_counters(
            num_servers, max_num_queued_reqs, max_num_queued_tokens
        )
        protocol = parse_protocol(protocol)
        lock = self._context.Lock() if protocol is Protocol.LOCKED else None
        self._specs = [
            ServerSpec(
                index,
                num_servers,
                self._counters,
                max_num_queued_reqs,
                max_num_queued_tokens,
                protocol,
                lock,
                token_rule,
                token_scope,
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
        """Every slot reset so far, in order."""
        with self._reset_lock:
            return list(self._resets)

    def slot_counts(self) -> list[int]:
        """Counter 0 of every slot; empty without a shared array."""
        if self._counters is None:
            return []
        per_slot = SharedAdmissionStats.COUNTERS_PER_SLOT
        return [int(self._counters[index * per_slot]) for index in range(len(self._specs))]

    @icontract.require(lambda self: not self.processes, "ADM-SRV-1: a group starts once")
    @icontract.ensure(
        lambda self: len(self.processes) == len(self.specs), "ADM-SRV-1: one process per server"
    )
    def start(self) -> None:
        """Spawn one process per server, handing each its spec."""
        for spec in self._specs:
            self._processes.append(self._spawn(spec))

    def _spawn(self, spec: ServerSpec) -> BaseProcess:
        process = self._context.Process(
            target=self._target,
            args=(spec, *self._args),
            name=f"queueref-server-{spec.index}",
            daemon=True,
        )
        process.start()
        return process

    def restart(self, index: int) -> BaseProcess:
        """A fresh process for server `index`, whose old one has exited.

        The old process is reaped first, so its slot is 0 before the new one
        can write it (one writer per slot at any time).
        """
        old = self._processes[index]
        if old.exitcode is None:
            raise RuntimeError(f"server {index} is still running (pid {old.pid})")
        self.reap()  # E2E-SRV-7 restarts; ADM-SRV-2: the old slot is 0 before the new writer
        process = self._spawn(self._specs[index])
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
        """Reset the slot of every server that died since the last call; report them.

        Without it, a crashed server's stale count shrinks the cap forever.

        A dead process can no longer write its slot, so the parent may: the
        single-writer rule holds. Every dead child is reaped once; a reset is
        reported only when the slot held something (a leak).
        """
        # ADM-RISK-1: the stale count of a dead server is given back, once.
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
        """Reap in a background thread every `interval` seconds until `close`."""
        if self._reaper is not None:
            return

        def loop() -> None:
            while not self._reaper_stop.wait(interval):
                self.reap()

        self._reaper = threading.Thread(target=loop, name="queueref-reaper", daemon=True)
        self._reaper.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop every process still running, join all, reap their slots."""
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
