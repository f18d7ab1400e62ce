"""What a fault run measures and how it is judged (E2E-FAULT-3, E2E-FAULT-4).

`StorePoller` reads every count and heartbeat key every 50 ms while a
scenario of `queueref.runtime.faults.runs` runs; after the run, when the trace files
are complete, each snapshot is compared with every server's true count from
the merged trace (`store_matches_trace`): the store recovered when a
snapshot read within one lease of the heal shows every true count
(`recovered_within`), and the fault was real when the store showed it
(`fault_observed`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from queueref.runtime.store.redis_config import StoreConfig
from queueref.runtime.store.redis_connect import sync_client
from queueref.runtime.store.redis_scripts import key_prefix
from queueref.trace.events import AdmissionEvent


@dataclass(frozen=True)
class Snapshot:
    """One read of every count and heartbeat key, between `start` and `end` (monotonic)."""

    start: float
    end: float
    visible: tuple[int, ...]  # per server: its count if its lease is live, else 0
    allocated: bool = True  # the nodes' allocation is there: written once, at their start


def true_counts(events: list[AdmissionEvent], servers: int) -> list[list[tuple[float, int]]]:
    """Per server, its true count after each change: [(t, count)], starting at (-inf, 0)."""
    deltas: list[list[tuple[float, int]]] = [[] for _ in range(servers)]
    for event in events:
        if event.event == "admit":
            deltas[event.server].append((event.t, event.n))
        elif event.event in ("finish", "abort"):
            when = event.t_before if event.t_before is not None else event.t
            deltas[event.server].append((when, -event.n))
    steps: list[list[tuple[float, int]]] = []
    for changes in deltas:
        count, series = 0, [(float("-inf"), 0)]
        for when, delta in sorted(changes):
            count += delta
            series.append((when, count))
        steps.append(series)
    return steps


def _values_between(series: list[tuple[float, int]], start: float, end: float) -> set[int]:
    values = {series[0][1]}
    for when, count in series:
        if when <= start:
            values = {count}
        elif when <= end:
            values.add(count)
    return values


def store_matches_trace(
    snapshot: Snapshot, steps: list[list[tuple[float, int]]], slack: float
) -> bool:
    """E2E-FAULT-4: each server's visible count is a value its true count took while read."""
    return all(
        visible in _values_between(series, snapshot.start - slack, snapshot.end + slack)
        for visible, series in zip(snapshot.visible, steps, strict=True)
    )


def fault_observed(
    fault: str,
    snapshots: list[Snapshot],
    steps: list[list[tuple[float, int]]],
    clock: FaultClock,
    slack: float,
) -> bool:
    """E2E-FAULT-3: the store showed the fault (else the run proves nothing about it).

    partition, pause: server 0's slot read 0 during the fault while it held requests (its
    lease lapsed); redis-restart: the nodes' allocation, written once at their start, was
    gone after the restart (Redis came back empty);
    node-kill: the dead server's count still counted after the kill (until its lease);
    failover: the Sentinel named another primary; tokens: nothing to observe in the store.
    """
    if fault == "failover":
        return clock.promoted
    if fault == "tokens":
        return True

    def held(series: list[tuple[float, int]], s: Snapshot) -> int:
        return min(_values_between(series, s.start - slack, s.end + slack))

    if fault in ("partition", "pause"):
        during = [s for s in snapshots if clock.injected <= s.start and s.end <= clock.healed]
        return any(s.visible[0] == 0 and held(steps[0], s) > 0 for s in during)
    after = [s for s in snapshots if s.start >= clock.healed]
    if fault == "redis-restart":
        return any(not s.allocated for s in after)
    return any(s.visible[0] > 0 for s in after)  # node-kill


def recovered_within(
    snapshots: list[Snapshot],
    steps: list[list[tuple[float, int]]],
    healed: float,
    window: float,
    slack: float,
) -> bool:
    """E2E-FAULT-4: a snapshot read in [healed, healed + window] shows every true count."""
    return any(
        store_matches_trace(s, steps, slack)
        for s in snapshots
        if s.start >= healed and s.end <= healed + window
    )


class StorePoller:
    """Reads every count and heartbeat key every 50 ms in a thread; errors are skipped."""

    def __init__(
        self, url: str, deployment: str, servers: int, sentinel_master: str | None = None
    ) -> None:
        self._client = sync_client(url, sentinel_master, 0.3)
        config = StoreConfig(url, deployment, servers, 0)
        # A string key beside the nodes' hash: MGET reads a hash as None, so this one.
        self._nodes_key = f"{key_prefix(deployment)}:next_base"
        self._keys = [config.count_key(i) for i in range(servers)] + [
            config.heartbeat_key(i) for i in range(servers)
        ]
        self.servers = servers
        self.snapshots: list[Snapshot] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-poller", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            start = time.monotonic()
            try:
                raw = self._client.mget(self._keys + [self._nodes_key])
            except Exception:  # the store is down or cut: no snapshot
                continue
            end = time.monotonic()
            counts, beats = raw[: self.servers], raw[self.servers : 2 * self.servers]
            visible = tuple(
                int(c) if c is not None and b is not None and c.isdigit() else 0
                for c, b in zip(counts, beats, strict=True)
            )
            self.snapshots.append(Snapshot(start, end, visible, raw[-1] is not None))

    def __enter__(self) -> StorePoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._client.close()


@dataclass
class FaultClock:
    """When the fault was injected and healed (monotonic), and which servers it killed."""

    injected: float = 0.0
    healed: float = 0.0
    killed: list[int] = field(default_factory=list)
    promoted: bool = False  # failover: the Sentinel named another primary
