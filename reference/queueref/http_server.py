"""Real HTTP API servers: an ASGI app per spawned process, all on one port.

Models the front door of vLLM's OpenAI-compatible server
(`vllm/entrypoints/openai/api_server.py` with `--api-server-count N`): N API
server processes accept connections on one listening address; each admits a
completion request with `AsyncLLM.check_admission`, answers HTTP 503 with an
OpenAI-style JSON error when the queue is full, and exports
`vllm:num_requests_running` on `/metrics`.

Deliberate divergences from vLLM:

* The engine is simulated: an admitted request is held for the service time
  (with jitter) and then finished; no model runs.
* The processes share the port with `SO_REUSEPORT` (Linux balances incoming
  connections by a hash of the client's address and port): the parent only
  checks that the port is free, every child binds its own listening socket.
  vLLM's parent binds once and hands the socket to its children.
* `mode="local"` runs each server on its own count (the behaviour before vLLM
  PR #54746); the parent's counter array is then only a display of each
  server's count for `/metrics`, never read by admission.
* Every decision and departure is recorded as an `AdmissionEvent` line in a
  per-server file (`queueref.events`), so a run can be checked afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import json
import multiprocessing
import os
import random
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Literal

from queueref.admission import (
    AdmissionController,
    AdmissionRejected,
    SharedAdmissionStats,
)
from queueref.events import AdmissionEvent
from queueref.front import APIServer
from queueref.models.protocol import parse_protocol
from queueref.servers import START_METHOD, ServerGroup, ServerSpec, SlotReset
from queueref.tracker import RequestTracker
from queueref.validators import is_int_at_least

ServeMode = Literal["local", "shared", "reserve"]

#: The admission protocols `serve` offers (E2E-SRV-1).
SERVE_MODES: Final[tuple[ServeMode, ...]] = ("local", "shared", "reserve")

#: The paths of the completion endpoint (E2E-SRV-2).
COMPLETION_PATHS: Final = ("/v1/completions", "/v1/chat/completions")

#: The `type` of the JSON error of a rejected request (E2E-SRV-2).
BUSY_ERROR_TYPE: Final = "ServiceUnavailableError"

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def busy_body(message: str) -> dict[str, Any]:
    """The JSON body of a 503: vLLM's `ErrorResponse` shape (E2E-SRV-2)."""
    return {
        "error": {
            "message": message,
            "type": BUSY_ERROR_TYPE,
            "param": None,
            "code": 503,
        }
    }


def is_busy_body(body: bytes) -> bool:
    """Whether `body` is the documented 503 body: busy, try again (E2E-SRV-2)."""
    try:
        record = json.loads(body)
    except ValueError:
        return False
    if not isinstance(record, dict) or set(record) != {"error"}:
        return False
    error = record["error"]
    if not isinstance(error, dict) or error.get("code") != 503:
        return False
    if error.get("type") != BUSY_ERROR_TYPE:
        return False
    message = error.get("message")
    return isinstance(message, str) and "busy" in message and "try again" in message


@dataclass(frozen=True)
class HttpConfig:
    """What every server process needs besides its `ServerSpec` (E2E-SRV-1)."""

    host: str
    port: int
    mode: ServeMode
    service_time_ms: float
    jitter: float = 0.2
    trace_dir: str | None = None
    ready: Any = None  # a spawn-context Semaphore released once per server that listens


def trace_file(trace_dir: str | Path, index: int) -> Path:
    """The per-server record file in `trace_dir`."""
    return Path(trace_dir) / f"server-{index}.jsonl"


class CompletionApp:
    """The ASGI app of one API server (E2E-SRV-2, E2E-SRV-3).

    `POST /v1/completions` admits the request (check + registration, no await
    between: ADM-FRONT-1), holds it for the service time, finishes it and
    answers 200; a rejection answers 503 with `busy_body`. `GET /metrics` is
    Prometheus text; `GET /health` answers 200.
    """

    def __init__(
        self,
        api: APIServer,
        *,
        service_time_ms: float,
        jitter: float = 0.2,
        display: SharedAdmissionStats | None = None,
        global_view: SharedAdmissionStats | None = None,
        mode: str = "shared",
        seed: int | None = None,
    ) -> None:
        self._api = api
        self._service = service_time_ms / 1000.0
        self._jitter = jitter
        self._display = display
        self._global = global_view
        self._mode = mode
        self._ids = itertools.count()
        self._random = random.Random(seed)
        self.admitted = 0
        self.rejected = 0

    @property
    def api(self) -> APIServer:
        """The server's admission front."""
        return self._api

    def _mirror(self) -> None:
        """Local mode: show this server's count in its display slot (never read by admission)."""
        if self._display is not None:
            self._display.set_num_requests(self._api.tracker.get_num_unfinished_requests())

    def global_running(self) -> int:
        """The global count read from the shared counters (the own count without them)."""
        if self._global is not None:
            return self._global.get_num_requests()
        return self._api.tracker.get_num_unfinished_requests()

    def metrics_text(self) -> str:
        """Prometheus text exposition of this server's and the global count (E2E-SRV-3)."""
        index = self._api.server_index
        limit = self._api.controller.max_num_queued_reqs
        lines = [
            "# HELP vllm:num_requests_running Requests admitted and unfinished on this server.",
            "# TYPE vllm:num_requests_running gauge",
            f'vllm:num_requests_running{{server="{index}"}} '
            f"{self._api.tracker.get_num_unfinished_requests()}",
            "# HELP queueref:global_num_requests_running Sum of every server's shared slot.",
            "# TYPE queueref:global_num_requests_running gauge",
            f'queueref:global_num_requests_running{{server="{index}"}} {self.global_running()}',
            "# HELP queueref:max_num_queued_reqs The cap M.",
            "# TYPE queueref:max_num_queued_reqs gauge",
            f'queueref:max_num_queued_reqs{{mode="{self._mode}"}} '
            f"{limit if limit is not None else -1}",
            "# HELP queueref:requests_total Admission decisions of this server.",
            "# TYPE queueref:requests_total counter",
            f'queueref:requests_total{{server="{index}",outcome="admitted"}} {self.admitted}',
            f'queueref:requests_total{{server="{index}",outcome="rejected"}} {self.rejected}',
        ]
        return "\n".join(lines) + "\n"

    async def _answer(
        self, send: Send, status: int, body: bytes, content_type: bytes = b"application/json"
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _drain(self, receive: Receive) -> None:
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            more = bool(message.get("more_body", False))

    async def complete(self, receive: Receive, send: Send) -> None:
        """Admit, hold for the service time, finish, answer (E2E-SRV-2)."""
        await self._drain(receive)
        request_id = f"cmpl-{self._api.server_index}-{next(self._ids)}"
        try:
            # ADM-FRONT-1: check + registration in one synchronous step.
            ids = self._api.admit(request_id)
        except AdmissionRejected as rejection:
            # E2E-SRV-2: a rejected request gets 503 and vLLM's JSON error body.
            self.rejected += 1
            body = json.dumps(busy_body(rejection.message)).encode()
            await self._answer(send, rejection.http_status, body)
            return
        self.admitted += 1
        self._mirror()
        finished = False
        try:
            spread = self._jitter * self._service
            await asyncio.sleep(max(0.0, self._service + self._random.uniform(-spread, spread)))
            for rid in ids:
                self._api.finish(rid)
            finished = True
            self._mirror()
        finally:
            if not finished:
                # Cancelled (client gone, shutdown): give the slot back, recorded as an abort.
                self._api.abort(request_id)
                self._mirror()
        body = json.dumps(
            {
                "id": request_id,
                "object": "text_completion",
                "created": int(time.time()),
                "model": "queueref-simulated",
                "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
            }
        ).encode()
        await self._answer(send, 200, body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        if path in COMPLETION_PATHS:
            await self.complete(receive, send)
        elif path == "/metrics":
            await self._drain(receive)
            await self._answer(
                send, 200, self.metrics_text().encode(), b"text/plain; version=0.0.4"
            )
        elif path == "/health":
            await self._drain(receive)
            await self._answer(send, 200, b"{}")
        else:
            await self._drain(receive)
            await self._answer(send, 404, b'{"error": {"message": "not found", "code": 404}}')


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port) that shares the port (E2E-SRV-1).

    `SO_REUSEPORT`: every server process binds its own socket on the same
    port and the kernel spreads incoming connections over them.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class PortInUseError(OSError):
    """The port of `serve` is taken by another program (E2E-CLI-1)."""


def reserve_port(host: str, port: int) -> int:
    """Check that (host, port) is free and return it; port 0 picks a free one (E2E-CLI-1).

    Binds without `SO_REUSEPORT`, so any other listener on the port makes it
    fail, then releases it for the server processes.
    """
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        chosen: int = probe.getsockname()[1]
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise PortInUseError(error.errno, f"port {port} on {host} is already in use") from None
        raise
    finally:
        probe.close()
    return chosen


def port_is_free(host: str, port: int) -> bool:
    """Whether nothing listens on (host, port) any more (E2E-SRV-4)."""
    try:
        reserve_port(host, port)
    except OSError:
        return False
    return True


def _build(spec: ServerSpec, http: HttpConfig, record: Callable[[AdmissionEvent], None]) -> Any:
    """The server's app: its own tracker and controller over the parent's counters (E2E-SRV-1)."""
    if http.mode == "local":
        # Before PR #54746: admission reads the own count only; the slot is a display.
        tracker = RequestTracker(None)
        controller = AdmissionController(
            spec.max_num_queued_reqs, spec.max_num_queued_tokens, tracker=tracker
        )
        api = APIServer(controller, server_index=spec.index, record=record)
        display = spec.shared_stats()
        return CompletionApp(
            api,
            service_time_ms=http.service_time_ms,
            jitter=http.jitter,
            display=display,
            global_view=display,
            mode=http.mode,
        )
    api = spec.build(record=record)
    return CompletionApp(
        api,
        service_time_ms=http.service_time_ms,
        jitter=http.jitter,
        global_view=spec.shared_stats(),
        mode=http.mode,
    )


def serve_process(spec: ServerSpec, http: HttpConfig) -> None:
    """The entry point of one spawned API server process (E2E-SRV-1).

    Binds its own `SO_REUSEPORT` socket, serves the app with uvicorn until
    SIGINT/SIGTERM (uvicorn's graceful shutdown), and records every decision
    to its trace file, one line at a time (flushed per line, so a crash loses
    nothing already decided).
    """
    import uvicorn

    stream: IO[str] | None = None
    if http.trace_dir is not None:
        stream = open(trace_file(http.trace_dir, spec.index), "w", encoding="utf-8", buffering=1)

    def record(event: AdmissionEvent) -> None:
        if stream is not None:
            stream.write(event.to_json() + "\n")

    try:
        app = _build(spec, http, record)
        sock = listening_socket(http.host, http.port)
        config = uvicorn.Config(
            app,
            lifespan="off",
            loop="asyncio",
            http="h11",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=3,
            backlog=1024,
        )
        server = uvicorn.Server(config)

        async def main() -> None:
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            if http.ready is not None and server.started:
                http.ready.release()
            await task

        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            pass  # E2E-SRV-4: Ctrl-C reaches every process of the group; uvicorn already stopped.
        finally:
            sock.close()
    finally:
        if stream is not None:
            stream.close()


@dataclass
class ServeResult:
    """What a `serve` run left: the records, the slots at the end, the crashes."""

    port: int
    events: list[AdmissionEvent] = field(default_factory=list)
    final_slots: list[int] = field(default_factory=list)
    resets: list[SlotReset] = field(default_factory=list)
    crashed: list[tuple[int, int | None]] = field(default_factory=list)


class HttpServers:
    """N spawned HTTP API server processes on one port, as a context manager (E2E-SRV-1).

    Entering checks the port, spawns the servers (`queueref.servers.ServerGroup`,
    which allocates the counter array) and waits until every one listens.
    Leaving stops them all (SIGTERM, then SIGKILL), reaps every slot and
    merges the per-server records (E2E-SRV-4, E2E-TRACE-1).
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
    ) -> None:
        # E2E-CLI-1: bad input is refused before anything starts.
        if not is_int_at_least(num_servers, 1):
            raise ValueError(f"--servers must be an integer >= 1, got {num_servers!r}")
        if not is_int_at_least(max_num_queued_reqs, 0):
            raise ValueError(
                f"--max-num-queued-reqs must be an integer >= 0, got {max_num_queued_reqs!r}"
            )
        if mode not in SERVE_MODES:
            raise ValueError(f"--admission must be one of {SERVE_MODES}, got {mode!r}")
        if service_time_ms < 0:
            raise ValueError(f"--service-time-ms must be >= 0, got {service_time_ms!r}")
        self.num_servers = num_servers
        self.max_num_queued_reqs = max_num_queued_reqs
        self.mode: ServeMode = mode
        self.host = host
        self.requested_port = port
        self.port = port
        self.service_time_ms = service_time_ms
        self.jitter = jitter
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        self.startup_timeout = startup_timeout
        self._group: ServerGroup | None = None
        self._reported: set[int] = set()
        self._closed = False
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
        """Check the port, spawn the servers, wait until all listen (E2E-SRV-1)."""
        self.port = reserve_port(self.host, self.requested_port)
        self.result.port = self.port
        if self.trace_dir is not None:
            self.trace_dir.mkdir(parents=True, exist_ok=True)
        ready = multiprocessing.get_context(START_METHOD).Semaphore(0)
        http = HttpConfig(
            self.host,
            self.port,
            self.mode,
            self.service_time_ms,
            self.jitter,
            str(self.trace_dir) if self.trace_dir is not None else None,
            ready,
        )
        group = ServerGroup(
            serve_process,
            self.num_servers,
            max_num_queued_reqs=self.max_num_queued_reqs,
            protocol=parse_protocol(self.mode),
            args=(http,),
        )
        self._group = group
        group.start()
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

    def poll(self) -> list[str]:
        """Reap dead servers: one report line per crash, its slot reset (E2E-SRV-4, ADM-SRV-2)."""
        group = self.group
        lines: list[str] = []
        resets = {reset.index: reset for reset in group.reap()}
        self.result.resets.extend(resets.values())
        for spec, process in zip(group.specs, group.processes, strict=False):
            if process.exitcode is None or spec.index in self._reported:
                continue
            self._reported.add(spec.index)
            self.result.crashed.append((spec.index, process.exitcode))
            reset = resets.get(spec.index)
            stale = reset.stale_count if reset is not None else 0
            lines.append(
                f"server {spec.index} (pid {process.pid}) exited with code {process.exitcode}; "
                f"its slot was reclaimed (stale count {stale})"
            )
        return lines

    def alive(self) -> int:
        """How many server processes are still running."""
        return sum(1 for p in self.group.processes if p.exitcode is None)

    def slot_counts(self) -> list[int]:
        """Counter 0 of every slot."""
        return self.group.slot_counts()

    def close(self) -> None:
        """Stop every server, reap every slot, merge the records (E2E-SRV-4)."""
        if self._closed or self._group is None:
            return
        self._closed = True
        # E2E-SRV-4: SIGTERM (uvicorn's graceful shutdown), join, SIGKILL stragglers, reap.
        self._group.close(timeout=8.0)
        self.result.final_slots = self._group.slot_counts()
        self.result.resets.extend(r for r in self._group.resets if r not in self.result.resets)
        if self.trace_dir is not None:
            self.result.events = merge_traces(self.trace_dir, self.num_servers)

    def __enter__(self) -> HttpServers:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def merge_traces(trace_dir: str | Path, num_servers: int) -> list[AdmissionEvent]:
    """The records of every server, merged in order of `t` (E2E-TRACE-1).

    Each server's file is in its own time order; a stable sort keeps it.
    A torn last line of a killed server is skipped.
    """
    events: list[AdmissionEvent] = []
    for index in range(num_servers):
        path = trace_file(trace_dir, index)
        if not path.exists():
            continue
        with open(path, encoding="utf-8") as stream:
            for line in stream:
                if not line.strip():
                    continue
                with contextlib.suppress(ValueError):
                    events.append(AdmissionEvent.from_json(line))
    events.sort(key=lambda event: event.t)
    return events


def pids_alive(pids: Iterator[int] | list[int]) -> list[int]:
    """The pids among `pids` that still exist (for the no-process-left checks)."""
    alive: list[int] = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        alive.append(pid)
    return alive
