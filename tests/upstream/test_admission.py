"""vLLM's own `check_admission` and `SharedAdmissionStats` beside queueref's, on a grid.

Run by `make upstream` once per installed release (tests/conftest.py). For
every point of a grid (servers, the other servers' counts, this server's
unfinished requests and their prompt tokens, both limits, `n`) one
`RawArray("q", ...)` is allocated as vLLM allocates it and two servers' views
are put over it: queueref's `SharedAdmissionStats` (written by queueref's
`RequestTracker`) and the release's own (read by the release's
`AsyncLLM.check_admission`, called on a stand-in engine that answers the
counts from the same tracker). Both must admit or reject alike, with the same
error (ADM-CTL-3, ADM-CTL-4, ADM-CTL-5), and read the same global count from
the slots queueref wrote (ADM-STATS-2, ADM-CTL-7).
Its teeth: a limit off by one on the vLLM side is caught.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from types import SimpleNamespace
from typing import Any

import pytest
from vllm.v1.engine import admission_control
from vllm.v1.engine.async_llm import AsyncLLM

from queueref import (
    AdmissionController,
    AdmissionRejected,
    RequestTracker,
    SharedAdmissionStats,
)

pytestmark = pytest.mark.upstream

RELEASE = os.environ["QUEUEREF_UPSTREAM_RELEASE"]


def vllm_decision(engine: Any, n: int) -> str:
    """The release's own check_admission: "admit" or the error's class name."""
    try:
        AsyncLLM.check_admission(engine, n)
    except Exception as error:
        if type(error).__name__ not in ("QueueOverflowError", "MaxQueuedTokensError"):
            raise  # anything else is a crash of the harness or of vLLM, not a decision
        return type(error).__name__
    return "admit"


def queueref_decision(controller: AdmissionController, n: int) -> str:
    try:
        controller.check_admission(n)
    except AdmissionRejected as error:
        return type(error).__name__
    return "admit"


def grid() -> list[tuple[int, int, tuple[int, ...], int | None, int | None, int]]:
    points = []
    for servers, others, prompts, max_reqs, max_tokens, n in itertools.product(
        (1, 2, 3),
        (0, 1, 3),
        ((), (1,), (2, 3), (1, 1, 4, 2)),
        (None, 0, 1, 2, 4, 6),
        (None, 0, 1, 5, 9),
        (1, 2, 3),
    ):
        if servers == 1 and others:
            continue
        points.append((servers, others, prompts, max_reqs, max_tokens, n))
    return points


def run_point(
    servers: int,
    others: int,
    prompts: tuple[int, ...],
    max_reqs: int | None,
    max_tokens: int | None,
    n: int,
    skew: int = 0,
) -> tuple[str, str, int, int]:
    """(vLLM's decision, queueref's, vLLM's global count, queueref's) at one point."""
    counters = multiprocessing.RawArray("q", SharedAdmissionStats.num_counters(servers))
    for index in range(1, servers):  # the other servers' own slots
        counters[index * SharedAdmissionStats.COUNTERS_PER_SLOT] = others
    ours = SharedAdmissionStats(counters, servers, 0) if servers > 1 else None
    tracker = RequestTracker(ours)
    for i, tokens in enumerate(prompts):
        tracker.add(f"r{i}", 1, tokens)
    controller = AdmissionController(
        max_reqs, max_tokens, tracker=tracker, shared_stats=ours, token_scope="local"
    )
    theirs = None
    if servers > 1:
        theirs = admission_control.SharedAdmissionStats(
            {"mp_admission_counters": counters}, servers, 0
        )
    engine = SimpleNamespace(
        scheduler_config=SimpleNamespace(
            max_num_queued_reqs=None if max_reqs is None else max_reqs + skew,
            max_num_queued_tokens=max_tokens,
        ),
        admission_stats=theirs,
        get_num_unfinished_requests=tracker.get_num_unfinished_requests,
        get_num_queued_tokens=tracker.get_num_queued_tokens,
        logger_manager=None,
        log_stats=False,
    )
    if hasattr(AsyncLLM, "_record_admission_rejection"):  # vLLM 0.32.0 and later: a metric
        engine._record_admission_rejection = lambda reason: AsyncLLM._record_admission_rejection(
            engine, reason
        )
    global_theirs = theirs.get_num_requests() if theirs is not None else len(prompts)
    global_ours = ours.get_num_requests() if ours is not None else len(prompts)
    return (
        vllm_decision(engine, n),
        queueref_decision(controller, n),
        global_theirs,
        global_ours,
    )


def test_check_admission_agrees_on_the_grid() -> None:
    """ADM-CTL-3, ADM-CTL-4, ADM-CTL-5, ADM-CTL-7, ADM-STATS-2: the same decision and
    count at every point."""
    points = grid()
    outcomes = set()
    for point in points:
        theirs, ours, count_theirs, count_ours = run_point(*point)
        assert (theirs, count_theirs) == (ours, count_ours), point
        outcomes.add(theirs)
    assert outcomes == {"admit", "QueueOverflowError", "MaxQueuedTokensError"}
    # (1 one-server + 2 x 3 multi-server) x 4 prompt sets x 6 x 5 limits x 3 n
    assert len(points) == 7 * 4 * 6 * 5 * 3


def test_a_limit_off_by_one_is_caught() -> None:
    """The teeth: vLLM's side given max_num_queued_reqs + 1 disagrees somewhere."""
    found = [p for p in grid() if len({*run_point(*p, skew=1)[:2]}) == 2]
    assert found
