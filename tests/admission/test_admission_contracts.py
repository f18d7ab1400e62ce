"""Gaps in the tests of queueref.admission.controller found by `make mutation`: contracts.

Each equality a condition states (a count after a check, a cancel, a read) is shown to
catch a broken variant on both sides -- one that leaves too much and one that leaves too
little -- so that neither `<=` nor `>=` in its place would do; each precondition is shown
refusing its input with its own text (not only the guard kept for `python -O`, which is
tested apart, without contracts); and counts past CPython's small-int cache show that
`is` would not do for `==`.
"""

from __future__ import annotations

from multiprocessing.sharedctypes import RawArray
from typing import Any

import icontract
import pytest
from method_variants import Change, method_variant

from queueref import AdmissionController, RequestTracker, SharedAdmissionStats
from queueref.admission import protocol as protocol_module
from queueref.admission.check import AdmissionCheck
from queueref.admission.controller import AdmissionMode
from queueref.errors import AdmissionCounterError


def _controller(buffer: Any = None, servers: int = 2, **options: Any) -> AdmissionController:
    """Server 0 of `servers` over `buffer` (a private list by default)."""
    counters = buffer if buffer is not None else [0] * SharedAdmissionStats.num_counters(servers)
    return AdmissionController(shared_stats=SharedAdmissionStats(counters, servers, 0), **options)


def _read_every_slot(check: AdmissionCheck) -> int:
    """Read until done, at most one read per slot of both passes (a broken read may stall);
    the number of reads made."""
    reads = 0
    while not check.done and reads < check.num_slots + check.num_token_slots:
        check.read_next()
        reads += 1
    assert check.done, "the check did not finish in one read per slot"
    return reads


def _install(monkeypatch: pytest.MonkeyPatch, name: str, old: str, new: str, bug: str) -> None:
    """Replace `AdmissionController.<name>` by its variant with one named change."""
    broken = method_variant(AdmissionController, name, Change(name, bug, old, new))
    monkeypatch.setattr(AdmissionController, name, broken)


# --- check_admission's postconditions, both sides ---

_ADMITTED = "return view"  # the last line of check_admission: a bug planted before it


def test_a_check_that_drops_a_request_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-CTL-6: a check that takes a request away (the unfinished count shrinks) is caught
    by "a check registers nothing" as surely as one that adds one."""
    _install(
        monkeypatch,
        "check_admission",
        _ADMITTED,
        "self._tracker.abort('a')\n    " + _ADMITTED,
        "drops a request while checking",
    )
    server = _controller(max_num_queued_reqs=4)
    server.tracker.add("a")
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-6: a check registers nothing"):
        server.check_admission()


def test_a_check_that_keeps_a_slot_it_should_not_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-9: a check-then-write check that leaves a reservation behind is caught."""
    _install(
        monkeypatch,
        "check_admission",
        _ADMITTED,
        "self._tracker.reserve(1)\n    " + _ADMITTED,
        "leaves a slot reserved",
    )
    server = _controller(max_num_queued_reqs=4)
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-9: a write-then-check admission keeps"
    ):
        server.check_admission()


def test_an_admission_that_gives_its_reservation_back_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-9: a write-then-check admission that gives its slot back (so the registration
    that follows has none to take over) is caught."""
    _install(
        monkeypatch,
        "check_admission",
        _ADMITTED,
        "self._tracker.release_reservation(n)\n    " + _ADMITTED,
        "gives the admitted reservation back",
    )
    server = _controller(max_num_queued_reqs=4, mode="write-then-check")
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-9: a write-then-check admission keeps"
    ):
        server.check_admission()


def test_an_admission_that_gives_its_tokens_back_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TOK-5: a write-then-check admission that gives its token reservation back is
    caught by "a write-then-check admission keeps its token reservation"."""
    _install(
        monkeypatch,
        "check_admission",
        _ADMITTED,
        "self._tracker.release_token_reservation(n * num_prompt_tokens)\n    " + _ADMITTED,
        "gives the admitted tokens back",
    )
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check")
    with pytest.raises(
        icontract.ViolationError,
        match="ADM-TOK-5: a write-then-check admission keeps its token reservation",
    ):
        server.check_admission(2, 3)


@pytest.mark.parametrize(
    ("limit", "wrong_view"), [(4, "None"), (None, "0")], ids=["limit, no view", "view, no limit"]
)
def test_a_view_returned_without_its_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch, limit: int | None, wrong_view: str
) -> None:
    """ADM-CTL-3: the view is returned iff there is a request limit: a check that returns
    None under a limit, or a count without one, is caught."""
    _install(
        monkeypatch,
        "check_admission",
        _ADMITTED,
        f"view = {wrong_view}\n    " + _ADMITTED,
        "returns the wrong kind of view",
    )
    server = _controller(max_num_queued_reqs=limit, max_num_queued_tokens=10)
    with pytest.raises(
        icontract.ViolationError,
        match="ADM-CTL-3: the view is returned iff there is a request limit",
    ):
        server.check_admission()


@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
def test_a_decision_past_the_request_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """ADM-CTL-3: with 2 requests in a limit of 2, a decision that admits one more anyway is
    caught: check-then-write read view + n = 3 > 2 (the view itself is at the limit, so
    `view <= M` would pass it), write-then-check read its own reservation, view = 3 > 2."""
    monkeypatch.setattr(protocol_module, "admits", lambda *args: True)
    server = _controller(max_num_queued_reqs=2, mode=mode)
    server.tracker.add("a", n=2)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-3: an admission read view"):
        server.check_admission()


# --- start_check's postconditions, the side not shown elsewhere ---


def test_a_start_check_that_reserves_too_little_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-9: a write-then-check `start_check` that reserves one slot fewer than `n` is
    caught by its postcondition (exactly `n`, not at most `n`)."""
    _install(
        monkeypatch,
        "start_check",
        "reserve(self._tracker, n, tokens,",
        "reserve(self._tracker, n - 1, tokens,",
        "reserves one slot too few",
    )
    server = _controller(max_num_queued_reqs=4, mode="write-then-check")
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-9: write-then-check writes its reservation first"
    ):
        server.start_check(2, 1)


def test_a_start_check_that_reserves_too_few_tokens_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TOK-5: a write-then-check `start_check` that reserves one token fewer than
    `n * num_prompt_tokens` is caught by its postcondition (exactly, not at most)."""
    _install(
        monkeypatch,
        "start_check",
        "reserve(self._tracker, n, tokens,",
        "reserve(self._tracker, n, tokens - 1,",
        "reserves one token too few",
    )
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check")
    with pytest.raises(
        icontract.ViolationError, match="ADM-TOK-5: write-then-check writes its tokens first"
    ):
        server.start_check(2, 3)


@pytest.mark.contracts
def test_a_start_check_that_hands_out_a_closed_check_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-7: a `start_check` that returns a check already abandoned (one that could be
    neither read nor decided) is caught by "a started check is open". In check-then-write
    the abandoned check held no reservation, so no count differs: only this condition sees it."""
    broken = method_variant(
        AdmissionController,
        "start_check",
        Change(
            "start_check",
            "returns an abandoned check",
            "return AdmissionCheck(",
            "abandoned = AdmissionCheck(",
        ),
        Change(
            "start_check",
            "returns an abandoned check",
            "self._reserves_tokens,\n    )",
            "self._reserves_tokens,\n    )\n    abandoned.abandon()\n    return abandoned",
        ),
    )
    monkeypatch.setattr(AdmissionController, "start_check", broken)
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=10)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-7: a started check is open"):
        server.start_check(1, 1)
    assert server.tracker.num_reserved == 0 and server.tracker.num_reserved_tokens == 0


def test_a_decision_that_leaves_the_check_open_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-7: a `decide` that admits but leaves the check open (so it could be decided
    again, or abandoned after its admission) is caught by "a decided check is closed"."""
    broken = method_variant(
        AdmissionCheck,
        "decide",
        Change("decide", "stays open after admitting", "self._open = False\n", ""),
    )
    monkeypatch.setattr(AdmissionCheck, "decide", broken)
    server = _controller(max_num_queued_reqs=4)
    check = server.start_check(1, 1)
    _read_every_slot(check)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-7: a decided check is closed"):
        check.decide()


# --- cancel_admission's postconditions, both sides ---


@pytest.mark.parametrize(
    ("given_back", "bug"),
    [("n - 1", "gives one slot too few back"), ("n + 1", "gives one slot too many back")],
)
def test_a_cancel_that_gives_back_the_wrong_reservation_is_caught(
    monkeypatch: pytest.MonkeyPatch, given_back: str, bug: str
) -> None:
    """ADM-CTL-9: 3 slots held, cancelling 2: a cancel that gives back 1 or 3 is caught by
    "cancelling gives exactly the reservation back"."""
    _install(
        monkeypatch,
        "cancel_admission",
        "give_back(self._tracker, n, tokens,",
        f"give_back(self._tracker, {given_back}, tokens,",
        bug,
    )
    server = _controller(max_num_queued_reqs=4, mode="write-then-check")
    server.check_admission(1)
    server.check_admission(2)
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-9: cancelling gives exactly the reservation back"
    ):
        server.cancel_admission(2)


@pytest.mark.parametrize(
    ("given_back", "bug"),
    [("tokens - 1", "gives one token too few back"), ("tokens + 1", "gives one too many back")],
)
def test_a_cancel_that_gives_back_the_wrong_tokens_is_caught(
    monkeypatch: pytest.MonkeyPatch, given_back: str, bug: str
) -> None:
    """ADM-TOK-5: 9 tokens held, cancelling 6: a cancel that gives back 5 or 7 is caught by
    "cancelling gives exactly the token reservation back"."""
    _install(
        monkeypatch,
        "cancel_admission",
        "give_back(self._tracker, n, tokens,",
        f"give_back(self._tracker, n, {given_back},",
        bug,
    )
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check")
    server.check_admission(1, 3)
    server.check_admission(2, 3)
    with pytest.raises(
        icontract.ViolationError,
        match="ADM-TOK-5: cancelling gives exactly the token reservation back",
    ):
        server.cancel_admission(2, 3)


# --- read_next's postcondition, both sides ---


@pytest.mark.parametrize(
    ("old", "new", "bug"),
    [
        (
            "self._token_state = self._token_state.read(value)",
            "self._token_state = self._token_state.read(value).read(0)",
            "a token read advances two slots",
        ),
        (
            "self._state = self._state.read(value)",
            "self._state = self._state",
            "a request read does not advance",
        ),
    ],
    ids=["two slots", "no slot"],
)
def test_a_read_that_advances_other_than_one_slot_is_caught(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str, bug: str
) -> None:
    """ADM-CTL-7, ADM-TOK-2: a read that advances two slots, or none, is caught by "one read
    advances by exactly one slot of one pass"."""
    broken = method_variant(AdmissionCheck, "read_next", Change("read_next", bug, old, new))
    monkeypatch.setattr(AdmissionCheck, "read_next", broken)
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=10)
    check = server.start_check(1, 1)
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-7, ADM-TOK-2: one read advances by exactly one"
    ):
        for _ in range(check.num_slots + check.num_token_slots):  # bounded: a read may stall
            check.read_next()


def test_a_closed_or_finished_check_reads_and_decides_no_more() -> None:
    """ADM-CTL-7: reading a check after its last slot, deciding it before its last slot,
    deciding a decided one and reading an abandoned one are refused, with contracts on, by
    the one declaration of the order (`_check_step`, kept under `python -O` too)."""
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=10)
    check = server.start_check(1, 1)
    check.read_next()
    with pytest.raises(
        RuntimeError, match=r"ADM-CTL-7: decide only after every slot is read: 1 of 4 reads"
    ):
        check.decide()
    _read_every_slot(check)
    with pytest.raises(RuntimeError, match=r"ADM-CTL-7: a slot is left to read: every slot"):
        check.read_next()
    check.decide()
    closed = "ADM-CTL-7: the check is still open: this one was decided or abandoned"
    with pytest.raises(RuntimeError, match=closed):
        check.decide()
    abandoned = server.start_check(1, 1)
    abandoned.abandon()
    with pytest.raises(RuntimeError, match=closed):
        abandoned.read_next()


# --- preconditions with their own text, and the guards without contracts ---


@pytest.mark.parametrize(
    ("method", "args", "message"),
    [
        ("start_check", (0, 1), "ADM-CTL-2: n is an int >= 1"),
        ("start_check", (1, -1), "ADM-TOK-3: num_prompt_tokens is an int >= 0"),
        ("cancel_admission", (0, 1), "ADM-CTL-2: n is an int >= 1"),
        ("cancel_admission", (1, -1), "ADM-TOK-3: num_prompt_tokens is an int >= 0"),
    ],
)
def test_a_bad_argument_is_refused_by_the_precondition(
    method: str, args: tuple[int, int], message: str
) -> None:
    """ADM-CTL-2, ADM-TOK-3: the precondition itself (the contract, not the guard kept for
    `python -O`) refuses n = 0 and a prompt of -1 tokens, and nothing is written."""
    counters = [0] * 16
    server = _controller(
        counters, max_num_queued_reqs=4, max_num_queued_tokens=10, mode="write-then-check"
    )
    with pytest.raises(ValueError, match=message):
        getattr(server, method)(*args)
    assert counters == [0] * 16 and server.tracker.num_reserved == 0


@pytest.mark.guard
@pytest.mark.parametrize(
    ("method", "args", "message"),
    [
        ("start_check", (0, 1), "ADM-CTL-2: n is an int >= 1"),
        ("start_check", (1, -1), "ADM-TOK-3: num_prompt_tokens is an int >= 0"),
        ("cancel_admission", (0, 1), "ADM-CTL-2: n is an int >= 1"),
        ("cancel_admission", (1, -1), "ADM-TOK-3: num_prompt_tokens is an int >= 0"),
    ],
)
def test_the_argument_preconditions_hold_in_both_modes(
    method: str, args: tuple[int, int], message: str
) -> None:
    """ADM-CTL-2, ADM-TOK-3: each precondition on the arguments is declared once
    (`queueref.preconditions.require`) and refuses n = 0 and a prompt of -1 tokens with its
    description, with contracts on and under `python -O` (`make test` runs this there too),
    and nothing is written."""
    counters = [0] * 16
    server = _controller(
        counters, max_num_queued_reqs=4, max_num_queued_tokens=10, mode="write-then-check"
    )
    server.check_admission(1, 5)
    before = list(counters)
    with pytest.raises(ValueError, match=message):
        getattr(server, method)(*args)
    assert counters == before
    assert server.tracker.num_reserved == 1 and server.tracker.num_reserved_tokens == 5


@pytest.mark.guard
@pytest.mark.guard
def test_the_token_give_back_guard_holds_without_contracts() -> None:
    """ADM-TOK-5: with contracts on and under `python -O` alike `cancel_admission` refuses
    giving back more tokens than held, naming the problem, and nothing is written."""
    counters = [0] * 16
    server = _controller(
        counters, max_num_queued_reqs=4, max_num_queued_tokens=10, mode="write-then-check"
    )
    server.check_admission(1, 5)
    before = list(counters)
    with pytest.raises(
        ValueError, match="ADM-TOK-5: only a token reservation that is held can be given back"
    ):
        server.cancel_admission(1, 6)
    assert counters == before
    assert server.tracker.num_reserved == 1 and server.tracker.num_reserved_tokens == 5


# --- counts past the small-int cache ---


def test_reservations_and_requests_past_the_small_int_cache_keep_exact_counts() -> None:
    """ADM-CTL-6, ADM-CTL-9: with 300 unfinished requests, two write-then-check admissions of
    n = 300 samples (600 slots reserved) and one cancelled, every condition that compares
    two counts holds and the counts are exact (`is` for `==` would trip on counts above
    256, each computed anew)."""
    server = _controller(max_num_queued_reqs=2000, mode="write-then-check")
    server.tracker.add("running", n=300)
    assert server.check_admission(300, 1) == 600
    assert server.check_admission(300, 1) == 900
    assert server.tracker.num_reserved == 600
    server.cancel_admission(300, 1)
    assert server.tracker.num_reserved == 300
    assert server.tracker.get_num_unfinished_requests() == 300


def test_a_check_of_many_servers_reads_each_slot_once() -> None:
    """ADM-CTL-7: a stepwise check over 300 servers makes 300 reads of each pass, each read
    advancing by exactly one (past the small-int cache: `is` would not do)."""
    server = _controller(servers=300, max_num_queued_reqs=1000, max_num_queued_tokens=1000)
    check = server.start_check(1, 1)
    assert _read_every_slot(check) == 600 and check.reads == 600
    assert check.decide() == 0


# --- what a check is built with ---


def test_the_defaults_are_one_request_of_a_one_token_prompt() -> None:
    """ADM-CTL-2, ADM-TOK-3: `start_check()`, `check_admission()` and `cancel_admission()`
    default to n = 1 and a prompt of 1 token: a write-then-check admission holds 1 slot
    and 1 token, and cancelling with the defaults gives back exactly those."""
    counters: Any = RawArray("q", 16)
    server = _controller(
        counters, max_num_queued_reqs=4, max_num_queued_tokens=10, mode="write-then-check"
    )
    check = server.start_check()
    assert (check.n, check.tokens) == (1, 1)
    check.abandon()
    server.check_admission()
    assert (server.tracker.num_reserved, server.tracker.num_reserved_tokens) == (1, 1)
    assert (counters[0], counters[1]) == (1, 1)
    server.cancel_admission()
    assert (server.tracker.num_reserved, server.tracker.num_reserved_tokens) == (0, 0)


@pytest.mark.parametrize(
    ("options", "slots"),
    [
        (dict(), (0, 0)),
        (dict(max_num_queued_reqs=4), (3, 0)),
        (dict(max_num_queued_tokens=9), (0, 3)),
        (dict(max_num_queued_reqs=4, max_num_queued_tokens=9), (3, 3)),
        (dict(max_num_queued_reqs=4, max_num_queued_tokens=9, token_scope="local"), (3, 1)),
    ],
    ids=["no limit", "requests", "tokens", "both", "both, local tokens"],
)
def test_a_check_reads_the_slots_its_limits_need(
    options: dict[str, Any], slots: tuple[int, int]
) -> None:
    """ADM-CTL-7, ADM-TOK-2: over the stats of 3 servers a check reads counter 0 of every slot
    iff there is a request limit, and counter 1 of every slot iff there is a token limit in
    the shared scope (once, the own tokens, in the local scope); nothing without a limit."""
    server = _controller(servers=3, **options)
    check = server.start_check(1, 1)
    assert (check.num_slots, check.num_token_slots) == slots
    assert _read_every_slot(check) == sum(slots) == check.reads


@pytest.mark.parametrize(
    ("options", "slots"),
    [
        (dict(max_num_queued_reqs=4), (1, 0)),
        (dict(max_num_queued_tokens=9), (0, 1)),
        (dict(max_num_queued_reqs=4, max_num_queued_tokens=9), (1, 1)),
    ],
    ids=["requests", "tokens", "both"],
)
def test_without_stats_a_check_reads_the_local_counts_once(
    options: dict[str, Any], slots: tuple[int, int]
) -> None:
    """ADM-CTL-7, ADM-RISK-2: without shared stats each limit's pass is one read of the local
    count (unfinished plus reserved, the own tokens)."""
    server = AdmissionController(**options)
    check = server.start_check(1, 1)
    assert (check.num_slots, check.num_token_slots) == slots


def test_a_check_holds_its_reservations_only_while_open() -> None:
    """ADM-CTL-9, ADM-TOK-5: an open write-then-check check holds its slot and its tokens; once
    admitted the tracker holds them (the check no longer does), once abandoned nobody does;
    a check-then-write check holds nothing."""
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=10, mode="write-then-check")
    check = server.start_check(1, 2)
    assert check.holds_reservation and check.holds_token_reservation
    _read_every_slot(check)
    check.decide()
    assert not check.holds_reservation and not check.holds_token_reservation
    assert (server.tracker.num_reserved, server.tracker.num_reserved_tokens) == (1, 2)
    other = server.start_check(1, 2)
    other.abandon()
    assert not other.holds_reservation and not other.holds_token_reservation
    assert (server.tracker.num_reserved, server.tracker.num_reserved_tokens) == (1, 2)
    plain = _controller(max_num_queued_reqs=4, max_num_queued_tokens=10).start_check(1, 2)
    assert not plain.holds_reservation and not plain.holds_token_reservation


def test_a_parallel_request_reserves_all_its_tokens_on_the_one_pass_path() -> None:
    """ADM-TOK-5, ADM-CTL-11: over a RawArray a write-then-check admission of n = 2 samples of
    a 3-token prompt reserves 2 * 3 = 6 tokens in counter 1."""
    counters: Any = RawArray("q", 16)
    server = _controller(
        counters, max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check"
    )
    assert server.check_admission(2, 3) == 2
    assert server.tracker.num_reserved_tokens == 6 and counters[1] == 6


@pytest.mark.parametrize(("n", "num_prompt_tokens"), [(2, 1), (1, 0), (3, 0)])
def test_every_valid_request_takes_the_one_pass(
    monkeypatch: pytest.MonkeyPatch, n: int, num_prompt_tokens: int
) -> None:
    """ADM-CTL-11: over a RawArray every valid request -- parallel ones and prompts of 0
    tokens too -- is checked in one C-level pass, with no slot read through Python."""
    calls: list[tuple[int, int]] = []
    original = SharedAdmissionStats._read

    def recording_read(self: SharedAdmissionStats, index: int, counter: int) -> int:
        calls.append((index, counter))
        return original(self, index, counter)

    server = _controller(RawArray("q", 16), max_num_queued_reqs=4, max_num_queued_tokens=10)
    monkeypatch.setattr(SharedAdmissionStats, "_read", recording_read)
    assert server.check_admission(n, num_prompt_tokens) == 0
    assert calls == []


@pytest.mark.parametrize("scope", ["local", "shared"])
def test_a_token_scope_built_at_run_time_is_accepted(scope: str) -> None:
    """ADM-TOK-6: a scope spelled by a string built at run time (as read from a config file
    or a command line, so not the interned literal) is read by its value."""
    spelled = "".join(list(scope))
    assert spelled == scope and spelled is not scope
    server = _controller(max_num_queued_tokens=10, token_scope=spelled)
    assert server.token_scope == scope


# --- more of the survivors' kind: refusals by their own conditions, and what is read ---


def test_a_cancel_of_more_slots_than_held_is_refused_by_the_precondition() -> None:
    """ADM-CTL-9: with 1 slot reserved, cancelling 2 is refused by the controller's own
    precondition (not left to the tracker), and nothing is given back."""
    server = _controller(max_num_queued_reqs=4, mode="write-then-check")
    server.check_admission()
    with pytest.raises(
        ValueError, match="ADM-CTL-9: only a reservation that is held can be given back"
    ):
        server.cancel_admission(2)
    assert server.tracker.num_reserved == 1


def test_a_check_steps_through_the_slots_in_index_order() -> None:
    """ADM-CTL-7, ADM-TOK-2: each read of a stepwise check advances `next_slot` over the
    request pass (its `view` the sum so far), then `next_token_slot` over the token pass
    (`token_view` likewise)."""
    counters = [0] * SharedAdmissionStats.num_counters(2)
    stats = SharedAdmissionStats(counters, 2, 0)
    counters[stats.slot_offset + stats.COUNTERS_PER_SLOT] = 2  # server 1: 2 requests
    counters[stats.slot_offset + stats.COUNTERS_PER_SLOT + 1] = 7  # and 7 tokens
    server = AdmissionController(4, 100, shared_stats=stats)
    check = server.start_check(1, 1)
    steps = []
    for _ in range(4):
        check.read_next()
        steps.append((check.next_slot, check.view, check.next_token_slot, check.token_view))
    assert steps == [(1, 0, 0, 0), (2, 2, 0, 0), (2, 2, 1, 0), (2, 2, 2, 7)]
    assert check.done and check.decide() == 2


def test_the_local_count_is_the_unfinished_plus_the_reserved() -> None:
    """ADM-CTL-3, ADM-CTL-9: without shared stats a write-then-check check reads the local
    count: 3 unfinished requests plus every reservation held, its own included, so five
    admissions in a row read 4, 5, 6, 7, 8."""
    server = AdmissionController(10, mode="write-then-check")
    server.tracker.add("running", n=3)
    assert [server.check_admission() for _ in range(5)] == [4, 5, 6, 7, 8]


def test_ge_admits_a_prompt_larger_than_the_room_left() -> None:
    """ADM-TOK-3, ADM-CTL-4: by the default `ge` rule (vLLM 0.30.0) the request's own tokens
    are not counted: a backlog of 9 below a limit of 10 admits a 5-token prompt, and the
    postcondition (the backlog below the limit) holds."""
    server = AdmissionController(None, 10)
    server.tracker.add("queued", num_prompt_tokens=9)
    assert server.check_admission(1, 5) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(max_num_queued_reqs=-1), "ADM-CTL-1: max_num_queued_reqs is None or an int >= 0"),
        (
            dict(max_num_queued_tokens=-1),
            "ADM-CTL-1: max_num_queued_tokens is None or an int >= 0",
        ),
        (dict(mode="bogus"), "ADM-CTL-1: mode is 'check-then-write' or 'write-then-check'"),
    ],
    ids=["requests", "tokens", "mode"],
)
def test_a_bad_limit_or_mode_is_refused_by_the_precondition(
    options: dict[str, Any], message: str
) -> None:
    """ADM-CTL-1: the constructor's preconditions themselves (not only the guards kept for
    `python -O`) refuse a negative limit and an unknown mode, each with its own text."""
    with pytest.raises(ValueError, match=message):
        AdmissionController(**options)


@pytest.mark.guard
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(mode="bogus"), "ADM-CTL-1: mode is 'check-then-write' or 'write-then-check'"),
        (
            dict(
                shared_stats=SharedAdmissionStats([0] * 16, 2, 0),
                tracker=RequestTracker(SharedAdmissionStats([0] * 16, 2, 0)),
            ),
            "ADM-CTL-1: the tracker refreshes the same shared stats the controller reads",
        ),
    ],
    ids=["mode", "tracker"],
)
def test_the_mode_and_tracker_preconditions_hold_in_both_modes(
    options: dict[str, Any], message: str
) -> None:
    """ADM-CTL-1: the constructor refuses an unknown mode and a tracker of other stats,
    naming the problem, with contracts on and under `python -O` (one declaration each)."""
    with pytest.raises(ValueError, match=message):
        AdmissionController(**options)


@pytest.mark.parametrize("scope", ["global", "mixed", "x", "Shared"])
@pytest.mark.parametrize("with_stats", [True, False], ids=["stats", "no stats"])
def test_an_unknown_token_scope_is_refused(scope: str, with_stats: bool) -> None:
    """ADM-TOK-6: a scope other than None, "shared" or "local" -- whether it sorts before
    "local", between the two or after "shared" -- is a ValueError naming it."""
    stats = SharedAdmissionStats([0] * 16, 2, 0) if with_stats else None
    with pytest.raises(ValueError, match="ADM-TOK-6: token_scope must be None, 'shared' or"):
        AdmissionController(None, 10, shared_stats=stats, token_scope=scope)  # type: ignore[arg-type]


@pytest.mark.guard
@pytest.mark.parametrize("counter", [0, 1], ids=["requests", "tokens"])
def test_a_slot_of_minus_one_is_refused_on_the_one_pass_path(counter: int) -> None:
    """ADM-CTL-8, ADM-CTL-11: the least negative value, -1, in either pass of the one-pass
    read is an AdmissionCounterError naming the slot, and the reservations are given back."""
    counters: Any = RawArray("q", 16)
    stats = SharedAdmissionStats(counters, 2, 0)
    counters[stats.COUNTERS_PER_SLOT + counter] = -1
    server = AdmissionController(
        10, 100, shared_stats=stats, tracker=RequestTracker(stats), mode="write-then-check"
    )
    with pytest.raises(AdmissionCounterError, match=f"slot 1 counter {counter} holds -1"):
        server.check_admission(1, 1)
    assert server.tracker.num_reserved == 0 and server.tracker.num_reserved_tokens == 0
    assert (counters[0], counters[1]) == (0, 0)


@pytest.mark.parametrize("buffer", ["list", "RawArray"])
@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
def test_a_decision_past_a_limit_of_one_is_caught_on_either_path(
    monkeypatch: pytest.MonkeyPatch, mode: AdmissionMode, buffer: str
) -> None:
    """ADM-CTL-3, ADM-CTL-11: one request in a limit of 1; a decision that admits another is
    caught on the stepwise and on the one-pass path: check-then-write read view + n = 2 > 1
    (not 1 | 1 or 1 ^ 1), write-then-check its own reservation, view = 2 > 1."""
    monkeypatch.setattr(protocol_module, "admits", lambda *args: True)
    counters: Any = [0] * 16 if buffer == "list" else RawArray("q", 16)
    stats = SharedAdmissionStats(counters, 2, 0)
    server = AdmissionController(1, shared_stats=stats, tracker=RequestTracker(stats), mode=mode)
    server.tracker.add("a")
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-3: an admission read view"):
        server.check_admission()


def test_write_then_check_in_the_local_token_scope_reserves_no_tokens() -> None:
    """ADM-TOK-5, ADM-RISK-2: write-then-check reserves tokens only in the shared scope; in
    the local scope it reserves its slot and writes no token to counter 1."""
    counters = [0] * 16
    server = _controller(
        counters,
        max_num_queued_reqs=4,
        max_num_queued_tokens=100,
        mode="write-then-check",
        token_scope="local",
    )
    assert server.reserves and not server.reserves_tokens
    server.check_admission(1, 5)
    assert server.tracker.num_reserved == 1 and server.tracker.num_reserved_tokens == 0
    assert (counters[0], counters[1]) == (1, 0)


def test_cancelling_in_check_then_write_gives_nothing_back() -> None:
    """ADM-CTL-9, ADM-TOK-5: a check-then-write admission wrote nothing, so cancelling it
    changes no count."""
    counters = [0] * 16
    server = _controller(counters, max_num_queued_reqs=4, max_num_queued_tokens=100)
    server.tracker.add("a", num_prompt_tokens=3)
    server.check_admission(1, 2)
    before = list(counters)
    server.cancel_admission(1, 2)
    assert counters == before
    assert (server.tracker.num_reserved, server.tracker.num_reserved_tokens) == (0, 0)
    assert server.tracker.get_num_unfinished_requests() == 1


@pytest.mark.contracts
def test_adm_ctl_9_start_check_counts_reservations_by_value_past_the_small_int_cache() -> None:
    """ADM-CTL-9: with 300 reservations held, a write-then-check `start_check` holds one
    more, and its postcondition says so: counts compared by value (CPython keeps one
    object per int only in -5..256)."""
    server = AdmissionController(10**6, mode="write-then-check")
    server.tracker.reserve(300)
    check = server.start_check(1)
    assert server.tracker.num_reserved == 301
    check.abandon()
    assert server.tracker.num_reserved == 300
