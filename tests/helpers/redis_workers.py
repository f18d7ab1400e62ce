"""Process targets for the multi-node store tests (module level: spawn imports them by name)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from queueref.runtime.store.redis_config import StoreConfig
from queueref.runtime.store.redis_store import RedisAdmissionStore
from queueref.trace.events import AdmissionEvent, EventKind, write_jsonl


async def _admission_loop(
    config: StoreConfig, cap: int, max_n: int, seconds: float, seed: int, trace: Path
) -> None:
    """Admit requests of random weight, hold each a few ms, release; record every event.

    Stamps follow ADM-EV-3: an admit right after the decision (before the
    write), a departure's `t_before` just before its write and `t` after it.
    """
    rng = random.Random(seed)
    store = RedisAdmissionStore(config, cap)
    await store.start()
    events: list[AdmissionEvent] = []
    held: list[tuple[str, int]] = []
    stop_at = time.monotonic() + seconds
    serial = 0
    server = config.server_index

    async def finish(request_id: str, n: int) -> None:
        before = time.monotonic()
        await store.release(n)
        events.append(
            AdmissionEvent(time.monotonic(), server, "finish", request_id, n, None, before)
        )

    try:
        while time.monotonic() < stop_at:
            if held and (rng.random() < 0.5 or len(held) > 4):
                await finish(*held.pop(rng.randrange(len(held))))
                continue
            serial += 1
            request_id = f"s{server}-{serial}"
            n = rng.randint(1, max_n)
            decision = await store.admit(n)
            stamp = time.monotonic()
            kind: EventKind = "admit" if decision.admitted else "reject"
            events.append(AdmissionEvent(stamp, server, kind, request_id, n, decision.view))
            if decision.admitted:
                held.append((request_id, n))
            await asyncio.sleep(rng.random() * 0.002)
        while held:
            await finish(*held.pop())
    finally:
        await store.close()
        write_jsonl(events, trace)


def admission_worker(
    config: StoreConfig, cap: int, max_n: int, seconds: float, seed: int, trace: str
) -> None:
    asyncio.run(_admission_loop(config, cap, max_n, seconds, seed, Path(trace)))


async def _fill_and_hang(config: StoreConfig, cap: int, ready: str) -> None:
    store = RedisAdmissionStore(config, cap)
    await store.start()
    while (await store.admit(1)).admitted:
        pass
    heartbeats = asyncio.ensure_future(store.run_heartbeats())
    partial = Path(ready + ".tmp")
    partial.write_text(json.dumps({"pid": os.getpid(), "count": store.count}))
    partial.replace(ready)  # the reader never sees half a file
    await heartbeats  # runs until the process is killed or stopped


def fill_and_hang_worker(config: StoreConfig, cap: int, ready: str) -> None:
    """Fill the cap, then keep renewing the lease until killed (kill -9 / SIGSTOP tests)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    asyncio.run(_fill_and_hang(config, cap, ready))


def read_ready(path: Path, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            data: dict[str, Any] = json.loads(path.read_text())
            return data
        time.sleep(0.01)
    raise TimeoutError(f"worker did not report ready in {path}")
