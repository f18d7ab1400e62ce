"""The store's faults as an exhaustive model (OB-FAULT-1 .. OB-FAULT-5), against formulas.

The expected worst totals are computed here from the formulas of
`specs/multi-node.md`, never by the model under test; the model must reach them
exactly. The broken claim (no fault can push the count over the bound) is
refuted by the same searches.
"""

from __future__ import annotations

import pytest

from queueref.verify.store_faults import FAULTS, explore_fault


def bound(n: int, m: int, w: int) -> int:
    return m + (n - 1) * min(m, w)


def partition_worst(n: int, m: int, w: int, k: int, atomic: bool) -> int:
    """OB-FAULT-1: the cut servers keep what they held (<= min(k*M, the bound)); the
    others run the protocol among themselves, reading the cut ones as 0."""
    if atomic:
        return min(n * m, 2 * m)
    return min(n * m, min(k * m, bound(n, m, w)) + bound(n - k, m, w))


def restart_worst(n: int, m: int, w: int, atomic: bool) -> int:
    """OB-FAULT-2: after Redis returns empty, every server is alone until the others write."""
    return min(n * m, 2 * (m if atomic else bound(n, m, w)))


def failover_worst(n: int, m: int, w: int, k: int, atomic: bool) -> int:
    """OB-FAULT-3: k lost writes hide at most k*W admitted requests."""
    return min(n * m, (m if atomic else bound(n, m, w)) + k * w)


SIZES = [(2, 1, 1), (2, 2, 1), (2, 3, 1), (2, 2, 2), (2, 3, 2), (3, 1, 1), (3, 2, 1)]
# Without (3, 2, 1): half a million states for a restart, and no formula it would tell apart.
SMALL = SIZES[:-1]


@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize(("n", "m", "w"), SIZES)
def test_OB_FAULT_1_partition_and_OB_FAULT_4_pause(n: int, m: int, w: int, atomic: bool) -> None:
    """OB-FAULT-1, OB-FAULT-4: a node cut from Redis (or paused past its lease) adds at most
    what it held; the worst total is the formula's, and real total <= bound + dropped."""
    for fault in ("partition", "pause"):
        row = explore_fault(fault, n, m, w, 1, atomic=atomic)
        assert row.holds, row
        assert row.worst_total == partition_worst(n, m, w, 1, atomic), row


@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize(("n", "m", "w"), SMALL)
def test_OB_FAULT_2_restart_empty(n: int, m: int, w: int, atomic: bool) -> None:
    """OB-FAULT-2: Redis restarted empty: the worst total is the formula's, and it holds
    real total <= bound + dropped (dropped: every count at the restart)."""
    row = explore_fault("restart", n, m, w, atomic=atomic)
    assert row.holds and row.worst_total == restart_worst(n, m, w, atomic), row


@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize(("n", "m", "w"), [(2, 1, 1), (2, 2, 1), (2, 3, 1), (2, 2, 2)])
def test_OB_FAULT_3_failover_with_k_lost_writes(
    n: int, m: int, w: int, k: int, atomic: bool
) -> None:
    """OB-FAULT-3: a failover that loses the last k writes: at most k*W over the bound;
    with no write lost (k = 0) the bound holds."""
    row = explore_fault("failover", n, m, w, k, atomic=atomic)
    assert row.holds and row.worst_total == failover_worst(n, m, w, k, atomic), row
    if k == 0:
        assert row.overshoot == 0


@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize(("n", "m", "w"), SMALL)
def test_OB_FAULT_5_a_killed_node_never_overshoots(n: int, m: int, w: int, atomic: bool) -> None:
    """OB-FAULT-5: kill -9 of a node: its slot counts until its lease lapses, so the
    others only under-admit; the bound holds."""
    row = explore_fault("kill", n, m, w, 1, atomic=atomic)
    assert row.overshoot == 0 and row.worst_total == (m if atomic else bound(n, m, w)), row


def test_OB_FAULT_1_the_claim_without_dropped_is_refuted() -> None:
    """OB-FAULT-1: the broken claim 'a fault never pushes the count over the bound' is
    refuted by the model (a real overshoot), while the claim with `dropped` holds."""
    for fault in ("partition", "restart", "pause"):
        row = explore_fault(fault, 2, 2, 1, 1)
        assert row.worst_total > row.bound and row.worst_excess <= row.bound, row
    lost = explore_fault("failover", 2, 2, 1, 1)
    assert lost.worst_total > lost.bound


def test_OB_FAULT_1_bad_arguments_name_the_problem() -> None:
    """OB-FAULT-1: an unknown fault or a bad size is a ValueError naming it."""
    assert "partition" in FAULTS
    with pytest.raises(ValueError, match="fault must be one of"):
        explore_fault("flood", 2, 2, 1)
    for kwargs, name in (({"servers": 0}, "servers"), ({"k": -1}, "k"), ({"cap": True}, "cap")):
        args = {"fault": "restart", "servers": 2, "cap": 2, "weight": 1, "k": 0} | kwargs
        with pytest.raises(ValueError, match=f"{name} must be an int"):
            explore_fault(**args)  # type: ignore[arg-type]
