"""Ties: requests with equal (priority, arrival_time) (ORC-TIES-1, ORC-TIES-2, ORC-TIES-3).

queueref orders ties by request_id (RQ-REQ-1); a request type whose `<`
compares only (priority, arrival_time) leaves them unordered. Here: the
comparison that accepts any order among ties (`ties="any"`), where two
results part, and the hint a failure prints when they part only on a tie.
No Hypothesis here.
"""

from __future__ import annotations

from typing import Any

from queueref.oracle.handles import Handle


def equal_up_to_ties(actual: Any, expected: Any) -> bool:
    """ORC-TIES-1: the same requests, in the same order except among equal (priority, arrival).

    Two requests, or two sequences of requests whose keys run in the same order
    and whose every run of equal keys holds the same requests.
    """
    if isinstance(actual, Handle) and isinstance(expected, Handle):
        return actual.tie_key == expected.tie_key
    if not (isinstance(actual, tuple) and isinstance(expected, tuple)):
        return False
    if len(actual) != len(expected):
        return False
    if not all(isinstance(h, Handle) for h in (*actual, *expected)):
        return False
    if [h.tie_key for h in actual] != [h.tie_key for h in expected]:
        return False
    start = 0
    for end in range(1, len(actual) + 1):
        if end == len(actual) or actual[end].tie_key != actual[start].tie_key:
            if {id(h) for h in actual[start:end]} != {id(h) for h in expected[start:end]}:
                return False
            start = end
    return True


def first_difference(actual: Any, expected: Any) -> tuple[Handle, Handle] | None:
    """The two requests where `actual` and `expected` part (for the tie hint)."""
    if isinstance(actual, Handle) and isinstance(expected, Handle):
        return actual, expected
    if isinstance(actual, tuple) and isinstance(expected, tuple):
        for mine, theirs in zip(actual, expected, strict=False):
            if mine is not theirs and isinstance(mine, Handle) and isinstance(theirs, Handle):
                return mine, theirs
    return None


def tie_parting(actual: Any, expected: Any) -> tuple[Handle, Handle] | None:
    """ORC-TIES-2: where two results part, when the requests there tie; else None.

    Only a parting between two requests with equal (priority, arrival_time)
    is about ties; two results that differ elsewhere too are not.
    """
    if not equal_up_to_ties(actual, expected):
        return None
    parted = first_difference(actual, expected)
    if parted is None or parted[0].tie_key != parted[1].tie_key:
        return None
    return parted


def tie_hint(mine: Handle, theirs: Handle, made_later: Handle) -> str:
    """ORC-TIES-2, ORC-TIES-3: the line that says the requests tie and how the reference orders.

    `mine` is what the subject gave, `theirs` what the reference gave (the
    smaller request_id), `made_later` the one of the two created later: when
    it is `theirs`, string order is not creation order, and the line says so.
    """
    strings = ""
    if made_later is theirs:
        strings = (
            f"; request ids compare as strings, so {theirs.request_id!r} < "
            f"{mine.request_id!r} although {theirs.name} was made after {mine.name}"
        )
    return (
        f"{mine.name} and {theirs.name} tie: both have (priority, arrival_time) = "
        f"{mine.tie_key!r}, and the reference orders them by request_id (RQ-REQ-1){strings}. "
        "If your request type leaves such ties unordered (its `<` compares only "
        "priority and arrival_time), pass ties='any'."
    )
