"""Gaps in the tests of queueref.admission.tracker, found by `make mutation`.

Two kinds of test. A contract's teeth: the real method rebuilt with one named change
(`tests/helpers/method_variants.py`, its contracts re-applied from its source) is caught by
the condition that states the rule, for the reason it claims. A guard's: the checks a
method keeps in its body for `python -O`, where the preconditions are gone, are
called without the contracts (`inspect.unwrap`) and must refuse the bad input with
its clear error, changing nothing.
"""

from __future__ import annotations

import icontract
import pytest
from method_variants import Change, method_variant

import queueref.config
from queueref import RequestTracker, SharedAdmissionStats
from queueref.admission import tracker as tracker_module
from queueref.admission.contracts import tracker as tracker_contracts


def _tracker(*, share_tokens: bool = False) -> tuple[RequestTracker, list[int]]:
    """A tracker on slot 0 of two, over a private buffer (its frame conditions run)."""
    counters = [0] * 16
    return RequestTracker(SharedAdmissionStats(counters, 2, 0), share_tokens=share_tokens), counters


def test_registration_takes_over_n_times_the_prompt_of_more_token_reservations() -> None:
    """ADM-TOK-5: 10 reserved tokens, then a request of n = 2 with 3-token prompts: the
    registration takes over 2 * 3 = 6 of them (not 2 ** 3 = 8), 4 stay reserved and
    counter 1 holds the 6 queued plus the 4."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.reserve_tokens(10)
    tracker.add("a", n=2, num_prompt_tokens=3)
    assert tracker.num_reserved_tokens == 4
    assert tracker.get_num_queued_tokens() == 6
    assert counters[1] == 10


def test_a_rollback_that_gives_back_too_little_is_caught() -> None:
    """ADM-CTL-6: a `release_reservation` that removes one less than asked leaves the slot
    current (it is refreshed) but is caught by "the rollback removes exactly the
    reservation"."""
    tracker, _ = _tracker()
    broken = method_variant(
        RequestTracker,
        "release_reservation",
        Change(
            "release_reservation",
            "gives back one slot less than asked",
            "self._reserved -= n",
            "self._reserved -= n - 1",
        ),
    )
    tracker.reserve(3)
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-6: the rollback removes exactly the reservation"
    ):
        broken(tracker, 2)


def test_an_abort_that_forgets_counter_1_is_caught() -> None:
    """ADM-TOK-1: an `abort` that refreshes only the request count (counter 0) leaves the
    aborted request's tokens in counter 1: caught by "abort writes the queued tokens"."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.add("a", num_prompt_tokens=5)
    broken = method_variant(
        RequestTracker,
        "abort",
        Change(
            "abort",
            "refreshes counter 0 only",
            "self._refresh()",
            "self._stats.set_num_requests(len(self._states) + self._reserved)",
        ),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-1: abort writes the queued tokens"):
        broken(tracker, "a")
    assert counters[1] == 5  # the variant really left the tokens behind


def test_a_child_left_in_its_parent_after_it_ended_is_inconsistent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TRK-6: a `_drop` that forgets to take a finished child out of its parent leaves
    the parent naming a child no longer tracked: the deep invariant "the cached counts
    equal the tracked requests" catches it at the finish."""
    tracker, _ = _tracker()
    tracker.add("p", n=2)

    def drop_forgetting_the_parent(self: RequestTracker, request_id: str) -> None:
        state = self._states.pop(request_id)
        if state.is_prefilling:
            self._queued_tokens -= state.num_prompt_tokens

    monkeypatch.setattr(RequestTracker, "_drop", drop_forgetting_the_parent)
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-6: the cached counts equal the tracked requests"
    ):
        tracker.finish("0_p")


def test_a_child_under_another_parent_is_inconsistent() -> None:
    """ADM-TRK-6: a parent that lists a tracked child whose own parent is another id."""
    tracker, _ = _tracker()
    tracker.add("p", n=2)
    assert tracker_contracts.consistent(tracker)
    tracker._states["0_p"].parent_id = "q"
    assert not tracker_contracts.consistent(tracker)


_TOKEN_COUNT = "ADM-TOK-5: a token reservation is an int >= 0"


@pytest.mark.guard
@pytest.mark.parametrize(
    ("tokens", "refusal"),
    [
        (-1, _TOKEN_COUNT),
        (1.0, _TOKEN_COUNT),
        (True, _TOKEN_COUNT),
        (6, "ADM-TOK-5: only a held token reservation can be given back"),
    ],
)
def test_the_token_rollback_guard_holds_in_both_modes(tokens: object, refusal: str) -> None:
    """ADM-TOK-5: with contracts on and under `python -O` (one declaration, kept),
    `release_token_reservation` refuses a negative, non-int or bool count, and more tokens
    than are reserved, naming the problem; nothing changes."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.reserve_tokens(5)
    with pytest.raises(ValueError, match=refusal):
        tracker.release_token_reservation(tokens)  # type: ignore[arg-type]
    assert tracker.num_reserved_tokens == 5 and counters[1] == 5


@pytest.mark.guard
@pytest.mark.parametrize("tokens", [-1, 2.0, False])
def test_the_token_reservation_guard_holds_in_both_modes(tokens: object) -> None:
    """ADM-TOK-5: in both modes `reserve_tokens` refuses a count that is not an int >= 0;
    nothing changes."""
    tracker, counters = _tracker(share_tokens=True)
    with pytest.raises(ValueError, match=_TOKEN_COUNT):
        tracker.reserve_tokens(tokens)  # type: ignore[arg-type]
    assert tracker.num_reserved_tokens == 0 and counters[1] == 0


def test_a_change_that_does_not_apply_is_refused() -> None:
    """The variants cannot drift: a change whose text is not in the method exactly once is
    an error naming it, not a silently unchanged copy."""
    from method_variants import ChangeDoesNotApply

    with pytest.raises(ChangeDoesNotApply, match="found 0 times"):
        method_variant(
            RequestTracker, "abort", Change("abort", "gone", "self._forgotten()", "pass")
        )


def test_a_variant_without_changes_keeps_the_contracts_of_the_real_method() -> None:
    """The rebuilt method carries the real one's conditions: the unchanged copy refuses
    what the real method refuses, with the same precondition."""
    tracker, _ = _tracker()
    copy = method_variant(RequestTracker, "release_reservation")
    with pytest.raises(ValueError, match="ADM-TRK-7: only a held reservation can be given back"):
        copy(tracker, 1)
    with pytest.raises(ValueError, match="ADM-TRK-7: only a held reservation can be given back"):
        tracker.release_reservation(1)


def test_prefill_done_of_large_prompts_keeps_the_count() -> None:
    """ADM-TOK-4: counts above CPython's small-int cache: two 1,000-token prompts, one
    leaves prefill, 1,000 stay queued and no condition trips (an identity comparison
    of the counts, `is` for `==`, would)."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.add("a", num_prompt_tokens=1000)
    tracker.add("b", num_prompt_tokens=1000)
    tracker.prefill_done("a")
    assert tracker.get_num_queued_tokens() == 1000 and counters[1] == 1000
    tracker.reserve_tokens(700)
    tracker.release_token_reservation(300)
    tracker.add("c", n=2, num_prompt_tokens=300)
    assert tracker.get_num_queued_tokens() == 1600 and tracker.num_reserved_tokens == 0


def test_a_token_rollback_that_leaves_counter_1_behind_is_caught() -> None:
    """ADM-TOK-5: a `release_token_reservation` that updates its count but does not write
    counter 1 is caught by "counter 1 is rolled back"."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.reserve_tokens(5)
    broken = method_variant(
        RequestTracker,
        "release_token_reservation",
        Change(
            "release_token_reservation",
            "does not write counter 1",
            "self._reserved_tokens -= tokens\n    self._refresh_tokens()",
            "self._reserved_tokens -= tokens",
        ),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-5: counter 1 is rolled back"):
        broken(tracker, 2)
    assert counters[1] == 5


def test_a_token_count_gone_negative_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-TRK-7, ADM-TOK-5: a `_drop` that takes a request's prompt tokens out again after
    it left prefill drives the queued tokens to -1: caught by "counts are never
    negative" (deep checks off, so the whole-structure invariant does not speak first)."""

    def drop_taking_the_tokens_twice(self: RequestTracker, request_id: str) -> None:
        state = self._states.pop(request_id)
        self._queued_tokens -= state.num_prompt_tokens

    tracker = RequestTracker()
    tracker.add("a", num_prompt_tokens=1)
    tracker.prefill_done("a")
    monkeypatch.setattr(RequestTracker, "_drop", drop_taking_the_tokens_twice)
    monkeypatch.setattr(queueref.config, "deep_checks", lambda: False)
    with pytest.raises(icontract.ViolationError, match="counts are never negative"):
        tracker.finish("a")


def test_token_reservations_add_up() -> None:
    """ADM-TOK-5: two token reservations, 3 then 1, hold 4 (a sum, not a bitwise 3 | 1)."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.reserve_tokens(3)
    tracker.reserve_tokens(1)
    assert tracker.num_reserved_tokens == 4 and counters[1] == 4


def test_large_reservations_keep_exact_counts() -> None:
    """ADM-TRK-7: reservations past CPython's small-int cache (300 + 300 slots) add up and
    give back with no condition tripping (`is` for `==` would)."""
    tracker, counters = _tracker()
    tracker.reserve(300)
    tracker.reserve(300)
    assert tracker.num_reserved == 600 and counters[0] == 600
    tracker.release_reservation(300)
    assert tracker.num_reserved == 300 and counters[0] == 300


def test_a_slot_written_too_high_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-TRK-5: a refresh that writes one more than unfinished + reserved is caught by
    "add refreshes the slot" (the slot must equal the count, not merely cover it)."""

    def refresh_one_too_many(self: RequestTracker) -> None:
        assert self._stats is not None
        self._stats.set_num_requests(len(self._states) + self._reserved + 1)

    tracker, _ = _tracker()
    monkeypatch.setattr(RequestTracker, "_refresh", refresh_one_too_many)
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-5: add refreshes the slot"):
        tracker.add("a")


def test_counter_1_written_too_low_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-TOK-5: a token refresh that leaves out the token reservations writes too little
    to counter 1: caught by "the token reservation is in counter 1"."""

    def refresh_without_reservations(self: RequestTracker) -> None:
        assert self._stats is not None
        self._stats.set_num_queued_tokens(self._queued_tokens)

    tracker, _ = _tracker(share_tokens=True)
    monkeypatch.setattr(RequestTracker, "_refresh_tokens", refresh_without_reservations)
    with pytest.raises(
        icontract.ViolationError, match="ADM-TOK-5: the token reservation is in counter 1"
    ):
        tracker.reserve_tokens(5)


def test_a_registration_that_keeps_the_reservations_is_caught() -> None:
    """ADM-TRK-7: an `add` that does not take over the reservations it registers leaves
    them held beside the real count (the slot counts the request twice): caught by "a
    registration takes over outstanding reservations"."""
    tracker, _ = _tracker()
    tracker.reserve(3)
    broken = method_variant(
        RequestTracker,
        "add",
        Change(
            "add",
            "keeps the reservations",
            "self._reserved -= min(self._reserved, n)",
            "pass",
        ),
    )
    with pytest.raises(
        icontract.ViolationError,
        match="ADM-TRK-7: a registration takes over outstanding reservations",
    ):
        broken(tracker, "a")


def test_a_registration_that_keeps_the_token_reservations_is_caught() -> None:
    """ADM-TOK-5: likewise for the token reservations: caught by "a registration takes
    over outstanding token reservations"."""
    tracker, _ = _tracker(share_tokens=True)
    tracker.reserve_tokens(4)
    broken = method_variant(
        RequestTracker,
        "add",
        Change(
            "add",
            "keeps the token reservations",
            "self._reserved_tokens -= min(self._reserved_tokens, n * num_prompt_tokens)",
            "pass",
        ),
    )
    with pytest.raises(
        icontract.ViolationError,
        match="ADM-TOK-5: a registration takes over outstanding token reservations",
    ):
        broken(tracker, "a", 1, 4)


def test_a_prefill_done_that_adds_a_request_is_caught() -> None:
    """ADM-TRK-4: a `prefill_done` that leaves a second, token-less state behind (the
    unfinished count grows) is caught by "leaving prefill is not finishing" (the count
    must stay, not merely not fall)."""
    tracker, _ = _tracker()
    tracker.add("a", num_prompt_tokens=2)
    broken = method_variant(
        RequestTracker,
        "prefill_done",
        Change(
            "prefill_done",
            "leaves a shadow request behind",
            "state.is_prefilling = False",
            "state.is_prefilling = False\n"
            "        self._states['shadow'] = _RequestState(None, 0, False)",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-4: leaving prefill is not finishing"
    ):
        broken(tracker, "a")


def test_a_reservation_of_one_too_many_is_caught() -> None:
    """ADM-TRK-7: a `reserve` that adds n + 1 is caught by "a reservation adds n"."""
    tracker, _ = _tracker()
    broken = method_variant(
        RequestTracker,
        "reserve",
        Change("reserve", "adds one too many", "self._reserved += n", "self._reserved += n + 1"),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-7: a reservation adds n"):
        broken(tracker, 2)


def test_an_abort_that_does_not_report_what_it_ended_is_caught() -> None:
    """ADM-TRK-2: an `abort` that ends a request without returning its id is caught by
    "exactly the returned requests are gone"."""
    tracker, _ = _tracker()
    tracker.add("a")
    broken = method_variant(
        RequestTracker,
        "abort",
        Change("abort", "forgets to report the ended id", "aborted.append(rid)", "pass"),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-2: exactly the returned requests are gone"
    ):
        broken(tracker, "a")


@pytest.mark.guard
@pytest.mark.parametrize(
    ("n", "refusal"),
    [
        (0, "ADM-CTL-2: n is an int >= 1"),
        (1.0, "ADM-CTL-2: n is an int >= 1"),
        (True, "ADM-CTL-2: n is an int >= 1"),
        (4, "ADM-TRK-7: only a held reservation can be given back"),
    ],
)
def test_the_rollback_guard_holds_in_both_modes(n: object, refusal: str) -> None:
    """ADM-TRK-7: in both modes `release_reservation` refuses a count that is not an int
    >= 1 or more than is held (3), naming it; nothing changes."""
    tracker, counters = _tracker()
    tracker.reserve(3)
    with pytest.raises(ValueError, match=refusal):
        tracker.release_reservation(n)  # type: ignore[arg-type]
    assert tracker.num_reserved == 3 and counters[0] == 3


@pytest.mark.parametrize("n", [0, -1])
def test_a_reservation_of_no_slot_is_refused_by_the_precondition(n: int) -> None:
    """ADM-CTL-2: the precondition of `reserve` itself (not only the guard kept for
    `python -O`) refuses n < 1."""
    tracker, counters = _tracker()
    with pytest.raises(ValueError, match="ADM-CTL-2: n is an int >= 1"):
        tracker.reserve(n)
    assert tracker.num_reserved == 0 and counters[0] == 0


def test_a_registration_that_takes_over_every_reservation_is_caught() -> None:
    """ADM-TRK-7: an `add` of n = 1 that drops all three reservations held (not just the
    one it registers) is caught by "a registration takes over outstanding reservations"
    (the count must be exact, not merely not above)."""
    tracker, _ = _tracker()
    tracker.reserve(3)
    broken = method_variant(
        RequestTracker,
        "add",
        Change(
            "add",
            "takes over every reservation",
            "self._reserved -= min(self._reserved, n)",
            "self._reserved = 0",
        ),
    )
    with pytest.raises(
        icontract.ViolationError,
        match="ADM-TRK-7: a registration takes over outstanding reservations",
    ):
        broken(tracker, "a")


def test_a_large_token_reservation_is_taken_over_in_part() -> None:
    """ADM-TOK-5: 1,000 reserved tokens, a 300-token request registers: 700 stay reserved
    (counts past the small-int cache, so an identity comparison would trip)."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.reserve_tokens(1000)
    tracker.add("a", num_prompt_tokens=300)
    assert tracker.num_reserved_tokens == 700 and counters[1] == 1000


def test_a_rollback_of_no_slot_is_refused_by_the_precondition() -> None:
    """ADM-CTL-2: the precondition of `release_reservation` itself refuses n = 0."""
    tracker, counters = _tracker()
    tracker.reserve(1)
    with pytest.raises(ValueError, match="ADM-CTL-2: n is an int >= 1"):
        tracker.release_reservation(0)
    assert tracker.num_reserved == 1 and counters[0] == 1


def test_an_abort_that_reports_another_request_is_caught() -> None:
    """ADM-TRK-2: an `abort` that ends "a" but returns the id of "b", still tracked (the
    counts agree), is caught by "an aborted request is no longer tracked"."""
    tracker, _ = _tracker()
    tracker.add("a")
    tracker.add("b")
    broken = method_variant(
        RequestTracker,
        "abort",
        Change(
            "abort",
            "reports a request it did not end",
            "aborted.append(rid)",
            "aborted.append(next(iter(self._states), rid))",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-2: an aborted request is no longer tracked"
    ):
        broken(tracker, "a")


def test_a_share_tokens_that_does_not_share_is_caught() -> None:
    """ADM-TOK-1: a `share_tokens` that never turns sharing on writes nothing to counter 1,
    which is consistent with not sharing: only "the tokens are shared" catches it."""
    tracker, _ = _tracker()
    broken = method_variant(
        RequestTracker,
        "share_tokens",
        Change("share_tokens", "never turns sharing on", "self._shares_tokens = True", "pass"),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-1: the tokens are shared"):
        broken(tracker)


def test_an_add_that_returns_the_children_out_of_order_is_caught() -> None:
    """ADM-TRK-1: an `add` of n = 2 that registers both children but returns their ids
    reversed is caught by "the internal ids are the request id, or 0_id .. (n-1)_id"."""
    tracker, _ = _tracker()
    broken = method_variant(
        RequestTracker,
        "add",
        Change("add", "returns the ids reversed", "return ids", "return ids[::-1]"),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-1: the internal ids are"):
        broken(tracker, "p", 2)


def test_an_add_that_registers_a_child_too_few_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TRK-1: an `add` of n = 2 that registers only the second child is caught by
    "all n children are registered" (the count must be exact, not merely not above;
    deep checks off, so the whole-structure invariant does not speak first)."""
    monkeypatch.setattr(queueref.config, "deep_checks", lambda: False)
    tracker, _ = _tracker()
    broken = method_variant(
        RequestTracker,
        "add",
        Change("add", "registers one child too few", "for rid in ids:", "for rid in ids[1:]:"),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-1: all n children are registered"):
        broken(tracker, "p", 2)


def test_an_abort_that_reports_an_id_twice_is_caught() -> None:
    """ADM-TRK-2: an `abort` that returns the ended id twice (one gone, two reported) is
    caught by "exactly the returned requests are gone"."""
    tracker, _ = _tracker()
    tracker.add("a")
    broken = method_variant(
        RequestTracker,
        "abort",
        Change("abort", "reports the id twice", "aborted.append(rid)", "aborted += [rid, rid]"),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-2: exactly the returned requests are gone"
    ):
        broken(tracker, "a")


def test_a_finish_that_ends_nothing_is_caught() -> None:
    """ADM-TRK-3: a `finish` that forgets the request is caught by "finishing ends exactly
    one internal request" (the count must fall by one, not merely not by more)."""
    tracker, _ = _tracker()
    tracker.add("a")
    broken = method_variant(
        RequestTracker,
        "finish",
        Change("finish", "ends nothing", "self._drop(request_id)", "pass"),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-3: finishing ends exactly one internal request"
    ):
        broken(tracker, "a")


def test_a_prefill_done_that_ends_the_request_is_caught() -> None:
    """ADM-TRK-4: a `prefill_done` that also forgets the request (its tokens leave as they
    should) is caught by "leaving prefill is not finishing"."""
    tracker, _ = _tracker()
    tracker.add("a", num_prompt_tokens=2)
    broken = method_variant(
        RequestTracker,
        "prefill_done",
        Change(
            "prefill_done",
            "ends the request",
            "state.is_prefilling = False",
            "state.is_prefilling = False\n        del self._states[request_id]",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-4: leaving prefill is not finishing"
    ):
        broken(tracker, "a")


def test_a_prefill_done_that_takes_the_tokens_out_twice_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TOK-4: a `prefill_done` that takes twice the prompt out of the count is caught by
    "exactly the request's prompt tokens leave the count (once)" (deep checks off)."""
    monkeypatch.setattr(queueref.config, "deep_checks", lambda: False)
    tracker, _ = _tracker()
    tracker.add("a", num_prompt_tokens=2)
    tracker.add("b", num_prompt_tokens=3)
    broken = method_variant(
        RequestTracker,
        "prefill_done",
        Change(
            "prefill_done",
            "takes the prompt out twice",
            "self._queued_tokens -= state.num_prompt_tokens",
            "self._queued_tokens -= 2 * state.num_prompt_tokens",
        ),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-4: exactly the request's prompt"):
        broken(tracker, "a")


@pytest.mark.parametrize(
    "new, bug", [("tokens - 1", "gives back one token less"), ("tokens + 1", "one token more")]
)
def test_a_token_rollback_of_the_wrong_size_is_caught(new: str, bug: str) -> None:
    """ADM-TOK-5: a `release_token_reservation` that gives back one token less, or one
    more, than asked is caught by "the rollback removes exactly the token reservation"."""
    tracker, _ = _tracker(share_tokens=True)
    tracker.reserve_tokens(5)
    broken = method_variant(
        RequestTracker,
        "release_token_reservation",
        Change(
            "release_token_reservation",
            bug,
            "self._reserved_tokens -= tokens",
            f"self._reserved_tokens -= {new}",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TOK-5: the rollback removes exactly the token"
    ):
        broken(tracker, 2)


def test_a_token_reservation_of_one_too_many_is_caught() -> None:
    """ADM-TOK-5: a `reserve_tokens` that holds one token more than asked (and writes it to
    counter 1, so the counter agrees) is caught by "a token reservation adds its tokens"."""
    tracker, _ = _tracker(share_tokens=True)
    broken = method_variant(
        RequestTracker,
        "reserve_tokens",
        Change(
            "reserve_tokens",
            "holds one token too many",
            "self._reserved_tokens += tokens",
            "self._reserved_tokens += tokens + 1",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TOK-5: a token reservation adds its tokens"
    ):
        broken(tracker, 3)


def test_a_parent_without_children_or_also_a_request_is_inconsistent() -> None:
    """ADM-TRK-6: the whole-structure check refuses a parent with no live child, and a
    parent id that is also tracked as a request; it compares ids by value."""
    tracker, _ = _tracker()
    tracker.add("p", n=2)
    tracker._parents["q"] = {}
    assert not tracker_contracts.consistent(tracker)
    del tracker._parents["q"]
    tracker._states["p"] = tracker_module._RequestState(None, 0, False)
    assert not tracker_contracts.consistent(tracker)
    del tracker._states["p"]
    tracker._states["0_p"].parent_id = "".join(["p"])  # equal to the key, another object
    assert tracker_contracts.consistent(tracker)


@pytest.mark.guard
def test_the_reservation_guard_holds_in_both_modes() -> None:
    """ADM-CTL-2: in both modes `reserve` refuses n = 0; nothing changes."""
    tracker, counters = _tracker()
    with pytest.raises(ValueError, match="ADM-CTL-2: n is an int >= 1"):
        tracker.reserve(0)
    assert tracker.num_reserved == 0 and counters[0] == 0


def test_a_negative_token_reservation_is_refused_by_the_precondition() -> None:
    """ADM-TOK-5: the precondition of `reserve_tokens` itself refuses -1."""
    tracker, _ = _tracker(share_tokens=True)
    with pytest.raises(ValueError, match="ADM-TOK-5: a token reservation is an int >= 0"):
        tracker.reserve_tokens(-1)
    assert tracker.num_reserved_tokens == 0


@pytest.mark.guard
def test_a_request_queues_one_prompt_token_unless_told() -> None:
    """ADM-TRK-4: `add` without a prompt length queues 1 token per child (the default of
    `num_prompt_tokens`, as `check_admission`'s)."""
    tracker = RequestTracker()
    tracker.add("a")
    tracker.add("p", n=2)
    assert tracker.get_num_queued_tokens() == 3


def test_counter_1_holds_queued_plus_reserved_tokens() -> None:
    """ADM-TOK-5: with 1 queued token and 1 reserved, counter 1 holds their sum 2 (the
    frame condition adds them; a bitwise 1 ^ 1 would expect 0)."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.add("a", num_prompt_tokens=1)
    tracker.reserve_tokens(1)
    assert counters[1] == 2
    tracker.reserve_tokens(3)
    tracker.release_token_reservation(3)
    assert counters[1] == 2


def test_a_rollback_that_does_not_write_the_slot_is_caught() -> None:
    """ADM-CTL-6: a `release_reservation` that lowers its count but leaves the slot as it
    was is caught by "the slot is rolled back"."""
    tracker, counters = _tracker()
    tracker.reserve(2)
    broken = method_variant(
        RequestTracker,
        "release_reservation",
        Change(
            "release_reservation",
            "does not write the slot",
            "self._reserved -= n\n    self._refresh()",
            "self._reserved -= n",
        ),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-6: the slot is rolled back"):
        broken(tracker, 1)
    assert counters[0] == 2


@pytest.mark.parametrize(
    "tokens, message",
    [
        (-1, "ADM-TOK-5: a token reservation is an int >= 0"),
        (6, "ADM-TOK-5: only a held token reservation can be given back"),
    ],
)
def test_a_bad_token_rollback_is_refused_by_its_preconditions(tokens: int, message: str) -> None:
    """ADM-TOK-5: the preconditions of `release_token_reservation` themselves (not only the
    guard kept for `python -O`) refuse a negative count and more than is held (5)."""
    tracker, counters = _tracker(share_tokens=True)
    tracker.reserve_tokens(5)
    with pytest.raises(ValueError, match=message):
        tracker.release_token_reservation(tokens)
    assert tracker.num_reserved_tokens == 5 and counters[1] == 5


def test_an_add_that_returns_too_few_ids_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-TRK-1: an `add` of n = 2 that registers both children but returns only the
    first id (a prefix, so "no more than" would accept it) is caught by "the internal ids
    are the request id, or 0_id .. (n-1)_id"."""
    tracker, _ = _tracker()
    broken = method_variant(
        RequestTracker,
        "add",
        Change("add", "returns the first id only", "return ids", "return ids[:1]"),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-1: the internal ids are"):
        broken(tracker, "p", 2)


def test_a_large_reservation_is_taken_over_one_by_one() -> None:
    """ADM-TRK-7: 600 reservations held, one request registers: 599 stay (past the
    small-int cache: an identity comparison of the counts would trip)."""
    tracker, counters = _tracker()
    tracker.reserve(600)
    tracker.add("a")
    assert tracker.num_reserved == 599 and counters[0] == 600


def test_a_finish_that_does_not_write_the_slot_is_caught() -> None:
    """ADM-TRK-5: a `finish` that forgets the request but not the slot is caught by
    "finish refreshes the slot"."""
    tracker, counters = _tracker()
    tracker.add("a")
    broken = method_variant(
        RequestTracker,
        "finish",
        Change(
            "finish",
            "does not write the slot",
            "self._drop(request_id)\n    self._refresh()",
            "self._drop(request_id)",
        ),
    )
    with pytest.raises(icontract.ViolationError, match="ADM-TRK-5: finish refreshes the slot"):
        broken(tracker, "a")
    assert counters[0] == 1


@pytest.mark.guard
def test_share_tokens_is_a_keyword() -> None:
    """ADM-TOK-1: `share_tokens` is keyword-only, so a stray second positional argument is a
    TypeError, not a silent switch."""
    stats = SharedAdmissionStats([0] * 16, 2, 0)
    with pytest.raises(TypeError):
        RequestTracker(stats, True)  # type: ignore[call-arg]
    assert RequestTracker(stats, share_tokens=True).shares_tokens


@pytest.mark.parametrize("field", ["_reserved", "_queued_tokens", "_reserved_tokens"])
def test_a_count_corrupted_below_zero_is_caught_at_the_next_call(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADM-TRK-7, ADM-TOK-5: each of the three cached counts, set to -1 behind the tracker's
    back, is caught by the invariant "counts are never negative" at the next public call
    (deep checks off, so the whole-structure invariant does not speak first)."""
    monkeypatch.setattr(queueref.config, "deep_checks", lambda: False)
    tracker = RequestTracker()
    setattr(tracker, field, -1)
    with pytest.raises(icontract.ViolationError, match="counts are never negative"):
        tracker.has_request("a")


def test_sharing_tokens_without_stats_is_refused_by_the_precondition() -> None:
    """ADM-TOK-1: the precondition of `share_tokens` itself (not only the guard kept for
    `python -O`) refuses a tracker without shared stats."""
    tracker = RequestTracker()
    with pytest.raises(
        ValueError, match="ADM-TOK-1: only a tracker with shared stats can share its tokens"
    ):
        tracker.share_tokens()
    assert not tracker.shares_tokens


def test_a_finish_that_ends_two_requests_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-TRK-3: a `finish` that also forgets another request is caught by "finishing ends
    exactly one internal request" (deep checks off, so the whole-structure invariant does
    not speak first)."""
    monkeypatch.setattr(queueref.config, "deep_checks", lambda: False)
    tracker, _ = _tracker()
    tracker.add("a")
    tracker.add("b")
    broken = method_variant(
        RequestTracker,
        "finish",
        Change(
            "finish",
            "ends another request too",
            "self._drop(request_id)",
            "self._drop(request_id)\n    self._drop(next(iter(self._states)))",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TRK-3: finishing ends exactly one internal request"
    ):
        broken(tracker, "a")


def test_finishing_one_of_many_requests_keeps_exact_counts() -> None:
    """ADM-TRK-3: with 300 requests tracked (past the small-int cache), finishing one leaves
    299, with no condition tripping."""
    tracker, counters = _tracker()
    for index in range(300):
        tracker.add(f"r{index}")
    tracker.finish("r0")
    assert tracker.get_num_unfinished_requests() == 299 and counters[0] == 299


def test_a_rollback_that_gives_back_too_much_is_caught() -> None:
    """ADM-CTL-6: a `release_reservation` that removes one more than asked is caught by "the
    rollback removes exactly the reservation" (not merely not less)."""
    tracker, _ = _tracker()
    tracker.reserve(3)
    broken = method_variant(
        RequestTracker,
        "release_reservation",
        Change(
            "release_reservation",
            "gives back one slot more than asked",
            "self._reserved -= n",
            "self._reserved -= n + 1",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-6: the rollback removes exactly the reservation"
    ):
        broken(tracker, 1)


def test_a_token_reservation_of_one_too_few_is_caught() -> None:
    """ADM-TOK-5: a `reserve_tokens` that holds one token less than asked is caught by "a
    token reservation adds its tokens"; large reservations add up exactly."""
    tracker, counters = _tracker(share_tokens=True)
    broken = method_variant(
        RequestTracker,
        "reserve_tokens",
        Change(
            "reserve_tokens",
            "holds one token too few",
            "self._reserved_tokens += tokens",
            "self._reserved_tokens += tokens - 1",
        ),
    )
    with pytest.raises(
        icontract.ViolationError, match="ADM-TOK-5: a token reservation adds its tokens"
    ):
        broken(tracker, 3)
    fresh, fresh_counters = _tracker(share_tokens=True)
    fresh.reserve_tokens(300)
    fresh.reserve_tokens(300)
    assert fresh.num_reserved_tokens == 600 and fresh_counters[1] == 600


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "self._queued_tokens += n * num_prompt_tokens",
            "self._queued_tokens += n * num_prompt_tokens\n"
            "    self._states['ghost'] = _RequestState(None, 0, False)",
            "ADM-TRK-1: all n children are registered",
        ),
        (
            "self._queued_tokens += n * num_prompt_tokens",
            "self._queued_tokens += n * num_prompt_tokens + 1",
            "ADM-TRK-4: every child queues its prompt tokens",
        ),
    ],
    ids=["one request too many", "one token too many"],
)
def test_an_add_that_registers_too_much_is_caught(
    old: str, new: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADM-TRK-1, ADM-TRK-4: an `add` that registers an extra request, or queues one token
    more than n * prompt, is caught by its postcondition (exact, not merely not less;
    deep checks off)."""
    monkeypatch.setattr(queueref.config, "deep_checks", lambda: False)
    tracker, _ = _tracker()
    broken = method_variant(RequestTracker, "add", Change("add", message, old, new))
    with pytest.raises(icontract.ViolationError, match=message):
        broken(tracker, "p", 2, 3)


@pytest.mark.parametrize(
    "method, old, new, args, message",
    [
        (
            "abort",
            "self._refresh()\n    return aborted",
            "return aborted",
            ("a",),
            "ADM-TRK-5: abort refreshes the slot",
        ),
        (
            "reserve",
            "self._reserved += n\n    self._refresh()",
            "self._reserved += n",
            (2,),
            "ADM-CTL-9: the reservation is in the slot",
        ),
    ],
    ids=["abort", "reserve"],
)
def test_a_change_that_does_not_write_the_slot_is_caught(
    method: str, old: str, new: str, args: tuple[object, ...], message: str
) -> None:
    """ADM-TRK-5, ADM-CTL-9: an `abort` or a `reserve` that changes the count but leaves
    the slot as it was is caught by its own "... the slot" postcondition."""
    tracker, _ = _tracker()
    tracker.add("a")
    broken = method_variant(RequestTracker, method, Change(method, "no slot write", old, new))
    with pytest.raises(icontract.ViolationError, match=message):
        broken(tracker, *args)


def test_a_cached_token_count_off_either_way_is_inconsistent() -> None:
    """ADM-TRK-6: the whole-structure check refuses a cached token count one below or one
    above the prompts in prefill, and a child whose parent id sorts before its parent's."""
    tracker, _ = _tracker()
    tracker.add("p", n=2, num_prompt_tokens=3)
    for wrong in (5, 7):
        tracker._queued_tokens = wrong
        assert not tracker_contracts.consistent(tracker)
    tracker._queued_tokens = 6
    assert tracker_contracts.consistent(tracker)
    tracker._states["0_p"].parent_id = "a"  # "a" < "p": another parent, sorting first
    assert not tracker_contracts.consistent(tracker)


def test_a_child_listed_under_two_parents_is_inconsistent() -> None:
    """ADM-TRK-6: a child whose own parent lists it, but which another parent lists too, is
    refused whichever way the two parent ids sort; equal ids are compared by value."""
    for other in ("a", "z"):  # sorts before "p", and after it
        tracker, _ = _tracker()
        tracker.add("p", n=2)
        tracker._parents[other] = {"0_p": None}
        tracker._states["0_p"].parent_id = other
        assert not tracker_contracts.consistent(tracker), other
    tracker, _ = _tracker()
    tracker.add("parent", n=2)
    tracker._states["0_parent"].parent_id = "".join(["par", "ent"])  # equal, not the same
    assert tracker_contracts.consistent(tracker)


@pytest.mark.parametrize(
    "method, old, new, args, message",
    [
        (
            "share_tokens",
            "self._refresh_tokens()",
            "pass",
            (),
            "ADM-TOK-1: counter 1 holds the queued tokens",
        ),
        (
            "add",
            "self._queued_tokens += n * num_prompt_tokens",
            "self._queued_tokens += n * num_prompt_tokens - 1",
            ("b", 1, 3),
            "ADM-TRK-4: every child queues its prompt tokens",
        ),
        (
            "add",
            "self._reserved_tokens -= min(self._reserved_tokens, n * num_prompt_tokens)",
            "self._reserved_tokens = 0",
            ("b", 1, 3),
            "ADM-TOK-5: a registration takes over outstanding token reservations",
        ),
        (
            "reserve",
            "self._reserved += n",
            "self._reserved += n - 1",
            (2,),
            "ADM-TRK-7: a reservation adds n",
        ),
    ],
    ids=["share_tokens writes nothing", "add queues too few", "add takes over all", "reserve"],
)
def test_a_change_that_falls_short_is_caught(
    method: str,
    old: str,
    new: str,
    args: tuple[object, ...],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TOK-1, ADM-TRK-4, ADM-TOK-5, ADM-TRK-7: a method that does too little (writes no
    counter 1, queues a token too few, takes over every token reservation, reserves one
    slot too few) is caught by its exact postcondition (deep checks off)."""
    monkeypatch.setattr(queueref.config, "deep_checks", lambda: False)
    tracker = RequestTracker(SharedAdmissionStats([0] * 16, 2, 0))
    tracker.add("a", num_prompt_tokens=5)
    if method != "share_tokens":
        tracker.share_tokens()
        tracker.reserve_tokens(10)
    broken = method_variant(RequestTracker, method, Change(method, message, old, new))
    with pytest.raises(icontract.ViolationError, match=message):
        broken(tracker, *args)


@pytest.mark.parametrize("method", ["add", "finish"])
def test_counter_1_left_behind_by_add_or_finish_is_caught(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADM-TOK-1: a token refresh that writes nothing leaves counter 1 stale: caught by
    "add writes the queued tokens" and "finish writes the queued tokens"."""
    tracker, _ = _tracker(share_tokens=True)
    tracker.add("a", num_prompt_tokens=5)
    tracker.add("b", num_prompt_tokens=3)
    monkeypatch.setattr(RequestTracker, "_refresh_tokens", lambda self: None)
    with pytest.raises(icontract.ViolationError, match=f"ADM-TOK-1: {method} writes the queued"):
        if method == "add":
            tracker.add("c", num_prompt_tokens=2)
        else:
            tracker.finish("a")


def test_prefill_done_among_many_requests_keeps_the_count() -> None:
    """ADM-TRK-4: with 300 requests tracked (past the small-int cache), leaving prefill keeps
    300 unfinished, with no condition tripping."""
    tracker = RequestTracker()
    for index in range(300):
        tracker.add(f"r{index}")
    tracker.prefill_done("r0")
    assert tracker.get_num_unfinished_requests() == 300 and tracker.get_num_queued_tokens() == 299
