"""OB-TABLE-3: Spin, on the Promela text of the compact encoding, agrees with the explorer.

Spin (the Debian package `spin`, installed by `make test`) runs the model that
`queueref.verify.promela` writes from `CompactCheckThenWrite`'s tables; on every
instance here it must store exactly the explorer's states and find its worst total,
the formula. Broken Promela texts show the comparison failing for the reason it claims.
"""

from __future__ import annotations

import json

import pytest

from queueref.admission.protocol import overshoot_bound
from queueref.cli.main import main
from queueref.verify.admission_models import CompactCheckThenWrite
from queueref.verify.promela import compact_promela, spin_worst_total, verify_promela
from queueref.verify.search import explore

#: N = 1..4, M = 0..3, W = 1..3, about a second each (two compilations of `pan`).
INSTANCES = [(1, 1, 1), (2, 0, 2), (2, 2, 1), (2, 3, 3), (3, 2, 1), (3, 3, 2), (4, 2, 1)]


def formula(servers: int, cap: int, weight: int) -> int:
    """OB-BOUND-1 written out here, not taken from the code under test."""
    return cap + (servers - 1) * min(cap, weight)


@pytest.mark.parametrize(("servers", "cap", "weight"), INSTANCES)
def test_spin_stores_the_explorers_states_and_finds_its_worst_total(
    servers: int, cap: int, weight: int
) -> None:
    """OB-TABLE-3: the same states, state for state in number, and the same worst total."""
    spin = spin_worst_total(servers, cap, weight, optimize=False)
    python = explore("check-then-write", servers, cap, weight, encoding="compact")
    assert spin.states == python.states
    assert spin.worst_total == python.worst_total == formula(servers, cap, weight)
    # At the worst total the bound holds and one below it fails (none below 0).
    assert [run.result.holds for run in spin.runs] == ([True, False] if cap else [True])


def _broken(text: str, old: str, new: str) -> str:
    """`text` with the one occurrence of `old` replaced: a named, minimal change."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def test_a_check_admitting_one_too_many_is_refuted_at_the_bound() -> None:
    """OB-TABLE-3 teeth: server 0 admitting a weight one larger than its room breaks the
    bound, and Spin reports the assertion violated where the model as written holds."""
    servers, cap, weight = 2, 2, 1
    model = CompactCheckThenWrite(servers, cap, weight)
    claim = overshoot_bound(servers, cap, weight)
    text = compact_promela(servers, cap, weight, claim)
    assert verify_promela(text, optimize=False).holds
    old = f"c[0] >= {model.done_base} -> s[0] = s[0] + 1;"
    broken = _broken(text, old, old.replace("+ 1;", "+ 2;"))
    assert not verify_promela(broken, optimize=False).holds


def test_a_missing_move_changes_the_state_count() -> None:
    """OB-TABLE-3 teeth: a model in which the last server never starts a check stores
    fewer states than the explorer, so the state-for-state comparison fails for that
    reason (its total never passes M, so the bound still holds)."""
    servers, cap, weight = 2, 2, 1
    text = compact_promela(servers, cap, weight, overshoot_bound(servers, cap, weight))
    line = "  :: d_step { c[1] == 0 -> c[1] = 1 }  /* start */\n"
    broken = verify_promela(_broken(text, line, ""), optimize=False)
    python = explore("check-then-write", servers, cap, weight, encoding="compact")
    assert broken.holds
    assert broken.states < python.states == 135


def test_the_tables_are_the_python_models() -> None:
    """OB-MODEL-1: the Promela text carries the reading table the step functions built,
    row by row, so Spin decides nothing the Python model did not."""
    model = CompactCheckThenWrite(3, 3, 2)
    text = compact_promela(3, 3, 2, 7)
    width = model.max_slot + 1
    rows = [model.after_read[code] or [0] * width for code in range(model.codes)]
    flat = ", ".join(str(v) for row in rows for v in row)
    assert f"after_read[{model.codes * width}] = {{{flat}}};" in text
    assert f"slot_of[{model.codes}] = {{{', '.join(map(str, model.slot_of))}}};" in text


def test_bound_table_with_the_spin_engine_prints_the_explorers_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """OB-TABLE-2, OB-TABLE-3: `bound-table --engine spin` gives the rows the explorer
    gives (worst total, bound, states of the compact encoding), marked as Spin's."""
    argv = ["bound-table", "--servers", "2-3", "--cap", "2", "--weight", "1", "--json"]
    assert main([*argv, "--engine", "spin", "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["servers"], r["worst_total"], r["bound"], r["engine"]) for r in rows] == [
        (2, 3, 3, "spin"),
        (3, 4, 4, "spin"),
    ]
    compact = [explore("check-then-write", n, 2, 1, encoding="compact") for n in (2, 3)]
    assert [r["states"] for r in rows] == [c.states for c in compact] == [135, 3445]


@pytest.mark.parametrize(
    "extra",
    [["--witness"], ["--protocol", "write-then-check"], ["--limit", "tokens"]],
)
def test_the_spin_engine_refuses_what_it_cannot_search(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """OB-TABLE-2: a usage error in one line, exit status 2, before any search."""
    assert main(["bound-table", "--servers", "2", "--cap", "1", "--engine", "spin", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--engine spin searches check-then-write" in err[0]


def test_explore_refuses_an_unknown_engine_and_a_spin_witness() -> None:
    with pytest.raises(ValueError, match="unknown engine 'pan'"):
        explore("check-then-write", 2, 2, 1, engine="pan")
    with pytest.raises(ValueError, match="without a witness"):
        explore("check-then-write", 2, 2, 1, engine="spin", witness=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [((0, 1, 1, 1), "servers must be an int >= 1"), ((2, -1, 1, 1), "cap must be an int >= 0"),
     ((2, 1, True, 1), "weight must be an int >= 1"), ((2, 1, 1, 1.5), "claim must be an int")],
)  # fmt: skip
def test_bad_instances_are_refused_by_name(args: tuple[int, int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compact_promela(*args)
