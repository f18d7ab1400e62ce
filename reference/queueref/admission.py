"""Admission control of one API server: `AdmissionController` and its step-wise check.

Models `AsyncLLM.check_admission` of `vllm/v1/engine/async_llm.py` (vLLM
PR #54746). The semantics are stated in `specs/admission.md`. The shared
counters are in `queueref.shared_stats`, the errors in `queueref.errors`, the
argument checks in `queueref.validators`; this module re-exports them, so
`from queueref.admission import SharedAdmissionStats` (and the other names
below) keeps working.

Deliberate divergences from vLLM:

* A check reads the slots strictly one `__getitem__` per slot, in index order,
  through `queueref.models.protocol.Check`, and is available step by step
  (`AdmissionController.start_check`) so that models and tests can interleave
  other servers between two reads.
* write-then-check (`mode="write-then-check"`, formerly `"reserve"`) is
  queueref's addition: a hard global cap at the price of spurious
  rejections. The default check-then-write is upstream's.
* Limits are validated at construction (upstream validates them in
  `SchedulerConfig`): negative or non-integer limits are a `ValueError`.
"""

from __future__ import annotations

from typing import Final, Literal

import icontract

from queueref.errors import (
    AdmissionCounterError,
    AdmissionRejected,
    MaxQueuedTokensError,
    QueueOverflowError,
)
from queueref.models import protocol
from queueref.shared_stats import (
    CONFIG_KEY,
    AdmissionCounterBuffer,
    SharedAdmissionStats,
    allocate_admission_counters,
    is_private_buffer,
)
from queueref.tracker import RequestTracker
from queueref.validators import is_index, is_int, is_int_at_least, is_limit

__all__ = [
    "CONFIG_KEY",
    "MODES",
    "AdmissionCheck",
    "AdmissionController",
    "AdmissionCounterBuffer",
    "AdmissionCounterError",
    "AdmissionMode",
    "AdmissionRejected",
    "MaxQueuedTokensError",
    "QueueOverflowError",
    "SharedAdmissionStats",
    "allocate_admission_counters",
    "is_index",
    "is_int",
    "is_int_at_least",
    "is_limit",
    "is_private_buffer",
    "is_token_backlog_full",
]

#: How `mode=` may be spelled: the protocol names, then the deprecated aliases.
AdmissionMode = Literal["check-then-write", "write-then-check", "shared", "reserve"]

#: The protocols an `AdmissionController` runs (locked and local are built around it).
CONTROLLER_PROTOCOLS: Final = (
    protocol.Protocol.CHECK_THEN_WRITE,
    protocol.Protocol.WRITE_THEN_CHECK,
)

#: Every accepted spelling of `mode=` and the protocol it runs (ADM-CTL-1).
MODES: Final[dict[str, protocol.Protocol]] = {
    name: protocol.parse_protocol(name) for name in protocol.spellings(CONTROLLER_PROTOCOLS)
}


def is_token_backlog_full(queued_tokens: int, limit: int | None) -> bool:
    """The token rule: reject iff a limit is set and `queued_tokens >= limit`."""
    return limit is not None and queued_tokens >= limit


# ---------------------------------------------------------------------------
# The controller
# ---------------------------------------------------------------------------


class AdmissionCheck:
    """One admission check of one server, taken one slot read at a time.

    Made by `AdmissionController.start_check`; `read_next()` reads exactly one
    slot (one `__getitem__`, counter 0, in index order, each slot once);
    `decide()` applies the protocol's decision once every slot is read.
    `check_admission` is `start_check` + `read_next` until `done` + `decide`;
    tests and models drive the steps themselves to interleave other servers.
    In write-then-check the reservation is already in the own slot when the
    check is made, and every way out but admission gives it back.
    """

    __slots__ = ("_controller", "_stats", "_n", "_state", "_num_slots", "_reserved", "_open")

    def __init__(
        self, controller: AdmissionController, n: int, num_slots: int, reserved: bool
    ) -> None:
        self._controller = controller
        self._stats = controller.shared_stats
        self._n = n
        self._state = protocol.Check(n)
        self._num_slots = num_slots
        self._reserved = reserved
        self._open = True

    @property
    def n(self) -> int:
        """The weight of the request being checked."""
        return self._n

    @property
    def next_slot(self) -> int:
        """The slot the next read reads."""
        return self._state.next_slot

    @property
    def num_slots(self) -> int:
        """How many slots this check reads (0 without a request limit, 1 for the local count)."""
        return self._num_slots

    @property
    def view(self) -> int:
        """The sum of the values read so far."""
        return self._state.view

    @property
    def done(self) -> bool:
        """Every slot has been read."""
        return self._state.done(self._num_slots)

    @property
    def is_open(self) -> bool:
        """Neither decided nor abandoned yet."""
        return self._open

    @property
    def holds_reservation(self) -> bool:
        """Whether the own slot holds this check's reservation right now."""
        return self._open and self._reserved

    def _give_back(self) -> None:
        """Close the check; write the reservation back if one is held."""
        if self._open:
            self._open = False
            if self._reserved:
                self._reserved = False
                self._controller.tracker.release_reservation(self._n)

    @icontract.require(lambda self: self.is_open, "ADM-CTL-7: the check is still open")
    @icontract.require(lambda self: not self.done, "ADM-CTL-7: a slot is left to read")
    @icontract.snapshot(lambda self: self.next_slot, name="slot")
    @icontract.ensure(
        lambda self, OLD: self.next_slot == OLD.slot + 1,
        "ADM-CTL-7: one read advances by exactly one slot",
    )
    def read_next(self) -> int:
        """Read the next slot: one `__getitem__` of counter 0 of that slot.

        Without shared stats the single "slot" is the local count (unfinished
        requests plus outstanding reservations). A corrupt value or a failing
        buffer gives the reservation back and raises.
        """
        try:
            stats = self._stats
            if stats is None:
                tracker = self._controller.tracker
                value = tracker.get_num_unfinished_requests() + tracker.num_reserved
            else:
                value = stats.read_slot(self._state.next_slot)
        except BaseException:
            self._give_back()
            raise
        self._state = self._state.read(value)
        return value

    @icontract.require(lambda self: self.is_open, "ADM-CTL-7: the check is still open")
    @icontract.require(lambda self: self.done, "ADM-CTL-7: decide only after every slot is read")
    @icontract.ensure(lambda self: not self.is_open, "ADM-CTL-7: a decided check is closed")
    def decide(self) -> int | None:
        """Admit (return the view read, None without a request limit) or raise.

        The request limit first (`QueueOverflowError`), then the token limit
        (`MaxQueuedTokensError`). A rejection gives a reservation
        back, so it leaves every count as it was; an admission in
        write-then-check keeps it, for the tracker registration to take over.
        """
        controller = self._controller
        try:
            limit = controller.max_num_queued_reqs
            view: int | None = None
            if limit is not None:
                # ADM-CTL-5: with M = 0 no view + n (n >= 1) and no reservation fits.
                view = self._state.view
                if not protocol.admits(controller.protocol, view, self._n, limit):
                    raise QueueOverflowError(view=view, n=self._n, limit=limit)
            token_limit = controller.max_num_queued_tokens
            # ADM-RISK-2: the server's own queued tokens, never counter 1 of any slot.
            queued_tokens = controller.tracker.get_num_queued_tokens()
            if is_token_backlog_full(queued_tokens, token_limit):
                raise MaxQueuedTokensError(queued_tokens=queued_tokens, limit=token_limit)
        except BaseException:
            self._give_back()
            raise
        self._open = False
        return view

    def abandon(self) -> None:
        """Close the check without deciding, giving a reservation back."""
        self._give_back()


def _tracker_matches(tracker: RequestTracker | None, shared_stats: object) -> bool:
    return tracker is None or tracker.shared_stats is shared_stats


class AdmissionController:
    """Per-server admission control: `check_admission(n)` admits or raises.

    `mode="check-then-write"` (default) is upstream's protocol: read the count
    (the global sum of the shared slots, or the local unfinished count), admit
    iff `count + n <= max_num_queued_reqs`; the caller's tracker registration
    then writes the own slot. `mode="write-then-check"`: add `n` to
    the own slot first, read, keep the reservation iff the sum read is
    `<= max_num_queued_reqs`, else write it back and reject.
    """

    @icontract.require(
        lambda max_num_queued_reqs: is_limit(max_num_queued_reqs),
        "ADM-CTL-1: max_num_queued_reqs is None or an int >= 0",
        error=ValueError,
    )
    @icontract.require(
        lambda max_num_queued_tokens: is_limit(max_num_queued_tokens),
        "ADM-CTL-1: max_num_queued_tokens is None or an int >= 0",
        error=ValueError,
    )
    @icontract.require(
        lambda mode: mode in MODES,
        "ADM-CTL-1: mode is 'check-then-write' or 'write-then-check' (or an old alias)",
        error=ValueError,
    )
    @icontract.require(
        lambda tracker, shared_stats: _tracker_matches(tracker, shared_stats),
        "ADM-CTL-1: the tracker refreshes the same shared stats the controller reads",
        error=ValueError,
    )
    def __init__(
        self,
        max_num_queued_reqs: int | None = None,
        max_num_queued_tokens: int | None = None,
        tracker: RequestTracker | None = None,
        shared_stats: SharedAdmissionStats | None = None,
        mode: AdmissionMode | protocol.Protocol = "check-then-write",
    ) -> None:
        # ADM-CTL-1: the same checks, kept under `python -O` (no contracts).
        for name, value in (
            ("max_num_queued_reqs", max_num_queued_reqs),
            ("max_num_queued_tokens", max_num_queued_tokens),
        ):
            if not is_limit(value):
                raise ValueError(f"ADM-CTL-1: {name} must be None or an int >= 0, got {value!r}")
        if mode not in MODES:
            raise ValueError(f"ADM-CTL-1: mode must be one of {sorted(MODES)}, got {mode!r}")
        if not _tracker_matches(tracker, shared_stats):
            raise ValueError(
                "ADM-CTL-1: the tracker must refresh the shared stats the controller reads "
                "(pass the same SharedAdmissionStats to both)"
            )
        self._max_num_queued_reqs = max_num_queued_reqs
        self._max_num_queued_tokens = max_num_queued_tokens
        self._tracker = tracker if tracker is not None else RequestTracker(shared_stats)
        self._shared_stats = shared_stats
        self._protocol = MODES[mode]

    @property
    def max_num_queued_reqs(self) -> int | None:
        """The request cap (None: no cap)."""
        return self._max_num_queued_reqs

    @property
    def max_num_queued_tokens(self) -> int | None:
        """The per-server cap on queued prompt tokens (None: no cap)."""
        return self._max_num_queued_tokens

    @property
    def tracker(self) -> RequestTracker:
        """The server's request tracker (the local count, queued tokens, reservations)."""
        return self._tracker

    @property
    def shared_stats(self) -> SharedAdmissionStats | None:
        """The shared counters, or None: then the local count decides."""
        return self._shared_stats

    @property
    def mode(self) -> str:
        """`"check-then-write"` or `"write-then-check"`, whichever spelling built it."""
        return self._protocol.value

    @property
    def protocol(self) -> protocol.Protocol:
        """The protocol `decide` applies."""
        return self._protocol

    @property
    def reserves(self) -> bool:
        """Whether a check writes a reservation before reading."""
        return (
            self._protocol is protocol.Protocol.WRITE_THEN_CHECK
            and self._max_num_queued_reqs is not None
        )

    @icontract.require(
        lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1", error=ValueError
    )
    @icontract.snapshot(lambda self: self.tracker.num_reserved, name="reserved")
    @icontract.ensure(
        lambda self, n, OLD, result: (
            self.tracker.num_reserved == OLD.reserved + (n if self.reserves else 0)
        ),
        "ADM-CTL-9: write-then-check writes its reservation first; check-then-write writes nothing",
    )
    @icontract.ensure(lambda self, result: result.is_open, "ADM-CTL-7: a started check is open")
    def start_check(self, n: int = 1) -> AdmissionCheck:
        """Start a check of a request of weight `n`; write-then-check reserves first."""
        if not is_int_at_least(n, 1):
            raise ValueError(f"ADM-CTL-2: n must be an int >= 1, got {n!r}")
        if self._max_num_queued_reqs is None:
            num_slots = 0  # no request limit: nothing to read (upstream reads nothing)
        elif self._shared_stats is None:
            num_slots = 1  # the local count
        else:
            num_slots = self._shared_stats.client_count
        reserved = self.reserves
        if reserved:
            # ADM-CTL-9: the reservation is in the own slot before the first read.
            self._tracker.reserve(n)
        return AdmissionCheck(self, n, num_slots, reserved)

    @icontract.require(
        lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1", error=ValueError
    )
    @icontract.snapshot(lambda self: self.tracker.num_reserved, name="reserved")
    @icontract.snapshot(lambda self: self.tracker.get_num_unfinished_requests(), name="unfinished")
    @icontract.ensure(
        lambda self, OLD: self.tracker.get_num_unfinished_requests() == OLD.unfinished,
        "ADM-CTL-6: a check registers nothing",
    )
    @icontract.ensure(
        lambda self, n, OLD: (
            self.tracker.num_reserved == OLD.reserved + (n if self.reserves else 0)
        ),
        "ADM-CTL-9: a write-then-check admission keeps its reservation; "
        "check-then-write writes nothing",
    )
    @icontract.ensure(
        lambda self, result: (result is None) == (self.max_num_queued_reqs is None),
        "ADM-CTL-3: the view is returned iff there is a request limit",
    )
    @icontract.ensure(
        lambda self, n, result: (
            result is None
            or self.max_num_queued_reqs is None
            or (
                self.protocol is protocol.Protocol.CHECK_THEN_WRITE
                and result + n <= self.max_num_queued_reqs
            )
            or (
                self.protocol is protocol.Protocol.WRITE_THEN_CHECK
                and result <= self.max_num_queued_reqs
            )
        ),
        "ADM-CTL-3: an admission read view + n <= M (check-then-write) "
        "or view <= M (write-then-check)",
    )
    @icontract.ensure(
        lambda self: (
            self.max_num_queued_tokens is None
            or self.tracker.get_num_queued_tokens() < self.max_num_queued_tokens
        ),
        "ADM-CTL-4: an admitted request found the token backlog below its limit",
    )
    def check_admission(self, n: int = 1) -> int | None:
        """Admit a request of `n` parallel samples or raise `AdmissionRejected`.

        Returns the count the check read (None when there is no request
        limit). Raises `QueueOverflowError` when the request limit would be
        exceeded, then `MaxQueuedTokensError` when the server's queued prompt
        tokens reached the token limit; a rejection changes no count. The
        read is per slot, in index order.

        The cap is approximate in check-then-write: check and write are not atomic
        across servers. In write-then-check an admission leaves its
        reservation in the own slot; register the request with the tracker
        (which takes the reservation over) or call `cancel_admission(n)`.
        """
        check = self.start_check(n)
        while not check.done:
            check.read_next()
        return check.decide()

    @icontract.require(
        lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1", error=ValueError
    )
    @icontract.require(
        lambda self, n: not self.reserves or self.tracker.num_reserved >= n,
        "ADM-CTL-9: only a reservation that is held can be given back",
        error=ValueError,
    )
    @icontract.snapshot(lambda self: self.tracker.num_reserved, name="reserved")
    @icontract.ensure(
        lambda self, n, OLD: (
            self.tracker.num_reserved == OLD.reserved - (n if self.reserves else 0)
        ),
        "ADM-CTL-9: cancelling gives exactly the reservation back",
    )
    def cancel_admission(self, n: int = 1) -> None:
        """Give back an admission that will not be registered.

        In write-then-check this writes the reservation back; in check-then-write an
        admission wrote nothing, so there is nothing to give back.
        """
        if not is_int_at_least(n, 1):
            raise ValueError(f"ADM-CTL-2: n must be an int >= 1, got {n!r}")
        if self.reserves:
            self._tracker.release_reservation(n)
