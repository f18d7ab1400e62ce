"""Broken variants of the admission protocol, refuted with concrete traces (OB-BROKEN-1..4).

Each kept trace is a regression test: it is replayed on the variant's model (which refuses
a step that is not enabled) and must exceed the bound. The same row check that
`tools/bound_table.py` applies to the real protocol must fail on the variants: that is the
evidence that the bound check can fail.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from queueref.verify.admission_models import CheckThenWrite, Step
from queueref.verify.broken_models import AsyncGap, Crash, LazyRefresh
from queueref.verify.search import capacity_leak, replay, search

ROOT = Path(__file__).resolve().parents[2]


def formula(servers: int, cap: int, weight: int) -> int:
    return cap + (servers - 1) * min(cap, weight)


def _bound_table_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bound_table_tool", ROOT / "tools" / "bound_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bound_table_tool"] = module
    spec.loader.exec_module(module)
    return module


def _row(servers: int, cap: int, weight: int, worst: int) -> dict[str, object]:
    return {
        "protocol": "check-then-write",
        "servers": servers,
        "cap": cap,
        "weight": weight,
        "worst_total": worst,
        "bound": formula(servers, cap, weight),
    }


# --- (i) a second check before the first is recorded ---------------------------------

# N = 1, M = 1, W = 1, two overlapping checks of server 0. `check` is the position of the
# check among the server's checks kept sorted (the symmetry reduction), as the search
# reports it: both start, both read slot 0 (= 0), both admit.
ASYNC_GAP_TRACE = [
    Step("start", 0, 1, 0),
    Step("start", 0, 1, 0),
    Step("read", 0, 0, 0),
    Step("read", 0, 0, 0),
    Step("admit", 0, 0, 0),
    Step("admit", 0, 0, 1),
]


def test_async_gap_trace_exceeds_the_bound() -> None:
    """OB-BROKEN-1: both checks read 0 before either records; both admit: 2 > M = 1."""
    model = AsyncGap(1, 1, 1, checks_per_server=2)
    final = replay(model, ASYNC_GAP_TRACE)[-1]
    assert model.total(final) == 2 > formula(1, 1, 1)


def test_async_gap_worst_case_is_one_server_per_check() -> None:
    """OB-BROKEN-1: exhaustively, M + (N*K - 1)*min(M, W); K = 1 is the protocol itself."""
    for servers, cap, weight in [(1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 2, 1), (2, 2, 2)]:
        for checks in (1, 2):
            worst = search(AsyncGap(servers, cap, weight, checks)).best_score
            assert worst == cap + (servers * checks - 1) * min(cap, weight)
        assert search(AsyncGap(servers, cap, weight, 1)).best_score == formula(servers, cap, weight)


def test_the_bound_check_fails_on_the_async_gap() -> None:
    """OB-BROKEN-1, OB-TABLE-1: tools/bound_table.py's row check rejects the variant."""
    tool = _bound_table_tool()
    worst = search(AsyncGap(2, 2, 1, 2)).best_score
    assert tool.check_row(_row(2, 2, 1, worst)) != []
    real = search(CheckThenWrite(2, 2, 1)).best_score
    assert tool.check_row(_row(2, 2, 1, real)) == []


@pytest.mark.contracts
def test_crosshair_refutes_the_async_gap_in_the_atomic_model() -> None:
    """OB-BROKEN-1, OB-ATOMIC-1: the atomic step that lets a server pass a second check
    before writing the first is refuted by CrossHair with a concrete counterexample."""
    path = ROOT / "proofs" / "generated" / "mutants" / "atomic_bad.py"
    line = next(
        i
        for i, text in enumerate(path.read_text().splitlines(), 1)
        if text.startswith("def atomic_n1_step(")
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosshair",
            "check",
            "--analysis_kind=icontract",
            "--report_all",
            "--per_condition_timeout=20",
            f"{path.relative_to(ROOT)}:{line}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert ": error: false when calling atomic_n1_step(" in proc.stdout, proc.stdout + proc.stderr


# --- (ii) lazy refresh --------------------------------------------------------------

LAZY_TRACE = [  # N = 1, M = 1, W = 1, refresh every 2 admissions
    Step("start", 0, 1),
    Step("read", 0, 0),
    Step("admit", 0),  # u = 1, published 0
    Step("start", 0, 1),
    Step("read", 0, 0),  # reads the stale 0
    Step("admit", 0),  # u = 2, published 2 now
]


def test_lazy_refresh_trace_exceeds_the_bound() -> None:
    """OB-BROKEN-2: the own slot still says 0 after the first admission: 2 > M = 1."""
    model = LazyRefresh(1, 1, 1, every=2)
    final = replay(model, LAZY_TRACE)[-1]
    assert model.total(final) == 2 > formula(1, 1, 1)


def test_lazy_refresh_overshoot_grows_with_k() -> None:
    """OB-BROKEN-2: worst = M + (N*k - 1)*min(M, W): linear in k; k = 1 is the protocol."""
    for servers, cap, weight in [(1, 2, 1), (2, 2, 1), (2, 3, 1), (2, 2, 2)]:
        worst = [search(LazyRefresh(servers, cap, weight, every=k)).best_score for k in (1, 2, 3)]
        assert worst == [cap + (servers * k - 1) * min(cap, weight) for k in (1, 2, 3)]
        assert worst[0] == formula(servers, cap, weight)
        assert worst[0] < worst[1] < worst[2]


def test_the_bound_check_fails_on_lazy_refresh() -> None:
    """OB-BROKEN-2, OB-TABLE-1: tools/bound_table.py's row check rejects the variant."""
    tool = _bound_table_tool()
    worst = search(LazyRefresh(2, 2, 1, every=2)).best_score
    assert tool.check_row(_row(2, 2, 1, worst)) != []


# --- (iii) a crashed server whose slot is never cleared -------------------------------

CRASH_TRACE = [  # N = 2, M = 2, W = 1: server 0 admits 2 and dies
    Step("start", 0, 1),
    Step("read", 0, 0),
    Step("read", 0, 1),
    Step("admit", 0),
    Step("start", 0, 1),
    Step("read", 0, 0),
    Step("read", 0, 1),
    Step("admit", 0),
    Step("crash", 0),
]


def test_a_dead_slot_refuses_every_admission_forever() -> None:
    """OB-BROKEN-3: after the crash nothing runs, yet no admission is reachable any more."""
    model = Crash(2, 2, 1, reap=False)
    stuck = replay(model, CRASH_TRACE)[-1]
    assert model.total(stuck) == 0  # nothing running: server 0's requests died with it
    seen = {stuck}
    todo = [stuck]
    while todo:  # everything reachable from the stuck state
        state = todo.pop()
        for label, nxt in model.successors(state):
            assert label[0] != "admit", "an admission after the leak"
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    assert len(seen) > 1  # server 1 keeps trying: starts and rejections


def test_the_explorer_finds_the_leak() -> None:
    """OB-BROKEN-3: the leak search finds a stuck state, with a trace that replays to it."""
    for servers, cap in [(2, 1), (2, 2), (3, 2)]:
        leak = capacity_leak(servers, cap, 1, reap=False)
        assert leak is not None
        model = Crash(servers, cap, 1, reap=False)
        assert replay(model, leak.witness)[-1] == leak.state
        assert model.total(leak.state) == 0 and "crash" in {s.action for s in leak.witness}


def test_resetting_a_dead_slot_fixes_the_leak_and_keeps_the_bound() -> None:
    """OB-BROKEN-4: with the reset, no stuck state exists, the kept trace recovers, and the
    running count still obeys OB-BOUND-1."""
    for servers, cap, weight in [(2, 1, 1), (2, 2, 1), (2, 2, 2), (3, 2, 1)]:
        assert capacity_leak(servers, cap, weight, reap=True) is None
        worst = search(Crash(servers, cap, weight, reap=True)).best_score
        assert worst <= formula(servers, cap, weight)
    model = Crash(2, 2, 1, reap=True)
    recovered = replay(
        model,
        [
            *CRASH_TRACE,
            Step("reap", 0),
            Step("start", 1, 1),
            Step("read", 1, 0),
            Step("read", 1, 1),
        ],
    )[-1]
    assert model.admits(recovered)
