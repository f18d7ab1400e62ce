"""One admission check: its decisions, and `AdmissionCheck`, the check one read at a time.

A check makes up to two passes. The request pass reads counter 0 of every slot (or
the local count) and `decide_requests` decides it; then, with a token limit, the
token pass reads counter 1 of every slot (or the own tokens) and `decide_tokens`
decides it. In write-then-check the reservations are written before the first read
(`reserve`), and every way out but an admission gives them back (`give_back`).
`AdmissionController.check_admission` reads each pass at once; `AdmissionCheck`
(from `start_check`) reads one slot per step, so that models and tests can
interleave other servers between two reads. Both decide with the functions below.
Read after `queueref.admission.protocol` and before `queueref.admission.controller`.
"""

from __future__ import annotations

import typing

from queueref.admission import protocol
from queueref.admission.tracker import RequestTracker
from queueref.errors import MaxQueuedTokensError, QueueOverflowError


def reserve(
    tracker: RequestTracker, n: int, tokens: int, reserved: bool, tokens_reserved: bool
) -> None:
    """Write a check's reservations before its first read (write-then-check)."""
    if reserved:
        tracker.reserve(n)  # ADM-CTL-9: in the own slot before the first read
    if tokens_reserved:
        tracker.reserve_tokens(tokens)  # ADM-TOK-5: likewise in counter 1


def decide_requests(rule: protocol.Protocol, view: int, n: int, limit: int) -> None:
    """The decision on a finished request pass: return to go on, or raise."""
    # ADM-CTL-5: with M = 0 no view + n (n >= 1) and no reservation fits.
    if not protocol.admits(rule, view, n, limit):
        raise QueueOverflowError(view=view, n=n, limit=limit)


def decide_tokens(
    rule: protocol.TokenRule, queued: int, tokens: int, limit: int, reserved: bool
) -> None:
    """The decision on a finished token pass: a held token reservation is kept iff the
    sum read is within the limit, else the token rule decides."""  # ADM-TOK-3, ADM-TOK-5
    if reserved:
        admitted = protocol.keeps_reservation(queued, limit)
    else:
        admitted = protocol.admits_tokens(rule, queued, tokens, limit)
    if not admitted:
        raise MaxQueuedTokensError(queued_tokens=queued, limit=limit)


def give_back(
    tracker: RequestTracker, n: int, tokens: int, reserved: bool, tokens_reserved: bool
) -> None:
    """Write a check's reservations back: the way out of every check but an admission."""
    if reserved:
        tracker.release_reservation(n)
    if tokens_reserved:
        tracker.release_token_reservation(tokens)


class CheckSettings(typing.Protocol):
    """What a check reads of its controller (`AdmissionController` is one)."""

    @property
    def tracker(self) -> RequestTracker: ...
    @property
    def max_num_queued_reqs(self) -> int | None: ...
    @property
    def max_num_queued_tokens(self) -> int | None: ...
    @property
    def token_rule(self) -> protocol.TokenRule: ...
    def read_request_slot(self, index: int) -> int: ...
    def read_token_slot(self, index: int) -> int: ...
    @property  # last: below here `protocol` names this property, not the module
    def protocol(self) -> protocol.Protocol: ...


class AdmissionCheck:
    """One admission check of one server, one `__getitem__` per `read_next()`: counter 0
    of every slot in index order, then (with a token limit) counter 1 of every slot.
    The request pass is decided before the first token read (vLLM 0.30.0's order: a
    request the request limit rejects reads no tokens), the token pass by `decide()`."""

    __slots__ = (
        "_controller", "_n", "_tokens", "_state", "_token_state", "_num_slots",
        "_num_token_slots", "_reserved", "_tokens_reserved", "_open",
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
        self._n = n
        self._tokens = tokens
        self._state = protocol.Check(n)
        self._token_state = protocol.Check(tokens)
        self._num_slots = num_slots
        self._num_token_slots = num_token_slots
        self._reserved = reserved
        self._tokens_reserved = tokens_reserved
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
        """How many slots the request pass reads (0: no request limit, 1: the local count)."""
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

    def _close(self) -> None:
        """Close the check, giving the reservations back if it holds them."""
        if self._open:  # a closed check holds nothing (`holds_reservation`)
            self._open = False
            tracker = self._controller.tracker
            give_back(tracker, self._n, self._tokens, self._reserved, self._tokens_reserved)

    def _pass_request_limit(self) -> int | None:
        """The request decision on the finished request pass (None: no limit); taken again
        at `decide`, where it decides as before: the view is the same sum."""
        limit = self._controller.max_num_queued_reqs
        if limit is not None:
            decide_requests(self._controller.protocol, self._state.view, self._n, limit)
        return None if limit is None else self._state.view

    def read_next(self) -> int:
        """Read the next counter (the request decision before the first token read). A
        rejection, a corrupt value or a failing buffer gives the reservations back."""
        self._check_step(deciding=False)
        try:
            if not self._state.done(self._num_slots):
                value = self._controller.read_request_slot(self._state.next_slot)
                self._state = self._state.read(value)
                return value
            self._pass_request_limit()
            value = self._controller.read_token_slot(self._token_state.next_slot)
        except BaseException:
            self._close()
            raise
        self._token_state = self._token_state.read(value)
        return value

    def decide(self) -> int | None:
        """Admit (return the view read, None without a request limit) or raise. A rejection
        gives the reservations back; a write-then-check admission keeps them, for the
        tracker registration to take over."""
        self._check_step(deciding=True)
        limit, queued = self._controller.max_num_queued_tokens, self._token_state.view
        try:
            view = self._pass_request_limit()
            if limit is not None:
                rule = self._controller.token_rule
                decide_tokens(rule, queued, self._tokens, limit, self._tokens_reserved)
        except BaseException:
            self._close()
            raise
        self._open = False
        return view

    def _check_step(self, *, deciding: bool) -> None:
        """The order of the steps, in both modes: a read past the last slot would read no
        slot, a decision on part of them would admit on a sum that is not the check's."""
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
        self._close()
