"""ADM-PRE-1 .. ADM-PRE-7: vLLM's admission path and the preflight reservations, exhaustively.

The expected values are the formulas of `specs/admission.md` written out here, not
`paths.path_bound`; the full table (N = 1..3, M = 0..3, W = 1..2) is checked by
`tools/bound_table.py`. Every broken variant must be refuted (the checks have teeth).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path
from types import ModuleType

import pytest

from queueref.admission.paths import AdmissionPath
from queueref.cli.main import main
from queueref.verify.path_models import Broken, PathModel, PathStep
from queueref.verify.path_search import (
    explore_path,
    worst_spurious_rejection_path,
    worst_wasted_renders,
)

TWO = AdmissionPath.TWO_CHECK
GAP = AdmissionPath.TWO_CHECK_AWAIT_GAP
WTC = AdmissionPath.RESERVE_WRITE_THEN_CHECK
CTW = AdmissionPath.RESERVE_CHECK_THEN_WRITE

SMALL = [(n, m, w) for n in (1, 2) for m in range(4) for w in (1, 2)] + [
    (3, m, w) for m in range(3) for w in (1, 2)
]


def check_then_write_bound(n: int, m: int, w: int) -> int:
    return m + (n - 1) * min(m, w)


@pytest.mark.parametrize("path", [TWO, GAP, CTW])
@pytest.mark.parametrize(("n", "m", "w"), SMALL)
def test_adm_pre_1_4_6_bound_is_check_then_write_s_and_reached(
    path: AdmissionPath, n: int, m: int, w: int
) -> None:
    """ADM-PRE-1, ADM-PRE-3 (one request per server), ADM-PRE-4, ADM-PRE-6."""
    row = explore_path(path, n, m, w, prices=False)
    assert row.worst_total == check_then_write_bound(n, m, w)
    assert row.bound == row.worst_total


@pytest.mark.parametrize(("n", "m", "w"), SMALL)
def test_adm_pre_5_write_then_check_reservation_reaches_m_never_more(
    n: int, m: int, w: int
) -> None:
    """ADM-PRE-5: the admitted count reaches the cap M and never passes it."""
    row = explore_path(WTC, n, m, w, prices=False)
    assert (row.worst_total, row.bound) == (m, m)


def test_adm_pre_2_preflight_refusal_writes_nothing_and_renders_nothing() -> None:
    """ADM-PRE-2: a request refused at preflight changes no count and is never rendered."""
    model = PathModel(TWO, 2, 1, 1)
    state = model.initial()
    for step in [PathStep("start", 0, 1), PathStep("read", 0, 0), PathStep("read", 0, 1),
                 PathStep("render", 0), PathStep("recheck", 0, 0), PathStep("recheck", 0, 1),
                 PathStep("register", 0)]:  # fmt: skip
        state = model.step(state, step)
    before = model.step(state, PathStep("start", 1, 1))
    after = model.step(before, PathStep("reject", 1, 0))
    assert after == state  # slots and server 1's request as before the request came
    actions = {label[0] for label, _ in model.successors(before) if label[1] == 1}
    assert actions == {"reject"}  # no render is reachable for it


def test_adm_pre_1_witness_reaches_the_bound_through_both_checks() -> None:
    """ADM-PRE-1: the tightness witness passes preflight, renders and registers."""
    row = explore_path(TWO, 3, 2, 1, witness=True, prices=False)
    assert row.witness is not None
    model = PathModel(TWO, 3, 2, 1)
    state = model.initial()
    for step in row.witness:
        state = model.step(state, step)
    assert model.total(state) == 4 == 2 + 2 * 1
    actions = {step.action for step in row.witness}
    assert {"read", "render", "recheck", "register"} <= actions


@pytest.mark.parametrize(
    ("n", "m", "w", "k", "worst"), [(1, 2, 2, 2, 4), (2, 2, 2, 2, 8), (1, 3, 2, 2, 5)]
)
def test_adm_pre_3_await_gap_passes_check_then_write_s_bound(
    n: int, m: int, w: int, k: int, worst: int
) -> None:
    """ADM-PRE-3: with two requests of one server in flight, vLLM 0.30.0's await before
    each child lets both check before either registers: M + (N*K - 1) * min(M, W)."""
    assert worst == m + (n * k - 1) * min(m, w)  # the stated formula, by hand
    row = explore_path(GAP, n, m, w, k, witness=True, prices=False)
    assert row.worst_total == worst > check_then_write_bound(n, m, w)
    # 0.31.0's registration (no await between the children) keeps the bound at any K.
    assert explore_path(TWO, n, m, w, k, prices=False).worst_total == check_then_write_bound(
        n, m, w
    )


def test_adm_pre_3_await_gap_harmless_for_n_1() -> None:
    """ADM-PRE-3: a request of n = 1 registers with no await, so W = 1 keeps the bound."""
    assert explore_path(GAP, 2, 3, 1, 2, prices=False).worst_total == check_then_write_bound(
        2, 3, 1
    )


@pytest.mark.parametrize(("n", "m", "w", "wasted"), [(2, 1, 1, 1), (3, 1, 1, 2), (3, 2, 2, 2)])
def test_adm_pre_7_two_checks_waste_renders_reservations_do_not(
    n: int, m: int, w: int, wasted: int
) -> None:
    """ADM-PRE-7: a burst of N requests renders and then refuses N - (what fits)."""
    count, trace = worst_wasted_renders(TWO, n, m, w)
    assert count == wasted
    assert trace[-1].action == "refuse"
    for path in (WTC, CTW):
        assert worst_wasted_renders(path, n, m, w)[0] == 0


@pytest.mark.parametrize(("n", "m", "w"), [(1, 2, 1), (2, 1, 1), (2, 2, 1), (2, 3, 2), (3, 2, 2)])
def test_adm_pre_7_spurious_rejection(n: int, m: int, w: int) -> None:
    """ADM-PRE-7: only the write-then-check reservation refuses a request that fits, and
    at most min(M, N*W - 1) free (OB-WTC-3); the checks that write after reading never."""
    want = None if n == 1 or m == 0 else min(m, n * w - 1)
    free, trace = worst_spurious_rejection_path(WTC, n, m, w)
    assert free == want
    if free is not None:
        assert trace[-1].action == "rollback"
    for path in (TWO, GAP, CTW):
        assert worst_spurious_rejection_path(path, n, m, w) == (None, ())


def test_adm_pre_5_render_failure_releases_the_reservation() -> None:
    """ADM-PRE-5: a refused, failed or disconnected request leaves every slot as before."""
    model = PathModel(WTC, 1, 2, 1)
    steps = [PathStep("start", 0, 1), PathStep("keep", 0, 0), PathStep("fail", 0, 0)]
    states = [model.initial()]
    for step in steps:
        states.append(model.step(states[-1], step))
    assert [s[0] for s in states] == [0, 1, 1, 0]


# -- broken variants: each must be refuted -------------------------------------------


@pytest.mark.parametrize(
    ("path", "broken", "n", "m", "w", "k"),
    [
        (TWO, Broken.NO_SECOND_CHECK, 1, 1, 1, 2),
        (TWO, Broken.AWAIT_BEFORE_CHILDREN, 1, 2, 2, 2),
        (CTW, Broken.AWAIT_BEFORE_RESERVE, 1, 1, 1, 2),
    ],
)
def test_adm_pre_broken_variants_pass_the_bound(
    path: AdmissionPath, broken: Broken, n: int, m: int, w: int, k: int
) -> None:
    """Without the second check, with an await before the children, or with an await
    before the reservation write, two requests of one server both pass: over the bound."""
    row = explore_path(path, n, m, w, k, prices=False, broken=broken)
    assert row.worst_total > check_then_write_bound(n, m, w)
    assert explore_path(path, n, m, w, k, prices=False).worst_total == check_then_write_bound(
        n, m, w
    )


def test_adm_pre_5_broken_second_check_after_reservation_refuses_on_an_empty_system() -> None:
    """vLLM's second check kept after a write-then-check reservation reads the own
    reservation and adds n again: one request alone on an empty server (N = 1, M = 1) is
    rendered, then refused -- a wasted render and a spurious rejection at M - A = 1."""
    wasted, trace = worst_wasted_renders(WTC, 1, 1, 1, broken=Broken.SECOND_CHECK_AFTER_RESERVE)
    assert wasted == 1
    assert [s.action for s in trace] == ["start", "keep", "render", "refuse"]
    free, _ = worst_spurious_rejection_path(WTC, 1, 1, 1, broken=Broken.SECOND_CHECK_AFTER_RESERVE)
    assert free == 1
    assert worst_wasted_renders(WTC, 1, 1, 1)[0] == 0


# -- the command ---------------------------------------------------------------------


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_adm_pre_7_bound_table_path_rows() -> None:
    """ADM-PRE-7: `bound-table --path` prints a row per (N, M, W, K), exact bounds."""
    code, out, _ = run(
        ["bound-table", "--path", "two-check-await-gap", "--servers", "1", "--cap", "2",
         "--weight", "2", "--requests-per-server", "1-2", "--json", "-q"]
    )  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert [(r["requests_per_server"], r["worst_total"], r["bound"]) for r in rows] == [
        (1, 2, 2),
        (2, 4, 4),
    ]
    assert all(r["path"] == "two-check-await-gap" for r in rows)


def test_adm_pre_7_bound_table_bad_requests_per_server() -> None:
    """A bad K is one line on stderr and exit status 2."""
    code, out, err = run(["bound-table", "--path", "two-check", "--requests-per-server", "0"])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--requests-per-server" in err


@pytest.mark.slow
def test_adm_pre_7_design_note_numbers_are_the_explorer_s() -> None:
    """ADM-PRE-7: every row of the table in specs/preflight-reservations.md is what the
    search finds (the note states no number the explorer does not reproduce)."""
    note = Path(__file__).resolve().parents[2] / "specs" / "preflight-reservations.md"
    rows = [
        [cell.strip().strip("*") for cell in line.strip("|").split("|")]
        for line in note.read_text().splitlines()
        if line.startswith("| two-check") or line.startswith("| reserve-")
    ]
    assert len(rows) >= 10
    for path, n, m, w, k, worst, bound, wasted, spurious, states in rows:
        found = explore_path(path.split()[0], int(n), int(m), int(w), int(k))
        assert (found.worst_total, found.bound) == (int(worst), int(bound)), path
        assert found.extra["wasted_renders"] == int(wasted), path
        want = None if spurious == "-" else int(spurious)
        assert found.extra["spurious_rejection"] == want, path
        assert found.states == int(states.replace(",", "")), path


def _bound_table_tool() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "tools" / "bound_table.py"
    spec = importlib.util.spec_from_file_location("bound_table_tool_paths", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("path", "broken", "n", "m", "w", "k"),
    [
        (TWO, Broken.NO_SECOND_CHECK, 1, 1, 1, 2),
        (TWO, Broken.AWAIT_BEFORE_CHILDREN, 1, 2, 2, 2),
        (CTW, Broken.AWAIT_BEFORE_RESERVE, 1, 1, 1, 2),
        (WTC, Broken.SECOND_CHECK_AFTER_RESERVE, 1, 1, 1, 1),
    ],
)
def test_adm_pre_7_tool_rejects_the_broken_rows(
    path: AdmissionPath, broken: Broken, n: int, m: int, w: int, k: int
) -> None:
    """ADM-PRE-7: tools/bound_table.py's row check fails each broken variant's row (the
    worst count over the bound, or a wasted render of a reservation) and passes the real
    protocol's."""
    tool = _bound_table_tool()
    bad = explore_path(path, n, m, w, k, broken=broken).row()
    bad.pop("broken")
    assert tool.check_path_row(bad) != []
    assert tool.check_path_row(explore_path(path, n, m, w, k).row()) == []
