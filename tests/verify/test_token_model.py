"""OB-TOK-1..3: the shared token limit, searched exhaustively (queueref.verify.tokens)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

import queueref.cli.bound_table as bound_table_command
from queueref.admission import protocol
from queueref.cli.main import main
from queueref.verify import search, token_compact, tokens
from queueref.verify.tokens import Rule, TokenRow, admits_tokens, explore_joint, explore_tokens

CTW, WTC = "check-then-write", "write-then-check"

# (N, Mt, P) -> the worst queued tokens, written out by hand from the formulas of
# specs/token-limit.md: ge Mt - 1 + N*P (0 when Mt = 0); fits Mt + (N-1)*min(Mt, P);
# write-then-check Mt.
GE_ROWS = [
    ((1, 0, 1), 0),
    ((1, 1, 1), 1),
    ((1, 3, 2), 4),
    ((2, 1, 1), 2),
    ((2, 2, 1), 3),
    ((2, 2, 2), 5),
    ((2, 3, 2), 6),
    ((3, 1, 1), 3),
    ((3, 2, 1), 4),
]
FITS_ROWS = [
    ((1, 0, 1), 0),
    ((1, 3, 2), 3),
    ((2, 1, 1), 2),
    ((2, 2, 2), 4),
    ((2, 3, 2), 5),
    ((2, 4, 3), 7),
    ((3, 1, 1), 3),
    ((3, 2, 1), 4),
]
WTC_ROWS = [((1, 3, 2), 3), ((2, 2, 2), 2), ((2, 4, 3), 4), ((3, 2, 1), 2), ((3, 2, 2), 2)]

# (N, Mt, P) = (3, 3, 2), the issue's instance: the plain encoding's worst, run once
# (ge: 5,464,848 states in 31 min, fits: 2,786,353 states in 9 min on the shared 2-core
# machine), equal to the formulas: ge 3 - 1 + 3*2 = 8, fits 3 + 2*min(3, 2) = 7.
ISSUE_ROWS = [("ge", 8), ("fits", 7)]


@pytest.mark.parametrize(("bounds", "expected"), GE_ROWS)
def test_OB_TOK_1_upstream_ge_rule_worst_is_mt_minus_1_plus_n_p(
    bounds: tuple[int, int, int], expected: int
) -> None:
    """OB-TOK-1: under upstream's `queued >= Mt` rule the worst global queued tokens are
    Mt - 1 + N*P (0 for Mt = 0), and they are reached."""
    row = explore_tokens(*bounds, rule="ge", protocol_name=CTW)
    assert (row.worst_tokens, row.bound) == (expected, expected)


@pytest.mark.parametrize(("bounds", "expected"), FITS_ROWS)
def test_OB_TOK_2_fits_rule_is_the_request_bound_for_tokens(
    bounds: tuple[int, int, int], expected: int
) -> None:
    """OB-TOK-2: under the opt-in `queued + t > Mt` rule the worst is Mt + (N-1)*min(Mt, P)."""
    row = explore_tokens(*bounds, rule="fits", protocol_name=CTW)
    assert (row.worst_tokens, row.bound) == (expected, expected)


@pytest.mark.parametrize(("bounds", "expected"), WTC_ROWS)
def test_OB_TOK_3_write_then_check_never_admits_more_than_mt(
    bounds: tuple[int, int, int], expected: int
) -> None:
    """OB-TOK-3: with write-then-check the admitted queued tokens never exceed Mt, reached."""
    row = explore_tokens(*bounds, rule="fits", protocol_name=WTC)
    assert (row.worst_tokens, row.bound) == (expected, expected)


@pytest.mark.parametrize("encoding", tokens.ENCODINGS)
def test_OB_TOK_1_a_wrong_bound_is_refuted(encoding: str) -> None:
    """OB-TOK-1, OB-TOK-5: each encoding refutes a bound one too small: the fits bound for
    the ge rule (Mt + (N-1)*min(Mt, P) = 4 at N = 2, Mt = 2, P = 2) is exceeded (5)."""
    row = explore_tokens(2, 2, 2, rule="ge", protocol_name=CTW, encoding=encoding)
    assert row.worst_tokens == 5 > 2 + (2 - 1) * min(2, 2)


@pytest.mark.parametrize(("rule", "expected"), ISSUE_ROWS)
def test_OB_TOK_5_the_issue_instance_3_3_2_in_the_compact_encoding(
    rule: str, expected: int
) -> None:
    """OB-TOK-5: N = 3, Mt = 3, P = 2, where the plain encoding needs millions of states:
    the compact one finds the plain one's worst (its run, once) in under 30,000 states."""
    row = explore_tokens(3, 3, 2, rule=rule, protocol_name=CTW)
    assert (row.worst_tokens, row.bound) == (expected, expected)
    assert row.states < 30_000


# Every instance the plain encoding searches in about a second or less: N <= 2 with
# Mt 0-3 and P 1-2, and N = 3 with Mt <= 1 and P = 1.
SMALL = [(n, mt, p) for n in (1, 2) for mt in range(4) for p in (1, 2)]
SMALL += [(3, 0, 1), (3, 1, 1)]
VARIANTS = [(CTW, "ge"), (CTW, "fits"), (WTC, "fits")]


def _worst_mismatches(
    instances: list[tuple[int, int, int]], variant: tuple[str, str]
) -> list[tuple[tuple[int, int, int], int, int]]:
    """The instances where the compact encoding's worst differs from the plain one's."""
    protocol_name, rule = variant
    out = []
    for bounds in instances:
        compact = explore_tokens(*bounds, rule=rule, protocol_name=protocol_name)
        plain = explore_tokens(*bounds, rule=rule, protocol_name=protocol_name, encoding="plain")
        assert compact.states <= plain.states, bounds  # compact: never more states
        if compact.worst_tokens != plain.worst_tokens:
            out.append((bounds, compact.worst_tokens, plain.worst_tokens))
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_OB_TOK_5_compact_and_plain_encodings_find_the_same_worst(
    variant: tuple[str, str],
) -> None:
    """OB-TOK-5: on every small instance the compact encoding finds exactly the plain
    encoding's worst queued tokens, in no more states."""
    assert _worst_mismatches(SMALL, variant) == []


def _checks_never_overlap(successors: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """An unsound reduction: no check starts while another is in progress (as if reads
    commuted with the others' admissions): the locked protocol, not the shared one."""

    def moves(state: Any, **bounds: Any) -> list[Any]:
        busy = sum(check is not None for _, check in state)
        return [
            s
            for s in successors(state, **bounds)
            if sum(c is not None for _, c in s) <= max(busy, 1)
        ]

    return moves


def _sorted_servers(successors: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """An unsound reduction: the servers kept sorted, as if they were interchangeable (a
    check in progress then reads another slot next, and its own slot as another's)."""

    def moves(state: Any, **bounds: Any) -> list[Any]:
        return [tuple(sorted(s, key=repr)) for s in successors(state, **bounds)]

    return moves


@pytest.mark.parametrize(
    ("reduction", "smaller"), [(_checks_never_overlap, True), (_sorted_servers, False)]
)
def test_OB_TOK_5_an_unsound_reduction_is_caught(
    monkeypatch: pytest.MonkeyPatch, reduction: Callable[..., Any], smaller: bool
) -> None:
    """OB-TOK-5: the comparison has teeth. A reduction that loses interleavings (checks never
    overlap) finds a smaller worst than the plain encoding; the server symmetry that does
    not hold here (reads in index order) finds a larger one: both are reported."""
    monkeypatch.setattr(token_compact, "ctw_successors", reduction(token_compact.ctw_successors))
    found = _worst_mismatches([(2, 2, 1), (2, 2, 2)], (CTW, "ge"))
    assert found
    for _, compact_worst, plain_worst in found:
        assert (compact_worst < plain_worst) is smaller


@pytest.mark.parametrize("encoding", tokens.ENCODINGS)
def test_OB_TOK_5_a_broken_rule_is_refuted_by_each_encoding(
    monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    """OB-TOK-1, OB-TOK-5: `queued <= Mt` for `queued < Mt` (Coq's mutant of OB-TOK-1) is
    refuted by each encoding: the worst exceeds Mt - 1 + N*P."""

    def off_by_one(rule: Rule, view: int, t: int, limit: int) -> bool:
        return view <= limit if Rule(rule) is Rule.GE else view + t <= limit

    monkeypatch.setattr(protocol, "admits_tokens", off_by_one)
    monkeypatch.setattr(tokens, "admits_tokens", off_by_one)
    row = explore_tokens(2, 2, 2, rule="ge", encoding=encoding)
    assert row.worst_tokens == 2 + 2 * 2 > row.bound == 5


def test_OB_TOK_1_the_rules() -> None:
    """OB-TOK-1, OB-TOK-2: ge ignores the new request's own tokens; fits counts them."""
    assert admits_tokens(Rule.GE, 4, 100, 5) and not admits_tokens(Rule.GE, 5, 1, 5)
    assert admits_tokens(Rule.FITS, 3, 2, 5) and not admits_tokens(Rule.FITS, 4, 2, 5)
    assert not admits_tokens(Rule.GE, 0, 1, 0) and not admits_tokens(Rule.FITS, 0, 1, 0)


@pytest.mark.guard
def test_OB_TOK_1_bad_bounds_name_the_problem() -> None:
    """OB-TOK-1: bad bounds raise ValueError naming them."""
    for bad, field in (((0, 1, 1), "servers"), ((1, -1, 1), "limit"), ((1, 1, 0), "prompt")):
        with pytest.raises(ValueError, match=f"{field} must be an int"):
            explore_tokens(*bad)
    with pytest.raises(ValueError, match="'gt'"):
        explore_tokens(1, 1, 1, rule="gt")
    with pytest.raises(ValueError, match="more than 10 states"):
        explore_tokens(2, 2, 2, max_states=10)
    for encoding in tokens.ENCODINGS:  # OB-TOK-5: the limit holds in each, named
        with pytest.raises(ValueError, match=f"more than 10 states \\({encoding} encoding"):
            explore_tokens(2, 2, 2, max_states=10, encoding=encoding)
    with pytest.raises(ValueError, match="OB-TOK-1: unknown encoding 'packed'"):
        explore_tokens(1, 1, 1, encoding="packed")


# (N, M, W, Mt, P) -> (worst requests, worst tokens), found by the search and checked by
# hand against M + (N-1)*min(M, W) and Mt - 1 + N*W*P (each is reached, or the other
# limit stops it first).
JOINT_ROWS = [
    ((1, 2, 2, 2, 2), (2, 4)),  # tokens: one admission of 2 x 2, then the request cap
    ((2, 1, 1, 1, 1), (2, 2)),
    ((2, 2, 1, 2, 1), (3, 3)),
    ((2, 2, 1, 1, 2), (3, 4)),
    ((2, 2, 2, 2, 1), (4, 4)),
    ((2, 2, 1, 3, 2), (3, 6)),
]


@pytest.mark.parametrize(("bounds", "expected"), JOINT_ROWS)
def test_OB_TOK_4_both_limits_never_exceed_either_bound_alone(
    bounds: tuple[int, int, int, int, int], expected: tuple[int, int]
) -> None:
    """OB-TOK-4: with both limits, the two passes read at different moments, yet the request
    count stays within OB-BOUND-1 and the tokens within OB-TOK-1 (P = W * prompt)."""
    row = explore_joint(*bounds)
    assert (row.worst_requests, row.worst_tokens) == expected
    servers, cap, weight, limit, prompt = bounds
    assert row.worst_requests <= cap + (servers - 1) * min(cap, weight)
    assert row.worst_tokens <= limit - 1 + servers * weight * prompt
    assert row.holds


# More instances with both limits, compared with the plain encoding (each under a second).
JOINT_SMALL = [bounds for bounds, _ in JOINT_ROWS] + [
    (1, 3, 2, 3, 2), (2, 0, 1, 1, 1), (2, 1, 2, 0, 1), (2, 2, 2, 1, 2), (2, 3, 2, 2, 1),
]  # fmt: skip


@pytest.mark.parametrize("bounds", JOINT_SMALL)
def test_OB_TOK_5_compact_and_plain_agree_with_both_limits(
    bounds: tuple[int, int, int, int, int],
) -> None:
    """OB-TOK-4, OB-TOK-5: with both limits the compact encoding finds the plain one's
    worst request and token counts, in fewer states."""
    compact, plain = explore_joint(*bounds), explore_joint(*bounds, encoding="plain")
    assert (compact.worst_requests, compact.worst_tokens) == (
        plain.worst_requests, plain.worst_tokens
    )  # fmt: skip
    assert compact.states <= plain.states


def _bound_table(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["bound-table", "--quiet", *args])
    return code, out.getvalue()


def test_OB_TOK_1_bound_table_limit_tokens_prints_the_exact_rows() -> None:
    """OB-TOK-1, OB-TOK-2: `bound-table --limit tokens` prints the rows of the search with the
    request table's keys; the values are the formulas, written out by hand."""
    code, out = _bound_table("--limit", "tokens", "--servers", "2", "--cap", "1-2",
                             "--weight", "1-2", "--json")  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert {k for row in rows for k in row} >= {"protocol", "servers", "cap", "weight",
                                                "worst_total", "bound", "states"}  # fmt: skip
    assert [(r["cap"], r["weight"], r["worst_total"], r["bound"]) for r in rows] == [
        (1, 1, 2, 2), (1, 2, 4, 4), (2, 1, 3, 3), (2, 2, 5, 5)
    ]  # fmt: skip
    code, out = _bound_table("--limit", "tokens", "--rule", "fits", "--servers", "2",
                             "--cap", "2", "--weight", "2", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)[0]["worst_total"] == 4


def test_OB_TOK_4_bound_table_limit_both() -> None:
    """OB-TOK-4: `--limit both` reports each count against its own bound."""
    code, out = _bound_table("--limit", "both", "--servers", "2", "--cap", "2", "--weight", "1",
                             "--token-cap", "2", "--prompt", "1", "--json")  # fmt: skip
    assert code == 0
    (row,) = json.loads(out)
    assert (row["worst_total"], row["bound"], row["worst_tokens"], row["token_bound"]) == (
        3, 3, 3, 3
    )  # fmt: skip
    code, _ = _bound_table("--limit", "both", "--protocol", "write-then-check", "--cap", "1")
    assert code == 2


def test_OB_TOK_1_bound_table_flags_a_row_over_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """OB-TOK-1: a search that finds more than the bound makes the command exit 1."""
    real = explore_tokens

    def one_more(*args: object) -> TokenRow:
        found = real(*args)  # type: ignore[arg-type]
        return dataclasses.replace(found, worst_tokens=found.worst_tokens + 1)

    monkeypatch.setattr(bound_table_command, "explore_tokens", one_more)
    code, _ = _bound_table("--limit", "tokens", "--servers", "1", "--cap", "1", "--weight", "1")
    assert code == 1


def test_OB_TOK_5_bound_table_state_limit_and_progress(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OB-TOK-5, E2E-CLI-4: `--max-states` still stops a token row (exit 2, one line naming
    the requirement, the encoding and the instance); each row reports its states."""
    code = main(["bound-table", "--quiet", "--limit", "tokens", "--servers", "3", "--cap", "3",
                 "--weight", "2", "--max-states", "1000"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == (
        "queueref bound-table: OB-TOK-1: more than 1000 states (compact encoding, N=3, Mt=3, "
        "P=2); lower the bounds or raise the state limit"
    )
    monkeypatch.setattr(bound_table_command, "show_progress", lambda args: True)
    assert main(["bound-table", "--limit", "tokens", "--servers", "2", "--cap", "1",
                 "--weight", "1", "--json"]) == 0  # fmt: skip
    assert re.search(r"^queueref bound-table: N=2 Mt=1 P=1: \d+ states in \d+\.\d\d s",
                     capsys.readouterr().err, re.MULTILINE)  # fmt: skip


# Every joint instance the plain encoding searches in well under a second: OB-TOK-6's
# comparison (N = 1 and 2 over M 0-3, W 1-2, Mt 0-2, P 1; N = 2 with P = 2; N = 3 small).
JOINT_PLAIN = [(n, m, w, mt, 1) for n in (1, 2) for m in range(4) for w in (1, 2)
               for mt in range(3)]  # fmt: skip
JOINT_PLAIN += [(2, 2, 1, 1, 2), (2, 2, 2, 2, 2), (2, 1, 2, 2, 2), (3, 1, 1, 1, 1),
                (3, 1, 1, 2, 1), (3, 2, 1, 0, 1), (3, 0, 2, 2, 2)]  # fmt: skip


def _joint_mismatches(
    instances: list[tuple[int, int, int, int, int]],
) -> list[tuple[tuple[int, ...], tuple[int, int], tuple[int, int]]]:
    """Where the compact encoding's worst (requests, tokens) differ from the plain one's."""
    out: list[tuple[tuple[int, ...], tuple[int, int], tuple[int, int]]] = []
    for bounds in instances:
        compact, plain = explore_joint(*bounds), explore_joint(*bounds, encoding="plain")
        assert compact.states <= plain.states, bounds
        found = (compact.worst_requests, compact.worst_tokens)
        if found != (plain.worst_requests, plain.worst_tokens):
            out.append((bounds, found, (plain.worst_requests, plain.worst_tokens)))
    return out


def test_OB_TOK_6_own_slot_read_with_the_next_step_finds_the_plain_worst() -> None:
    """OB-TOK-6: reading the own slot in the same step as what follows it finds the plain
    encoding's worst request and token counts on every instance the plain one searches
    quickly."""
    assert _joint_mismatches(JOINT_PLAIN) == []


def test_OB_TOK_6_an_unsound_merge_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """OB-TOK-6: the comparison has teeth. The merge carried all the way -- a check reads
    every slot and decides in one step, the locked protocol -- loses the straddle of
    OB-BOUND-1, and the comparison reports a smaller worst than the plain encoding's."""
    real = token_compact.joint_reads

    def whole_check_at_once(server: Any, own: int, num: int, can_start: bool) -> Any:
        reads, _ = real(server, own, num, can_start)
        if not reads:
            return reads, False
        first = reads[0][1] * num + reads[0][0]
        return tuple((r % num, r // num) for r in range(first, 2 * num)), True

    monkeypatch.setattr(token_compact, "joint_reads", whole_check_at_once)
    found = _joint_mismatches([(2, 2, 1, 2, 1), (2, 2, 2, 2, 1), (3, 1, 1, 1, 1)])
    assert [row[0] for row in found] == [(2, 2, 1, 2, 1), (2, 2, 2, 2, 1), (3, 1, 1, 1, 1)]
    assert all(row[1] < row[2] for row in found)


@pytest.mark.parametrize("bounds", [(2, 2, 2, 2, 2), (3, 2, 1, 1, 1), (3, 1, 2, 2, 1)])
def test_OB_TOK_6_the_packed_search_visits_the_tuple_search_states(
    bounds: tuple[int, int, int, int, int],
) -> None:
    """OB-TOK-6: the packed search (`queueref.verify.packed`) visits as many states as the
    breadth-first search of `joint_successors` over tuples, with the same worst counts."""
    servers, cap, weight, limit, prompt = bounds
    start: tuple[Any, ...] = ((0, (), None),) * servers
    states = list(search.reachable(
        start,
        lambda s: token_compact.joint_successors(s, cap, weight, limit, prompt),
    ))  # fmt: skip
    row = explore_joint(*bounds)
    assert row.states == len(states)
    assert row.worst_requests == max(sum(d + len(pre) for d, pre, _ in s) for s in states)
    assert row.worst_tokens == max(sum(sum(pre) for _, pre, _ in s) for s in states)


@pytest.mark.guard
def test_OB_TOK_6_the_packed_search_keeps_the_state_limit() -> None:
    """OB-TOK-4, OB-TOK-6: past `max_states` the packed search stops with the message."""
    with pytest.raises(ValueError, match=r"^OB-TOK-4: more than 50 states \(compact encoding"):
        explore_joint(3, 2, 2, 2, 1, max_states=50)
