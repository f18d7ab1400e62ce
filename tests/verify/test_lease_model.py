"""OB-LEASE-1: the lease variant of the fine-grained model, searched exhaustively."""

from __future__ import annotations

from typing import Any

import pytest
from method_variants import Change, method_variant

from queueref.verify import lease, search
from queueref.verify.lease import explore_leases

# (N, M, W, lapses) -> M + (N-1)*min(M, W), written out by hand.
ROWS = [
    ((1, 1, 1, 1), 1),
    ((1, 2, 1, 2), 2),
    ((2, 1, 1, 1), 2),
    ((2, 2, 1, 1), 3),
    ((2, 2, 1, 2), 3),
    ((2, 2, 2, 1), 4),
    ((2, 3, 2, 2), 5),
    ((3, 1, 1, 1), 3),
]


@pytest.mark.parametrize(("bounds", "expected"), ROWS)
def test_OB_LEASE_1_excess_over_the_dropped_count_is_the_lease_free_bound(
    bounds: tuple[int, int, int, int], expected: int
) -> None:
    """OB-LEASE-1: real total - dropped <= M + (N-1)*min(M, W) in every reachable state,
    and some state reaches it."""
    row = explore_leases(*bounds)
    assert row.bound == expected
    assert row.worst_excess == expected
    assert row.holds


@pytest.mark.parametrize("encoding", lease.ENCODINGS)
def test_OB_LEASE_1_without_the_dropped_term_the_bound_is_broken(encoding: str) -> None:
    """OB-LEASE-1, OB-LEASE-2: the dropped count is needed -- N = 2, M = 2, W = 1, one lapse:
    a server holding 2 lapses, the other admits 2, real total 4 > M + (N-1)*min(M, W) = 3;
    each encoding finds it."""
    row = explore_leases(2, 2, 1, 1, encoding=encoding)
    assert row.worst_total == 4 > row.bound == 3
    assert not explore_leases(2, 2, 1, 0, encoding=encoding).worst_total > 3  # OB-BOUND-1


# Every instance the plain encoding searches in about a second or less.
SMALL = [
    (n, m, w, lapses) for n in (1, 2) for m in range(4) for w in (1, 2) for lapses in (0, 1, 2)
]
SMALL += [(3, 1, 1, 1), (3, 2, 1, 0)]


def _mismatches(instances: list[tuple[int, int, int, int]]) -> list[tuple[object, ...]]:
    """Where the compact encoding's worst cases differ from the plain one's."""
    out: list[tuple[object, ...]] = []
    for bounds in instances:
        compact, plain = explore_leases(*bounds), explore_leases(*bounds, encoding="plain")
        assert compact.states <= plain.states, bounds
        found = (compact.worst_excess, compact.worst_total)
        if found != (plain.worst_excess, plain.worst_total):
            out.append((bounds, found, (plain.worst_excess, plain.worst_total)))
    return out


def test_OB_LEASE_2_compact_and_plain_encodings_find_the_same_worst() -> None:
    """OB-LEASE-2: on every small instance the compact encoding finds the plain one's worst
    excess over `dropped` and worst total, in no more states."""
    assert _mismatches(SMALL) == []


def _dropped_ignored(start: Any, successors: Any, **_: object) -> dict[Any, int]:
    """An unsound search: every state at cost 0, as if a lapse dropped nothing."""
    return {state: 0 for state in search.reachable(start, lambda s: [t for t, _ in successors(s)])}


def _checks_never_overlap(start: Any, successors: Any, **limits: Any) -> dict[Any, int]:
    """An unsound reduction: no check starts while another is in progress (the locked
    protocol, as if reads commuted with the others' admissions)."""

    def busy(state: Any) -> int:
        return sum(check is not None for check in state[2])

    def moves(state: Any) -> list[Any]:
        return [(t, c) for t, c in successors(state) if busy(t) <= max(busy(state), 1)]

    return search.least_costs(start, moves, **limits)


@pytest.mark.parametrize(
    ("search_with", "larger"), [(_dropped_ignored, True), (_checks_never_overlap, False)]
)
def test_OB_LEASE_2_an_unsound_search_is_caught(
    monkeypatch: pytest.MonkeyPatch, search_with: Any, larger: bool
) -> None:
    """OB-LEASE-2: the comparison has teeth. Forgetting what the lapses dropped reports a
    larger excess than the plain encoding; checks that never overlap a smaller one."""
    monkeypatch.setattr(lease, "least_costs", search_with)
    found = _mismatches([(2, 2, 1, 1), (2, 2, 2, 1)])
    assert found
    assert all((compact[0] > plain[0]) is larger for _, compact, plain in found)  # type: ignore[index]


def test_OB_LEASE_2_least_costs_is_the_least_over_every_path() -> None:
    """OB-LEASE-2: `least_costs` finds the cheapest path, not the first or the shortest:
    a -> b costs 5 directly, 1 + 0 + 1 = 2 through c and d."""
    graph = {"a": [("b", 5), ("c", 1)], "c": [("d", 0)], "d": [("b", 1)], "b": []}
    assert search.least_costs("a", lambda s: graph[s]) == {"a": 0, "b": 2, "c": 1, "d": 1}
    with pytest.raises(ValueError, match="too many"):
        search.least_costs("a", lambda s: graph[s], max_states=2, too_many="too many")


@pytest.mark.guard
def test_OB_LEASE_1_bad_bounds_name_the_problem() -> None:
    for bad, field in (
        ((0, 1, 1, 1), "servers"),
        ((1, -1, 1, 1), "cap"),
        ((1, 1, 0, 1), "weight"),
        ((1, 1, 1, True), "lapses"),
    ):
        with pytest.raises(ValueError, match=f"{field} must be an int"):
            explore_leases(*bad)
    with pytest.raises(ValueError, match="OB-LEASE-1: unknown encoding 'packed'"):
        explore_leases(1, 1, 1, 1, encoding="packed")
    for encoding in lease.ENCODINGS:  # OB-LEASE-2: the state limit holds in each, named
        with pytest.raises(ValueError, match=f"more than 10 states \\({encoding} encoding"):
            explore_leases(2, 2, 1, 1, encoding=encoding, max_states=10)


def test_OB_LEASE_4_an_unsound_merge_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """OB-LEASE-4: the comparison with the plain encoding has teeth. The merge carried to
    every read (every slot read as if it were the own one: the whole check one step, the
    locked protocol) loses interleavings, and the comparison reports a smaller worst."""
    change = Change("_reads", "every slot read as if it were the own one",
                    "own, slot = slot == p, slot + 1", "own, slot = True, slot + 1")  # fmt: skip
    monkeypatch.setattr(lease, "_reads", method_variant(lease, "_reads", change))  # type: ignore[arg-type]
    found = _mismatches([(2, 2, 1, 0), (2, 2, 2, 1), (3, 1, 1, 1)])
    assert [bounds for bounds, _, _ in found] == [(2, 2, 1, 0), (2, 2, 2, 1), (3, 1, 1, 1)]
    assert all(compact[0] < plain[0] for _, compact, plain in found)  # type: ignore[index]


def test_OB_LEASE_4_the_own_slot_merge_halves_the_states() -> None:
    """OB-LEASE-4: reading the own slot with the step after it keeps the plain worst (the
    comparison above) in fewer states than OB-LEASE-2's encoding alone: N = 3, M = 3,
    W = 2, one lapse: 59,128 states before the merge (commit 98c6d65), fewer than 31,000."""
    row = explore_leases(3, 3, 2, 1)
    assert (row.worst_excess, row.bound, row.worst_total) == (7, 7, 8)
    assert row.states < 31_000
