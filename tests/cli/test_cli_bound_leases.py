"""OB-LEASE-3: `queueref bound-table --limit leases`, the lease model's exhaustive table."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

import queueref.cli.bound_table as bound_table_command
import queueref.cli.bound_table_leases as lease_rows_module
from queueref.cli.main import main
from queueref.verify.lease import LeaseRow, explore_leases

# The table of OB-LEASE-1 in specs/multi-node.md: (N, M, W, lapses) -> (worst total -
# dropped, bound, worst real total), written out by hand.
SPEC_TABLE = {
    (2, 2, 1, 1): (3, 3, 4),
    (2, 2, 2, 2): (4, 4, 4),
    (2, 3, 2, 2): (5, 5, 6),
    (3, 2, 1, 2): (4, 4, 6),
    (3, 2, 2, 1): (6, 6, 6),
}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["bound-table", "--quiet", "--limit", "leases", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_OB_LEASE_3_rows_are_the_bound_m_plus_n_minus_1_min_m_w(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """OB-LEASE-3: one row per (N, M, W, lapses); `worst_total` (real total - dropped) is
    M + (N-1)*min(M, W), computed here by the formula, on every row, exit 0."""
    code, out, _ = _run(capsys, "--servers", "1-3", "--cap", "0-2", "--weight", "1-2",
                        "--lapses", "0-1", "--json")  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert [(r["servers"], r["cap"], r["weight"], r["lapses"]) for r in rows] == [
        (n, m, w, k) for n in (1, 2, 3) for m in (0, 1, 2) for w in (1, 2) for k in (0, 1)
    ]
    for row in rows:
        n, m, w = row["servers"], row["cap"], row["weight"]
        assert row["worst_total"] == row["bound"] == m + (n - 1) * min(m, w), row
        assert row["worst_real_total"] >= row["worst_total"] and row["states"] > 0
        if row["lapses"] == 0:  # no lapse, nothing dropped: OB-BOUND-1 itself
            assert row["worst_real_total"] == row["worst_total"]
        assert row["protocol"] == "check-then-write" and row["limit"] == "leases"


@pytest.mark.parametrize(("bounds", "expected"), sorted(SPEC_TABLE.items()))
def test_OB_LEASE_3_rows_match_the_table_of_the_spec(
    capsys: pytest.CaptureFixture[str],
    bounds: tuple[int, int, int, int],
    expected: tuple[int, int, int],
) -> None:
    """OB-LEASE-3: the command's row is the spec's row (worst excess, bound, worst total)."""
    n, m, w, k = (str(b) for b in bounds)
    code, out, _ = _run(capsys, "--servers", n, "--cap", m, "--weight", w, "--lapses", k,
                        "--json")  # fmt: skip
    (row,) = json.loads(out)
    assert code == 0
    assert (row["worst_total"], row["bound"], row["worst_real_total"]) == expected


def test_OB_LEASE_3_the_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    """OB-LEASE-3: without --json, a titled table with the columns and a verdict per row."""
    code, out, _ = _run(capsys, "--servers", "2", "--cap", "2", "--weight", "1")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("check-then-write with lease lapses")
    assert lines[1].split() == ["servers", "cap", "weight", "lapses", "worst_total", "bound",
                                "worst_real_total", "states", "seconds", "check"]  # fmt: skip
    assert lines[2].split()[:7] == ["2", "2", "1", "1", "3", "3", "4"]
    assert lines[2].endswith("ok")


def test_OB_LEASE_3_a_row_over_its_bound_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OB-LEASE-3: a search that finds more than the bound makes the command exit 1, with a
    line on stderr naming the row."""

    def one_more(*args: Any, **kwargs: Any) -> LeaseRow:
        found = explore_leases(*args, **kwargs)
        return dataclasses.replace(found, worst_excess=found.worst_excess + 1)

    monkeypatch.setattr(lease_rows_module, "explore_leases", one_more)
    code, out, err = _run(capsys, "--servers", "2", "--cap", "1", "--weight", "1")
    assert code == 1
    assert "OVER THE BOUND" in out
    assert "N=2 M=1 W=1: worst_total 3 vs bound 2" in err


def test_OB_LEASE_3_the_state_limit_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """OB-LEASE-3, OB-LEASE-2: past --max-states the row stops: exit 2, OB-LEASE-1's line."""
    code, out, err = _run(capsys, "--servers", "3", "--cap", "2", "--weight", "1",
                          "--max-states", "100")  # fmt: skip
    assert (code, out) == (2, "")
    assert err == (
        "queueref bound-table: OB-LEASE-1: more than 100 states (compact encoding, N=3, M=2, "
        "W=1, lapses=1); lower the bounds or raise the state limit\n"
    )


@pytest.mark.guard
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lapses", "-1"], "--lapses '-1': expected A-B or A (integers)"),
        (["--lapses", "x"], "--lapses 'x': expected A-B or A (integers)"),
        (["--lapses", "2-1"], "--lapses '2-1': the range is empty (1 < 2)"),
        (["--protocol", "write-then-check"], "--limit leases searches check-then-write"),
        (["--witness"], "--limit leases searches check-then-write"),
        (["--max-states", "0"], "--max-states '0': expected a finite number >= 1"),
    ],
)
def test_OB_LEASE_3_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """OB-LEASE-3: bad input is one line on stderr naming the problem, exit 2, no rows."""
    code, out, err = _run(capsys, "--servers", "2", "--cap", "1", "--weight", "1", *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(f"queueref bound-table: {message}")


def test_OB_LEASE_3_progress_per_row_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OB-LEASE-3, E2E-CLI-4: each row's states and rate go to stderr as it finishes."""
    monkeypatch.setattr(bound_table_command, "show_progress", lambda args: True)
    code = main(["bound-table", "--limit", "leases", "--servers", "2", "--cap", "1-2",
                 "--weight", "1", "--json"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0
    found = re.findall(r"^queueref bound-table: N=2 M=(\d) W=1 lapses=1: \d+ states in "
                       r"\d+\.\d\d s", err, re.MULTILINE)  # fmt: skip
    assert found == ["1", "2"]
