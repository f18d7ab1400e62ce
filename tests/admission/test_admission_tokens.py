"""The shared token limit: counter 1 written by the tracker, read by the token pass.

Expected values are written out by hand from `specs/admission.md` ("The shared
token limit") and vLLM 0.30.0's `check_admission` (`current_tokens >=
max_queued_tokens` rejects), never computed by the code under test.
"""

from __future__ import annotations

from typing import Any

import icontract
import pytest
from broken_trackers import StalePrefillTracker

import queueref.admission.protocol as protocol_module
from queueref import (
    AdmissionController,
    MaxQueuedTokensError,
    QueueOverflowError,
    RequestTracker,
    SharedAdmissionStats,
    allocate_admission_counters,
)
from queueref.admission.controller import resolve_token_scope
from queueref.errors import AdmissionCounterError


class RecordingBuffer:
    """A two-server counter buffer that logs every read and write."""

    def __init__(self, size: int = 16) -> None:
        self.values = [0] * size
        self.log: list[tuple[str, int, int]] = []

    def __getitem__(self, index: int) -> int:
        self.log.append(("read", index, self.values[index]))
        return self.values[index]

    def __setitem__(self, index: int, value: int) -> None:
        self.log.append(("write", index, value))
        self.values[index] = value

    def reads(self) -> list[int]:
        return [index for kind, index, _ in self.log if kind == "read"]

    def writes(self) -> list[tuple[int, int]]:
        return [(index, value) for kind, index, value in self.log if kind == "write"]


def pair(
    reqs: int | None, tokens: int | None, counters: Any = None, **options: Any
) -> list[AdmissionController]:
    """Two servers over one buffer, each with its own tracker (made by the controller)."""
    buffer = counters if counters is not None else [0] * 16
    return [
        AdmissionController(
            reqs, tokens, shared_stats=SharedAdmissionStats(buffer, 2, i), **options
        )
        for i in range(2)
    ]


# ---------------------------------------------------------------------------
# ADM-TOK-1: the tracker writes counter 1


def test_counter_1_written_after_add_prefill_done_finish_abort() -> None:
    """ADM-TOK-1, ADM-TOK-4: n*p after add; the prompt leaves at prefill_done; exits write too."""
    buffer = RecordingBuffer()
    tracker = RequestTracker(SharedAdmissionStats(buffer, 2, 1), share_tokens=True)
    assert buffer.writes() == [(9, 0)]  # sharing starts with the current count
    tracker.add("fan", n=3, num_prompt_tokens=10)  # three children, each prefilling 10
    tracker.add("solo", num_prompt_tokens=7)
    assert buffer.writes()[1:] == [(8, 3), (9, 30), (8, 4), (9, 37)]
    tracker.prefill_done("1_fan")
    assert buffer.writes()[-1] == (9, 27) and buffer.values[8] == 4  # counter 0 untouched
    tracker.finish("1_fan")  # out of prefill already: no token leaves twice
    assert buffer.writes()[-2:] == [(8, 3), (9, 27)]
    tracker.abort("fan")
    assert buffer.writes()[-2:] == [(8, 1), (9, 7)]
    tracker.finish("solo")  # finished while prefilling: its tokens go with it
    assert buffer.values == [0] * 16


def test_without_sharing_counter_1_is_never_written() -> None:
    """ADM-TOK-1, ADM-TOK-6: a tracker that does not share tokens writes counter 0 only."""
    buffer = RecordingBuffer()
    tracker = RequestTracker(SharedAdmissionStats(buffer, 2, 0))
    tracker.add("a", num_prompt_tokens=50)
    tracker.prefill_done("a")
    tracker.finish("a")
    assert buffer.writes() == [(0, 1), (0, 0)]
    assert not tracker.shares_tokens
    # No token limit: the default scope is local, so the controller does not turn sharing on.
    assert not pair(5, None)[0].tracker.shares_tokens


def test_set_num_queued_tokens_writes_only_counter_1_of_the_own_slot() -> None:
    """ADM-TOK-1: the token write's frame; a bad count writes nothing."""
    counters = list(range(16))
    SharedAdmissionStats(counters, 2, 1).set_num_queued_tokens(99)
    assert counters == [0, 1, 2, 3, 4, 5, 6, 7, 8, 99, 10, 11, 12, 13, 14, 15]
    for bad in (-1, 2.0, True, "3"):
        with pytest.raises(ValueError, match="ADM-TOK-1"):
            SharedAdmissionStats(counters, 2, 1).set_num_queued_tokens(bad)  # type: ignore[arg-type]
    assert counters[9] == 99


@pytest.mark.contracts
def test_adm_tok_1_a_token_write_into_counter_0_is_caught() -> None:
    """ADM-TOK-1 has teeth: a token write that lands in counter 0 is caught by the frame."""

    class MisplacedTokens(SharedAdmissionStats):
        QUEUED_TOKENS = 0  # type: ignore[misc]  # deliberately broken: writes over the count

    counters = [0] * 16
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-1"):
        MisplacedTokens(counters, 2, 0).set_num_queued_tokens(5)


def test_share_tokens_needs_shared_stats() -> None:
    """ADM-TOK-1: no shared stats, nothing to share: ValueError, nothing changes."""
    tracker = RequestTracker()
    with pytest.raises(ValueError, match="ADM-TOK-1"):
        tracker.share_tokens()
    assert not tracker.shares_tokens


@pytest.mark.contracts
def test_adm_tok_1_counter_1_left_high_at_prefill_done_is_caught() -> None:
    """ADM-TOK-1 has teeth: a tracker that leaves counter 1 high at prefill_done is caught."""
    counters = [0] * 16
    tracker = StalePrefillTracker(SharedAdmissionStats(counters, 2, 0), share_tokens=True)
    tracker.add("a", num_prompt_tokens=5)
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-1"):
        tracker.prefill_done("a")


# ---------------------------------------------------------------------------
# ADM-TOK-2: the token pass


def test_token_pass_reads_counter_1_of_every_slot_after_the_request_pass() -> None:
    """ADM-TOK-2: reads 0, 8 (counter 0) then 1, 9 (counter 1), one each, in index order."""
    buffer = RecordingBuffer()
    servers = pair(10, 100, counters=buffer)
    servers[1].tracker.add("other", num_prompt_tokens=60)
    servers[0].tracker.add("mine", num_prompt_tokens=39)
    buffer.log.clear()
    assert servers[0].check_admission(num_prompt_tokens=500) == 2  # 99 < 100: admitted
    assert buffer.reads() == [0, 8, 1, 9] and buffer.writes() == []
    assert servers[0].read_queued_tokens() == 99
    servers[1].tracker.add("more", num_prompt_tokens=1)
    buffer.log.clear()
    with pytest.raises(MaxQueuedTokensError) as caught:
        servers[0].check_admission()
    assert (caught.value.queued_tokens, caught.value.limit) == (100, 100)
    assert buffer.reads() == [0, 8, 1, 9] and buffer.writes() == []


def test_request_limit_rejects_before_any_token_read() -> None:
    """ADM-TOK-2, ADM-CTL-4: the request limit first; its rejection reads no counter 1."""
    buffer = RecordingBuffer()
    servers = pair(1, 100, counters=buffer)
    servers[1].tracker.add("other", num_prompt_tokens=500)
    buffer.log.clear()
    check = servers[0].start_check()
    check.read_next()
    check.read_next()
    with pytest.raises(QueueOverflowError):
        check.read_next()  # the first token read decides the request limit first
    assert buffer.reads() == [0, 8] and not check.is_open


def test_step_wise_token_pass() -> None:
    """ADM-TOK-2, ADM-CTL-7: each read advances one slot of one pass; the views are sums."""
    counters = [0] * 16
    servers = pair(4, 10, counters=counters)
    servers[1].tracker.add("b", n=2, num_prompt_tokens=3)
    check = servers[0].start_check(1, 4)
    assert (check.num_slots, check.num_token_slots, check.tokens) == (2, 2, 4)
    values = [check.read_next() for _ in range(4)]
    assert values == [0, 2, 0, 6] and (check.view, check.token_view) == (2, 6) and check.done
    assert check.decide() == 2


def test_a_corrupt_counter_1_never_admits_and_gives_reservations_back() -> None:
    """ADM-TOK-2, ADM-CTL-8: a negative counter 1 is an error; both reservations go back."""
    counters = [0] * 16
    servers = pair(5, 10, counters=counters, mode="write-then-check")
    counters[9] = -3
    with pytest.raises(AdmissionCounterError):
        servers[0].check_admission(2, 3)
    assert counters[0] == 0 and counters[1] == 0
    assert servers[0].tracker.num_reserved == 0 and servers[0].tracker.num_reserved_tokens == 0


def test_local_scope_reads_no_counter_1() -> None:
    """ADM-TOK-2, ADM-RISK-2: the local scope decides on the own tokens only."""
    buffer = RecordingBuffer()
    buffer.values[9] = 10**6
    servers = pair(5, 10, counters=buffer, token_scope="local")
    buffer.log.clear()
    assert servers[0].check_admission() == 0
    assert buffer.reads() == [0, 8]


# ---------------------------------------------------------------------------
# ADM-TOK-3: the decision


@pytest.mark.parametrize(
    ("rule", "queued", "prompt", "admitted"),
    [
        ("ge", 99, 1000, True),  # vLLM 0.30.0: the new request's tokens are not counted
        ("ge", 100, 1, False),
        ("fits", 90, 10, True),
        ("fits", 91, 10, False),
        ("fits", 0, 101, False),  # a prompt longer than the limit never fits
    ],
)
def test_token_rules(rule: str, queued: int, prompt: int, admitted: bool) -> None:
    """ADM-TOK-3: ge rejects at queued >= Mt; fits rejects at queued + n*p > Mt."""
    counters = [0] * 16
    servers = pair(None, 100, counters=counters, token_rule=rule)
    servers[1].tracker.add("other", num_prompt_tokens=queued)
    if admitted:
        assert servers[0].check_admission(num_prompt_tokens=prompt) is None
    else:
        with pytest.raises(MaxQueuedTokensError) as caught:
            servers[0].check_admission(num_prompt_tokens=prompt)
        assert (caught.value.queued_tokens, caught.value.limit) == (queued, 100)
    assert counters[1] == 0 and servers[0].tracker.get_num_queued_tokens() == 0


def test_fits_counts_every_sample() -> None:
    """ADM-TOK-3: n samples of p tokens add n*p: 3 * 30 = 90 fits 100, 3 * 34 = 102 does not."""
    servers = pair(None, 100, token_rule="fits")
    assert servers[0].check_admission(3, 30) is None
    with pytest.raises(MaxQueuedTokensError):
        servers[0].check_admission(3, 34)


@pytest.mark.guard
@pytest.mark.parametrize("bad", [-1, 1.5, True, "10", None])
def test_bad_prompt_length_writes_nothing(bad: Any) -> None:
    """ADM-TOK-3: a bad prompt length is a ValueError before any write or reservation."""
    counters = [0] * 16
    servers = pair(5, 10, counters=counters, mode="write-then-check")
    for call in (servers[0].check_admission, servers[0].start_check):
        with pytest.raises(ValueError, match="ADM-TOK-3"):
            call(1, bad)
    with pytest.raises(ValueError, match="ADM-TOK-3"):
        servers[0].cancel_admission(1, bad)
    assert counters == [0] * 16 and servers[0].tracker.num_reserved_tokens == 0


@pytest.mark.guard
def test_bad_token_rule() -> None:
    """ADM-TOK-3: an unknown rule is a ValueError at construction."""
    with pytest.raises(ValueError, match="ADM-TOK-3"):
        AdmissionController(None, 10, token_rule="gt")  # type: ignore[arg-type]


@pytest.mark.contracts
def test_adm_ctl_4_a_token_decision_that_always_admits_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-4, ADM-TOK-3 have teeth: a token decision that always admits is caught."""
    # The module the controller decides with (admission imports it as `protocol`).
    monkeypatch.setattr(protocol_module, "admits_tokens", lambda *args: True)
    server = AdmissionController(None, 10)
    server.tracker.add("full", num_prompt_tokens=10)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-4"):
        server.check_admission()


# ---------------------------------------------------------------------------
# ADM-TOK-4: prefill done


@pytest.mark.guard
def test_prefill_done_takes_the_tokens_out_once() -> None:
    """ADM-TOK-4: exactly the prompt leaves; twice changes nothing; unknown ids change nothing."""
    counters = [0] * 16
    servers = pair(None, 100, counters=counters)
    tracker = servers[0].tracker
    tracker.add("p", n=2, num_prompt_tokens=40)
    assert counters[1] == 80
    tracker.prefill_done("0_p")
    tracker.prefill_done("0_p")
    assert counters[1] == 40 and tracker.get_num_unfinished_requests() == 2 and counters[0] == 2
    refused = "ADM-TRK-4: only a tracked internal request leaves prefill"  # its precondition
    with pytest.raises(KeyError, match=refused):
        tracker.prefill_done("nope")
    with pytest.raises(KeyError, match=refused):
        tracker.prefill_done("p")  # a parent id is not an internal request
    assert counters[1] == 40 and tracker.get_num_queued_tokens() == 40


def test_tokens_leave_at_prefill_not_at_finish() -> None:
    """ADM-TOK-4: a long-running decode holds a request slot but no queued tokens."""
    servers = pair(10, 100)
    servers[1].tracker.add("long", num_prompt_tokens=100)
    with pytest.raises(MaxQueuedTokensError):
        servers[0].check_admission()
    servers[1].tracker.prefill_done("long")
    assert servers[0].check_admission() == 1  # the request count still holds "long"


# ---------------------------------------------------------------------------
# ADM-TOK-5: write-then-check for tokens


def test_token_reservation_is_visible_before_the_first_read_and_taken_over() -> None:
    """ADM-TOK-5: n*p in counter 1 before any read; kept iff the view <= Mt; add takes it over."""
    counters = [0] * 16
    servers = pair(5, 10, counters=counters, mode="write-then-check")
    check = servers[0].start_check(2, 3)
    assert counters[0] == 2 and counters[1] == 6 and check.holds_token_reservation
    while not check.done:
        check.read_next()
    assert check.token_view == 6 and check.decide() == 2
    servers[0].tracker.add("r", n=2, num_prompt_tokens=3)
    assert counters[1] == 6 and servers[0].tracker.num_reserved_tokens == 0


def test_token_reservation_rejected_is_given_back() -> None:
    """ADM-TOK-5, ADM-CTL-6: 8 queued + 3 reserved > 10: rejected, both counters as before."""
    counters = [0] * 16
    servers = pair(5, 10, counters=counters, mode="write-then-check")
    servers[1].tracker.add("other", num_prompt_tokens=8)
    before = list(counters)
    with pytest.raises(MaxQueuedTokensError) as caught:
        servers[0].check_admission(1, 3)
    assert caught.value.queued_tokens == 11
    assert counters == before and servers[0].tracker.num_reserved_tokens == 0


def test_cancel_gives_the_token_reservation_back() -> None:
    """ADM-TOK-5: cancel_admission(n, p) writes both reservations back; more is refused."""
    counters = [0] * 16
    servers = pair(5, 10, counters=counters, mode="write-then-check")
    servers[0].check_admission(1, 4)
    assert counters[1] == 4
    with pytest.raises(ValueError, match="ADM-TOK-5"):
        servers[0].cancel_admission(1, 5)
    assert counters[1] == 4 and counters[0] == 1
    servers[0].cancel_admission(1, 4)
    assert counters[0] == 0 and counters[1] == 0


@pytest.mark.guard
def test_release_more_tokens_than_held_is_refused() -> None:
    """ADM-TOK-5: token reservations are never negative; a bad release changes nothing."""
    counters = [0] * 16
    tracker = RequestTracker(SharedAdmissionStats(counters, 2, 0), share_tokens=True)
    tracker.reserve_tokens(3)
    for bad in (4, -1):
        with pytest.raises(ValueError, match="ADM-TOK-5"):
            tracker.release_token_reservation(bad)
    with pytest.raises(ValueError, match="ADM-TOK-5"):
        tracker.reserve_tokens(-2)
    assert tracker.num_reserved_tokens == 3 and counters[1] == 3


# ---------------------------------------------------------------------------
# ADM-TOK-6: the scope


def test_scope_resolution() -> None:
    """ADM-TOK-6: shared by default with stats and a token limit; local otherwise."""
    stats = SharedAdmissionStats([0] * 16, 2, 0)
    assert resolve_token_scope(None, stats, 10) == "shared"
    assert resolve_token_scope(None, stats, None) == "local"
    assert resolve_token_scope(None, None, 10) == "local"
    assert resolve_token_scope("local", stats, 10) == "local"
    for bad_scope, bad_stats in (("shared", None), ("global", stats), (1, stats)):
        with pytest.raises(ValueError, match="ADM-TOK-6"):
            resolve_token_scope(bad_scope, bad_stats, 10)
    with pytest.raises(ValueError, match="ADM-TOK-6"):
        AdmissionController(None, 10, token_scope="shared")


def test_shared_scope_turns_on_the_given_trackers_token_writes() -> None:
    """ADM-TOK-6: a tracker handed in is made to write counter 1 at once."""
    counters = [0] * 16
    stats = SharedAdmissionStats(counters, 2, 1)
    tracker = RequestTracker(stats)
    tracker.add("a", num_prompt_tokens=12)
    assert counters[9] == 0
    controller = AdmissionController(None, 100, tracker=tracker, shared_stats=stats)
    assert controller.token_scope == "shared" and tracker.shares_tokens and counters[9] == 12


@pytest.mark.guard
def test_allocation_for_a_token_limit_alone() -> None:
    """ADM-TOK-6, ADM-ALLOC-1: several servers with only a token limit get the buffer."""
    assert len(allocate_admission_counters(3, None, 100)) == 24
    assert allocate_admission_counters(1, None, 100) is None
    assert allocate_admission_counters(3, None, None) is None
    with pytest.raises(ValueError, match="ADM-TOK-6"):
        allocate_admission_counters(3, None, -1)


def test_shared_scope_is_the_global_guard_local_is_n_times_looser() -> None:
    """ADM-TOK-6, ADM-RISK-2: two servers, Mt = 10, 6 tokens each: shared rejects, local not."""
    for scope, rejected in (("shared", True), ("local", False)):
        servers = pair(None, 10, token_scope=scope)
        servers[0].tracker.add("a", num_prompt_tokens=6)
        servers[1].tracker.add("b", num_prompt_tokens=6)
        if rejected:
            with pytest.raises(MaxQueuedTokensError):
                servers[0].check_admission()
        else:
            assert servers[0].check_admission() is None


class ForgetfulState:
    """Deliberately broken request state: its prompt reads 0 once it leaves prefill."""

    def __init__(self, tokens: int) -> None:
        self.parent_id = None
        self.is_prefilling = True
        self._tokens = tokens

    @property
    def num_prompt_tokens(self) -> int:
        return self._tokens if self.is_prefilling else 0


@pytest.mark.contracts
def test_adm_tok_4_a_prefill_done_that_keeps_the_tokens_is_caught() -> None:
    """ADM-TOK-4 has teeth: a prefill_done that takes no token out of the count is caught."""
    tracker = RequestTracker()
    tracker.add("a", num_prompt_tokens=7)
    tracker._states["a"] = ForgetfulState(7)  # type: ignore[assignment]
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-4"):
        tracker.prefill_done("a")
