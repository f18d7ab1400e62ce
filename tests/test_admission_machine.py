"""Cross-process admission as a Hypothesis state machine over one shared buffer.

N simulated servers share one counter buffer (a ctypes array, like the
`RawArray` of production, so contracts do not re-read it). A check is split
into its single-slot reads -- `start_check`, `read_slot`, `decide` are
separate rules -- so other servers admit, finish and abort between two reads
of one server's check. Every server also keeps its requests in a real request
queue (`waiting`, FCFS or priority) and a `running` list, and the machine
adds, pops, prepends and removes on those queues as the scheduler would, so
queue operations and admissions interleave.

Invariants after every step: the admitted global count is at most
`M + (N - 1) * min(M, W)` (check-then-write) or `M` (write-then-check); when
a server has no check in progress its slot equals its tracker's count; no
count is negative; the queues hold exactly the tracker's requests.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
from broken_trackers import LazyRefreshTracker
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from queueref import (
    AdmissionController,
    AdmissionRejected,
    FCFSRequestQueue,
    Request,
    RequestTracker,
    SchedulingPolicy,
    SharedAdmissionStats,
    create_request_queue,
)
from queueref.admission import AdmissionCheck, AdmissionMode
from queueref.models.protocol import overshoot_bound
from queueref.queues import RequestQueue

PICK = st.integers(min_value=0, max_value=1_000)


class CrossProcessAdmission(RuleBasedStateMachine):
    """N servers, one buffer; checks read one slot per step (ADM-BOUND-1, ADM-BOUND-2)."""

    tracker_factory: Any = RequestTracker

    @initialize(
        num_servers=st.integers(min_value=1, max_value=4),
        cap=st.integers(min_value=0, max_value=4),
        max_n=st.integers(min_value=1, max_value=3),
        mode=st.sampled_from(["shared", "reserve"]),
        policy=st.sampled_from([SchedulingPolicy.FCFS, SchedulingPolicy.PRIORITY]),
    )
    def setup(
        self, num_servers: int, cap: int, max_n: int, mode: AdmissionMode, policy: Any
    ) -> None:
        """ADM-CTL-7: one controller per server over one shared buffer."""
        note(f"N={num_servers} M={cap} W={max_n} mode={mode} policy={policy.value}")
        self.num_servers = num_servers
        self.cap = cap
        self.max_n = max_n
        self.mode = mode
        size = SharedAdmissionStats.num_counters(num_servers)
        self.counters = (ctypes.c_longlong * size)()
        self.controllers: list[AdmissionController] = []
        for index in range(num_servers):
            stats = SharedAdmissionStats(self.counters, num_servers, index)
            self.controllers.append(
                AdmissionController(
                    cap, tracker=self.tracker_factory(stats), shared_stats=stats, mode=mode
                )
            )
        self.checks: dict[int, AdmissionCheck] = {}
        self.waiting: list[RequestQueue] = [
            create_request_queue(policy) for _ in range(num_servers)
        ]
        self.running: list[list[Request]] = [[] for _ in range(num_servers)]
        self.requests: list[dict[str, Request]] = [{} for _ in range(num_servers)]
        self.external: list[list[str]] = [[] for _ in range(num_servers)]
        self.model_count = [0] * num_servers  # the machine's own count, independent of the tracker
        self.serial = 0

    # -- helpers -------------------------------------------------------------

    def idle(self) -> list[int]:
        return [s for s in range(self.num_servers) if s not in self.checks]

    def idle_with_requests(self) -> list[int]:
        return [s for s in self.idle() if self.requests[s]]

    def unqueue(self, server: int, request_ids: list[str]) -> None:
        """Take ended requests out of `running` or the waiting queue (remove_requests)."""
        running_ids = {r.request_id for r in self.running[server]}
        self.running[server] = [
            r for r in self.running[server] if r.request_id not in set(request_ids)
        ]
        waiting = [self.requests[server][rid] for rid in request_ids if rid not in running_ids]
        if len(waiting) == 1:
            self.waiting[server].remove_request(waiting[0])
        elif waiting:
            self.waiting[server].remove_requests(waiting)
        for rid in request_ids:
            del self.requests[server][rid]
        self.model_count[server] -= len(request_ids)
        self.external[server] = [
            e for e in self.external[server] if self.controllers[server].tracker.has_request(e)
        ]

    # -- admission ----------------------------------------------------------

    @precondition(lambda self: bool(self.idle()))
    @rule(pick=PICK, n=st.integers(min_value=1, max_value=3))
    def start_check(self, pick: int, n: int) -> None:
        """ADM-CTL-7, ADM-CTL-9: a server starts a check (reserve mode writes first)."""
        server = self.idle()[pick % len(self.idle())]
        n = min(n, self.max_n)
        self.checks[server] = self.controllers[server].start_check(n)
        note(f"server {server}: start check n={n}")

    @precondition(lambda self: any(not check.done for check in self.checks.values()))
    @rule(pick=PICK)
    def read_slot(self, pick: int) -> None:
        """ADM-CTL-7: one read of one slot of one server's check."""
        reading = [s for s, check in sorted(self.checks.items()) if not check.done]
        server = reading[pick % len(reading)]
        check = self.checks[server]
        slot = check.next_slot
        value = check.read_next()
        note(f"server {server}: read slot {slot} = {value} (view {check.view})")

    @precondition(lambda self: any(check.done for check in self.checks.values()))
    @rule(pick=PICK, priority=st.integers(min_value=0, max_value=2))
    def decide(self, pick: int, priority: int) -> None:
        """ADM-FRONT-1, ADM-CTL-6: decide; admitted requests are registered at once, then queued."""
        deciding = [s for s, check in sorted(self.checks.items()) if check.done]
        server = deciding[pick % len(deciding)]
        check = self.checks.pop(server)
        tracker = self.controllers[server].tracker
        before = (list(self.counters), tracker.get_num_unfinished_requests())
        try:
            view = check.decide()
        except AdmissionRejected as rejection:
            note(f"server {server}: rejected n={check.n}: {type(rejection).__name__}")
            own = server * SharedAdmissionStats.COUNTERS_PER_SLOT
            expected = list(before[0])
            expected[own] = tracker.get_num_unfinished_requests()  # reservation written back
            assert list(self.counters) == expected
            assert tracker.get_num_unfinished_requests() == before[1]
            return
        self.serial += 1
        request_id = f"s{server}r{self.serial}"
        ids = tracker.add(request_id, check.n)
        note(f"server {server}: admitted {request_id} n={check.n} at view {view}")
        self.external[server].append(request_id)
        for rid in ids:
            request = Request(rid, priority=priority, arrival_time=float(self.serial))
            self.requests[server][rid] = request
            self.waiting[server].add_request(request)
        self.model_count[server] += check.n

    # -- departures ---------------------------------------------------------

    @precondition(lambda self: bool(self.idle_with_requests()))
    @rule(pick=PICK, which=PICK)
    def finish(self, pick: int, which: int) -> None:
        """ADM-TRK-3, ADM-TRK-5: an internal request finishes (waiting or running)."""
        servers = self.idle_with_requests()
        server = servers[pick % len(servers)]
        ids = sorted(self.requests[server])
        rid = ids[which % len(ids)]
        self.controllers[server].tracker.finish(rid)
        self.unqueue(server, [rid])
        note(f"server {server}: finish {rid}")

    @precondition(lambda self: any(self.external[s] for s in self.idle()))
    @rule(pick=PICK, which=PICK)
    def abort(self, pick: int, which: int) -> None:
        """ADM-TRK-2: abort a request by its id: a parent takes its children along."""
        servers = [s for s in self.idle() if self.external[s]]
        server = servers[pick % len(servers)]
        request_id = self.external[server][which % len(self.external[server])]
        ended = self.controllers[server].tracker.abort(request_id)
        assert ended
        self.unqueue(server, ended)
        note(f"server {server}: abort {request_id} -> {ended}")

    # -- the scheduler's queue operations -------------------------------------

    @precondition(lambda self: any(self.waiting[s] for s in range(len(self.waiting))))
    @rule(pick=PICK)
    def schedule(self, pick: int) -> None:
        """The scheduler pops the head of a waiting queue into running."""
        servers = [s for s in range(self.num_servers) if self.waiting[s]]
        server = servers[pick % len(servers)]
        head = self.waiting[server].peek_request()
        request = self.waiting[server].pop_request()
        assert request is head
        self.running[server].append(request)
        note(f"server {server}: schedule {request.request_id}")

    @precondition(lambda self: any(self.running[s] for s in range(len(self.running))))
    @rule(pick=PICK, count=st.integers(min_value=1, max_value=3))
    def preempt(self, pick: int, count: int) -> None:
        """Preemption puts running requests back in front: prepend_request / prepend_requests."""
        servers = [s for s in range(self.num_servers) if self.running[s]]
        server = servers[pick % len(servers)]
        moved = self.running[server][-count:]
        self.running[server] = self.running[server][: -len(moved)]
        if len(moved) == 1:
            self.waiting[server].prepend_request(moved[0])
        else:
            self.waiting[server].prepend_requests(FCFSRequestQueue(moved))
        note(f"server {server}: preempt {[r.request_id for r in moved]}")

    # -- invariants -----------------------------------------------------------

    def admitted_total(self) -> int:
        return sum(c.tracker.get_num_unfinished_requests() for c in self.controllers)

    @invariant()
    def check_bound(self) -> None:
        """ADM-BOUND-1, ADM-BOUND-2: the admitted global count never exceeds the bound."""
        if not hasattr(self, "controllers"):
            return
        if self.mode == "reserve":
            bound = self.cap
        else:
            bound = overshoot_bound(self.num_servers, self.cap, self.max_n)
            assert bound == self.cap + (self.num_servers - 1) * min(self.cap, self.max_n)
        total = self.admitted_total()
        assert total <= bound, f"admitted {total} > bound {bound}"

    @invariant()
    def check_slots(self) -> None:
        """ADM-TRK-5, ADM-STATS-2: idle servers' slots equal their counts; nothing negative."""
        if not hasattr(self, "controllers"):
            return
        per_slot = SharedAdmissionStats.COUNTERS_PER_SLOT
        assert all(value >= 0 for value in self.counters)
        for server, controller in enumerate(self.controllers):
            tracker = controller.tracker
            assert tracker.get_num_unfinished_requests() == self.model_count[server]
            assert tracker.num_reserved >= 0
            slot = self.counters[server * per_slot]
            if server in self.checks:
                held = self.checks[server].n if self.checks[server].holds_reservation else 0
                assert slot == self.model_count[server] + held
            else:
                assert tracker.num_reserved == 0
                assert slot == self.model_count[server]
            assert [self.counters[server * per_slot + k] for k in range(1, per_slot)] == [0] * 7

    @invariant()
    def check_queues(self) -> None:
        """Nothing lost or duplicated: waiting + running hold exactly the tracker's requests."""
        if not hasattr(self, "controllers"):
            return
        for server, controller in enumerate(self.controllers):
            queued = [r.request_id for r in self.waiting[server]]
            running = [r.request_id for r in self.running[server]]
            assert len(queued) == len(self.waiting[server])
            assert sorted(queued + running) == sorted(controller.tracker.request_ids())


CrossProcessAdmission.TestCase.settings = settings(deadline=None, stateful_step_count=40)
TestCrossProcessAdmission = CrossProcessAdmission.TestCase


class LazyRefreshAdmission(CrossProcessAdmission):
    tracker_factory = LazyRefreshTracker


class LazyRefreshBoundOnly(LazyRefreshAdmission):
    """The broken variant with the slot invariant switched off: only the bound can catch it."""

    def check_slots(self) -> None:  # not an invariant any more
        pass


def broken_run_settings() -> settings:
    return settings(
        max_examples=300,
        derandomize=True,
        database=None,
        deadline=None,
        stateful_step_count=40,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=False,
        phases=[Phase.generate],  # finding the failure is the point; shrinking it costs minutes
    )


def test_machine_catches_a_lazy_slot_refresh() -> None:
    """ADM-TRK-5 has teeth: the machine's slot invariant finds a server that skips a refresh."""
    with pytest.raises(AssertionError):
        run_state_machine_as_test(LazyRefreshAdmission, settings=broken_run_settings())


def test_machine_bound_catches_the_overshoot_of_a_lazy_refresh() -> None:
    """ADM-BOUND-1, ADM-BOUND-2 have teeth: the bound invariant alone finds the overshoot."""
    with pytest.raises(AssertionError, match="admitted .* > bound"):
        run_state_machine_as_test(LazyRefreshBoundOnly, settings=broken_run_settings())
