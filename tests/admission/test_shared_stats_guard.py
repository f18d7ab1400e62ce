"""The slot-index guard of the one-slot reads, kept under `python -O` (ADM-STATS-3).

With contracts on, the precondition of `read_slot` / `read_tokens_slot` refuses an index
out of range first; these tests call the reads without their contracts
(`inspect.unwrap`), as `python -O` runs them, and `make test` runs them under -O too.
"""

from __future__ import annotations

import inspect

import pytest

from queueref import SharedAdmissionStats

pytestmark = pytest.mark.guard


@pytest.mark.parametrize("read", ["read_slot", "read_tokens_slot"])
@pytest.mark.parametrize("index", [-1, 2, 1.0, True, None])
def test_a_slot_index_out_of_range_is_refused_without_contracts(read: str, index: object) -> None:
    """ADM-STATS-3: a negative index (which would read the last server's slot), an index
    past the last slot, or a non-int is an IndexError naming it; no counter is read."""
    counters = [5, 7, 0, 0, 0, 0, 0, 0, 9, 11, 0, 0, 0, 0, 0, 0]
    stats = SharedAdmissionStats(counters, 2, 0)
    bare = inspect.unwrap(getattr(SharedAdmissionStats, read))
    with pytest.raises(IndexError, match=r"ADM-STATS-3: slot index .* is not in range\(2\)"):
        bare(stats, index)
    assert counters[8:10] == [9, 11]


@pytest.mark.parametrize("read, expected", [("read_slot", 9), ("read_tokens_slot", 11)])
def test_an_index_in_range_reads_its_slot_without_contracts(read: str, expected: int) -> None:
    """ADM-STATS-3: the guard lets a valid index through: slot 1's counter."""
    stats = SharedAdmissionStats([5, 7, 0, 0, 0, 0, 0, 0, 9, 11, 0, 0, 0, 0, 0, 0], 2, 0)
    assert inspect.unwrap(getattr(SharedAdmissionStats, read))(stats, 1) == expected
