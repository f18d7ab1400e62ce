"""What an admission check promises, stated apart from the check that decides.

The controller's `check_admission` runs these O(1) postconditions under
`if __debug__` (icontract decorators would cost more than the check), and its
constructor asks `tracker_matches` as a precondition. They are written out
here, not through the decision step of `queueref.admission.protocol`, so that a
broken step is caught. Read after `queueref.admission.check`, before
`queueref.admission.controller`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import icontract

from queueref.admission import protocol
from queueref.admission.tracker import RequestTracker, tracker_counts

if TYPE_CHECKING:
    from queueref.admission.check import CheckSettings

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
    controller: CheckSettings,
    n: int,
    num_prompt_tokens: int,
    view: int | None,
    before: tuple[int, int, int, int],
) -> None:
    """Raise `icontract.ViolationError` naming the first postcondition an admission broke.

    `before` is `tracker_counts` of the controller's tracker before the check.
    """  # ADM-CTL-3, -4, -6, -9, ADM-TOK-3, -5
    tracker, limit = controller.tracker, controller.max_num_queued_reqs
    unfinished, reserved, queued_tokens, reserved_tokens = tracker_counts(tracker)
    tokens = n * num_prompt_tokens
    token_limit = controller.max_num_queued_tokens
    reserves_tokens = controller.reserves_tokens
    broken = None
    if unfinished != before[0]:
        broken = "ADM-CTL-6: a check registers nothing"
    elif reserved != before[1] + (n if controller.reserves else 0):
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
        and not (view <= limit if controller.protocol is _WRITE_THEN_CHECK else view + n <= limit)
    ):
        broken = (
            "ADM-CTL-3: an admission read view + n <= M (check-then-write) "
            "or view <= M (write-then-check)"
        )
    elif token_limit is not None and not within_token_limit(
        controller.token_rule,
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


def tracker_matches(tracker: RequestTracker | None, shared_stats: object) -> bool:
    """Whether a controller's tracker refreshes the shared stats it reads (or it has none)."""
    return tracker is None or tracker.shared_stats is shared_stats
