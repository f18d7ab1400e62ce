"""The slot-index guard of the one-slot reads, kept under `python -O` (ADM-STATS-3).

The precondition of `read_slot` / `read_tokens_slot` is declared once and kept under
`python -O` (`queueref.preconditions.require`): these tests run with contracts on and
`make test` runs them under -O too.
"""

from __future__ import annotations

import pytest

from queueref import SharedAdmissionStats

pytestmark = pytest.mark.guard


@pytest.mark.parametrize("read", ["read_slot", "read_tokens_slot"])
@pytest.mark.parametrize("index", [-1, 2, 1.0, True, None])
def test_a_slot_index_out_of_range_is_refused_in_both_modes(read: str, index: object) -> None:
    """ADM-STATS-3: a negative index (which would read the last server's slot), an index
    past the last slot, or a non-int is an IndexError naming it; no counter is read."""
    counters = [5, 7, 0, 0, 0, 0, 0, 0, 9, 11, 0, 0, 0, 0, 0, 0]
    stats = SharedAdmissionStats(counters, 2, 0)
    requirement = "ADM-STATS-3" if read == "read_slot" else "ADM-TOK-2"
    with pytest.raises(IndexError, match=f"{requirement}: a slot index is in range"):
        getattr(stats, read)(index)
    assert counters[8:10] == [9, 11]


@pytest.mark.parametrize("read, expected", [("read_slot", 9), ("read_tokens_slot", 11)])
def test_an_index_in_range_reads_its_slot_in_both_modes(read: str, expected: int) -> None:
    """ADM-STATS-3: the precondition lets a valid index through: slot 1's counter."""
    stats = SharedAdmissionStats([5, 7, 0, 0, 0, 0, 0, 0, 9, 11, 0, 0, 0, 0, 0, 0], 2, 0)
    assert getattr(stats, read)(1) == expected
