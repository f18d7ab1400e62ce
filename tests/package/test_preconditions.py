"""`queueref.preconditions.require`: one declaration, the same refusal with contracts on and off.

With contracts on it is icontract's precondition; under `python -O` (a child process) the
same condition is kept as a plain check. The -O child also runs a broken variant (a kept
check that never refuses) to show that the assertions on it can fail.
"""

from __future__ import annotations

import os
import subprocess
import sys

import icontract
import pytest

from queueref.preconditions import require

CHILD = r"""
import sys
assert not __debug__
from queueref.preconditions import require

@require(lambda n: isinstance(n, int) and n >= 1, "X-1: n is an int >= 1")
@require(lambda n, limit: limit is None or n <= limit, "X-2: n is within the limit",
         error=OverflowError)
def admit(n, limit=None, *, note=""):
    return n

def refused(call):
    try:
        call()
    except Exception as caught:
        return f"{type(caught).__name__}: {caught}"
    return "accepted"

print(refused(lambda: admit(0)))           # the top condition
print(refused(lambda: admit(0, -1)))        # both fail: the bottom one is named, as icontract
print(refused(lambda: admit(3, limit=2)))   # by keyword, its own error type
print(refused(lambda: admit(2, 2)))         # by position
print(refused(lambda: admit()))             # a missing argument: the call's own TypeError
print(len(admit.__kept_preconditions__), hasattr(admit.__wrapped__, "__wrapped__"))  # one wrapper
@require(lambda first, flag: first > 0 or flag, "X-3: first is positive unless flagged")
def many(first, *rest, flag=False, **extra):
    return first, rest, flag, extra

print(many(1, 2, 3, flag=False, x=4), refused(lambda: many(0, 2)), many(0, flag=True))
if len(sys.argv) > 1:  # the broken variant: a kept check that never refuses
    never = require(lambda n: True, "X-1: n is an int >= 1")(lambda n: n)
    print(refused(lambda: never(0)))
"""


def _child(*args: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("PYTHONOPTIMIZE", None)
    done = subprocess.run(
        [sys.executable, "-O", "-c", CHILD, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


EXPECTED = [
    "ValueError: X-1: n is an int >= 1: n was 0",
    "OverflowError: X-2: n is within the limit: n was 0, limit was -1",
    "OverflowError: X-2: n is within the limit: n was 3, limit was 2",
    "accepted",
    "TypeError: admit() missing 1 required positional argument: 'n'",
    "2 False",
    "(1, (2, 3), False, {'x': 4}) ValueError: X-3: first is positive unless flagged: "
    "first was 0, flag was False (0, (), True, {})",
]


@pytest.mark.multiprocess
def test_a_kept_precondition_refuses_under_O_with_the_contracts_error() -> None:
    """ADM-ALLOC-1: under -O the declared condition alone refuses, with its error and text."""
    assert _child() == EXPECTED


@pytest.mark.multiprocess
def test_the_assertion_fails_on_a_kept_check_that_never_refuses() -> None:
    """ADM-ALLOC-1: the broken variant is accepted, so the refusals above are the check's."""
    assert _child("broken")[-1] == "accepted"


@pytest.mark.contracts
def test_with_contracts_on_it_is_icontracts_precondition() -> None:
    """ADM-ALLOC-1: with contracts on, the error is icontract's, raised by icontract."""

    @require(lambda n: n >= 1, "X-1: n >= 1")
    def admit(n: int) -> int:
        return n

    assert admit(1) == 1
    with pytest.raises(ValueError, match="X-1: n >= 1") as caught:
        admit(0)
    assert "n was 0" in str(caught.value)
    assert not hasattr(admit, "__kept_preconditions__")
    checker = icontract._checkers.find_checker(admit)  # icontract's own wrapper
    assert checker is not None and len(checker.__preconditions__) == 1  # type: ignore[attr-defined]


@pytest.mark.contracts
def test_stacked_conditions_are_checked_bottom_first_in_both_modes() -> None:
    """ADM-ALLOC-1: with contracts on, the call that breaks both of the -O child's stacked
    conditions is refused by the same one, the bottom (`EXPECTED[1]`)."""

    @require(lambda n: isinstance(n, int) and n >= 1, "X-1: n is an int >= 1")
    @require(
        lambda n, limit: limit is None or n <= limit,
        "X-2: n is within the limit",
        error=OverflowError,
    )
    def admit(n: int, limit: int | None = None) -> int:
        return n

    with pytest.raises(OverflowError, match="X-2: n is within the limit") as caught:
        admit(0, -1)
    assert EXPECTED[1].startswith("OverflowError: X-2")
    assert "n was 0" in str(caught.value) and "limit was -1" in str(caught.value)
