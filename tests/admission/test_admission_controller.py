"""Gaps in the tests of queueref.admission.controller, found by `make mutation`.

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
from queueref.admission import protocol as protocol_module
from queueref.admission.check import AdmissionCheck
from queueref.errors import MaxQueuedTokensError, QueueOverflowError


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
        "check_admission",
        Change(
            "check_admission",
            "registers a request while checking",
            "return view",
            "self._tracker.add('ghost')\n    return view",
        ),
    )
    monkeypatch.setattr(AdmissionController, "check_admission", broken)
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
def test_the_limit_preconditions_hold_in_both_modes(limits: tuple[object, object]) -> None:
    """ADM-CTL-1: the constructor refuses a limit that is not None or an int >= 0, naming
    it, with contracts on and under `python -O` (one declaration, kept by `require`)."""
    with pytest.raises(ValueError, match="ADM-CTL-1: max_num_queued_.* is None or an int >= 0"):
        AdmissionController(*limits)  # type: ignore[arg-type]


# --- Survivors of the full run of admission.py (lines of commit 96233ce) ---


def test_a_check_built_without_tokens_carries_none() -> None:
    """ADM-CTL-7: an `AdmissionCheck` built without the token arguments checks a request of
    no tokens, with no token pass and no token reservation."""
    server = _controller(max_num_queued_reqs=4)
    check = AdmissionCheck(server, 1, 2, False)
    assert check.tokens == 0
    assert check.num_token_slots == 0 and check.token_view == 0
    assert not check.holds_token_reservation


@pytest.mark.parametrize("buffer", ["none", "list", "RawArray"])
def test_the_local_token_scope_counts_the_own_token_reservations(buffer: str) -> None:
    """ADM-RISK-2, ADM-TOK-2: the local token scope judges the server's own tokens, which
    are its queued prompt tokens plus the token reservations its tracker holds (what
    ADM-TOK-1 writes to counter 1): 3 queued + 5 reserved = 8 reach a limit of 8, on the
    stepwise path (no stats, a list) and on the one-pass path (a RawArray) alike."""
    if buffer == "none":
        server = AdmissionController(None, 8)
    else:
        counters: Any = [0] * 16 if buffer == "list" else RawArray("q", 16)
        server = _controller(counters, max_num_queued_tokens=8, token_scope="local")
    server.tracker.add("queued", num_prompt_tokens=3)
    server.tracker.reserve_tokens(5)
    assert server.read_queued_tokens() == 8
    with pytest.raises(MaxQueuedTokensError) as rejected:
        server.check_admission(1, 1)
    assert rejected.value.queued_tokens == 8 and rejected.value.limit == 8
    assert server.tracker.num_reserved_tokens == 5
    assert server.tracker.get_num_queued_tokens() == 3


def test_fits_admits_a_request_that_fills_the_own_backlog_exactly() -> None:
    """ADM-TOK-3: with `fits`, an own backlog of 2 and a 3-token prompt need 5 of a limit
    of 5, a 1-token prompt 3 of 5: both admitted, and the postcondition that restates the
    rule (own + t <= Mt, at the limit and below it) holds."""
    server = AdmissionController(None, 5, token_rule="fits")
    server.tracker.add("queued", num_prompt_tokens=2)
    assert server.check_admission(1, 1) is None
    assert server.check_admission(1, 3) is None
    assert server.tracker.get_num_queued_tokens() == 2


@pytest.mark.parametrize("backlog", [10, 12])
def test_a_ge_decision_over_a_backlog_at_or_past_the_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch, backlog: int
) -> None:
    """ADM-CTL-4: with the default `ge` rule an own backlog of 10 is at a limit of 10, one of
    12 past it; a decision that admits anyway is caught (the backlog must be below the
    limit: not merely at most it, nor merely other than it)."""
    monkeypatch.setattr(protocol_module, "admits_tokens", lambda *args: True)
    server = AdmissionController(None, 10)
    server.tracker.add("queued", num_prompt_tokens=backlog)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-4"):
        server.check_admission(1, 1)


def test_giving_back_more_tokens_than_held_is_refused_by_the_precondition() -> None:
    """ADM-TOK-5: an admission holds 5 tokens; cancelling one of 6 tokens is refused by
    the precondition itself (n * num_prompt_tokens, not the guard kept for `python -O`),
    and nothing is given back."""
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check")
    server.check_admission(1, 5)
    with pytest.raises(
        ValueError, match="ADM-TOK-5: only a token reservation that is held can be given back"
    ):
        server.cancel_admission(1, 6)
    assert server.tracker.num_reserved == 1 and server.tracker.num_reserved_tokens == 5


def test_a_start_check_that_reserves_too_much_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-CTL-9: a write-then-check `start_check` that reserves one slot more than `n` is
    caught by its postcondition (exactly `n`, not at least `n`)."""
    broken = method_variant(
        AdmissionController,
        "start_check",
        Change(
            "start_check",
            "reserves one slot too many",
            "reserve(self._tracker, n, tokens,",
            "reserve(self._tracker, n + 1, tokens,",
        ),
    )
    monkeypatch.setattr(AdmissionController, "start_check", broken)
    server = _controller(max_num_queued_reqs=4, mode="write-then-check")
    with pytest.raises(
        icontract.ViolationError, match="ADM-CTL-9: write-then-check writes its reservation first"
    ):
        server.start_check(1, 1)


def test_a_start_check_that_reserves_too_many_tokens_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TOK-5: a write-then-check `start_check` that reserves one token more than
    `n * num_prompt_tokens` is caught by its postcondition."""
    broken = method_variant(
        AdmissionController,
        "start_check",
        Change(
            "start_check",
            "reserves one token too many",
            "reserve(self._tracker, n, tokens,",
            "reserve(self._tracker, n, tokens + 1,",
        ),
    )
    monkeypatch.setattr(AdmissionController, "start_check", broken)
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=100, mode="write-then-check")
    with pytest.raises(
        icontract.ViolationError, match="ADM-TOK-5: write-then-check writes its tokens first"
    ):
        server.start_check(2, 3)


def test_a_check_that_keeps_a_token_too_many_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-TOK-5: a check that leaves a token reservation behind (check-then-write reserves
    none) is caught by "a write-then-check admission keeps its token reservation": the
    token reservations after the check must equal, not merely be at least, what it keeps."""
    broken = method_variant(
        AdmissionController,
        "check_admission",
        Change(
            "check_admission",
            "leaves a token reserved",
            "return view",
            "self._tracker.reserve_tokens(1)\n    return view",
        ),
    )
    monkeypatch.setattr(AdmissionController, "check_admission", broken)
    server = _controller(max_num_queued_reqs=4)
    with pytest.raises(
        icontract.ViolationError,
        match="ADM-TOK-5: a write-then-check admission keeps its token reservation",
    ):
        server.check_admission()


@pytest.mark.guard
@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
@pytest.mark.parametrize("bad", [0, -1])
def test_a_weight_below_one_is_refused_on_the_one_pass_path_too(mode: str, bad: int) -> None:
    """ADM-CTL-2: over a RawArray (the one-pass path) an int n below 1 is refused as over a
    list, before any write or reservation."""
    counters = RawArray("q", 16)
    server = _controller(counters, max_num_queued_reqs=5, max_num_queued_tokens=10, mode=mode)
    with pytest.raises(ValueError, match="ADM-CTL-2: n is an int >= 1"):
        server.check_admission(bad, 1)
    assert list(counters) == [0] * 16
    assert server.tracker.num_reserved == 0 and server.tracker.num_reserved_tokens == 0


#: The controller's own refusals (its guard of n, the guard or precondition of the prompt);
#: the tracker's preconditions, which a bad value let into the fast path meets, word theirs
#: otherwise.
_BAD_N = "ADM-CTL-2: n is an int >= 1"
_BAD_PROMPT = "ADM-TOK-3: num_prompt_tokens (must be|is) an int >= 0"


@pytest.mark.guard
@pytest.mark.parametrize(
    ("n", "num_prompt_tokens", "named"),
    [(1, 2.5, _BAD_PROMPT), (1, True, _BAD_PROMPT), (1.5, 1, _BAD_N), (True, 1, _BAD_N)],
    ids=["prompt 2.5", "prompt True", "n 1.5", "n True"],
)
def test_a_non_int_argument_is_refused_on_the_one_pass_path_too(
    n: object, num_prompt_tokens: object, named: str
) -> None:
    """ADM-CTL-2, ADM-TOK-3: over a RawArray (the one-pass path) a non-int n or prompt length
    -- even beside a valid other argument -- is refused, naming the argument, before any
    write or reservation."""
    counters = RawArray("q", 16)
    server = _controller(
        counters, max_num_queued_reqs=5, max_num_queued_tokens=10, mode="write-then-check"
    )
    with pytest.raises(ValueError, match=named):
        server.check_admission(n, num_prompt_tokens)  # type: ignore[arg-type]
    assert list(counters) == [0] * 16
    assert server.tracker.num_reserved == 0 and server.tracker.num_reserved_tokens == 0


class _ClaimsToBeInt(type):
    """A metaclass whose classes compare equal to `int` (as a proxy type might)."""

    def __eq__(cls, other: object) -> bool:
        return other is int or type.__eq__(cls, other)

    def __ne__(cls, other: object) -> bool:
        return not _ClaimsToBeInt.__eq__(cls, other)

    __hash__ = type.__hash__


class _NotAnInt(metaclass=_ClaimsToBeInt):
    """An object that is no int, of a class that claims to be `int`."""


@pytest.mark.guard
@pytest.mark.parametrize("argument", ["n", "num_prompt_tokens"])
def test_a_class_that_claims_to_be_int_is_refused_on_the_one_pass_path(argument: str) -> None:
    """ADM-CTL-2, ADM-TOK-3: the one-pass path takes only a real int for n and for the prompt
    length (an identity test of the type): an object whose class compares equal to `int` is
    refused with the controller's error naming the argument, not let into the fast path to
    fail there with a TypeError."""
    assert _NotAnInt == int  # noqa: E721 (the premise: an equality test of the type is fooled)
    counters = RawArray("q", 16)
    server = _controller(counters, max_num_queued_reqs=5)
    args: dict[str, object] = {"n": 1, "num_prompt_tokens": 1, argument: _NotAnInt()}
    with pytest.raises(ValueError, match=_BAD_N if argument == "n" else _BAD_PROMPT):
        server.check_admission(**args)  # type: ignore[arg-type]
    assert list(counters) == [0] * 16


# --- what each pass reads (ADM-TOK-2, ADM-TOK-6, ADM-RISK-2) ---


def _three_servers(**options: Any) -> AdmissionController:
    """Server 0 of three: counter 1 of slots 1 and 2 hold 7 and 9 queued tokens."""
    counters = [0] * SharedAdmissionStats.num_counters(3)
    counters[8 + 1], counters[16 + 1] = 7, 9
    return AdmissionController(shared_stats=SharedAdmissionStats(counters, 3, 0), **options)


@pytest.mark.parametrize(
    ("options", "request_reads", "token_reads"),
    [
        ({"max_num_queued_reqs": 4, "max_num_queued_tokens": 50}, 3, 3),
        ({"max_num_queued_reqs": 4, "max_num_queued_tokens": 50, "token_scope": "local"}, 3, 1),
        ({"max_num_queued_tokens": 50, "token_scope": "local"}, 0, 1),
        ({"max_num_queued_reqs": 4}, 3, 0),
    ],
    ids=["shared", "local", "local, no request limit", "no token limit"],
)
def test_adm_tok_2_each_pass_reads_its_slots(
    options: dict[str, Any], request_reads: int, token_reads: int
) -> None:
    """ADM-TOK-2, ADM-CTL-7: over three slots the request pass reads 3 (0 without a
    request limit); the token pass reads the 3 counters 1 in the shared scope, the one own
    count in the local scope, nothing without a token limit."""
    check = _three_servers(**options).start_check(1, 1)
    assert (check.num_slots, check.num_token_slots) == (request_reads, token_reads)


def test_adm_risk_2_the_local_token_pass_reads_the_own_tokens_beside_shared_stats() -> None:
    """ADM-RISK-2: with shared stats but the local scope, a token read is the server's own
    queued tokens (5), never counter 1 of any slot (7 and 9 there); the shared scope reads
    counter 1 of the slot named."""
    local = _three_servers(max_num_queued_tokens=50, token_scope="local")
    local.tracker.add("a", 1, 5)
    assert [local.read_token_slot(index) for index in range(3)] == [5, 5, 5]
    check = local.start_check(1, 1)
    check.read_next()
    assert check.token_view == 5
    shared = _three_servers(max_num_queued_tokens=50)
    assert [shared.read_token_slot(index) for index in range(3)] == [0, 7, 9]


@pytest.mark.parametrize("scope", ["shared", "local"])
def test_adm_tok_6_a_scope_spelled_at_run_time_is_resolved_by_its_value(scope: str) -> None:
    """ADM-TOK-6: `resolve_token_scope` reads a scope built at run time (equal to the
    literal, another object) by its value, and answers with the literal."""
    from queueref.admission.controller import resolve_token_scope

    spelled = "".join(list(scope))
    assert spelled == scope and spelled is not scope
    assert resolve_token_scope(spelled, object(), 10) == scope


class _Unordered(str):
    """A scope name equal to the literal but refusing every order comparison."""

    def __lt__(self, other: object) -> bool:
        raise TypeError("a scope has no order")

    __le__ = __gt__ = __ge__ = __lt__


@pytest.mark.parametrize("scope", ["shared", "local"])
def test_adm_tok_6_a_scope_is_told_apart_by_equality_only(scope: str) -> None:
    """ADM-TOK-6: a scope is read by `==` alone: a name that refuses to be ordered still
    builds the controller it names, and its checks read what that scope reads."""
    server = _three_servers(max_num_queued_tokens=50, token_scope=_Unordered(scope))
    assert server.token_scope == scope
    assert server.start_check(1, 1).num_token_slots == (3 if scope == "shared" else 1)


@pytest.mark.guard  # under -O the body's own defaults decide: contracts on, the wrapper's
def test_adm_ctl_2_a_check_without_arguments_is_one_request_of_one_token() -> None:
    """ADM-CTL-2, ADM-TOK-3: `check_admission()` checks one request of a one-token prompt:
    with 3 of a cap of 4 queued it is admitted (2 would not be), and in write-then-check
    it reserves exactly one slot and one token."""
    server = _controller(max_num_queued_reqs=4, max_num_queued_tokens=10, mode="write-then-check")
    server.tracker.add("a", 3, 0)
    assert server.check_admission() == 4
    assert (server.tracker.num_reserved, server.tracker.num_reserved_tokens) == (1, 1)


class _Weight(int):
    """An int subclass for `n`: checked on the step-by-step path."""


@pytest.mark.parametrize("n", [_Weight(1), _Weight(2)], ids=["fits", "over"])
def test_adm_ctl_7_an_int_subclass_weight_is_checked_step_by_step_to_the_same_answer(
    n: int,
) -> None:
    """ADM-CTL-7: a weight that is an int subclass takes `start_check`, `read_next` until
    `done`, `decide`, and gets the answer a plain int gets: with 3 of 4 queued, 1 fits
    (view 3 returned) and 2 is refused."""
    plain, subclass = _controller(max_num_queued_reqs=4), _controller(max_num_queued_reqs=4)
    for server in (plain, subclass):
        server.tracker.add("a", 3, 0)
    outcomes: list[object] = []
    for server, weight in ((plain, int(n)), (subclass, n)):
        try:
            outcomes.append(server.check_admission(weight))
        except QueueOverflowError as error:
            outcomes.append((error.view, error.n, error.limit))
    assert outcomes[0] == outcomes[1] == (3 if int(n) == 1 else (3, 2, 4))


def test_adm_tok_6_a_shared_scope_spelled_at_run_time_still_needs_shared_stats() -> None:
    """ADM-TOK-6: "shared" built at run time (equal to the literal, another object) without
    shared stats is refused as the literal is."""
    spelled = "".join(list("shared"))
    assert spelled == "shared" and spelled is not "shared"  # noqa: F632
    with pytest.raises(ValueError, match="ADM-TOK-6: token_scope='shared' needs shared stats"):
        AdmissionController(max_num_queued_tokens=10, token_scope=spelled)  # type: ignore[arg-type]
