"""The guards of the step-by-step check and of `cancel_admission`, kept under `python -O`.

With contracts on, the preconditions refuse a step out of order (ADM-CTL-7) or a give-back
of more than is held (ADM-CTL-9) first; these tests call the methods without their
contracts (`inspect.unwrap`), as `python -O` runs them, and `make test` runs them under -O
too. A refused step changes nothing: the check is left as it was, and can go on.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from queueref import AdmissionController, QueueOverflowError, SharedAdmissionStats
from queueref.admission.check import AdmissionCheck

pytestmark = pytest.mark.guard

_read_next = inspect.unwrap(AdmissionCheck.read_next)
_decide = inspect.unwrap(AdmissionCheck.decide)


def _server(counters: list[int], **options: Any) -> AdmissionController:
    """Server 0 of 2 over `counters`."""
    return AdmissionController(shared_stats=SharedAdmissionStats(counters, 2, 0), **options)


def test_deciding_before_the_last_slot_is_refused_and_the_check_goes_on() -> None:
    """ADM-CTL-7: a decision after one of two slots would judge a sum that leaves out the
    other server (here 3 + 1 <= 4 would admit; with the other slot, 6 + 1 > 4 rejects).
    It is refused, naming how many reads were made, and the check goes on to the right
    answer."""
    counters = [0] * SharedAdmissionStats.num_counters(2)
    counters[0], counters[8] = 3, 3
    check = _server(counters, max_num_queued_reqs=4).start_check(1)
    assert _read_next(check) == 3
    with pytest.raises(
        RuntimeError, match=r"ADM-CTL-7: decide only after every slot is read: 1 of 2 reads made"
    ):
        _decide(check)
    assert check.is_open and check.reads == 1 and check.view == 3
    assert _read_next(check) == 3
    with pytest.raises(QueueOverflowError) as rejected:
        _decide(check)
    assert (rejected.value.view, rejected.value.n, rejected.value.limit) == (6, 1, 4)
    assert not check.is_open


def test_deciding_early_counts_the_token_reads_too() -> None:
    """ADM-CTL-7: with a token limit in the shared scope a check reads every slot's
    request count and then every slot's queued tokens, 2N reads; an early decision names
    them all (1 of 6 with N = 3: not 3, 0 or 24)."""
    counters = [0] * SharedAdmissionStats.num_counters(3)
    server = AdmissionController(
        shared_stats=SharedAdmissionStats(counters, 3, 0),
        max_num_queued_reqs=4,
        max_num_queued_tokens=100,
    )
    check = server.start_check(1, num_prompt_tokens=5)
    _read_next(check)
    with pytest.raises(
        RuntimeError, match=r"ADM-CTL-7: decide only after every slot is read: 1 of 6 reads made"
    ):
        _decide(check)
    assert check.is_open and check.reads == 1


def test_reading_past_the_last_slot_is_refused_with_no_read() -> None:
    """ADM-CTL-7: once every slot is read, another read is refused before it reads
    anything (the counters are not touched: a slot past the last one does not exist)."""
    counters = [0] * SharedAdmissionStats.num_counters(2)
    counters[0], counters[8] = 1, 2
    check = _server(counters, max_num_queued_reqs=4).start_check(1)
    _read_next(check)
    _read_next(check)
    with pytest.raises(
        RuntimeError, match="ADM-CTL-7: a slot is left to read: every slot is read; decide"
    ):
        _read_next(check)
    assert check.reads == 2 and check.view == 3 and check.is_open
    assert _decide(check) == 3


@pytest.mark.parametrize("close", ["decide", "abandon"])
@pytest.mark.parametrize("step", ["read_next", "decide"])
def test_a_closed_check_takes_no_more_steps(close: str, step: str) -> None:
    """ADM-CTL-7: a decided or abandoned check neither reads nor decides again: in
    write-then-check a second decision would keep a reservation already given back (or
    already kept), and the counters stay as the close left them."""
    counters = [0] * SharedAdmissionStats.num_counters(2)
    server = _server(counters, max_num_queued_reqs=4, mode="write-then-check")
    check = server.start_check(1)
    _read_next(check)
    _read_next(check)
    if close == "decide":
        _decide(check)
    else:
        check.abandon()
    after = list(counters)
    reserved = server.tracker.num_reserved
    with pytest.raises(
        RuntimeError,
        match="ADM-CTL-7: the check is still open: this one was decided or abandoned",
    ):
        (_read_next if step == "read_next" else _decide)(check)
    assert counters == after
    assert server.tracker.num_reserved == reserved == (1 if close == "decide" else 0)


@pytest.mark.parametrize("num_prompt_tokens", [1, 0])
def test_cancelling_more_than_is_reserved_is_refused_in_the_controllers_words(
    num_prompt_tokens: int,
) -> None:
    """ADM-CTL-9: in write-then-check, giving back 2 when 1 is reserved is refused by the
    controller's precondition (kept under `python -O`), naming its own requirement (not the
    tracker's ADM-TRK-7 underneath), also for a prompt of no tokens, and the reservation
    and the slot stay as they were."""
    counters = [0] * SharedAdmissionStats.num_counters(2)
    server = _server(counters, max_num_queued_reqs=4, mode="write-then-check")
    server.check_admission(1)
    assert server.tracker.num_reserved == 1 and counters[0] == 1
    with pytest.raises(
        ValueError, match="ADM-CTL-9: only a reservation that is held can be given back"
    ):
        server.cancel_admission(2, num_prompt_tokens)
    assert server.tracker.num_reserved == 1 and counters[0] == 1
    server.cancel_admission(1)
    assert server.tracker.num_reserved == 0 and counters[0] == 0


@pytest.mark.parametrize("n", [0, -1, "1", 1.0, True])
def test_cancelling_an_n_that_is_no_count_is_refused_in_check_then_write_too(n: Any) -> None:
    """ADM-CTL-2: `cancel_admission` refuses an `n` that is not an int >= 1 in both modes,
    also where it would give nothing back (check-then-write reserves nothing)."""
    counters = [0] * SharedAdmissionStats.num_counters(2)
    server = _server(counters, max_num_queued_reqs=4)
    with pytest.raises(ValueError, match="ADM-CTL-2: n is an int >= 1"):
        server.cancel_admission(n)
    assert counters == [0] * SharedAdmissionStats.num_counters(2)


def test_cancelling_in_check_then_write_gives_nothing_back_and_refuses_nothing() -> None:
    """ADM-CTL-9: check-then-write reserves nothing, so the give-back guard does not apply:
    cancelling an admission there changes no count."""
    counters = [0] * SharedAdmissionStats.num_counters(2)
    server = _server(counters, max_num_queued_reqs=4)
    server.check_admission(1)
    server.cancel_admission(3)
    assert counters == [0] * SharedAdmissionStats.num_counters(2)
    assert server.tracker.num_reserved == 0
