"""The contracts of `AdmissionController`, declared beside it and attached when
`queueref.admission` is imported (`queueref.admission.contracts`).

`check_admission` is the hot path of every request: its postconditions are the O(1)
checks of `check_admission_postconditions`, wrapped around it with contracts on
(icontract decorators would cost more than the check) and absent under `python -O`.
They are written out here, not through the decision step of
`queueref.admission.protocol`, so that a broken step is caught. The preconditions on
the arguments are declared once with `require` (kept under `python -O`); the bodies
keep only the guards that compute what to say. The postconditions read the controller's
own fields, not its properties: on Python 3.11 each property read is a Python call, and
seven of them cost more than the check they follow.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import icontract

from queueref.admission import protocol
from queueref.admission.controller import MODES, AdmissionController
from queueref.admission.tracker import RequestTracker, tracker_counts
from queueref.preconditions import install, original, require
from queueref.validators import is_int_at_least, is_limit

__all__ = ["check_admission_postconditions", "tracker_matches", "within_token_limit"]

# Members bound once: `Enum.MEMBER` costs about 100 ns on Python 3.11.
_WRITE_THEN_CHECK: Final = protocol.Protocol.WRITE_THEN_CHECK
_GE: Final = protocol.TokenRule.GE


def within_token_limit(
    rule: protocol.TokenRule, reserved: bool, own: int, tokens: int, limit: int
) -> bool:
    """What an admission implies for the own queued tokens, stated apart from the decision.

    The own tokens are part of the view read, so `ge` (view < Mt) implies
    own < Mt, and `fits` or a kept reservation (view + t <= Mt) implies
    own + t <= Mt.
    """
    if rule is _GE and not reserved:
        return own < limit
    return own + tokens <= limit


def check_admission_postconditions(
    controller: AdmissionController,
    n: int,
    num_prompt_tokens: int,
    view: int | None,
    before: tuple[int, int, int, int],
) -> None:
    """Raise `icontract.ViolationError` naming the first postcondition an admission broke.

    `before` is `tracker_counts` of the controller's tracker before the check.
    """  # ADM-CTL-3, -4, -6, -9, ADM-TOK-3, -5
    tracker, limit = controller._tracker, controller._max_num_queued_reqs
    unfinished, reserved, queued_tokens, reserved_tokens = tracker_counts(tracker)
    tokens = n * num_prompt_tokens
    token_limit = controller._max_num_queued_tokens
    reserves_tokens = controller._reserves_tokens
    broken = None
    if unfinished != before[0]:
        broken = "ADM-CTL-6: a check registers nothing"
    elif reserved != before[1] + (n if controller._reserves else 0):
        broken = (
            "ADM-CTL-9: a write-then-check admission keeps its reservation; "
            "check-then-write writes nothing"
        )
    elif reserved_tokens != before[3] + (tokens if reserves_tokens else 0):
        broken = "ADM-TOK-5: a write-then-check admission keeps its token reservation"
    elif (view is None) != (limit is None):
        broken = "ADM-CTL-3: the view is returned iff there is a request limit"
    elif (
        view is not None
        and limit is not None
        and not (view <= limit if controller._protocol is _WRITE_THEN_CHECK else view + n <= limit)
    ):
        broken = (
            "ADM-CTL-3: an admission read view + n <= M (check-then-write) "
            "or view <= M (write-then-check)"
        )
    elif token_limit is not None and not within_token_limit(
        controller._token_rule,
        reserves_tokens,
        queued_tokens,
        tokens,
        token_limit,
    ):
        broken = (
            "ADM-CTL-4, ADM-TOK-3: an admitted request found the own token backlog below its "
            "limit (ge), or the own backlog plus its tokens within it (fits, write-then-check)"
        )
    if broken is not None:
        raise icontract.ViolationError(f"AdmissionController.check_admission: {broken}")


def _cancel_arguments_valid(n: object, num_prompt_tokens: object) -> bool:
    """Whether `n` and `num_prompt_tokens` pass their own preconditions: the give-back
    conditions judge only those, and leave the rest to the preconditions that name them."""
    # ADM-CTL-2, ADM-TOK-3
    return is_int_at_least(n, 1) and is_int_at_least(num_prompt_tokens, 0)


def tracker_matches(tracker: RequestTracker | None, shared_stats: object) -> bool:
    """Whether a controller's tracker refreshes the shared stats it reads (or it has none)."""
    return tracker is None or tracker.shared_stats is shared_stats


def _with_postconditions(check: Any) -> Any:
    """`check_admission` followed by its postconditions (contracts on only)."""
    if not __debug__:
        return check

    @functools.wraps(check)
    def checked(self: AdmissionController, n: int = 1, num_prompt_tokens: int = 1) -> int | None:
        before = tracker_counts(self._tracker)
        view: int | None = check(self, n, num_prompt_tokens)
        check_admission_postconditions(self, n, num_prompt_tokens, view, before)
        return view

    checked.__contract_wrapper__ = _with_postconditions  # type: ignore[attr-defined]
    return checked


@install(AdmissionController)
@_with_postconditions  # ADM-CTL-3, -4, -6, -9, ADM-TOK-3, -5
@original(AdmissionController)
def check_admission() -> None: ...


@install(AdmissionController)
@require(
    lambda max_num_queued_reqs: is_limit(max_num_queued_reqs),
    "ADM-CTL-1: max_num_queued_reqs is None or an int >= 0",
)
@require(
    lambda max_num_queued_tokens: is_limit(max_num_queued_tokens),
    "ADM-CTL-1: max_num_queued_tokens is None or an int >= 0",
)
@require(
    lambda mode: mode in MODES,
    "ADM-CTL-1: mode is 'check-then-write' or 'write-then-check'",
)
@require(
    lambda tracker, shared_stats: tracker_matches(tracker, shared_stats),
    "ADM-CTL-1: the tracker refreshes the same shared stats the controller reads",
)
@original(AdmissionController)
def __init__() -> None: ...


@install(AdmissionController)
@require(lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1")
@icontract.snapshot(lambda self: self.tracker.num_reserved, name="reserved")
@icontract.ensure(
    lambda self, n, OLD, result: (
        self.tracker.num_reserved == OLD.reserved + (n if self.reserves else 0)
    ),
    "ADM-CTL-9: write-then-check writes its reservation first; check-then-write writes nothing",
)
@require(
    lambda num_prompt_tokens: is_int_at_least(num_prompt_tokens, 0),
    "ADM-TOK-3: num_prompt_tokens is an int >= 0",
)
@icontract.snapshot(lambda self: self.tracker.num_reserved_tokens, name="reserved_tokens")
@icontract.ensure(
    lambda self, n, num_prompt_tokens, OLD: (
        self.tracker.num_reserved_tokens
        == OLD.reserved_tokens + (n * num_prompt_tokens if self.reserves_tokens else 0)
    ),
    "ADM-TOK-5: write-then-check writes its tokens first; check-then-write writes none",
)
@icontract.ensure(lambda self, result: result.is_open, "ADM-CTL-7: a started check is open")
@original(AdmissionController)
def start_check() -> None: ...


@install(AdmissionController)
@require(lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1")
@require(
    lambda num_prompt_tokens: is_int_at_least(num_prompt_tokens, 0),
    "ADM-TOK-3: num_prompt_tokens is an int >= 0",
)
@require(
    lambda self, n, num_prompt_tokens: (
        not _cancel_arguments_valid(n, num_prompt_tokens)
        or not self.reserves
        or self.tracker.num_reserved >= n
    ),
    "ADM-CTL-9: only a reservation that is held can be given back",
)
@require(
    lambda self, n, num_prompt_tokens: (
        not _cancel_arguments_valid(n, num_prompt_tokens)
        or not self.reserves_tokens
        or self.tracker.num_reserved_tokens >= n * num_prompt_tokens
    ),
    "ADM-TOK-5: only a token reservation that is held can be given back",
)
@icontract.snapshot(lambda self: self.tracker.num_reserved, name="reserved")
@icontract.snapshot(lambda self: self.tracker.num_reserved_tokens, name="reserved_tokens")
@icontract.ensure(
    lambda self, n, OLD: self.tracker.num_reserved == OLD.reserved - (n if self.reserves else 0),
    "ADM-CTL-9: cancelling gives exactly the reservation back",
)
@icontract.ensure(
    lambda self, n, num_prompt_tokens, OLD: (
        self.tracker.num_reserved_tokens
        == OLD.reserved_tokens - (n * num_prompt_tokens if self.reserves_tokens else 0)
    ),
    "ADM-TOK-5: cancelling gives exactly the token reservation back",
)
@original(AdmissionController)
def cancel_admission() -> None: ...
