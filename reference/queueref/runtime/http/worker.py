"""The child side of `serve`: one API server process (E2E-SRV-1, E2E-SRV-7).

Models one API server process of vLLM 0.30.0's OpenAI-compatible server with
`--api-server-count N` (`vllm/entrypoints/openai/api_server.py`). Each binds
its own `SO_REUSEPORT` socket, serves `queueref.runtime.http.app.CompletionApp` with
uvicorn, beats a heartbeat for its parent and appends its records to its
own trace file.

Deliberate divergences from vLLM 0.30.0: the port is shared with
`SO_REUSEPORT` rather than one socket handed down by the parent; the process
dies with its parent (`PR_SET_PDEATHSIG`, and a watchdog thread); the
heartbeat is queueref's (E2E-SRV-7).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import random
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Final, Literal

from queueref.admission.protocol import Protocol, parse_protocol
from queueref.runtime.http.app import CompletionApp
from queueref.runtime.http.metrics import RejectionCounts
from queueref.runtime.http.releases import release_answers
from queueref.runtime.http.render import Preflight, RenderConfig
from queueref.runtime.http.store import NodeStore, StoreFront
from queueref.runtime.servers import ServerSpec
from queueref.trace.events import AdmissionEvent
from queueref.trace.files import trace_file

#: A protocol `serve` offers: a `Protocol` or its name.
ServeMode = Protocol | Literal["local", "check-then-write", "write-then-check"]

#: The admission protocols `serve` offers (E2E-SRV-1), by their names.
SERVE_PROTOCOLS: Final[tuple[Protocol, ...]] = (
    Protocol.LOCAL,
    Protocol.CHECK_THEN_WRITE,
    Protocol.WRITE_THEN_CHECK,
)


#: Why the parent restarts a server (E2E-SRV-7): the order of the restart counters.
RESTART_REASONS: Final = ("crashed", "hung")

#: How often a child beats its heartbeat, in seconds.
HEARTBEAT_INTERVAL: Final = 0.1

#: The default prefill delay, as a fraction of the service time (E2E-SRV-8).
PREFILL_FRACTION: Final = 0.25

#: Linux's prctl option that sends a signal to a process when its parent dies.
_PR_SET_PDEATHSIG: Final = 1

#: uvicorn's graceful shutdown in a child, in seconds.
_GRACEFUL_SECONDS: Final = 3


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
    parent_pid: int = 0
    heartbeats: Any = None  # RawArray("d", N): each child's last beat (time.monotonic)
    restarts: Any = None  # RawArray("q", N * len(RESTART_REASONS)), written by the parent
    prefill_ms: float | None = None  # None: PREFILL_FRACTION of the service time
    store: NodeStore | None = None  # serve --store: admit through the multi-node store
    rejections: Any = None  # RawArray("q", N * len(REJECTION_REASONS)): E2E-SRV-9
    vllm_version: str | None = None  # serve --vllm-version: answer as that release (E2E-SRV-10)
    paused: Any = None  # RawArray("q", 1): the group's pause flag (vLLM 0.33.0's /pause)
    render: RenderConfig | None = None  # serve --render-ms: vLLM's whole path (E2E-REN-2)


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port) that shares the port (E2E-SRV-1)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(4096)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _die_with_parent(parent_pid: int) -> None:
    """E2E-SRV-7: SIGTERM this process when its parent dies; a thread checks it too."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog below still ends the process
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the signal was armed

    def watchdog() -> None:
        orphaned_at: float | None = None
        while True:
            time.sleep(0.5)
            if os.getppid() == parent_pid:
                continue
            orphaned_at = orphaned_at or time.monotonic()
            if time.monotonic() - orphaned_at > _GRACEFUL_SECONDS + 2:
                os._exit(1)  # SIGTERM did not end us (or never came): go now

    if parent_pid:
        threading.Thread(target=watchdog, name="queueref-watchdog", daemon=True).start()


def _build(spec: ServerSpec, http: HttpConfig, record: Any) -> CompletionApp:
    """The server's app: its own tracker and controller over the parent's counters (E2E-SRV-1)."""
    restarts = http.restarts
    width = len(RESTART_REASONS)

    def restart_counts() -> list[dict[str, int]]:
        return [
            {reason: int(restarts[slot * width + k]) for k, reason in enumerate(RESTART_REASONS)}
            for slot in range(spec.num_servers)
        ]

    common: dict[str, Any] = {
        "service_time_ms": http.service_time_ms,
        "prefill_ms": (
            http.prefill_ms
            if http.prefill_ms is not None
            else PREFILL_FRACTION * http.service_time_ms
        ),
        "jitter": http.jitter,
        "mode": http.mode,
        "id_prefix": f"cmpl-{spec.index}-{os.getpid()}",  # unique across restarts
        "restarts": restart_counts if restarts is not None else None,
        "release": release_answers(http.vllm_version) if http.vllm_version else None,
        "paused": http.paused,
        "rejections": (
            RejectionCounts(http.rejections, spec.num_servers, spec.index)
            if http.rejections is not None
            else None
        ),
    }
    if http.store is not None:
        # ADM-STORE-8: admission through the store, under the global index base + local.
        front = StoreFront(
            http.store,
            spec.index,
            spec.max_num_queued_reqs,
            record,
            spec.max_num_queued_tokens,
            spec.token_rule,
        )
        return CompletionApp(spec.build(record=None), store=front, **common)
    api = spec.build(record=record)  # the one builder of a controller, token rule included
    if parse_protocol(spec.protocol) is Protocol.LOCAL:
        # Before PR #54746: admission reads the own count only; the slot is a display.
        display = spec.shared_stats()
        return CompletionApp(api, display=display, global_view=display, **common)
    if http.render is not None:  # E2E-REN-2: preflight, render, registration
        rng = random.Random()
        common["preflight"] = Preflight(api, http.render, rng, record)
    return CompletionApp(api, global_view=api.controller.shared_stats, **common)


def serve_process(spec: ServerSpec, http: HttpConfig) -> None:
    """The entry point of one spawned API server process (E2E-SRV-1, E2E-SRV-7).

    Dies with its parent; binds its own `SO_REUSEPORT` socket; serves the app
    with uvicorn until SIGINT/SIGTERM (uvicorn's graceful shutdown); beats its
    heartbeat from the event loop; appends every decision to its trace file,
    flushed per record, so a crash loses nothing already decided.
    """
    _die_with_parent(http.parent_pid)
    import uvicorn

    stream: IO[str] | None = None
    if http.trace_dir is not None:
        base = http.store.base if http.store is not None else 0  # global index with a store
        stream = open(trace_file(http.trace_dir, base + spec.index), "a", encoding="utf-8")

    def record(event: AdmissionEvent) -> None:
        if stream is not None:
            stream.write(event.to_json() + "\n")
            stream.flush()

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
            timeout_graceful_shutdown=_GRACEFUL_SECONDS,
            backlog=4096,
        )
        server = uvicorn.Server(config)

        async def heartbeat() -> None:
            while True:
                if http.heartbeats is not None:
                    http.heartbeats[spec.index] = time.monotonic()
                await asyncio.sleep(HEARTBEAT_INTERVAL)

        async def main() -> None:
            # uvicorn runs without lifespan events: the store's renewals start here.
            await app.startup()
            task = asyncio.create_task(server.serve(sockets=[sock]))
            beat = asyncio.create_task(heartbeat())
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            if http.ready is not None and server.started:
                http.ready.release()
            try:
                await task
            finally:
                beat.cancel()
                await app.shutdown()

        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            pass  # E2E-SRV-4: Ctrl-C reaches every process of the group; uvicorn already stopped.
        finally:
            sock.close()
    finally:
        if stream is not None:
            stream.close()
