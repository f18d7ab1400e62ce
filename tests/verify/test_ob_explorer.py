"""The exhaustive explorer and `queueref bound-table` (specs/overshoot-bound.md).

The expected values are computed here from the formulas of the spec, never taken from the
explorer: `formula(N, M, W) = M + (N - 1) * min(M, W)`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from method_variants import Change, broken_class

from queueref.cli.main import main
from queueref.verify.admission_models import (
    CheckThenWrite,
    CompactCheckThenWrite,
    Step,
    WriteThenCheck,
)
from queueref.verify.search import explore, replay, search, worst_spurious_rejection

ROOT = Path(__file__).resolve().parents[2]


def formula(servers: int, cap: int, weight: int) -> int:
    heaviest_admissible = weight if weight <= cap else cap
    return cap + (servers - 1) * heaviest_admissible


REQUIRED = [(n, m, w) for n in (2, 3) for m in range(5) for w in range(1, 4)] + [
    (4, m, 1) for m in range(3)
]


def test_check_then_write_worst_case_is_the_formula_on_the_required_table() -> None:
    """OB-TABLE-1, OB-BOUND-1, OB-BOUND-2: every required row, worst == bound == formula."""
    for servers, cap, weight in REQUIRED:
        row = explore("check-then-write", servers, cap, weight)
        expected = formula(servers, cap, weight)
        assert (row.worst_total, row.bound) == (expected, expected), (servers, cap, weight)
        assert row.states >= 1


def test_the_witness_replays_to_the_worst_total() -> None:
    """OB-BOUND-2, OB-TABLE-1: the interleaving found is enabled step by step and reaches
    the formula's count; for M = 0 nothing is ever admitted."""
    for servers, cap, weight in [(2, 1, 1), (2, 3, 2), (3, 2, 1), (3, 3, 3), (4, 2, 1)]:
        row = explore("check-then-write", servers, cap, weight, witness=True)
        assert row.witness is not None
        model = CheckThenWrite(servers, cap, weight)
        states = replay(model, row.witness)
        assert model.total(states[-1]) == formula(servers, cap, weight)
        assert [s.action for s in row.witness].count("admit") >= servers
    assert explore("check-then-write", 3, 0, 3).worst_total == 0


def test_the_construction_of_the_spec_reaches_the_bound_for_every_small_case() -> None:
    """OB-BOUND-2: server 0 admits alone to M - w, then all read before anyone writes."""
    for servers in (1, 2, 3, 4):
        for cap in (1, 2, 3, 5):
            for weight in (1, 2, 4):
                w = min(cap, weight)
                steps: list[Step] = []
                alone = cap - w
                while alone > 0:
                    n = min(w, alone)
                    steps += [Step("start", 0, n)]
                    steps += [Step("read", 0, s) for s in range(servers)]
                    steps += [Step("admit", 0)]
                    alone -= n
                steps += [Step("start", p, w) for p in range(servers)]
                steps += [Step("read", p, s) for s in range(servers) for p in range(servers)]
                steps += [Step("admit", p) for p in range(servers)]
                model = CheckThenWrite(servers, cap, weight)
                final = replay(model, steps)[-1]
                assert model.total(final) == formula(servers, cap, weight)


def test_a_step_that_is_not_enabled_is_refused() -> None:
    """OB-MODEL-1: replay refuses a read before a start, and an admission that does not fit."""
    model = CheckThenWrite(2, 1, 1)
    with pytest.raises(ValueError, match="not enabled"):
        replay(model, [Step("read", 0, 0)])
    full = [Step("start", 0, 1), Step("read", 0, 0), Step("read", 0, 1), Step("admit", 0)]
    # A second check of server 0 now reads 1: 1 + 1 > 1, rejected at its first read.
    states = replay(model, [*full, Step("start", 0, 1), Step("reject", 0, 0)])
    assert model.total(states[-1]) == 1
    with pytest.raises(ValueError, match="not enabled"):
        replay(model, [*full, Step("start", 0, 1), Step("read", 0, 0)])


def test_finishes_happen_at_any_time_and_only_lower_a_slot() -> None:
    """OB-MODEL-1: a finish is enabled during the server's own check and lowers its slot."""
    model = CheckThenWrite(2, 2, 1)
    trace = [Step("start", 0, 1), Step("read", 0, 0), Step("read", 0, 1), Step("admit", 0)]
    trace += [Step("start", 0, 1), Step("read", 0, 0), Step("finish", 0)]
    states = replay(model, trace)
    assert model.slots(states[-1]) == (0, 0)


def test_write_then_check_finishes_admitted_requests_only() -> None:
    """OB-MODEL-1: an idle server finishes an admitted request; a reservation never finishes."""
    model = WriteThenCheck(2, 2, 2)
    admitted = [Step("start", 0, 1), Step("read", 0, 0), Step("read", 0, 1), Step("keep", 0)]
    states = replay(model, [*admitted, Step("finish", 0)])
    assert model.slots(states[-1]) == (0, 0)
    with pytest.raises(ValueError, match="not enabled"):
        replay(model, [Step("start", 0, 2), Step("finish", 0)])


def test_write_then_check_never_admits_more_than_the_cap_and_reaches_it() -> None:
    """OB-WTC-1, OB-WTC-2, OB-TABLE-1: worst admitted == M, the slots (with reservations)
    go higher, and the witness replays to M."""
    for servers in (2, 3):
        for cap in (1, 2, 3):
            for weight in (1, 2):
                row = explore("write-then-check", servers, cap, weight, witness=True)
                assert (row.worst_total, row.bound) == (cap, cap)
                slot_total = row.extra["worst_slot_total"]
                assert isinstance(slot_total, int) and slot_total > cap
                model = WriteThenCheck(servers, cap, weight)
                assert row.witness is not None
                assert model.admitted(replay(model, row.witness)[-1]) == cap


def test_write_then_check_worst_spurious_rejection_is_the_formula() -> None:
    """OB-WTC-3: the largest free capacity at a contention-only rejection of a request
    that fits is min(M, N*W - 1) with N >= 2, none with N = 1; check-then-write has none."""
    for servers in (1, 2, 3):
        for cap in (1, 2, 3, 4):
            for weight in (1, 2):
                free, trace = worst_spurious_rejection("write-then-check", servers, cap, weight)
                expected = None if servers == 1 else min(cap, servers * weight - 1)
                assert free == expected, (servers, cap, weight)
                if expected is not None:
                    model = WriteThenCheck(servers, cap, weight, finishes=False)
                    states = replay(model, trace)
                    assert trace[-1].action == "rollback"
                    before = states[-2]
                    n = model.dec[before[servers + trace[-1].server]][0]
                    assert model.admitted(before) + n <= cap  # it would have fitted
                    assert cap - model.admitted(before) == expected
        assert worst_spurious_rejection("check-then-write", servers, 3, 2) == (None, ())


def test_a_spurious_rejection_trace_kept_as_a_regression() -> None:
    """OB-WTC-3: N=2, M=1, W=1 -- server 1's reservation makes server 0's check fail
    with nothing admitted at all."""
    trace = [
        Step("start", 0, 1),
        Step("read", 0, 0),
        Step("start", 1, 1),
        Step("read", 0, 1),
        Step("rollback", 0),
    ]
    model = WriteThenCheck(2, 1, 1)
    states = replay(model, trace)
    assert model.admitted(states[-2]) == 0  # nothing admitted, yet 0 + 1 <= 1 is refused
    assert model.slots(states[-1]) == (0, 1)


def test_search_counts_every_state_once() -> None:
    """OB-TABLE-1: the state count is the number of distinct reachable states."""
    model = CheckThenWrite(2, 1, 1)
    found = search(model, parents=True)
    assert found.parents is not None and found.states == len(found.parents)
    for state in found.parents:
        for _, nxt in model.successors(state):
            assert nxt in found.parents  # closed under the transitions


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_bound_table_command_prints_the_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """OB-TABLE-2: --json prints one object per (N, M, W) with the documented keys."""
    code, out, err = _run_cli(
        ["bound-table", "--servers", "2-3", "--cap", "0-2", "--weight", "1-2", "--json"], capsys
    )
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert [(r["servers"], r["cap"], r["weight"]) for r in rows] == [
        (n, m, w) for n in (2, 3) for m in (0, 1, 2) for w in (1, 2)
    ]
    for row in rows:
        assert {"servers", "cap", "weight", "worst_total", "bound", "states"} <= set(row)
        assert (
            row["worst_total"] == row["bound"] == formula(row["servers"], row["cap"], row["weight"])
        )


def test_bound_table_witness_reaches_worst_total(capsys: pytest.CaptureFixture[str]) -> None:
    """OB-TABLE-2, OB-BOUND-2: --witness adds the steps, the last slots sum to worst_total."""
    code, out, _ = _run_cli(
        ["bound-table", "--servers", "3", "--cap", "2", "--weight", "1", "--json", "--witness"],
        capsys,
    )
    (row,) = json.loads(out)
    assert code == 0
    assert sum(row["witness"][-1]["slots"]) == row["worst_total"] == formula(3, 2, 1)
    steps = [Step.from_json(s) for s in row["witness"]]
    assert CheckThenWrite(3, 2, 1).total(replay(CheckThenWrite(3, 2, 1), steps)[-1]) == 4


def test_bound_table_write_then_check(capsys: pytest.CaptureFixture[str]) -> None:
    """OB-TABLE-2, OB-WTC-1, OB-WTC-3: the protocol option, worst admitted <= M, the
    spurious-rejection key."""
    code, out, _ = _run_cli(
        [
            "bound-table",
            "--protocol",
            "write-then-check",
            "--servers",
            "2",
            "--cap",
            "1-3",
            "--weight",
            "2",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    for row in json.loads(out):
        assert row["protocol"] == "write-then-check"
        assert row["worst_total"] == row["bound"] == row["cap"]
        assert row["spurious_rejection"] == min(row["cap"], 2 * 2 - 1)


def test_bound_table_readable_table(capsys: pytest.CaptureFixture[str]) -> None:
    """OB-TABLE-2: without --json a table with a header and one line per row."""
    code, out, _ = _run_cli(
        ["bound-table", "--servers", "2", "--cap", "1-2", "--weight", "1"], capsys
    )
    lines = out.splitlines()
    assert code == 0
    assert "worst_total" in lines[1] and "bound" in lines[1]
    assert len(lines) == 4 and all(line.endswith("ok") for line in lines[2:])


@pytest.mark.parametrize(
    "argv",
    [
        ["--servers", "3-2"],
        ["--servers", "0"],
        ["--cap", "-1"],
        ["--cap", "x"],
        ["--weight", "1-2-3"],
        ["--weight", "0-1"],
        ["--protocol", "lock"],
    ],
)
def test_bound_table_bad_arguments_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """OB-TABLE-2: a bad range gives exactly one line on stderr and exit status 2."""
    code, out, err = _run_cli(["bound-table", *argv], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("queueref bound-table: ")


def test_bound_table_bad_range_in_a_real_process_has_no_traceback() -> None:
    """OB-TABLE-2: the same through `python -m queueref`, as a user runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "queueref", "bound-table", "--servers", "5-1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_bound_table_refuses_a_search_past_max_states(capsys: pytest.CaptureFixture[str]) -> None:
    """OB-TABLE-2: a row that would exceed --max-states stops with exit 2, one line."""
    code, _, err = _run_cli(
        ["bound-table", "--servers", "3", "--cap", "3", "--weight", "2", "--max-states", "1000"],
        capsys,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1


# --- the compact encoding (weight chosen at the decision) against the reference ---------

SMALL = [(n, m, w) for n in (1, 2, 3) for m in range(4) for w in (1, 2, 3)] + [
    (4, m, 1) for m in range(3)
]


def disagreements(
    servers: int, cap: int, weight: int, compact: type = CompactCheckThenWrite
) -> list[str]:
    """What differs between the reference and a compact encoding of one instance."""
    reference = search(CheckThenWrite(servers, cap, weight), parents=True)
    model = compact(servers, cap, weight)
    other = search(model, parents=True)
    packed_states, packed_worst, _ = model.search_packed()
    assert reference.parents is not None and other.parents is not None
    found = []
    if reference.best_score != other.best_score or other.best_score != packed_worst:
        found.append(f"worst total {reference.best_score} / {other.best_score} / {packed_worst}")
    if {s[:servers] for s in reference.parents} != {s[:servers] for s in other.parents}:
        found.append("reachable slot vectors differ")
    if packed_states != other.states:
        found.append(f"packed search {packed_states} states, tuple search {other.states}")
    if weight == 1 and reference.states != other.states:
        found.append(f"W = 1: {reference.states} states against {other.states}")
    return found


def test_compact_encoding_agrees_with_the_reference_on_every_small_instance() -> None:
    """OB-MODEL-1, OB-TABLE-1: same worst total (the formula), same reachable slot vectors,
    the packed and the tuple search count alike, and at W = 1 the same state count."""
    for servers, cap, weight in SMALL:
        assert disagreements(servers, cap, weight) == [], (servers, cap, weight)
        row = explore("check-then-write", servers, cap, weight, encoding="compact")
        assert row.worst_total == formula(servers, cap, weight), (servers, cap, weight)
    # Fewer states where the weight is free: the point of the encoding.
    big = explore("check-then-write", 3, 3, 3)
    small = explore("check-then-write", 3, 3, 3, encoding="compact")
    assert small.states < big.states and small.worst_total == big.worst_total


_OffByOneCompact = broken_class(
    CompactCheckThenWrite,
    "_OffByOneCompact",
    Change(
        "room",
        "a finished check may admit one more than fits",
        "return code - self.done_base + 1",
        "return code - self.done_base + 2",
    ),
)


_TooEagerCompact = broken_class(
    CompactCheckThenWrite,
    "_TooEagerCompact",
    Change(
        "_next_code",
        "a check gives up when the view reaches M - 1 instead of passing M - 1",
        "if not admits_check_then_write(view, 1, self.cap):",
        "if not admits_check_then_write(view, 1, self.cap) or view + 1 >= self.cap:",
    ),
)


def test_the_comparison_refutes_broken_compact_encodings() -> None:
    """OB-MODEL-1: the encoding comparison has teeth: a wrong room or a wrong early
    rejection changes the worst total or the reachable slot vectors; and the packed
    search refuses to write a slot past the bound its packing holds."""
    assert any("worst total" in d for d in disagreements(2, 2, 1, _TooEagerCompact))
    assert "reachable slot vectors differ" in disagreements(1, 3, 1, _TooEagerCompact)
    assert any("worst total" in d for d in disagreements(2, 2, 1, _OffByOneCompact))
    # The packed search refuses to write a slot past the bound it packs for.
    narrow = CompactCheckThenWrite(2, 2, 1)
    narrow.max_slot = 1
    with pytest.raises(AssertionError, match="overshoot bound"):
        narrow.search_packed()


def test_compact_witness_replays_to_the_worst_total() -> None:
    """OB-BOUND-2: the compact encoding's shortest witness (weights chosen at admit)."""
    for servers, cap, weight in [(2, 3, 2), (3, 2, 1), (3, 3, 3)]:
        row = explore("check-then-write", servers, cap, weight, encoding="compact", witness=True)
        assert row.witness is not None
        model = CompactCheckThenWrite(servers, cap, weight)
        assert model.total(replay(model, row.witness)[-1]) == formula(servers, cap, weight)
        admits = [s for s in row.witness if s.action == "admit"]
        assert admits and all(1 <= s.arg <= min(cap, weight) for s in admits)
        assert Step.from_json(admits[0].to_json()) == admits[0]


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="encoding"):
        explore("check-then-write", 2, 2, 1, encoding="spin-ish")
    with pytest.raises(ValueError, match="check-then-write only"):
        explore("write-then-check", 2, 2, 1, encoding="compact")
