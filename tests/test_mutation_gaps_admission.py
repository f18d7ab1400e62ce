"""Gaps in the tests of queueref.admission, found by `make mutation`.

Each test pins down a behaviour, or shows a condition catching a broken variant for
the reason it claims, that no earlier test did: a check while another admission's
reservations are held, a parallel request's tokens given back, counts past CPython's
small-int cache, a check with a side effect on the tracker, and a `fits` decision
whose backlog and prompt share bits.
"""

from __future__ import annotations

from multiprocessing.sharedctypes import RawArray
from typing import Any

import icontract
import pytest
from method_variants import Change, method_variant

from queueref import AdmissionController, SharedAdmissionStats
from queueref.models import protocol as protocol_module


def _controller(buffer: Any = None, **options: Any) -> AdmissionController:
    """Server 0 of two over `buffer` (a private list by default)."""
    counters = buffer if buffer is not None else [0] * 16
    return AdmissionController(shared_stats=SharedAdmissionStats(counters, 2, 0), **options)


@pytest.mark.parametrize("buffer", ["list", "RawArray"])
def test_a_second_check_while_a_reservation_is_held(buffer: str) -> None:
    """ADM-CTL-9, ADM-TOK-5: in write-then-check two admissions in a row, neither
    registered yet: the second keeps its reservation beside the first (2 slots, 10
    tokens held), whichever path (stepwise over a list, one pass over a RawArray)."""
    counters: Any = [0] * 16 if buffer == "list" else RawArray("q", 16)
    server = _controller(
        counters, max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check"
    )
    assert server.check_admission(1, 5) == 1
    assert server.check_admission(1, 5) == 2
    assert server.tracker.num_reserved == 2 and server.tracker.num_reserved_tokens == 10
    assert counters[0] == 2 and counters[1] == 10


def test_cancelling_a_parallel_request_gives_back_all_its_tokens() -> None:
    """ADM-TOK-5: a write-then-check admission of n = 2 samples of a 3-token prompt
    holds 6 tokens; cancelling it gives back exactly those 6 (and its 2 slots)."""
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check")
    server.check_admission(2, 3)
    assert server.tracker.num_reserved_tokens == 6
    server.cancel_admission(2, 3)
    assert server.tracker.num_reserved == 0 and server.tracker.num_reserved_tokens == 0
    assert server.shared_stats is not None
    assert server.shared_stats.get_num_queued_tokens() == 0


def test_write_then_check_of_large_prompts_keeps_exact_counts() -> None:
    """ADM-TOK-5: token counts above CPython's small-int cache (1,000-token prompts) are
    reserved, checked and given back with no condition tripping (an identity comparison
    of two equal counts, `is` for `==`, would)."""
    server = _controller(max_num_queued_reqs=8, max_num_queued_tokens=5000, mode="write-then-check")
    check = server.start_check(1, 1000)
    while not check.done:
        check.read_next()
    check.decide()
    server.check_admission(2, 1000)
    assert server.tracker.num_reserved_tokens == 3000
    server.cancel_admission(2, 1000)
    server.cancel_admission(1, 1000)
    assert server.tracker.num_reserved_tokens == 0


def test_a_check_that_registers_a_request_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-CTL-6: a check that registers a request as a side effect (the unfinished count
    grows during the check) is caught by "a check registers nothing"."""
    broken = method_variant(
        AdmissionController,
        "_check_step_by_step",
        Change(
            "_check_step_by_step",
            "registers a request while checking",
            "view = check.decide()",
            "view = check.decide()\n    self._tracker.add('ghost')",
        ),
    )
    monkeypatch.setattr(AdmissionController, "_check_step_by_step", broken)
    server = _controller(max_num_queued_reqs=4)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-6: a check registers nothing"):
        server.check_admission()


def test_a_fits_decision_past_the_limit_is_caught_when_backlog_and_prompt_share_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-4, ADM-TOK-3: with the `fits` rule, an own backlog of 5 and a 6-token prompt
    need 11 of a limit of 10; a decision that admits anyway is caught (5 + 6, not a
    bitwise 5 ^ 6 = 3, is what must fit)."""
    monkeypatch.setattr(protocol_module, "admits_tokens", lambda *args: True)
    server = AdmissionController(None, 10, token_rule="fits")
    server.tracker.add("queued", num_prompt_tokens=5)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-4"):
        server.check_admission(1, 6)


@pytest.mark.guard
@pytest.mark.parametrize("bad", [-1, -1000])
def test_a_negative_prompt_is_refused_on_the_one_pass_path_too(bad: int) -> None:
    """ADM-TOK-3: over a RawArray (the one-pass path) an int n with a negative prompt
    length is refused as over a list, before any write or reservation."""
    counters = RawArray("q", 16)
    server = _controller(
        counters, max_num_queued_reqs=5, max_num_queued_tokens=10, mode="write-then-check"
    )
    with pytest.raises(ValueError, match="ADM-TOK-3"):
        server.check_admission(1, bad)
    assert list(counters) == [0] * 16 and server.tracker.num_reserved_tokens == 0


def test_an_admission_of_a_zero_token_prompt_can_be_cancelled() -> None:
    """ADM-TOK-5: a prompt of 0 tokens is a valid request (ADM-TOK-3: an int >= 0): its
    write-then-check admission is given back like any other."""
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=10, mode="write-then-check")
    server.check_admission(1, 0)
    assert server.tracker.num_reserved == 1
    server.cancel_admission(1, 0)
    assert server.tracker.num_reserved == 0 and server.tracker.num_reserved_tokens == 0


def test_a_tracker_of_other_stats_is_refused_by_the_precondition() -> None:
    """ADM-CTL-1: the precondition itself (not only the guard kept for `python -O`) refuses
    a tracker that refreshes other shared stats than the controller reads."""
    from queueref import RequestTracker

    mine = SharedAdmissionStats([0] * 16, 2, 0)
    other = RequestTracker(SharedAdmissionStats([0] * 16, 2, 0))
    with pytest.raises(
        ValueError,
        match="ADM-CTL-1: the tracker refreshes the same shared stats the controller reads",
    ):
        AdmissionController(4, shared_stats=mine, tracker=other)


@pytest.mark.guard
@pytest.mark.parametrize(
    "limits",
    [(-1, None), (None, -1), (1.5, None), (None, True)],
    ids=["reqs -1", "tokens -1", "reqs 1.5", "tokens True"],
)
def test_the_limit_guards_hold_without_contracts(limits: tuple[object, object]) -> None:
    """ADM-CTL-1: without its preconditions (as under `python -O`) the constructor still
    refuses a limit that is not None or an int >= 0, naming it."""
    import inspect

    init = inspect.unwrap(AdmissionController.__init__)
    server = AdmissionController.__new__(AdmissionController)
    with pytest.raises(ValueError, match="ADM-CTL-1: max_num_queued_.* must be None or an int"):
        init(server, *limits)
