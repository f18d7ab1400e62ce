"""The process group of `serve`: the trace folder, and the parent's supervision.

The child side (its socket, its entry point, its heartbeat) is
`queueref.runtime.http.worker`, its port `queueref.runtime.http.ports`.

Models the front door of vLLM 0.30.0's OpenAI-compatible server with
`--api-server-count N` (`APIServerProcessManager` in `vllm/v1/utils.py`): N
API server processes accept connections on one listening address.

Deliberate divergences from vLLM 0.30.0:

* The processes share the port with `SO_REUSEPORT` (Linux balances incoming
  connections by a hash of the client's address and port): the parent only
  checks that the port is free, every child binds its own listening socket.
  vLLM's parent binds once and hands the socket to its children.
* `mode="local"` runs each server on its own count (the behaviour before vLLM
  PR #54746); the parent's counter array is then only a display.
* Every child dies with its parent (`PR_SET_PDEATHSIG`, and a watchdog thread
  where that is missing) and writes its records to its own file, flushed per
  record (E2E-SRV-7, E2E-TRACE-1).
* The parent supervises its children: each beats a heartbeat from its event
  loop; one silent for `worker_timeout` seconds is killed; a dead one has its
  slot reclaimed (its requests recorded as aborted) and is restarted
  (E2E-SRV-7). vLLM has no such recovery.
"""

from __future__ import annotations

import errno
import heapq
import json
import multiprocessing
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from queueref.admission.controller import TokenRuleName
from queueref.admission.protocol import parse_protocol
from queueref.oracle.trace_check import in_flight_requests
from queueref.oracle.trace_preflight import held_reservations
from queueref.runtime.http.metrics import REJECTION_REASONS
from queueref.runtime.http.ports import reserve_port
from queueref.runtime.http.releases import release_answers
from queueref.runtime.http.render import RenderConfig, check_render_setup
from queueref.runtime.http.store import NodeStore
from queueref.runtime.http.wire import COMPLETION_PATHS
from queueref.runtime.http.worker import (
    RESTART_REASONS,
    SERVE_PROTOCOLS,
    HttpConfig,
    ServeMode,
    serve_process,
)
from queueref.runtime.servers import START_METHOD, ServerGroup, SlotReset
from queueref.trace.events import AdmissionEvent
from queueref.trace.files import TraceFormatError, read_trace, trace_file
from queueref.validators import is_int_at_least

#: The token rules `serve --token-rule` offers (ADM-TOK-3).
TOKEN_RULES: Final[tuple[TokenRuleName, ...]] = ("ge", "fits")

#: The parent's own log in a trace folder: restarts and reclaimed slots (E2E-SRV-7).
SUPERVISOR_LOG: Final = "supervisor.jsonl"

#: How long a child may take to start before its silence counts (spawn imports Python).
STARTUP_GRACE: Final = 30.0

__all__ = [
    "SUPERVISOR_LOG",
    "TOKEN_RULES",
    "HttpServers",
    "Restart",
    "ServeResult",
    "prepare_trace_folder",
]


def prepare_trace_folder(folder: str | Path, num_servers: int, first: int = 0) -> Path:
    """Create the folder and an empty `server-<i>.jsonl` per server, before any child starts.

    E2E-TRACE-1: an unwritable path fails here, with nothing started, instead
    of after the run. Raises `OSError` naming the path.
    """
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"--trace {folder}: not a folder", str(folder))
    path.mkdir(parents=True, exist_ok=True)
    for index in range(first, first + num_servers):  # first > 0: a node of a store deployment
        trace_file(path, index).write_bytes(b"")
    (path / SUPERVISOR_LOG).write_bytes(b"")
    return path


def _repair_torn_tail(path: Path) -> None:
    """Cut a last line that a killed child left half written (it has no newline)."""
    with open(path, "r+b") as stream:
        size = stream.seek(0, os.SEEK_END)
        if size == 0:
            return
        start = max(0, size - (1 << 20) - 2)
        stream.seek(start)
        tail = stream.read()
        if tail.endswith(b"\n"):
            return
        cut = tail.rfind(b"\n")
        stream.truncate(start + cut + 1 if cut >= 0 else start)


@dataclass(frozen=True)
class Restart:
    """The parent replaced a dead or hung server (E2E-SRV-7)."""

    index: int
    reason: str
    old_pid: int | None
    exitcode: int | None
    stale_count: int
    reclaimed: int
    new_pid: int | None


@dataclass
class ServeResult:
    """What a `serve` run left: the records, the slots at the end, the crashes, the restarts."""

    port: int
    events: list[AdmissionEvent] = field(default_factory=list)
    final_slots: list[int] = field(default_factory=list)
    resets: list[SlotReset] = field(default_factory=list)
    crashed: list[tuple[int, int | None]] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # trace files that could not be completed


class HttpServers:
    """N spawned HTTP API server processes on one port, supervised (E2E-SRV-1, E2E-SRV-7).

    Entering checks the port and the trace folder, spawns the servers
    (`queueref.runtime.servers.ServerGroup`, which allocates the counter array) and
    waits until every one listens. `poll` supervises: it kills a server
    whose heartbeat is older than `worker_timeout`, reclaims the slot of a
    dead one (recording its requests as aborted) and restarts it when
    `restart` is on. Leaving stops them all (SIGTERM, then SIGKILL), reaps
    every slot; `read_events` then reads the trace folder back (E2E-SRV-4).
    """

    def __init__(
        self,
        num_servers: int,
        max_num_queued_reqs: int,
        mode: ServeMode,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        service_time_ms: float = 200.0,
        jitter: float = 0.2,
        trace_dir: str | Path | None = None,
        startup_timeout: float = 30.0,
        worker_timeout: float = 10.0,
        restart: bool = True,
        max_restarts: int = 10,
        max_num_queued_tokens: int | None = None,
        token_rule: TokenRuleName = "ge",
        prefill_ms: float | None = None,
        store: NodeStore | None = None,
        vllm_version: str | None = None,
        render: RenderConfig | None = None,
    ) -> None:
        # E2E-CLI-1: bad input is refused before anything starts.
        if vllm_version is not None:
            release_answers(vllm_version)  # E2E-SRV-10: ValueError naming the releases
        if not is_int_at_least(num_servers, 1):
            raise ValueError(f"--servers must be an integer >= 1, got {num_servers!r}")
        if not is_int_at_least(max_num_queued_reqs, 0):
            raise ValueError(
                f"--max-num-queued-reqs must be an integer >= 0, got {max_num_queued_reqs!r}"
            )
        if max_num_queued_tokens is not None and not is_int_at_least(max_num_queued_tokens, 0):
            raise ValueError(
                f"--max-num-queued-tokens must be an integer >= 0, got {max_num_queued_tokens!r}"
            )
        if token_rule not in TOKEN_RULES:
            raise ValueError(f"--token-rule must be one of {TOKEN_RULES}, got {token_rule!r}")
        if prefill_ms is not None and not 0 <= prefill_ms < float("inf"):
            raise ValueError(f"--prefill-ms must be finite and >= 0, got {prefill_ms!r}")
        if mode not in SERVE_PROTOCOLS:
            raise ValueError(
                f"--admission must be one of {', '.join(p.value for p in SERVE_PROTOCOLS)}, "
                f"got {mode!r}"
            )
        if not 0 <= service_time_ms < float("inf"):
            raise ValueError(f"--service-time-ms must be finite and >= 0, got {service_time_ms!r}")
        if not 0 < worker_timeout < float("inf"):
            raise ValueError(f"--worker-timeout must be finite and > 0, got {worker_timeout!r}")
        check_render_setup(render, parse_protocol(mode), store, max_num_queued_tokens)
        self.render = render  # E2E-REN-2
        self.num_servers = num_servers
        self.max_num_queued_reqs = max_num_queued_reqs
        self.max_num_queued_tokens = max_num_queued_tokens
        self.token_rule: TokenRuleName = token_rule
        self.prefill_ms = prefill_ms
        self.mode: ServeMode = mode
        self.host = host
        self.requested_port = port
        self.port = port
        self.service_time_ms = service_time_ms
        self.jitter = jitter
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        self.startup_timeout = startup_timeout
        self.worker_timeout = worker_timeout
        self.restart = restart
        self.max_restarts = max_restarts
        self.store = store
        self.vllm_version = vllm_version
        # With a store, records and trace files carry the global index: node base + local.
        self.trace_base = store.base if store is not None else 0
        self._group: ServerGroup | None = None
        self._handled: set[int] = set()  # pids already reported dead
        self._hung: set[int] = set()  # pids killed for silence
        self._closed = False
        self._http: HttpConfig | None = None
        self.started_pids: list[int] = []  # every server process ever started, restarts too
        self.result = ServeResult(port)

    @property
    def group(self) -> ServerGroup:
        """The process group (after `start`)."""
        if self._group is None:
            raise RuntimeError("the servers are not started")
        return self._group

    @property
    def started(self) -> bool:
        """Whether `start` spawned the processes."""
        return self._group is not None

    @property
    def url(self) -> str:
        """The completion URL."""
        return f"http://{self.host}:{self.port}{COMPLETION_PATHS[0]}"

    def start(self) -> None:
        """Check the port and the trace folder, spawn the servers, wait until all listen."""
        self.port = reserve_port(self.host, self.requested_port)
        self.result.port = self.port
        if self.trace_dir is not None:
            prepare_trace_folder(self.trace_dir, self.num_servers, self.trace_base)
        context = multiprocessing.get_context(START_METHOD)
        ready = context.Semaphore(0)
        heartbeats = context.RawArray("d", self.num_servers)
        restarts = context.RawArray("q", self.num_servers * len(RESTART_REASONS))
        rejections = context.RawArray("q", self.num_servers * len(REJECTION_REASONS))
        for index in range(self.num_servers):
            heartbeats[index] = time.monotonic() + STARTUP_GRACE
        http = HttpConfig(
            self.host,
            self.port,
            self.mode,
            self.service_time_ms,
            self.jitter,
            str(self.trace_dir) if self.trace_dir is not None else None,
            ready,
            os.getpid(),
            heartbeats,
            restarts,
            prefill_ms=self.prefill_ms,
            store=self.store,
            rejections=rejections,
            vllm_version=self.vllm_version,
            paused=context.RawArray("q", 1),
            render=self.render,
        )
        self._http = http
        group = ServerGroup(
            serve_process,
            self.num_servers,
            max_num_queued_reqs=self.max_num_queued_reqs,
            max_num_queued_tokens=self.max_num_queued_tokens,
            protocol=parse_protocol(self.mode),
            args=(http,),
            token_rule=self.token_rule,
        )
        self._group = group
        group.start()
        self.started_pids.extend(self.pids())
        deadline = time.monotonic() + self.startup_timeout
        for _ in range(self.num_servers):
            while not ready.acquire(timeout=0.1):
                if any(p.exitcode is not None for p in group.processes):
                    self.close()
                    raise RuntimeError(
                        "a server process exited during start-up "
                        f"(exit codes {[p.exitcode for p in group.processes]})"
                    )
                if time.monotonic() > deadline:
                    self.close()
                    raise TimeoutError(
                        f"the servers did not listen within {self.startup_timeout} s"
                    )

    def heartbeat_age(self, index: int) -> float:
        """Seconds since server `index` last beat (negative during its start-up grace)."""
        assert self._http is not None
        return time.monotonic() - float(self._http.heartbeats[index])

    def restart_counts(self) -> list[dict[str, int]]:
        """Per server, its restarts by reason (E2E-SRV-7; also on each server's /metrics)."""
        assert self._http is not None
        width = len(RESTART_REASONS)
        return [
            {r: int(self._http.restarts[i * width + k]) for k, r in enumerate(RESTART_REASONS)}
            for i in range(self.num_servers)
        ]

    def _log(self, record: dict[str, Any]) -> None:
        if self.trace_dir is not None:
            with open(self.trace_dir / SUPERVISOR_LOG, "a", encoding="utf-8") as stream:
                stream.write(json.dumps(record, separators=(",", ":")) + "\n")

    def _reclaim_records(self, index: int, t_before: float, t: float) -> int:
        """Record the dead server's requests as aborted at the reset of its slot; how many."""
        if self.trace_dir is None:
            return 0
        server = self.trace_base + index  # the index its records carry
        path = trace_file(self.trace_dir, server)
        _repair_torn_tail(path)
        events, _ = read_trace(path)
        held = in_flight_requests(events, server)
        with open(path, "a", encoding="utf-8") as stream:
            for request_id, slots in held.items():
                event = AdmissionEvent(t, server, "abort", request_id, slots, t_before=t_before)
                stream.write(event.to_json() + "\n")
            for request_id, n in held_reservations(events, server).items():  # E2E-REN-4
                event = AdmissionEvent(t, server, "release", request_id, n, t_before=t_before)
                stream.write(event.to_json() + "\n")
        return sum(held.values())

    def poll(self) -> list[str]:
        """Supervise: kill the silent, reclaim and restart the dead; one line each (E2E-SRV-7).

        Keeps nothing per request, so a long run does not grow the parent (E2E-SOAK-1).
        """
        group = self.group
        for index, process in enumerate(group.processes):
            if process.exitcode is None and self.heartbeat_age(index) > self.worker_timeout:
                if process.pid is not None:
                    self._hung.add(process.pid)
                process.kill()
                process.join(5)
        t_before = time.monotonic()
        resets = {reset.index: reset for reset in group.reap()}
        t_after = time.monotonic()
        self.result.resets.extend(resets.values())
        lines: list[str] = []
        for index, process in enumerate(group.processes):
            pid, exitcode = process.pid, process.exitcode
            if exitcode is None or pid in self._handled:
                continue
            self._handled.add(pid if pid is not None else -1)
            reason = "hung" if pid in self._hung else "crashed"
            reset = resets.get(index)
            stale = reset.stale_count if reset is not None else 0
            try:
                reclaimed = self._reclaim_records(index, t_before, t_after)
            except (ValueError, OSError) as error:
                reclaimed = 0
                self.result.problems.append(f"server {index}'s trace: {error}")
            self.result.crashed.append((index, exitcode))
            what = (
                f"did not beat for {self.worker_timeout:g} s and was killed"
                if reason == "hung"
                else f"exited with code {exitcode}"
            )
            line = (
                f"server {index} (pid {pid}) {what}; its slot was reclaimed (stale count {stale})"
            )
            new_pid: int | None = None
            counts = self.restart_counts()[index]
            if self.restart and sum(counts.values()) < self.max_restarts:
                assert self._http is not None
                self._http.heartbeats[index] = time.monotonic() + STARTUP_GRACE
                self._http.restarts[
                    index * len(RESTART_REASONS) + RESTART_REASONS.index(reason)
                ] += 1
                new_pid = group.restart(index).pid
                if new_pid is not None:
                    self.started_pids.append(new_pid)
                line += f"; restarted as pid {new_pid}"
            elif self.restart:
                line += f"; not restarted: {self.max_restarts} restarts already"
            restart = Restart(index, reason, pid, exitcode, stale, reclaimed, new_pid)
            self.result.restarts.append(restart)
            self._log(
                {
                    "t": t_after,
                    "server": index,
                    "event": "restart" if new_pid is not None else "down",
                    "reason": reason,
                    "pid": pid,
                    "exitcode": exitcode,
                    "stale_count": stale,
                    "reclaimed": reclaimed,
                    "new_pid": new_pid,
                }
            )
            lines.append(line)
        return lines

    def alive(self) -> int:
        """How many server processes are running."""
        return sum(1 for p in self.group.processes if p.exitcode is None)

    def pids(self) -> list[int]:
        """The pid of every server process now."""
        return [p.pid for p in self.group.processes if p.pid is not None]

    def slot_counts(self) -> list[int]:
        """Counter 0 of every slot."""
        return self.group.slot_counts()

    def read_events(self) -> list[AdmissionEvent]:
        """Every server's records, merged in order of `t` (E2E-TRACE-1).

        The files of this group's servers only: `server-<base>` ..
        `server-<base + N - 1>`, the global indices of a `serve --store` node
        (base 0 otherwise), each keeping its own order (ORC-TR-6); other files
        in the folder (another node's) are not read.
        """
        if self.trace_dir is None:
            return []
        per_server = []
        for server in range(self.trace_base, self.trace_base + self.num_servers):
            path = trace_file(self.trace_dir, server)
            if not path.exists():
                continue  # a server that never started wrote nothing
            events, numbers = read_trace(path)
            for event, number in zip(events, numbers, strict=True):
                if event.server != server:  # ORC-TR-13, as read_trace_folder checks it
                    raise TraceFormatError(
                        str(path),
                        number,
                        "server",
                        f"server {event.server} in the file of server {server}",
                    )
            per_server.append(events)
        return list(heapq.merge(*per_server, key=lambda event: event.t))

    def close(self) -> None:
        """Stop every server and reap every slot (E2E-SRV-4)."""
        if self._closed or self._group is None:
            return
        self._closed = True
        # E2E-SRV-4: SIGTERM (uvicorn's graceful shutdown), join, SIGKILL stragglers, reap.
        t_before = time.monotonic()
        self._group.close(timeout=8.0)
        t_after = time.monotonic()
        self.result.final_slots = self._group.slot_counts()
        self.result.resets.extend(r for r in self._group.resets if r not in self.result.resets)
        if self.trace_dir is not None:
            for index in range(self.num_servers):
                try:  # a straggler killed mid-request left requests without a departure
                    self._reclaim_records(index, t_before, t_after)
                except (ValueError, OSError) as error:
                    self.result.problems.append(f"server {index}'s trace: {error}")

    def __enter__(self) -> HttpServers:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
