"""Unit tests of `RequestTracker`: registration, cascade, finish, tokens, the slot refresh.

Expected values are written out by hand from `specs/admission.md`.
"""

from __future__ import annotations

from typing import Any

import icontract
import pytest
from method_variants import Change, broken_class

import queueref.config
from queueref import RequestTracker, SharedAdmissionStats
from queueref.admission.tracker import child_request_ids


class WriteLog:
    """A two-server counter buffer that logs the writes."""

    def __init__(self) -> None:
        self.values = [0] * 16
        self.writes: list[tuple[int, int]] = []

    def __getitem__(self, index: int) -> int:
        return self.values[index]

    def __setitem__(self, index: int, value: int) -> None:
        self.writes.append((index, value))
        self.values[index] = value


def tracked(buffer: Any = None, index: int = 1) -> RequestTracker:
    stats = SharedAdmissionStats(buffer if buffer is not None else [0] * 16, 2, index)
    return RequestTracker(stats)


def test_add_single_and_parallel() -> None:
    """ADM-TRK-1, ADM-TRK-6: n == 1 is the request itself; n > 1 is n children counted n."""
    tracker = RequestTracker()
    assert tracker.add("a") == ["a"]
    assert tracker.add("b", n=3) == ["0_b", "1_b", "2_b"]
    assert tracker.get_num_unfinished_requests() == 4
    assert tracker.request_ids() == ["a", "0_b", "1_b", "2_b"]
    assert tracker.has_request("b") and tracker.has_request("1_b")
    assert child_request_ids("x", 2) == ["0_x", "1_x"]


@pytest.mark.guard
@pytest.mark.parametrize(
    ("request_id", "n", "tokens"),
    [("a", 1, 1), ("b", 2, 1), ("0_b", 1, 1), ("c", 0, 1), ("c", 2, -1), ("c", 1.0, 1), (7, 1, 1)],
)
def test_add_is_all_or_nothing(request_id: Any, n: Any, tokens: Any) -> None:
    """ADM-TRK-1: a taken id, bad n or bad tokens -> ValueError and no change."""
    buffer = [0] * 16
    tracker = tracked(buffer)
    tracker.add("a", num_prompt_tokens=5)
    tracker.add("b", n=2, num_prompt_tokens=5)
    with pytest.raises(ValueError, match="ADM-TRK-1|ADM-CTL-2|ADM-TRK-4"):
        tracker.add(request_id, n=n, num_prompt_tokens=tokens)
    assert tracker.request_ids() == ["a", "0_b", "1_b"]
    assert tracker.get_num_queued_tokens() == 15 and buffer[8] == 3


@pytest.mark.guard
def test_child_id_collision_with_a_later_parent() -> None:
    """ADM-TRK-1: a new parallel request whose child id is already tracked is refused whole."""
    tracker = RequestTracker()
    tracker.add("1_x")
    with pytest.raises(ValueError, match="ADM-TRK-1"):
        tracker.add("x", n=2)
    assert tracker.request_ids() == ["1_x"]


def test_abort_parent_cascades() -> None:
    """ADM-TRK-2: aborting a parent ends every child it still has; the parent goes too."""
    tracker = RequestTracker()
    tracker.add("p", n=3)
    tracker.finish("1_p")
    assert tracker.abort("p") == ["0_p", "2_p"]
    assert not tracker.has_request("p") and tracker.get_num_unfinished_requests() == 0


def test_abort_child_and_unknown_ids() -> None:
    """ADM-TRK-2: a child alone; unknown ids are ignored; a list of ids."""
    tracker = RequestTracker()
    tracker.add("p", n=2)
    tracker.add("q")
    assert tracker.abort("1_p") == ["1_p"]
    assert tracker.has_request("p")
    assert tracker.abort(["nope", "q", "0_p", "q"]) == ["q", "0_p"]
    assert not tracker.has_request("p")
    assert tracker.abort("gone") == []


def test_finish() -> None:
    """ADM-TRK-3: finish ends one internal request; the parent leaves with its last child."""
    tracker = RequestTracker()
    tracker.add("p", n=2)
    tracker.finish("0_p")
    assert tracker.has_request("p") and tracker.get_num_unfinished_requests() == 1
    tracker.finish("1_p")
    assert not tracker.has_request("p") and tracker.get_num_unfinished_requests() == 0


@pytest.mark.guard
def test_finish_unknown_is_a_key_error() -> None:
    """ADM-TRK-3: an unknown id (or a parent id) -> KeyError, nothing changes."""
    tracker = RequestTracker()
    tracker.add("p", n=2)
    for bad in ("x", "p"):
        with pytest.raises(KeyError, match="ADM-TRK-3"):
            tracker.finish(bad)
    assert tracker.get_num_unfinished_requests() == 2


def test_queued_tokens() -> None:
    """ADM-TRK-4: prompt tokens of requests in prefill; prefill_done, finish, abort drop them."""
    tracker = RequestTracker()
    assert tracker.get_num_queued_tokens() == 0
    tracker.add("r1", num_prompt_tokens=100)
    tracker.add("r2", num_prompt_tokens=200)
    tracker.add("r3", num_prompt_tokens=50)
    tracker.add("fan", n=2, num_prompt_tokens=10)
    assert tracker.get_num_queued_tokens() == 370
    tracker.prefill_done("r2")
    tracker.prefill_done("r2")  # twice is harmless
    assert tracker.get_num_queued_tokens() == 170
    tracker.finish("r1")
    tracker.prefill_done("0_fan")
    tracker.abort("fan")
    assert tracker.get_num_queued_tokens() == 50
    tracker.finish("r2")  # out of prefill already: no double subtraction
    assert tracker.get_num_queued_tokens() == 50
    with pytest.raises(KeyError, match="ADM-TRK-4"):
        tracker.prefill_done("r1")


def test_slot_refreshed_at_exactly_three_exits() -> None:
    """ADM-TRK-5: add, abort (even of nothing) and finish write the slot; prefill_done not."""
    buffer = WriteLog()
    tracker = tracked(buffer, index=1)
    tracker.add("a", num_prompt_tokens=3)
    tracker.add("p", n=2)
    assert buffer.writes == [(8, 1), (8, 3)]
    tracker.prefill_done("a")
    assert buffer.writes == [(8, 1), (8, 3)]
    tracker.finish("a")
    tracker.abort("0_p")
    tracker.abort("nothing")
    tracker.abort("p")
    assert buffer.writes == [(8, 1), (8, 3), (8, 2), (8, 1), (8, 1), (8, 0)]
    assert buffer.values == [0] * 16


@pytest.mark.guard
def test_failed_add_writes_nothing() -> None:
    """ADM-TRK-5, ADM-TRK-1: a refused registration does not refresh."""
    buffer = WriteLog()
    tracker = tracked(buffer)
    tracker.add("a")
    with pytest.raises(ValueError):
        tracker.add("a")
    assert buffer.writes == [(8, 1)]


def test_without_stats_nothing_is_written() -> None:
    """ADM-TRK-5: no shared stats, no writes (the single-server path)."""
    tracker = RequestTracker()
    tracker.add("a")
    tracker.finish("a")
    assert tracker.shared_stats is None and tracker.get_num_unfinished_requests() == 0


def test_reservations() -> None:
    """ADM-TRK-7: reservations are in the slot; add takes them over; release gives them back."""
    buffer = [0] * 16
    tracker = tracked(buffer, index=0)
    tracker.add("held")
    tracker.reserve(2)
    assert buffer[0] == 3 and tracker.num_reserved == 2
    tracker.add("r", n=2)
    assert (
        buffer[0] == 3 and tracker.num_reserved == 0 and tracker.get_num_unfinished_requests() == 3
    )
    tracker.reserve(3)
    tracker.release_reservation(3)
    assert buffer[0] == 3 and tracker.num_reserved == 0
    tracker.reserve(1)
    tracker.add("big", n=3)  # takes over the one outstanding reservation, adds two
    assert buffer[0] == 6 and tracker.num_reserved == 0


@pytest.mark.guard
@pytest.mark.parametrize("n", [0, -1, 4])
def test_release_more_than_held_is_refused(n: int) -> None:
    """ADM-TRK-7: reservations are never negative; a bad release changes nothing."""
    buffer = [0] * 16
    tracker = tracked(buffer, index=0)
    tracker.reserve(3)
    with pytest.raises(ValueError):
        tracker.release_reservation(n)
    assert tracker.num_reserved == 3 and buffer[0] == 3


@pytest.mark.contracts
def test_adm_trk_5_a_tracker_that_skips_the_refresh_is_caught() -> None:
    """ADM-TRK-5 has teeth: a tracker that skips the refresh is caught by a postcondition."""

    LazyTracker = broken_class(
        RequestTracker,
        "LazyTracker",
        Change("_refresh", "never writes the slot", "if self._stats is not None:", "if False:"),
    )

    tracker = LazyTracker(SharedAdmissionStats([0] * 16, 2, 0))
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-5"):
        tracker.add("a")


@pytest.mark.contracts
def test_adm_trk_6_a_cached_token_count_that_drifts_is_caught() -> None:
    """ADM-TRK-6 has teeth: a cached token count that drifts from the requests is caught."""
    assert queueref.config.deep_checks()
    tracker = RequestTracker()
    tracker.add("a", num_prompt_tokens=10)
    tracker._queued_tokens = 11  # deliberately corrupt the cache
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-6"):
        tracker.get_num_unfinished_requests()


@pytest.mark.guard
def test_abort_with_a_bad_id_changes_nothing() -> None:
    """ADM-TRK-2: every id is checked before any request is dropped; the slot stays true."""
    from queueref import RequestTracker, SharedAdmissionStats

    counters = [0] * SharedAdmissionStats.num_counters(2)
    tracker = RequestTracker(SharedAdmissionStats(counters, 2, 0))
    tracker.add("a")
    tracker.add("b")
    with pytest.raises(TypeError, match="ADM-TRK-2"):
        tracker.abort(["a", ["x"]])  # type: ignore[list-item]
    assert tracker.get_num_unfinished_requests() == 2
    assert counters[0] == 2


def test_adm_trk_1_a_request_of_no_sample_has_no_internal_id() -> None:
    """ADM-TRK-1: `child_request_ids` names one id per sample: none for n = 0 (the request
    itself only for n = 1), two children for n = 2."""
    from queueref.admission.tracker import child_request_ids

    assert child_request_ids("r", 0) == []
    assert child_request_ids("r", 1) == ["r"]
    assert child_request_ids("r", 2) == ["0_r", "1_r"]
