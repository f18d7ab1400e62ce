"""The per-server front: check + registration without an await, all-or-nothing fan-out.

Modelled on the upstream tests `test_concurrent_single_request_admission_respects_limit`
and `test_parallel_admission_is_all_or_nothing` (asyncio.gather of two requests).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from method_variants import Change, broken_class

from queueref import (
    AdmissionController,
    MaxQueuedTokensError,
    QueueOverflowError,
    RequestTracker,
    SharedAdmissionStats,
)
from queueref.admission.front import APIServer
from queueref.trace.events import AdmissionEvent, max_in_flight


async def engine_step(_request_id: str) -> None:
    """Stands for `engine_core.add_request_async`: yields to the other coroutines."""
    await asyncio.sleep(0)


def front(limit: int | None, mode: str = "check-then-write", **kwargs: Any) -> APIServer:
    return APIServer(AdmissionController(limit, mode=mode), submit=engine_step, **kwargs)  # type: ignore[arg-type]


AwaitingFront = broken_class(
    APIServer,
    "AwaitingFront",
    Change(
        "add_request",
        "yields to the event loop between the check and the registration",
        "ids = self.admit(request_id, n, num_prompt_tokens)",
        "self.controller.check_admission(n)\n"
        "    await asyncio.sleep(0)  # the bug: another coroutine's check runs here\n"
        "    ids = self.tracker.add(request_id, n, num_prompt_tokens)",
    ),
    uses={"asyncio": asyncio},
)


async def gather_two(server: APIServer, first_n: int, second_n: int) -> list[Any]:
    return list(
        await asyncio.gather(
            server.add_request("first", first_n),
            server.add_request("second", second_n),
            return_exceptions=True,
        )
    )


@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
def test_concurrent_requests_cannot_take_the_same_last_slot(mode: str) -> None:
    """ADM-FRONT-1: two coroutines, one slot: exactly one is admitted."""
    server = front(1, mode)
    results = asyncio.run(gather_two(server, 1, 1))
    assert results[0] == ["first"]
    assert isinstance(results[1], QueueOverflowError)
    assert server.tracker.get_num_unfinished_requests() == 1
    assert server.tracker.num_reserved == 0


def test_an_await_between_check_and_registration_overshoots() -> None:
    """ADM-FRONT-1 has teeth: the broken front admits both coroutines into one slot."""
    server = AwaitingFront(AdmissionController(1), submit=engine_step)
    results = asyncio.run(gather_two(server, 1, 1))
    assert results == [["first"], ["second"]]
    assert server.tracker.get_num_unfinished_requests() == 2  # M = 1 exceeded


@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
@pytest.mark.parametrize("first_n", [1, 3])
def test_parallel_admission_is_all_or_nothing(first_n: int, mode: str) -> None:
    """ADM-FRONT-2: cap 3; n=1 then n=3 (or reversed): the first wins, the second gets nothing."""
    server = front(3, mode)
    second_n = 3 if first_n == 1 else 1
    results = asyncio.run(gather_two(server, first_n, second_n))
    assert not isinstance(results[0], Exception)
    assert isinstance(results[1], QueueOverflowError)
    assert server.tracker.get_num_unfinished_requests() == first_n
    assert server.tracker.num_reserved == 0


@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
def test_submission_failure_gives_every_slot_back(mode: str) -> None:
    """ADM-FRONT-2: the second child's submission fails: all children are aborted."""
    submitted: list[str] = []

    async def flaky(request_id: str) -> None:
        if submitted:
            raise RuntimeError("engine refused")
        submitted.append(request_id)
        await asyncio.sleep(0)

    counters = [0] * 16
    stats = SharedAdmissionStats(counters, 2, 0)
    controller = AdmissionController(
        4,
        tracker=RequestTracker(stats),
        shared_stats=stats,
        mode=mode,  # type: ignore[arg-type]
    )
    server = APIServer(controller, submit=flaky)
    with pytest.raises(RuntimeError, match="engine refused"):
        asyncio.run(server.add_request("p", 3))
    assert submitted == ["0_p"]
    assert server.tracker.get_num_unfinished_requests() == 0
    assert not server.tracker.has_request("p")
    assert counters == [0] * 16


def test_cancellation_gives_every_slot_back() -> None:
    """ADM-FRONT-2: cancelled while the first child is being submitted: every child is aborted."""
    started = asyncio.Event()

    async def hang(_request_id: str) -> None:
        started.set()
        await asyncio.Event().wait()

    server = APIServer(AdmissionController(3), submit=hang)

    async def scenario() -> None:
        task = asyncio.create_task(server.add_request("p", 3))
        await started.wait()
        assert server.tracker.get_num_unfinished_requests() == 3
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert server.tracker.get_num_unfinished_requests() == 0


@pytest.mark.guard
def test_bad_id_is_refused_before_the_check() -> None:
    """ADM-FRONT-1, ADM-CTL-6: a duplicate id is a ValueError and reserves nothing."""
    server = front(5, "write-then-check")
    server.admit("a")
    with pytest.raises(ValueError, match="ADM-TRK-1"):
        server.admit("a")
    with pytest.raises(ValueError, match="ADM-CTL-2"):
        server.admit("b", 0)
    assert server.tracker.num_reserved == 0
    assert server.tracker.get_num_unfinished_requests() == 1


def test_events_are_recorded_with_the_stamping_convention() -> None:
    """ADM-EV-3: admit after the decision and before the slot write; departures around it."""
    ticks = iter(range(100))
    clock_log: list[tuple[int, list[int]]] = []
    counters = [0] * 16
    stats = SharedAdmissionStats(counters, 2, 1)

    def clock() -> float:
        tick = next(ticks)
        clock_log.append((tick, list(counters[8:9])))
        return float(tick)

    events: list[AdmissionEvent] = []
    controller = AdmissionController(2, tracker=RequestTracker(stats), shared_stats=stats)
    server = APIServer(controller, server_index=1, record=events.append, clock=clock)
    server.admit("a", 2)
    with pytest.raises(QueueOverflowError):
        server.admit("b")
    server.finish("0_a")
    server.abort("a")
    assert server.abort("a") == []  # nothing ended: no event
    assert [(e.event, e.request_id, e.n, e.view) for e in events] == [
        ("admit", "a", 2, 0),
        ("reject", "b", 1, 2),
        ("finish", "0_a", 1, None),
        ("abort", "a", 1, None),
    ]
    # slot value seen by the clock: admit stamped while the slot still read 0 (before the
    # write); t_before of a departure before its write, t after it.
    assert clock_log == [(0, [0]), (1, [2]), (2, [2]), (3, [1]), (4, [1]), (5, [0]), (6, [0])]
    assert [(e.t_before, e.t) for e in events] == [(None, 0.0), (None, 1.0), (2.0, 3.0), (4.0, 5.0)]
    assert max_in_flight(events) == 2


def test_token_rejection_is_recorded_without_a_view() -> None:
    """ADM-EV-1: a token rejection has no request-count view to report."""
    events: list[AdmissionEvent] = []
    tracker = RequestTracker()
    tracker.add("long", num_prompt_tokens=10)
    server = APIServer(AdmissionController(None, 10, tracker=tracker), record=events.append)
    with pytest.raises(MaxQueuedTokensError):
        server.admit("x")
    assert [(e.event, e.view) for e in events] == [("reject", None)]


def test_locked_front_uses_the_lock() -> None:
    """ADM-FRONT-1: the admission lock wraps check + registration (the exact baseline)."""
    entered: list[str] = []

    class Lock:
        def __enter__(self) -> None:
            entered.append("enter")

        def __exit__(self, *exc: object) -> None:
            entered.append("exit")

    server = APIServer(AdmissionController(1), admission_lock=Lock())
    server.admit("a")
    with pytest.raises(QueueOverflowError):
        server.admit("b")
    assert entered == ["enter", "exit", "enter", "exit"]
