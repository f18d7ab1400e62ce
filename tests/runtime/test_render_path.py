"""E2E-REN-1..3, ADM-PRE-1, ADM-PRE-5, ADM-PRE-6: the render path of one server, in process.

Real `AdmissionController`s of two servers over one counter buffer, driven by
`Preflight.admit` with a fake ASGI `receive`; the expected counts are the paths'
rules written out here, not read from the code under test.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from queueref.admission.controller import AdmissionController
from queueref.admission.front import APIServer
from queueref.admission.paths import AdmissionPath
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.errors import AdmissionRejected, QueueOverflowError
from queueref.runtime.http.render import (
    RENDER_FAULT,
    ClientGone,
    Preflight,
    RenderConfig,
    RenderTime,
    check_render_setup,
    parse_preflight,
    parse_render_ms,
)
from queueref.trace.events import AdmissionEvent

TWO = AdmissionPath.TWO_CHECK
WTC = AdmissionPath.RESERVE_WRITE_THEN_CHECK
CTW = AdmissionPath.RESERVE_CHECK_THEN_WRITE
RESERVATIONS = (WTC, CTW)


class Group:
    """N servers on one buffer, each with a `Preflight` of the same mode."""

    def __init__(self, path: AdmissionPath, servers: int, cap: int, render_ms: float) -> None:
        render = RenderConfig(RenderTime(render_ms, render_ms), path)
        self.counters = [0] * SharedAdmissionStats.num_counters(servers)
        self.events: list[AdmissionEvent] = []
        self.apis = []
        self.paths = []
        for p in range(servers):
            stats = SharedAdmissionStats(self.counters, servers, p)
            controller = AdmissionController(cap, shared_stats=stats, mode=render.protocol)
            api = APIServer(controller, server_index=p, record=self.events.append)
            self.apis.append(api)
            self.paths.append(Preflight(api, render, random.Random(0), self.events.append))

    def slots(self) -> list[int]:
        return self.counters[:: SharedAdmissionStats.COUNTERS_PER_SLOT]

    def counts(self) -> list[tuple[int, int]]:
        """(unfinished, reserved) of every server."""
        return [
            (a.tracker.get_num_unfinished_requests(), a.tracker.num_reserved) for a in self.apis
        ]


async def quiet() -> dict[str, Any]:
    await asyncio.sleep(3600)
    return {"type": "http.request"}


async def hang_up() -> dict[str, Any]:
    return {"type": "http.disconnect"}


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [("100", 100, 100), ("50-200", 50, 200), ("0", 0, 0), ("60000", 6e4, 6e4)],
)
def test_e2e_ren_1_render_ms_syntax(text: str, low: float, high: float) -> None:
    """E2E-REN-1: a fixed time or LOW-HIGH, in ms."""
    assert parse_render_ms(text) == RenderTime(low, high)


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "60001", "200-50", "x", "", "1-2-3", "-5-10"])
def test_e2e_ren_1_bad_render_ms_is_one_line(text: str) -> None:
    """E2E-REN-1: negative, NaN, absurd or malformed: one line naming --render-ms."""
    with pytest.raises(ValueError, match=r"^--render-ms must be MS or LOW-HIGH .*got") as error:
        parse_render_ms(text)
    assert "\n" not in str(error.value)


def test_e2e_ren_2_preflight_modes_and_combinations() -> None:
    """E2E-REN-2: the modes served, and the combinations refused."""
    assert parse_preflight("two-check") is TWO
    with pytest.raises(ValueError, match="--preflight must be one of two-check, "):
        parse_preflight("two-check-await-gap")  # a model of 0.30.0, not served
    render = RenderConfig(RenderTime(1, 1), WTC)
    with pytest.raises(ValueError, match="runs over write-then-check counters"):
        check_render_setup(render, RenderConfig(RenderTime(1, 1)).protocol, None, None)
    with pytest.raises(ValueError, match="reserves requests only"):
        check_render_setup(render, render.protocol, None, 100)
    with pytest.raises(ValueError, match="not simulated with --store"):
        check_render_setup(render, render.protocol, object(), None)


@pytest.mark.parametrize("path", RESERVATIONS)
@pytest.mark.parametrize("way_out", ["render-error", "disconnect", "cancel"])
def test_e2e_ren_3_every_way_out_releases_the_reservation(
    path: AdmissionPath, way_out: str
) -> None:
    """E2E-REN-3: a render that raises, a client gone, a cancelled handler: every counter
    as it was, and the records say reserve then release."""
    group = Group(path, 2, 2, render_ms=50)

    async def run() -> None:
        receive = hang_up if way_out == "disconnect" else quiet
        fault = RENDER_FAULT if way_out == "render-error" else ""
        task = asyncio.ensure_future(group.paths[0].admit("a", 2, 1, fault, receive))
        await asyncio.sleep(0.01)
        if way_out != "disconnect":
            assert group.slots() == [2, 0]  # the reservation is held while rendering
            assert group.counts() == [(0, 2), (0, 0)]
        if way_out == "cancel":
            task.cancel()
        with pytest.raises(BaseException) as error:
            await task
        expected = {"render-error": "RenderFailed", "disconnect": "ClientGone"}
        assert type(error.value).__name__ == expected.get(way_out, "CancelledError")

    asyncio.run(run())
    assert group.slots() == [0, 0]
    assert group.counts() == [(0, 0), (0, 0)]
    kinds = [(e.event, e.n) for e in group.events]
    assert kinds == [("reserve", 2), ("release", 2)]


def test_e2e_ren_3_broken_release_is_caught() -> None:
    """E2E-REN-3: the same check fails on a path that forgets the release (broken variant)."""
    group = Group(WTC, 1, 2, render_ms=10)
    group.apis[0].tracker.release_reservation = lambda n: None  # type: ignore[method-assign]

    async def run() -> None:
        with pytest.raises(ClientGone):
            await group.paths[0].admit("a", 1, 1, "", hang_up)

    asyncio.run(run())
    assert group.slots() != [0]  # the leak the test above rules out


async def burst(group: Group, per_server: int) -> list[str]:
    """Every server starts `per_server` requests of n = 1 at once; the outcomes."""

    async def one(p: int, k: int) -> str:
        try:
            await group.paths[p].admit(f"r{p}-{k}", 1, 1, "", quiet)
        except QueueOverflowError:
            return "refused"
        return "admitted"

    jobs = [one(p, k) for p in range(len(group.paths)) for k in range(per_server)]
    return list(await asyncio.gather(*jobs))


def test_adm_pre_1_two_check_wastes_renders_in_a_burst() -> None:
    """ADM-PRE-1, E2E-REN-5: vLLM's path, M = 2, 2 servers x 3: all 6 pass preflight,
    2 register, 4 are rendered in vain."""
    group = Group(TWO, 2, 2, render_ms=20)
    outcomes = asyncio.run(burst(group, 3))
    assert outcomes.count("admitted") == 2
    assert sum(p.wasted_renders for p in group.paths) == 4
    assert sum(e.event == "preflight" for e in group.events) == 6
    assert sum(group.slots()) == 2


@pytest.mark.parametrize("path", RESERVATIONS)
def test_adm_pre_5_6_reservations_waste_no_render(path: AdmissionPath) -> None:
    """ADM-PRE-5, ADM-PRE-6, E2E-REN-5: a reservation refuses at preflight: nothing
    rendered in vain, never above M."""
    group = Group(path, 2, 2, render_ms=20)
    outcomes = asyncio.run(burst(group, 3))
    assert outcomes.count("admitted") == 2
    assert sum(p.wasted_renders for p in group.paths) == 0
    assert sum(e.event == "reject" for e in group.events) == 4  # all at preflight
    assert group.counts() == [(1, 0), (1, 0)] or sorted(group.counts()) == [(0, 0), (2, 0)]
    assert sum(group.slots()) == 2


def test_adm_ev_6_a_refusal_at_preflight_records_its_tokens_under_a_token_limit() -> None:
    """ADM-EV-6, ADM-EV-7: vLLM's path under a token cap of 10 (rule `ge`): prompts of 8
    tokens, one after the other; a and b pass (0 and 8 queued < 10), c is refused at
    preflight (16 queued) and its `reject` carries its tokens and the token view it read,
    as `APIServer.admit` records them."""
    render = RenderConfig(RenderTime(20, 20), TWO)
    counters = [0] * SharedAdmissionStats.num_counters(1)
    events: list[AdmissionEvent] = []
    stats = SharedAdmissionStats(counters, 1, 0)
    controller = AdmissionController(5, 10, shared_stats=stats)
    api = APIServer(controller, record=events.append)
    path = Preflight(api, render, random.Random(0), events.append)

    async def run() -> None:
        await path.admit("a", 1, 8, "", quiet)
        await path.admit("b", 1, 8, "", quiet)
        with pytest.raises(AdmissionRejected):
            await path.admit("c", 1, 8, "", quiet)

    asyncio.run(run())
    assert [(e.event, e.request_id) for e in events] == [
        ("preflight", "a"), ("admit", "a"), ("preflight", "b"), ("admit", "b"), ("reject", "c")
    ]  # fmt: skip
    refused = events[-1]
    assert (refused.tokens, refused.token_view, refused.view) == (8, 16, None)
