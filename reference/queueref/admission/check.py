"""One admission check taken one slot read at a time: `AdmissionCheck`.

`AdmissionController.start_check` makes one; `check_admission` is
`start_check`, `read_next` until `done`, `decide`. Models and tests drive the
steps themselves to interleave other servers between two reads (vLLM PR #54746's
`check_admission` makes the same reads in one go). Read after
`queueref.admission.protocol` (the step functions it applies) and before
`queueref.admission.controller` (which builds it).

A check sees its controller through `CheckSettings`: the limits, the rules and
the counters, nothing else, so this module does not import the controller.
"""

from __future__ import annotations

import typing

from queueref.admission import protocol
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.admission.tracker import RequestTracker
from queueref.errors import MaxQueuedTokensError, QueueOverflowError

__all__ = ["AdmissionCheck", "CheckSettings"]


class CheckSettings(typing.Protocol):
    """What a check reads of its controller (`AdmissionController` is one)."""

    @property
    def tracker(self) -> RequestTracker: ...
    @property
    def shared_stats(self) -> SharedAdmissionStats | None: ...
    @property
    def max_num_queued_reqs(self) -> int | None: ...
    @property
    def max_num_queued_tokens(self) -> int | None: ...
    @property
    def token_rule(self) -> protocol.TokenRule: ...
    @property
    def token_scope(self) -> str: ...
    @property
    def reserves(self) -> bool: ...
    @property
    def reserves_tokens(self) -> bool: ...
    @property  # last: below here `protocol` names this property, not the module
    def protocol(self) -> protocol.Protocol: ...


class AdmissionCheck:
    """One admission check of one server, taken one slot read at a time.

    `read_next()` reads exactly one counter (one `__getitem__`): first counter 0
    of every slot in index order (the request pass), then -- with a token limit
    -- counter 1 of every slot in index order (the token pass). The request
    limit is decided when its pass ends, before the first token read (vLLM
    0.30.0's order: a request rejected by the request limit reads no tokens);
    `decide()` applies the token decision once every read is made. In
    write-then-check the reservations (of `n` in counter 0 and of the request's
    tokens in counter 1) are already in the own slot when the check is made,
    and every way out but admission gives them back.
    """

    __slots__ = (
        "_controller", "_stats", "_n", "_tokens", "_state", "_token_state", "_num_slots",
        "_num_token_slots", "_reserved", "_tokens_reserved", "_request_passed", "_open",
    )  # fmt: skip

    def __init__(
        self,
        controller: CheckSettings,
        n: int,
        num_slots: int,
        reserved: bool,
        tokens: int = 0,
        num_token_slots: int = 0,
        tokens_reserved: bool = False,
    ) -> None:
        self._controller = controller
        self._stats = controller.shared_stats
        self._n = n
        self._tokens = tokens
        self._state = protocol.Check(n)
        self._token_state = protocol.Check(tokens)
        self._num_slots = num_slots
        self._num_token_slots = num_token_slots
        self._reserved = reserved
        self._tokens_reserved = tokens_reserved
        self._request_passed = False
        self._open = True

    @property
    def n(self) -> int:
        """The weight of the request being checked."""
        return self._n

    @property
    def tokens(self) -> int:
        """The prompt tokens the request adds: `n * num_prompt_tokens`."""
        return self._tokens

    @property
    def next_slot(self) -> int:
        """The slot the next read of the request pass reads."""
        return self._state.next_slot

    @property
    def num_slots(self) -> int:
        """How many slots this check reads (0 without a request limit, 1 for the local count)."""
        return self._num_slots

    @property
    def view(self) -> int:
        """The sum of the counter-0 values read so far."""
        return self._state.view

    @property
    def next_token_slot(self) -> int:
        """The slot the next read of the token pass reads."""
        return self._token_state.next_slot

    @property
    def num_token_slots(self) -> int:
        """How many counters 1 the token pass reads (0: no token limit, 1: the local count)."""
        return self._num_token_slots

    @property
    def token_view(self) -> int:
        """The sum of the queued tokens read so far."""
        return self._token_state.view

    @property
    def reads(self) -> int:
        """How many reads this check has made, in both passes."""
        return self._state.next_slot + self._token_state.next_slot

    @property
    def done(self) -> bool:
        """Every slot of both passes has been read."""
        return self._state.done(self._num_slots) and self._token_state.done(self._num_token_slots)

    @property
    def is_open(self) -> bool:
        """Neither decided nor abandoned yet."""
        return self._open

    @property
    def holds_reservation(self) -> bool:
        """Whether the own slot holds this check's reservation of `n` right now."""
        return self._open and self._reserved

    @property
    def holds_token_reservation(self) -> bool:
        """Whether counter 1 of the own slot holds this check's `tokens` right now."""
        return self._open and self._tokens_reserved

    def _give_back(self) -> None:
        """Close the check; write the reservations back if held."""
        if self._open:
            self._open = False
            tracker = self._controller.tracker
            if self._reserved:
                self._reserved = False
                tracker.release_reservation(self._n)
            if self._tokens_reserved:
                self._tokens_reserved = False
                tracker.release_token_reservation(self._tokens)

    def _pass_request_limit(self) -> int | None:
        """The request decision on the finished request pass (None: no limit)."""
        controller = self._controller
        limit = controller.max_num_queued_reqs
        if limit is None:
            return None
        # ADM-CTL-5: with M = 0 no view + n (n >= 1) and no reservation fits.
        view = self._state.view
        if not self._request_passed and not protocol.admits(
            controller.protocol, view, self._n, limit
        ):
            raise QueueOverflowError(view=view, n=self._n, limit=limit)
        self._request_passed = True
        return view

    def _read_tokens(self) -> int:
        """Counter 1 of the next slot (shared) or the own tokens (local)."""
        if self._controller.token_scope == "shared":
            assert self._stats is not None  # a shared scope is only built with stats
            return self._stats.read_tokens_slot(self._token_state.next_slot)
        tracker = self._controller.tracker
        # ADM-RISK-2: the local scope reads the server's own tokens, never counter 1.
        return tracker.get_num_queued_tokens() + tracker.num_reserved_tokens

    def read_next(self) -> int:
        """Read the next counter: one `__getitem__` of counter 0, then of counter 1.

        Without shared stats the single "slot" of the request pass is the local
        count (unfinished requests plus outstanding reservations); in the local
        token scope the single token "slot" is the own queued tokens. The first
        token read is preceded by the request decision: a `QueueOverflowError`
        there reads no token. A rejection, a corrupt value or a failing buffer
        gives the reservations back and raises.
        """
        self._check_step(deciding=False)
        try:
            if not self._state.done(self._num_slots):
                stats = self._stats
                if stats is None:
                    tracker = self._controller.tracker
                    value = tracker.get_num_unfinished_requests() + tracker.num_reserved
                else:
                    value = stats.read_slot(self._state.next_slot)
                self._state = self._state.read(value)
                return value
            self._pass_request_limit()
            value = self._read_tokens()
        except BaseException:
            self._give_back()
            raise
        self._token_state = self._token_state.read(value)
        return value

    def decide(self) -> int | None:
        """Admit (return the view read, None without a request limit) or raise.

        The request limit first (`QueueOverflowError`), then the token limit
        (`MaxQueuedTokensError`) on the token view. A rejection gives
        the reservations back, so it leaves every count as it was; an admission
        in write-then-check keeps them, for the tracker registration to take over.
        """
        self._check_step(deciding=True)
        controller = self._controller
        try:
            view = self._pass_request_limit()
            token_limit = controller.max_num_queued_tokens
            if token_limit is not None:
                queued = self._token_state.view
                if not _admits_tokens(controller, queued, self._tokens, self._tokens_reserved):
                    raise MaxQueuedTokensError(queued_tokens=queued, limit=token_limit)
        except BaseException:
            self._give_back()
            raise
        self._open = False
        return view

    def _check_step(self, *, deciding: bool) -> None:
        """The order of the steps, kept under `python -O` (the preconditions say the same
        with contracts on): a read past the last slot would read a slot that is not there,
        and a decision on part of the slots would admit on a sum that is not the check's."""
        if not self._open:
            raise RuntimeError(
                "ADM-CTL-7: the check is still open: this one was decided or abandoned"
            )
        if deciding and not self.done:
            raise RuntimeError(
                "ADM-CTL-7: decide only after every slot is read: "
                f"{self.reads} of {self._num_slots + self._num_token_slots} reads made"
            )
        if not deciding and self.done:
            raise RuntimeError("ADM-CTL-7: a slot is left to read: every slot is read; decide")

    def abandon(self) -> None:
        """Close the check without deciding, giving the reservations back."""
        self._give_back()


def _admits_tokens(
    controller: CheckSettings, queued: int, tokens: int, tokens_reserved: bool
) -> bool:
    """The token decision step on the tokens read."""  # ADM-TOK-3, ADM-TOK-5
    limit = controller.max_num_queued_tokens
    assert limit is not None  # only called with a token limit
    if tokens_reserved:
        return protocol.keeps_reservation(queued, limit)
    return protocol.admits_tokens(controller.token_rule, queued, tokens, limit)
