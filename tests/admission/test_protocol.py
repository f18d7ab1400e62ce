"""The step functions of queueref.admission.protocol pinned on hand-computed values.

The exhaustive explorers (tests/verify/test_ob_*.py) check these functions on every small
instance, but take minutes per mutant; `make mutation` runs the fastest covering test
first, so these direct checks kill a wrong operator or constant in a fraction of a second.
Every expected value here is worked out by hand from specs/admission.md, not by the code.
"""

from __future__ import annotations

import dataclasses

import pytest

from queueref.admission.protocol import (
    Check,
    Protocol,
    TokenRule,
    _read_all,
    accumulate,
    admits,
    admits_check_then_write,
    admits_tokens,
    bound,
    keeps_reservation,
    overshoot_bound,
    parse_protocol,
)

CTW, WTC = Protocol.CHECK_THEN_WRITE, Protocol.WRITE_THEN_CHECK


@pytest.mark.parametrize(
    ("servers", "cap", "max_n", "worst"),
    [
        (1, 4, 2, 4),  # one server: the cap
        (3, 4, 2, 8),  # 4 + 2 * min(4, 2)
        (3, 2, 5, 6),  # 2 + 2 * min(2, 5)
        (2, 1, 1, 2),  # 1 + 1 * 1
        (4, 3, 3, 12),  # 3 + 3 * 3
    ],
)
def test_overshoot_bound_is_m_plus_n_minus_one_times_min_m_w(
    servers: int, cap: int, max_n: int, worst: int
) -> None:
    """OB-BOUND-1: check-then-write's worst global count `M + (N - 1) * min(M, W)`."""
    assert overshoot_bound(servers, cap, max_n) == worst


def test_bound_of_each_protocol_and_of_its_name() -> None:
    """The worst count of each protocol for N=3, M=4, W=2: 8, the cap 4 twice, N*M=12."""
    assert [bound(p, 3, 4, 2) for p in Protocol] == [8, 4, 4, 12]
    assert bound("check-then-write", 3, 4, 2) == 8  # type: ignore[arg-type]
    assert bound("write-then-check", 3, 4, 2) == 4  # type: ignore[arg-type]
    assert bound(Protocol.LOCAL, 2, 5, 1) == 10


def test_the_decision_rules_at_their_boundaries() -> None:
    """ADM-CTL-3, ADM-CTL-9: admit iff view + n <= cap; write-then-check keeps iff view <= cap;
    locked and local decide as check-then-write."""
    assert admits_check_then_write(2, 2, 4) and not admits_check_then_write(3, 2, 4)
    assert admits_check_then_write(1, 2, 4)  # room to spare: not only an exact fit
    assert keeps_reservation(4, 4) and not keeps_reservation(5, 4) and keeps_reservation(3, 4)
    assert admits(WTC, 4, 2, 4) and not admits(WTC, 5, 2, 4)
    for protocol in (CTW, Protocol.LOCKED, Protocol.LOCAL):
        assert admits(protocol, 2, 2, 4) and not admits(protocol, 3, 2, 4)


def test_reads_add_up_in_index_order() -> None:
    """OB-MODEL-1: a read adds the slot's value; a pass adds them all; a check starts at slot 0 with
    view 0 and is done after the last slot."""
    assert accumulate(3, 4) == 7
    assert _read_all(1, [2, 3]) == 6 and _read_all(5, []) == 5
    check = Check(2)
    assert (check.next_slot, check.view) == (0, 0)
    assert check.read(3) == Check(2, 1, 3) and check.read(3).read(4) == Check(2, 2, 7)
    assert Check(2).done(0) and not Check(2, 1).done(2) and Check(2, 2).done(2)
    assert Check(2, 3).done(2)  # past the last slot is done too


def test_the_token_rules_at_their_boundaries() -> None:
    """ADM-TOK-3: `ge` rejects iff queued >= limit (the new tokens not counted); `fits`
    iff queued + t > limit; a rule given by its name decides the same; an unknown name is
    refused, not read as either rule."""
    assert admits_tokens(TokenRule.GE, 99, 500, 100)
    assert not admits_tokens(TokenRule.GE, 100, 1, 100)
    assert not admits_tokens(TokenRule.GE, 101, 1, 100)  # over the limit, not only at it
    assert admits_tokens(TokenRule.FITS, 80, 10, 100)  # room to spare
    assert admits_tokens(TokenRule.FITS, 90, 10, 100)
    assert not admits_tokens(TokenRule.FITS, 91, 10, 100)
    assert admits_tokens("ge", 99, 500, 100)  # type: ignore[arg-type]
    assert not admits_tokens("fits", 99, 500, 100)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'zz' is not a valid TokenRule"):
        admits_tokens("zz", 0, 1, 100)  # type: ignore[arg-type]


def test_e2e_cli_5_parse_protocol_reads_the_names_and_names_the_choices() -> None:
    """E2E-CLI-5: a protocol is typed by its name; anything else is one line naming it and
    the names of the protocols allowed."""
    assert [parse_protocol(p.value) for p in Protocol] == list(Protocol)
    assert parse_protocol(Protocol.LOCAL, [Protocol.LOCAL]) is Protocol.LOCAL
    every = "check-then-write, write-then-check, locked, local"
    with pytest.raises(ValueError) as caught:
        parse_protocol("fast")
    assert str(caught.value) == f"unknown admission protocol 'fast': expected one of {every}"
    with pytest.raises(ValueError) as caught:
        parse_protocol("locked", [CTW])
    assert str(caught.value) == (
        "unknown admission protocol 'locked': expected one of check-then-write"
    )
    with pytest.raises(ValueError, match="unknown admission protocol 3"):
        parse_protocol(3)


@pytest.mark.parametrize("old", ["shared", "reserve"])
def test_e2e_cli_5_the_old_spellings_are_unknown_names(old: str) -> None:
    """E2E-CLI-5: `shared` and `reserve`, the old spellings of check-then-write and
    write-then-check, name no protocol: they are refused like any unknown name."""
    with pytest.raises(ValueError) as caught:
        parse_protocol(old)
    assert str(caught.value) == (
        f"unknown admission protocol {old!r}: "
        "expected one of check-then-write, write-then-check, locked, local"
    )
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=f"unknown admission protocol {old!r}"):
        bound(old, 3, 4, 2)  # type: ignore[arg-type]


def test_a_check_in_progress_is_an_immutable_value() -> None:
    """OB-MODEL-1: a read gives a new `Check` and leaves the old one as it was, so a model
    can keep (and hash) every state it explored."""
    check = Check(2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.view = 5  # type: ignore[misc]
    assert check.read(3).view == 3 and check.view == 0
    assert len({Check(2, 1, 3), Check(2).read(3)}) == 1
