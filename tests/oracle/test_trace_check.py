"""Gaps in the tests of queueref.oracle.trace_check, found by `make mutation`.

Each test replays a small hand-written trace whose verdict is written out from
specs/oracle.md (the mode table, ORC-TR-1 to ORC-TR-15): the exact violations with
their lines and messages, the exact bounds, what is still in flight.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from trace_events import abort, admit, finish, reject

from queueref.oracle import check_admission_trace
from queueref.oracle.trace_check import in_flight_requests
from queueref.oracle.trace_report import TraceReport
from queueref.trace.events import AdmissionEvent, EventKind, write_jsonl


def found(report: TraceReport) -> list[tuple[int, str, str]]:
    """(line, rule, message) of every violation, in the report's order."""
    return [(v.line, v.rule, v.message) for v in report.violations]


# -- ORC-TR-5, ORC-TR-7: where a view and a server index must be ------------------------


def test_a_server_out_of_range_is_named_with_the_indices_there_are() -> None:
    """ORC-TR-5: with N = 4, an event of server 5 is reported, naming the indices 0..3;
    one of server 3 is not."""
    report = check_admission_trace([admit(1.0, 3, "b", view=0), admit(2.0, 5, "a", view=0)], 4, 2)
    assert found(report) == [
        (2, "ORC-TR-5", "server 5 is out of range: there are 4 servers (indices 0..3)")
    ]


def test_equal_times_on_one_server_are_not_time_going_backwards() -> None:
    """ORC-TR-6: only a timestamp earlier than the previous one of the same server is
    reported; two events of one server at the same time are fine."""
    trace = [admit(1.0, 0, "a", view=0), admit(1.0, 0, "b", view=1), admit(0.5, 0, "c", view=2)]
    report = check_admission_trace(trace, 1, 3)
    assert found(report) == [
        (3, "ORC-TR-6", "time goes backwards on server 0: t=0.5 after t=1.0"),
    ]


def test_a_write_then_check_view_must_hold_the_own_count_plus_the_reservation() -> None:
    """ORC-TR-7 (write-then-check): the view read after reserving holds at least the
    server's own in-flight count plus the n just reserved (the other servers' counts
    may add more): a view of exactly own + n is fine (2, then 2 + 1 = 3), one above it
    too (4 with own 1 and n 1), one below (3 with own 3 and n 1, or 0 with own 0 and
    n 1) cannot have been read."""
    trace = [
        admit(1.0, 0, "a", view=2, n=2),  # own 0 + n 2: fine
        admit(2.0, 0, "b", view=3),  # own 2 + n 1: fine
        admit(3.0, 0, "c", view=3),  # own 3 + n 1 = 4 > 3
        admit(4.0, 1, "d", view=0),  # server 1: own 0 + n 1 = 1 > 0
        admit(5.0, 1, "e", view=4),  # server 1: own 1 + n 1 = 2 <= 4: fine
    ]
    report = check_admission_trace(trace, 2, 4, max_n=2, mode="write-then-check")
    assert found(report) == [
        (
            3,
            "ORC-TR-7",
            "view 3 is below the server's own in-flight count 3 plus its reservation 1",
        ),
        (
            4,
            "ORC-TR-7",
            "view 0 is below the server's own in-flight count 0 plus its reservation 1",
        ),
    ]


def test_a_local_view_must_be_the_own_count_by_value() -> None:
    """ORC-TR-7 (local): the view is exactly the server's own in-flight count: a view
    below it is reported (0 with 1 in flight), and a view of 300 with 300 in flight is
    right, whatever objects hold the two numbers."""
    trace = [admit(1.0, 0, "a", view=0), admit(2.0, 0, "b", view=0)]
    report = check_admission_trace(trace, 1, 5, mode="local")
    assert found(report) == [
        (2, "ORC-TR-7", "view 0 is not the server's own in-flight count 1 (local mode)"),
    ]
    trace = [admit(1.0, 0, "a", view=0, n=300), admit(2.0, 0, "b", view=int("300"))]
    report = check_admission_trace(trace, 1, 1000, max_n=300, mode="local")
    assert report.violations == ()


# -- ORC-TR-4: a request named like a child of another ---------------------------------


def test_an_ended_request_named_like_a_child_no_longer_blocks_its_parent_id() -> None:
    """ORC-TR-4: "0_x" admitted and finished, then "2_x" admitted: an admission of "x"
    with n = 3 would register 0_x, 1_x and 2_x, and only 2_x is still in flight, so it
    alone is named (the ended 0_x is not)."""
    trace = [
        admit(1.0, 0, "0_x", view=0),
        finish(2.0, 0, "0_x"),
        admit(3.0, 0, "2_x", view=0),
        admit(4.0, 0, "x", view=1, n=3),
    ]
    report = check_admission_trace(trace, 1, 10, max_n=3)
    assert found(report) == [
        (4, "ORC-TR-4", "admitted 'x' while ['2_x'] still in flight on server 0"),
    ]


def test_a_child_may_not_be_given_back_twice() -> None:
    """ORC-TR-4: child 0 of a request of n = 2 finished twice: the second finish is of a
    child already ended (the request itself is still in flight)."""
    trace = [admit(1.0, 0, "a", view=0, n=2), finish(2.0, 0, "0_a"), finish(3.0, 0, "0_a")]
    report = check_admission_trace(trace, 1, 2, max_n=2)
    assert found(report) == [
        (3, "ORC-TR-4", "finish of '0_a', which is already ended on server 0"),
    ]
    assert report.still_in_flight == 1


def test_a_child_beyond_n_of_an_ended_request_is_unknown() -> None:
    """ORC-TR-4, ADM-TRK-1: "a" (n = 2) aborted whole had the children 0_a and 1_a: a
    later finish of 1_a is of a child already ended, one of 2_a or 5_a of a child that
    never existed; "b" (n = 1, ended) had no children at all, so 0_b is unknown."""
    trace = [
        admit(1.0, 0, "a", view=0, n=2),
        abort(2.0, 0, "a", n=2),
        finish(3.0, 0, "1_a"),
        finish(4.0, 0, "2_a"),
        finish(5.0, 0, "5_a"),
        admit(6.0, 0, "b", view=0),  # n = 1: no children
        finish(7.0, 0, "b"),
        finish(8.0, 0, "0_b"),
    ]
    report = check_admission_trace(trace, 1, 2, max_n=2)
    assert found(report) == [
        (3, "ORC-TR-4", "finish of '1_a', which is already ended on server 0"),
        (4, "ORC-TR-4", "finish of '2_a', which is unknown on server 0"),
        (5, "ORC-TR-4", "finish of '5_a', which is unknown on server 0"),
        (8, "ORC-TR-4", "finish of '0_b', which is unknown on server 0"),
    ]


def test_a_departure_must_give_back_exactly_what_it_ends() -> None:
    """ORC-TR-4: an abort of "a" (n = 3, none ended) ends its 3 internal requests: one
    that records n = 2 gives back too few, one that records n = 4 too many."""
    for recorded in (2, 4):
        trace = [admit(1.0, 0, "a", view=0, n=3), abort(2.0, 0, "a", n=recorded)]
        report = check_admission_trace(trace, 1, 4, max_n=4)
        assert found(report) == [
            (
                2,
                "ORC-TR-4",
                f"abort of 'a' gives back n={recorded}, but it ends 3 internal request(s) "
                "in flight",
            )
        ]


def test_a_request_whose_children_all_ended_may_be_admitted_again() -> None:
    """ORC-TR-4: once both children of "a" (n = 2) have finished, "a" is over: a new
    admission of "a" is not of a request still in flight."""
    trace = [
        admit(1.0, 0, "a", view=0, n=2),
        finish(2.0, 0, "0_a"),
        finish(3.0, 0, "1_a"),
        admit(4.0, 0, "a", view=0),
    ]
    report = check_admission_trace(trace, 1, 2, max_n=2)
    assert report.violations == ()
    assert report.still_in_flight == 1


@pytest.mark.parametrize(("other", "n"), [("5_x", 3), ("3_x", 3)])
def test_a_request_named_like_a_child_beyond_n_does_not_block_the_parent_id(
    other: str, n: int
) -> None:
    """ORC-TR-4: an admission of "x" with n = 3 registers 0_x, 1_x and 2_x only, so a
    live request named "5_x" or "3_x" is no conflict."""
    trace = [admit(1.0, 0, other, view=0), admit(2.0, 0, "x", view=1, n=n)]
    report = check_admission_trace(trace, 1, 10, max_n=3)
    assert report.violations == ()
    assert report.still_in_flight == 1 + n


# -- ORC-TR-14: the token bound of each mode --------------------------------------------


@pytest.mark.parametrize(
    ("mode", "rule", "bound"),
    [
        # N = 3, Mt = 10, P = n * tokens = 2 * 2 = 4.
        ("check-then-write", "ge", 10 - 1 + 3 * 4),  # OB-TOK-1: Mt - 1 + N * P
        ("check-then-write", "fits", 10 + (3 - 1) * 4),  # OB-TOK-2: Mt + (N-1) * min(Mt, P)
        ("write-then-check", "ge", 10),  # OB-TOK-3: Mt
        ("locked", "ge", 10 - 1 + 4),  # one server's OB-TOK-1
        ("locked", "fits", 10),  # one server's OB-TOK-2
        ("local", "ge", 3 * (10 - 1 + 4)),  # N times one server's
        ("local", "fits", 3 * 10),
    ],
)
def test_the_token_bound_of_each_mode(mode: str, rule: str, bound: int) -> None:
    """ORC-TR-14: the token bound with P the largest n * tokens admitted: check-then-write
    under `ge` Mt - 1 + N * P (OB-TOK-1), under `fits` OB-TOK-2's; write-then-check Mt
    (OB-TOK-3); `locked` one server's; `local` N times one server's."""
    trace = [admit(1.0, 0, "a", view=0, n=2, tokens=2, token_view=0)]
    report = check_admission_trace(
        trace, 3, 10, max_n=2, mode=mode, max_num_queued_tokens=10, token_rule=rule
    )
    assert (report.max_request_tokens, report.token_bound) == (4, bound)


def test_a_token_cap_of_zero_is_accepted_and_admits_nothing() -> None:
    """ORC-TR-14: Mt is an int >= 0, so 0 is a cap (OB-TOK-1: nothing is admitted, the
    bound is 0): a rejection by the token limit at token view 0 is right (no request view
    was read), and the report holds."""
    trace = [AdmissionEvent(1.0, 0, "reject", "a", 1, tokens=3, token_view=0)]
    report = check_admission_trace(trace, 2, 1, max_num_queued_tokens=0)
    assert (report.max_num_queued_tokens, report.token_bound, report.max_queued_tokens) == (
        0,
        0,
        0,
    )
    assert report.violations == () and report.ok


def test_a_write_then_check_token_view_must_hold_the_own_tokens_plus_the_reservation() -> None:
    """ORC-TR-15 (write-then-check): the token view read after reserving holds at least
    the server's own queued tokens plus the n * tokens just reserved: 4 then 4 + 4 = 8,
    so a second view of 6 cannot have been read."""
    trace = [
        admit(1.0, 0, "a", view=1, tokens=4, token_view=4),  # own 0 + 4: fine
        admit(2.0, 0, "b", view=2, tokens=4, token_view=6),  # own 4 + 4 = 8 > 6
    ]
    report = check_admission_trace(trace, 1, 5, mode="write-then-check", max_num_queued_tokens=10)
    assert found(report) == [
        (
            2,
            "ORC-TR-15",
            "token view 6 cannot have been read: the server's own queued tokens are 4 "
            "plus its reservation 4",
        )
    ]


def test_the_children_of_a_live_request_are_below_its_n_and_not_its_own_id() -> None:
    """ORC-TR-4, ADM-TRK-1: while "a" (n = 2) and "b" (n = 1) are in flight, 5_a is no
    child of a (5 >= n) and 0_b none of b (n = 1 has no children): both finishes are of
    unknown requests, and a and b stay in flight."""
    trace = [
        admit(1.0, 0, "a", view=0, n=2),
        admit(1.5, 0, "b", view=2),
        finish(2.0, 0, "5_a"),
        finish(3.0, 0, "0_b"),
    ]
    report = check_admission_trace(trace, 1, 3, max_n=2)
    assert found(report) == [
        (3, "ORC-TR-4", "finish of '5_a', which is unknown on server 0"),
        (4, "ORC-TR-4", "finish of '0_b', which is unknown on server 0"),
    ]
    assert report.still_in_flight == 3


def test_a_request_of_n_1_registers_only_its_own_id() -> None:
    """ORC-TR-4, ADM-TRK-1: a request of n = 1 has no children, so a live request named
    "0_x" is no conflict for an admission of "x" with n = 1."""
    trace = [admit(1.0, 0, "0_x", view=0), admit(2.0, 0, "x", view=1)]
    report = check_admission_trace(trace, 1, 10)
    assert report.violations == ()
    assert report.still_in_flight == 2


def test_the_smallest_live_child_id_is_the_one_named() -> None:
    """ORC-TR-4: live requests named 5_x and 1_x: an admission of "x" with n = 3 would
    register 1_x again (not 5_x, beyond its n), so 1_x is named."""
    trace = [
        admit(1.0, 0, "1_x", view=0),
        admit(2.0, 0, "5_x", view=1),
        admit(3.0, 0, "x", view=2, n=3),
    ]
    report = check_admission_trace(trace, 1, 10, max_n=3)
    assert found(report) == [
        (3, "ORC-TR-4", "admitted 'x' while ['1_x'] still in flight on server 0"),
    ]


@pytest.mark.parametrize(("event", "view", "token_view"), [("admit", 1, 10), ("reject", None, 11)])
def test_a_request_of_no_tokens_weighs_nothing_under_fits(
    event: EventKind, view: int | None, token_view: int
) -> None:
    """ORC-TR-15 (`fits`: admit iff token view + n * tokens <= Mt): a request recording 0
    tokens adds 0 to the token view it is judged by: admitted at a token view of exactly
    Mt = 10 (10 + 0 <= 10), rejected (by the token limit, no request view read) at 11
    (11 + 0 > 10); neither decision is reported."""
    trace = [
        admit(1.0, 0, "a", view=0, tokens=10, token_view=0),
        AdmissionEvent(2.0, 0, event, "b", 1, view=view, tokens=0, token_view=token_view),
    ]
    report = check_admission_trace(trace, 2, 3, max_num_queued_tokens=10, token_rule="fits")
    assert report.violations == ()


def test_a_trace_without_token_weights_has_a_largest_request_of_0_tokens() -> None:
    """ORC-TR-14: with only requests of 0 tokens admitted, P = 0, and the `ge` bound is
    Mt - 1 + N * 0 = 9 for Mt = 10."""
    trace = [admit(1.0, 0, "a", view=0, tokens=0, token_view=0)]
    report = check_admission_trace(trace, 2, 1, max_num_queued_tokens=10)
    assert (report.max_request_tokens, report.token_bound, report.max_queued_tokens) == (0, 9, 0)


@pytest.mark.parametrize("mode", ["check-then-write", "locked"])
def test_a_whole_request_departing_takes_out_n_times_its_tokens(mode: str) -> None:
    """ORC-TR-14: an abort of a request of n = 2 with 3-token prompts, both still in
    prefill, takes out 2 * 3 = 6 tokens: a later admission of 7 tokens makes the largest
    global queued tokens 7 (6 at first, 0 after the abort, then 7)."""
    trace = [
        admit(1.0, 0, "a", view=0, n=2, tokens=3, token_view=0),
        abort(2.0, 0, "a", n=2),
        admit(3.0, 0, "b", view=0, tokens=7, token_view=0),
    ]
    report = check_admission_trace(trace, 1, 2, max_n=2, mode=mode, max_num_queued_tokens=100)
    assert report.violations == ()
    assert (report.max_request_tokens, report.max_queued_tokens) == (7, 7)


@pytest.mark.parametrize(("mode", "largest"), [("check-then-write", 10), ("locked", 5)])
def test_the_token_measure_follows_the_request_measure_of_the_mode(mode: str, largest: int) -> None:
    """ORC-TR-14: the queued tokens are swept with the mode's measure: a departure takes
    the tokens of its request (still in prefill) out at `t` for `max_in_flight`
    (check-then-write: 5 + 5 = 10 while b is admitted at 2.5, before a's finish at 3), at
    `t_before` for `max_admitted_in_flight` (locked: a's finish was written at 2, so 5)."""
    trace = [
        admit(1.0, 0, "a", view=0, tokens=5, token_view=0),
        admit(2.5, 1, "b", view=1, tokens=5, token_view=5),
        AdmissionEvent(3.0, 0, "finish", "a", 1, t_before=2.0),
    ]
    report = check_admission_trace(trace, 2, 2, mode=mode, max_num_queued_tokens=10)
    assert report.violations == ()
    assert report.max_queued_tokens == largest


def test_an_admission_without_tokens_adds_none() -> None:
    """ORC-TR-14, ADM-EV-6: an admission that records 0 tokens (or none) adds nothing to
    the queued tokens: with 4 admitted after it the largest is 4, and the request's own
    tokens are 4."""
    trace = [
        admit(1.0, 0, "a", view=0, tokens=0, token_view=0),
        admit(2.0, 0, "b", view=1, token_view=0),  # no tokens recorded
        admit(3.0, 0, "c", view=2, tokens=4, token_view=0),
    ]
    report = check_admission_trace(trace, 1, 3, max_num_queued_tokens=10)
    assert report.violations == ()
    assert (report.max_request_tokens, report.max_queued_tokens) == (4, 4)


def test_a_local_token_view_must_be_the_own_tokens() -> None:
    """ORC-TR-15 (local): each server checks only its own queued tokens, so its token view
    is exactly them: 0 then 4 are right, 5 (with 4 queued) cannot have been read."""
    trace = [
        admit(1.0, 0, "a", view=0, tokens=4, token_view=0),
        admit(2.0, 0, "b", view=1, tokens=1, token_view=4),
        admit(3.0, 0, "c", view=2, tokens=1, token_view=6),
    ]
    report = check_admission_trace(trace, 1, 3, mode="local", max_num_queued_tokens=10)
    assert found(report) == [
        (
            3,
            "ORC-TR-15",
            "token view 6 cannot have been read: the server's own queued tokens are 5",
        )
    ]


def test_a_local_token_view_is_compared_by_value() -> None:
    """ORC-TR-15 (local): a token view of 300 with 300 tokens queued is the own count,
    whatever objects hold the two numbers: nothing to report."""
    trace = [
        admit(1.0, 0, "a", view=0, tokens=300, token_view=0),
        admit(2.0, 0, "b", view=1, tokens=1, token_view=int("300")),
    ]
    report = check_admission_trace(trace, 1, 3, mode="local", max_num_queued_tokens=1000)
    assert report.violations == ()


@pytest.mark.parametrize(
    ("mode", "tokens", "suffix"),
    [
        ("check-then-write", 3, ""),  # nothing reserved: no reservation named
        ("write-then-check", 0, ""),  # a reservation of 0 tokens is not named
        ("write-then-check", 3, " plus its reservation 3"),
    ],
)
def test_an_impossible_token_view_names_the_reservation_only_when_there_is_one(
    mode: str, tokens: int, suffix: str
) -> None:
    """ORC-TR-15: a token view below what the server itself holds names the server's own
    queued tokens, and, under write-then-check with tokens reserved, the reservation."""
    trace = [
        admit(1.0, 0, "a", view=1, tokens=4, token_view=4),
        admit(2.0, 0, "b", view=2, tokens=tokens, token_view=2),
    ]
    report = check_admission_trace(trace, 1, 3, mode=mode, max_num_queued_tokens=10)
    assert found(report) == [
        (
            2,
            "ORC-TR-15",
            f"token view 2 cannot have been read: the server's own queued tokens are 4{suffix}",
        )
    ]


def test_a_prefill_done_must_name_an_internal_request_in_flight() -> None:
    """ORC-TR-14: a `prefill_done` of a request of n > 1 (its children are the internal
    requests), of a request already ended, or of an unknown one is reported, each with
    what it is; one that takes out more or fewer tokens than the request holds too."""
    trace = [
        admit(1.0, 0, "a", view=0, n=2, tokens=3, token_view=0),
        AdmissionEvent(2.0, 0, "prefill_done", "a", 1, tokens=3),
        admit(3.0, 0, "b", view=2, tokens=3, token_view=6),
        finish(4.0, 0, "b"),
        AdmissionEvent(5.0, 0, "prefill_done", "b", 1, tokens=3),
        AdmissionEvent(6.0, 0, "prefill_done", "c", 1, tokens=3),
        admit(7.0, 0, "d", view=2, tokens=3, token_view=6),
        AdmissionEvent(8.0, 0, "prefill_done", "d", 1, tokens=5),
        admit(9.0, 0, "e", view=3, tokens=3, token_view=9),
        AdmissionEvent(10.0, 0, "prefill_done", "e", 1, tokens=2),
    ]
    report = check_admission_trace(trace, 1, 10, max_n=2, max_num_queued_tokens=100)
    assert found(report) == [
        (
            2,
            "ORC-TR-14",
            "prefill_done of 'a', which is a request of n > 1, not an internal request on server 0",
        ),
        (5, "ORC-TR-14", "prefill_done of 'b', which is already ended on server 0"),
        (6, "ORC-TR-14", "prefill_done of 'c', which is unknown on server 0"),
        (8, "ORC-TR-14", "prefill_done of 'd' takes out 5 tokens, but it holds 3"),
        (10, "ORC-TR-14", "prefill_done of 'e' takes out 2 tokens, but it holds 3"),
    ]


def test_a_prefilled_child_no_longer_holds_its_tokens() -> None:
    """ORC-TR-14: "a" (n = 2, 3 tokens each) holds 6; child 0's prefill is done (3 leave),
    then the request is aborted (only child 1's 3 tokens leave): nothing is queued, so a
    later admission of 7 makes the largest 7. A prefill of 300 tokens recorded as 300 is
    right, whatever objects hold the two numbers."""
    trace = [
        admit(1.0, 0, "a", view=0, n=2, tokens=3, token_view=0),
        AdmissionEvent(2.0, 0, "prefill_done", "0_a", 1, tokens=3),
        abort(3.0, 0, "a", n=2),
        admit(4.0, 0, "b", view=0, tokens=7, token_view=0),
        admit(5.0, 0, "c", view=1, tokens=300, token_view=7),
        AdmissionEvent(6.0, 0, "prefill_done", "c", 1, tokens=int("300")),
    ]
    report = check_admission_trace(trace, 1, 3, max_n=2, max_num_queued_tokens=1000)
    assert report.violations == ()
    assert report.max_queued_tokens == 307


def test_a_child_finishing_after_its_prefill_takes_out_no_more_tokens() -> None:
    """ORC-TR-14: "a" (n = 2, 3 tokens each) holds 6; child 0's prefill is done (3 leave),
    then child 0 finishes (nothing more leaves: its tokens are gone); child 1 still holds
    3, so an admission of 7 makes the largest 10."""
    trace = [
        admit(1.0, 0, "a", view=0, n=2, tokens=3, token_view=0),
        AdmissionEvent(2.0, 0, "prefill_done", "0_a", 1, tokens=3),
        finish(3.0, 0, "0_a"),
        admit(4.0, 0, "b", view=1, tokens=7, token_view=3),
    ]
    report = check_admission_trace(trace, 1, 3, max_n=2, max_num_queued_tokens=100)
    assert report.violations == ()
    assert report.max_queued_tokens == 10


def test_a_departed_child_no_longer_holds_its_tokens() -> None:
    """ORC-TR-14: "a" (n = 3, 2 tokens each, all in prefill) holds 6; its child 0 finishes
    (2 leave), then the rest is aborted (the 2 children left, 4 tokens): nothing is
    queued, so a later admission of 7 makes the largest 7."""
    trace = [
        admit(1.0, 0, "a", view=0, n=3, tokens=2, token_view=0),
        finish(2.0, 0, "0_a"),
        abort(3.0, 0, "a", n=2),
        admit(4.0, 0, "b", view=0, tokens=7, token_view=0),
    ]
    report = check_admission_trace(trace, 1, 3, max_n=3, max_num_queued_tokens=100)
    assert report.violations == ()
    assert report.max_queued_tokens == 7


@pytest.mark.parametrize(
    ("mode", "largest"),
    [
        # max_in_flight: at t = 2 the admission of b counts before a's departure: 5 + 5.
        ("check-then-write", 10),
        # max_admitted_in_flight: a's departure at t_before = 2 counts before b: 5.
        ("locked", 5),
    ],
)
def test_token_ties_are_broken_as_the_request_measure_breaks_them(mode: str, largest: int) -> None:
    """ORC-TR-14, ADM-EV-4, ADM-EV-5: at equal times the token sweep orders admissions
    before departures for `max_in_flight` and departures first for
    `max_admitted_in_flight`, whatever order the trace lists them in (here a's departure,
    stamped at 2 both ways, comes before b's admission at 2 in one trace and after it in
    the other)."""
    a = admit(1.0, 0, "a", view=0, tokens=5, token_view=0)
    b = admit(2.0, 1, "b", view=1, tokens=5, token_view=5)
    departure = AdmissionEvent(2.0, 0, "finish", "a", 1, t_before=1.5)
    stamped = AdmissionEvent(3.0, 0, "finish", "a", 1, t_before=2.0)
    first = [a, departure, b] if mode == "check-then-write" else [a, b, stamped]
    report = check_admission_trace(first, 2, 2, mode=mode, max_num_queued_tokens=10)
    assert report.violations == ()
    assert report.max_queued_tokens == largest


def test_the_summary_says_whether_the_token_bound_holds() -> None:
    """ORC-TR-14: with a token limit the summary gives the token bound and its verdict:
    one server admitting 4 tokens under Mt = 1 (`ge`) stays within Mt - 1 + 1 * 4 = 4;
    two `locked` servers admitting 4 each reach 8, above one server's bound 4."""
    one = [admit(1.0, 0, "a", view=0, tokens=4, token_view=0)]
    report = check_admission_trace(one, 1, 2, max_num_queued_tokens=1)
    assert "token bound: 4 -- holds" in report.summary().splitlines()
    assert report.ok
    two = one + [admit(2.0, 1, "b", view=0, tokens=4, token_view=0)]
    report = check_admission_trace(two, 2, 2, mode="locked", max_num_queued_tokens=1)
    assert (report.max_queued_tokens, report.token_bound) == (8, 4)
    assert "token bound: 4 -- BROKEN" in report.summary().splitlines()
    assert not report.ok


def test_a_report_built_without_counts_or_tokens_counts_nothing() -> None:
    """ORC-TR-1: a `TraceReport` built with only the request fields has counted no event
    of any kind and has no token limit: every count is 0, and so is the largest request's
    tokens."""
    report = TraceReport(
        mode="check-then-write",
        num_servers=1,
        max_num_queued_reqs=1,
        max_n=1,
        num_events=0,
        max_in_flight=0,
        measure="max_in_flight",
        bound=1,
        bound_holds=True,
        violations=(),
    )
    assert report.summary().splitlines()[1] == (
        "  admit 0, reject 0, finish 0, abort 0; still in flight at the end: 0"
    )
    data = report.to_dict()
    assert (data["max_request_tokens"], data["max_num_queued_tokens"], data["counts"]) == (
        0,
        None,
        {},
    )


# -- ORC-TR-13: a folder given to check_admission_trace ----------------------------------


def test_a_folder_is_checked_with_the_file_of_each_violation(tmp_path: Path) -> None:
    """ORC-TR-13: `check_admission_trace(DIR, ...)` reads the per-server files merged by
    `t`; a violation names its file and its line there."""
    folder = tmp_path / "trace"
    folder.mkdir()
    write_jsonl([admit(1.0, 0, "a", view=0), admit(3.0, 0, "c", view=2)], folder / "server-0.jsonl")
    write_jsonl([admit(4.0, 1, "b", view=3)], folder / "server-1.jsonl")
    report = check_admission_trace(folder, 2, 2)
    assert (report.num_events, report.max_in_flight) == (3, 3)
    # In trace order: server 0's line 2 (t = 3) before server 1's line 1 (t = 4).
    assert [str(v) for v in report.violations] == [
        f"{folder / 'server-0.jsonl'}:2: ORC-TR-2: admitted although not view 2 + n 1 <= cap 2",
        f"{folder / 'server-1.jsonl'}:1: ORC-TR-2: admitted although not view 3 + n 1 <= cap 2",
    ]
    assert [v.file for v in report.violations] == [
        str(folder / "server-0.jsonl"),
        str(folder / "server-1.jsonl"),
    ]


def test_the_violations_of_a_folder_come_in_trace_order_not_file_by_file(
    tmp_path: Path,
) -> None:
    """ORC-TR-1, ORC-TR-13: server 1's violation at t = 2 comes before server 0's at t = 3,
    although server-0.jsonl sorts first: the order is the merged trace's."""
    folder = tmp_path / "trace"
    folder.mkdir()
    write_jsonl([admit(1.0, 0, "a", view=0), admit(3.0, 0, "c", view=2)], folder / "server-0.jsonl")
    write_jsonl([admit(2.0, 1, "b", view=3)], folder / "server-1.jsonl")
    report = check_admission_trace(folder, 2, 2)
    assert [str(v) for v in report.violations] == [
        f"{folder / 'server-1.jsonl'}:1: ORC-TR-2: admitted although not view 3 + n 1 <= cap 2",
        f"{folder / 'server-0.jsonl'}:2: ORC-TR-2: admitted although not view 2 + n 1 <= cap 2",
    ]


def test_prefills_read_from_a_file_are_counted(tmp_path: Path) -> None:
    """ORC-TR-14, ORC-TR-1: the report counts the events of each kind, `prefill_done`
    included when there are any, also for a trace read from its file."""
    path = tmp_path / "trace.jsonl"
    write_jsonl(
        [
            admit(1.0, 0, "a", view=0, tokens=3, token_view=0),
            AdmissionEvent(2.0, 0, "prefill_done", "a", 1, tokens=3),
            finish(3.0, 0, "a"),
        ],
        path,
    )
    report = check_admission_trace(path, 1, 1, max_num_queued_tokens=10)
    assert report.violations == ()
    assert report.counts == {"admit": 1, "reject": 0, "finish": 1, "abort": 0, "prefill_done": 1}
    assert report.summary().splitlines()[1] == (
        "  admit 1, reject 0, finish 1, abort 0, prefill_done 1; still in flight at the end: 0"
    )


def test_preflight_records_read_from_a_file_are_counted(tmp_path: Path) -> None:
    """E2E-REN-5, ORC-TR-1: the preflight records of a trace read from its file are
    counted by kind: each kind is a string parsed from JSON, equal to the kind's name but
    not the same object, and each is counted."""
    path = tmp_path / "trace.jsonl"
    write_jsonl(
        [
            AdmissionEvent(1.0, 0, "preflight", "a", 1, view=0),
            AdmissionEvent(1.1, 0, "admit", "a", 1, view=0),
            AdmissionEvent(1.2, 0, "reserve", "b", 1, view=1),
            AdmissionEvent(1.3, 0, "release", "b", 1),
            AdmissionEvent(1.4, 0, "preflight", "c", 1, view=1),
            AdmissionEvent(1.5, 0, "reject", "c", 1, view=2),
            finish(2.0, 0, "a"),
        ],
        path,
    )
    report = check_admission_trace(path, 1, 2)
    assert report.violations == ()
    assert report.counts == {
        "admit": 1,
        "reject": 1,
        "finish": 1,
        "abort": 0,
        "preflight": 2,
        "reserve": 1,
        "release": 1,
        "wasted_render": 1,
    }


# -- ORC-TR-1: the arguments that go with the events ------------------------------------


@pytest.mark.guard
def test_line_numbers_and_files_must_match_the_events() -> None:
    """ORC-TR-1: `line_numbers` and `files` give one entry per event; anything else is a
    `ValueError`, and an item that is not an `AdmissionEvent` a `TypeError`."""
    trace = [admit(1.0, 0, "a", view=0), admit(2.0, 0, "b", view=1)]
    for numbers in ([7], [7, 8, 9]):
        with pytest.raises(
            ValueError, match=r"^ORC-TR-1: line_numbers must give one line per event$"
        ):
            check_admission_trace(trace, 1, 2, line_numbers=numbers)
    for files in (["x.jsonl"], ["x.jsonl"] * 3):
        with pytest.raises(ValueError, match=r"^ORC-TR-1: files must give one file per event$"):
            check_admission_trace(trace, 1, 2, files=files)
    with pytest.raises(TypeError, match=r"^ORC-TR-1: event 2 is not an AdmissionEvent: 'b'$"):
        check_admission_trace([trace[0], "b"], 1, 2)  # type: ignore[list-item]
    report = check_admission_trace(trace, 1, 1, line_numbers=[7, 9], files=["x.jsonl", "y.jsonl"])
    assert [str(v) for v in report.violations] == [
        "y.jsonl:9: ORC-TR-2: admitted although not view 1 + n 1 <= cap 1"
    ]


def test_a_long_trace_keeps_the_line_and_file_given_for_each_event() -> None:
    """ORC-TR-1: 300 events with 300 line numbers and 300 files (counts compared as
    numbers, whatever their size): the violation of the last event is at the line and in
    the file given for it."""
    trace = [AdmissionEvent(float(k), 0, "reject", f"r{k}", 1) for k in range(299)]
    trace.append(admit(299.0, 0, "last", view=5))
    report = check_admission_trace(
        trace,
        1,
        1,
        line_numbers=list(range(2, 302)),
        files=[f"part-{k // 100}.jsonl" for k in range(300)],
    )
    assert report.num_events == 300
    assert [str(v) for v in report.violations] == [
        "part-2.jsonl:301: ORC-TR-2: admitted although not view 5 + n 1 <= cap 1"
    ]


# -- E2E-SRV-7: what a dead server held -------------------------------------------------


def test_in_flight_requests_are_what_one_server_still_holds() -> None:
    """E2E-SRV-7: the requests of server 1 still in flight after the events, each with the
    slots it holds (n less its children already ended); other servers' events and
    rejections are left out."""
    events = [
        admit(1.0, 1, "a", view=0),
        admit(1.1, 1, "b", view=1, n=3),
        admit(1.2, 0, "c", view=0),  # server 0's
        reject(1.3, 1, "d", view=4),
        finish(2.0, 1, "1_b"),  # one child of b
        admit(2.1, 1, "e", view=3),
        finish(2.2, 1, "e"),
        admit(2.3, 0, "f", view=1),
        abort(2.4, 0, "c"),
    ]
    assert in_flight_requests(events, 1) == {"a": 1, "b": 2}
    assert in_flight_requests(events, 0) == {"f": 1}
    assert in_flight_requests(events, 2) == {}


def test_in_flight_requests_of_a_large_server_index_read_from_its_file() -> None:
    """E2E-SRV-7: the events are read back from the trace file, so the server index of
    each is a number parsed from JSON: server 300's requests are found by equality of
    that number with the index asked for, whatever object holds it."""
    lines = [
        '{"t":1.0,"server":300,"event":"admit","request_id":"a","n":2,"view":0}',
        '{"t":2.0,"server":300,"event":"admit","request_id":"b","n":1,"view":2}',
        '{"t":3.0,"server":300,"event":"finish","request_id":"b","n":1,"t_before":2.5}',
    ]
    events = [AdmissionEvent.from_json(line) for line in lines]
    assert in_flight_requests(events, int("300")) == {"a": 2}


def test_a_report_and_its_violations_are_immutable_values() -> None:
    """ORC-TR-1: the report and each violation are values: their fields cannot be rebound."""
    report = check_admission_trace([admit(1.0, 0, "a", view=1)], 1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.bound = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.violations[0].line = 7  # type: ignore[misc]
    assert (report.bound, report.violations[0].line) == (1, 1)


def test_a_report_without_a_token_bound_holds_its_tokens() -> None:
    """ORC-TR-14: with no token bound there is nothing the queued tokens could break: a
    report with a token measure but no bound has `token_bound_holds` true."""
    report = TraceReport(
        mode="check-then-write",
        num_servers=1,
        max_num_queued_reqs=1,
        max_n=1,
        num_events=0,
        max_in_flight=0,
        measure="max_in_flight",
        bound=1,
        bound_holds=True,
        violations=(),
        max_queued_tokens=3,
    )
    assert report.token_bound_holds and report.ok
