"""OB-LEASE-1: the lease variant of the fine-grained model, searched exhaustively."""

from __future__ import annotations

import pytest

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


def test_OB_LEASE_1_without_the_dropped_term_the_bound_is_broken() -> None:
    """OB-LEASE-1: the dropped count is needed -- N = 2, M = 2, W = 1, one lapse: a server
    holding 2 lapses, the other admits 2, real total 4 > M + (N-1)*min(M, W) = 3."""
    row = explore_leases(2, 2, 1, 1)
    assert row.worst_total == 4 > row.bound == 3
    assert not explore_leases(2, 2, 1, 0).worst_total > 3  # no lapse: OB-BOUND-1


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
