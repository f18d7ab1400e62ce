"""Cross-process admission control: shared counters, the controller, its errors.

Models `vllm/v1/engine/admission_control.py` (`SharedAdmissionStats`,
`AdmissionCounterBuffer`), the allocation in `APIServerProcessManager.__init__`
of `vllm/v1/utils.py`, `AsyncLLM.check_admission` of
`vllm/v1/engine/async_llm.py` and the errors of `vllm/exceptions.py`
(vLLM PR #54746). The semantics are stated in `specs/admission.md`.

Deliberate divergences from vLLM:

* The constructor takes the counter buffer itself, not a config dict it pops
  the buffer from; `SharedAdmissionStats.from_config` reads the dict without
  changing it (ADM-RISK-3: the construction-order hazard of vLLM 0.30.0's `pop`).
* Counts are validated: a negative count is never written (ADM-STATS-2) and a
  negative value read from a slot is an error, never an admission (ADM-CTL-8).
* A check reads the slots strictly one `__getitem__` per slot, in index order,
  through `queueref.models.protocol.Check`, and is available step by step
  (`AdmissionController.start_check`) so that models and tests can interleave
  other servers between two reads (ADM-CTL-7).
* `mode="reserve"` (write-then-check) is queueref's addition: a hard global cap
  at the price of spurious rejections (ADM-CTL-9). The default `mode="shared"`
  is vLLM 0.30.0's check-then-write.
* Limits are validated at construction (vLLM 0.30.0 validates them in
  `SchedulerConfig`): negative or non-integer limits are a `ValueError`.
* `AdmissionRejected` derives from `Exception`, not from `ValueError`, so that
  a rejection is never mistaken for bad input (vLLM 0.30.0's
  `GracefulHTTPError` derives from `Exception` too, through `VLLMError`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
from collections.abc import Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import icontract

from queueref import config
from queueref.models import protocol

if TYPE_CHECKING:
    from queueref.tracker import RequestTracker

AdmissionMode = Literal["shared", "reserve"]

#: The admission modes of `AdmissionController` and the protocol each runs (ADM-CTL-1).
MODES: Final[dict[str, protocol.Protocol]] = {
    "shared": protocol.Protocol.CHECK_THEN_WRITE,
    "reserve": protocol.Protocol.WRITE_THEN_CHECK,
}

#: The key under which vLLM 0.30.0 hands the buffer to a server (ADM-RISK-3).
CONFIG_KEY: Final = "mp_admission_counters"


class AdmissionCounterBuffer(Protocol):
    """What a counter buffer must offer: integer reads and writes by index.

    A `multiprocessing.RawArray("q", ...)` in production, a list in tests, or
    any object whose `__getitem__` calls back between reads (trace replay).
    """

    def __getitem__(self, index: int, /) -> int: ...

    def __setitem__(self, index: int, value: int, /) -> None: ...


class AdmissionCounterError(RuntimeError):
    """A slot holds a value no server could have written (e.g. a negative count).

    Raised instead of deciding, so a corrupt counter never admits (ADM-CTL-8).
    """


def is_int(value: object) -> bool:
    """An `int` that is not a `bool`."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_int_at_least(value: object, low: int) -> bool:
    """An int (not a bool) that is >= low; safe on any object (contracts call it)."""
    return is_int(value) and value >= low  # type: ignore[operator]


def is_index(value: object, count: object) -> bool:
    """An int (not a bool) in range(count)."""
    return is_int(value) and is_int(count) and 0 <= value < count  # type: ignore[operator]


def is_limit(value: object) -> bool:
    """A valid limit: None (no limit) or an int >= 0 (ADM-CTL-1)."""
    return value is None or is_int_at_least(value, 0)


def is_private_buffer(counters: object) -> bool:
    """Whether a buffer can be re-read in a contract without side effects or races.

    Only a plain `list` qualifies: a shared `RawArray` changes under the feet
    of a contract (other processes write it), and a custom buffer may call
    back on every read. Frame conditions that re-read slots are restricted to
    private buffers.
    """
    return type(counters) is list


def _whole_buffer(counters: object) -> list[int] | None:
    """A copy of a private buffer for a deep frame condition, else None."""
    if config.deep_checks() and isinstance(counters, list) and is_private_buffer(counters):
        return list(counters)
    return None


def _only_own_counter_changed(
    stats: SharedAdmissionStats, count: int, before: list[int] | None
) -> bool:
    """The frame condition of a write: counter 0 of the own slot, nothing else (ADM-STATS-2)."""
    if before is None:
        return True
    # Computed from the index, not from the cached offset, so a corrupt offset is caught.
    own = stats.client_index * stats.COUNTERS_PER_SLOT + stats.REQUEST_COUNT
    expected = [count if index == own else value for index, value in enumerate(before)]
    return _whole_buffer(stats.counters) == expected


def _buffer_holds(counters: object, client_count: object) -> bool:
    """Whether a buffer of known length holds the counters of `client_count` servers."""
    length = _buffer_length(counters)
    if length is None or not is_int(client_count) or client_count < 1:  # type: ignore[operator]
        return True
    return length >= SharedAdmissionStats.num_counters(client_count)  # type: ignore[arg-type]


def _buffer_length(counters: object) -> int | None:
    """The length of a buffer when it has one (lists and ctypes arrays do)."""
    if isinstance(counters, (list, ctypes.Array)):
        return len(counters)
    try:
        return len(counters)  # type: ignore[arg-type]
    except TypeError:
        return None


# ---------------------------------------------------------------------------
# Shared counters
# ---------------------------------------------------------------------------


class SharedAdmissionStats:
    """Lock-free admission counters shared by the API server processes (ADM-STATS-4).

    Server `i` owns slot `i`: counters `i * COUNTERS_PER_SLOT` to
    `(i + 1) * COUNTERS_PER_SLOT - 1`, one 64-byte cache line, so that two
    servers' writes never invalidate each other's line (false sharing).
    Counter 0 of a slot is the server's unfinished-request count; counter 1 is
    reserved for queued prompt tokens (ADM-LAYOUT-3). A server writes only its
    own slot; a reader sums counter 0 of every slot, one slot at a time.
    """

    # ADM-LAYOUT-1: one slot is one cache line of 8-byte counters.
    CACHE_LINE_BYTES: Final = 64
    COUNTER_BYTES: Final = 8
    COUNTERS_PER_SLOT: Final = CACHE_LINE_BYTES // COUNTER_BYTES

    # ADM-LAYOUT-3: the counters of a slot.
    REQUEST_COUNT: Final = 0
    QUEUED_TOKENS: Final = 1

    @icontract.require(
        lambda client_count: is_int_at_least(client_count, 1),
        "ADM-STATS-1: client_count is an int >= 1",
        error=ValueError,
    )
    @icontract.require(
        lambda client_count, client_index: (
            is_int(client_index) and 0 <= client_index < client_count
        ),
        "ADM-STATS-1: 0 <= client_index < client_count",
        error=ValueError,
    )
    @icontract.require(
        lambda counters, client_count: _buffer_holds(counters, client_count),
        "ADM-STATS-1: the buffer holds num_counters(client_count) counters",
        error=ValueError,
    )
    def __init__(
        self, counters: AdmissionCounterBuffer, client_count: int, client_index: int
    ) -> None:
        # ADM-STATS-1: the checks also run under `python -O` (no contracts).
        if not (is_int_at_least(client_count, 1)):
            raise ValueError(f"ADM-STATS-1: client_count must be an int >= 1, got {client_count!r}")
        if not (is_int(client_index) and 0 <= client_index < client_count):
            raise ValueError(
                f"ADM-STATS-1: client_index must satisfy 0 <= client_index < {client_count}, "
                f"got {client_index!r}"
            )
        length = _buffer_length(counters)
        needed = self.num_counters(client_count)
        if length is not None and length < needed:
            raise ValueError(
                f"ADM-STATS-1: the buffer holds {length} counters, "
                f"{client_count} servers need {needed}"
            )
        self._counters = counters
        self._client_count = client_count
        self._client_index = client_index
        self._slot_offset = client_index * self.COUNTERS_PER_SLOT

    @classmethod
    @icontract.require(
        lambda client_count: is_int_at_least(client_count, 1),
        "ADM-LAYOUT-2: client_count is an int >= 1",
        error=ValueError,
    )
    @icontract.ensure(
        lambda cls, client_count, result: result == client_count * cls.COUNTERS_PER_SLOT,
        "ADM-LAYOUT-2: one slot of COUNTERS_PER_SLOT counters per server",
    )
    def num_counters(cls, client_count: int) -> int:
        """How many counters `client_count` servers need (ADM-LAYOUT-2)."""
        if not (is_int_at_least(client_count, 1)):
            raise ValueError(
                f"ADM-LAYOUT-2: client_count must be an int >= 1, got {client_count!r}"
            )
        return client_count * cls.COUNTERS_PER_SLOT

    @classmethod
    @icontract.snapshot(lambda client_addresses: dict(client_addresses or {}), name="config")
    @icontract.ensure(
        lambda client_addresses, OLD: dict(client_addresses or {}) == OLD.config,
        "ADM-RISK-3: reading the config never changes it",
    )
    def from_config(
        cls,
        client_addresses: Mapping[str, Any] | None,
        client_count: int,
        client_index: int,
    ) -> SharedAdmissionStats | None:
        """The stats named by vLLM 0.30.0's config key, or None when absent (ADM-RISK-3).

        vLLM 0.30.0 pops `"mp_admission_counters"` from the dict that is later
        handed to the engine client, so the order of construction matters;
        this reads it and leaves the mapping untouched.
        """
        if client_addresses is None:
            return None
        counters = client_addresses.get(CONFIG_KEY)
        if counters is None:
            return None
        return cls(counters, client_count, client_index)

    @property
    def counters(self) -> AdmissionCounterBuffer:
        """The shared buffer."""
        return self._counters

    @property
    def client_count(self) -> int:
        """How many servers share the buffer."""
        return self._client_count

    @property
    def client_index(self) -> int:
        """The index of this server's slot."""
        return self._client_index

    @property
    def slot_offset(self) -> int:
        """The index of counter 0 of this server's slot (ADM-LAYOUT-3)."""
        return self._slot_offset

    @icontract.require(
        lambda self, client_index: is_index(client_index, self.client_count),
        "ADM-STATS-3: a slot index is in range",
        error=IndexError,
    )
    @icontract.ensure(lambda result: result >= 0, "ADM-STATS-3: a count read is never negative")
    def read_slot(self, client_index: int) -> int:
        """Counter 0 of slot `client_index`: exactly one `__getitem__` (ADM-STATS-3).

        A negative value (or a non-integer) raises `AdmissionCounterError`
        (ADM-CTL-8).
        """
        value = self._counters[client_index * self.COUNTERS_PER_SLOT + self.REQUEST_COUNT]
        if (type(value) is not int and not is_int(value)) or value < 0:
            raise AdmissionCounterError(
                f"ADM-CTL-8: slot {client_index} holds {value!r}, not a count; "
                "refusing to decide on a corrupt counter"
            )
        return value

    @icontract.require(
        lambda count: is_int_at_least(count, 0),
        "ADM-STATS-2: a count is an int >= 0",
        error=ValueError,
    )
    @icontract.snapshot(lambda self: _whole_buffer(self.counters), name="buffer")
    @icontract.ensure(
        lambda self, count, OLD: _only_own_counter_changed(self, count, OLD.buffer),
        "ADM-STATS-2: a write changes counter 0 of the writer's own slot and nothing else",
    )
    def set_num_requests(self, count: int) -> None:
        """Write this server's unfinished count to counter 0 of its own slot (ADM-STATS-2)."""
        if not is_int(count) or count < 0:
            raise ValueError(f"ADM-STATS-2: a count must be an int >= 0, got {count!r}")
        self._counters[self._slot_offset + self.REQUEST_COUNT] = count

    @icontract.ensure(lambda result: result >= 0, "ADM-STATS-3: the sum is never negative")
    @icontract.ensure(
        lambda self, result: (
            not config.deep_checks()
            or not is_private_buffer(self.counters)
            or result
            == sum(
                self.counters[index * self.COUNTERS_PER_SLOT + self.REQUEST_COUNT]
                for index in range(self.client_count)
            )
        ),
        "ADM-STATS-3: the sum equals the sum of counter 0 of every slot",
    )
    def get_num_requests(self) -> int:
        """The global unfinished count: counter 0 of every slot, read one at a time (ADM-STATS-3).

        Not a snapshot: other servers may write between two reads.
        """
        check = protocol.Check(n=1)
        while not check.done(self._client_count):
            check = check.read(self.read_slot(check.next_slot))
        return check.view


@icontract.require(
    lambda num_servers: is_int_at_least(num_servers, 1),
    "ADM-ALLOC-1: num_servers is an int >= 1",
    error=ValueError,
)
@icontract.require(
    lambda max_num_queued_reqs: is_limit(max_num_queued_reqs),
    "ADM-ALLOC-1: max_num_queued_reqs is None or an int >= 0",
    error=ValueError,
)
@icontract.ensure(
    lambda num_servers, max_num_queued_reqs, result: (
        (result is None) == (num_servers == 1 or max_num_queued_reqs is None)
    ),
    "ADM-ALLOC-1: a buffer only for several servers with a request limit",
)
@icontract.ensure(
    lambda num_servers, result: (
        result is None
        or (
            len(result) == SharedAdmissionStats.num_counters(num_servers)
            and all(value == 0 for value in result)
        )
    ),
    "ADM-ALLOC-1: num_counters(num_servers) counters, all zero",
)
def allocate_admission_counters(num_servers: int, max_num_queued_reqs: int | None) -> Any:
    """The shared counter array of `num_servers` servers, or None (ADM-ALLOC-1).

    A zeroed `multiprocessing.RawArray("q", num_counters(num_servers))` (8-byte
    signed counters, no lock: each server writes only its own slot) when there
    are several servers and a request limit; otherwise None, and then no
    shared-memory path runs at all.
    """
    if not (is_int_at_least(num_servers, 1)):
        raise ValueError(f"ADM-ALLOC-1: num_servers must be an int >= 1, got {num_servers!r}")
    if not is_limit(max_num_queued_reqs):
        raise ValueError(
            f"ADM-ALLOC-1: max_num_queued_reqs must be None or an int >= 0, "
            f"got {max_num_queued_reqs!r}"
        )
    if num_servers == 1 or max_num_queued_reqs is None:
        return None
    context = multiprocessing.get_context("spawn")
    return context.RawArray("q", SharedAdmissionStats.num_counters(num_servers))


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class AdmissionRejected(Exception):
    """A request was refused by admission control; HTTP 503, retry later (ADM-ERR-1)."""

    http_status: int = HTTPStatus.SERVICE_UNAVAILABLE
    default_message: str = "The server cannot accept the request right now. Please try again later."

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        super().__init__(self.message)


class QueueOverflowError(AdmissionRejected):
    """Admitting the request would exceed `max_num_queued_reqs` (ADM-ERR-1, ADM-CTL-3).

    `view` is the count the check read, `n` the request's weight, `limit` the cap.
    """

    default_message = (
        "The server is busy: its request queue is full. "
        "Please try again later, or send the request to another instance."
    )

    def __init__(
        self,
        message: str | None = None,
        *,
        view: int | None = None,
        n: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.view = view
        self.n = n
        self.limit = limit


class MaxQueuedTokensError(AdmissionRejected):
    """The server's queued prompt tokens reached `max_num_queued_tokens` (ADM-ERR-1, ADM-CTL-4).

    `queued_tokens` is what the server had queued, `limit` the cap.
    """

    default_message = (
        "The server has a backlog of prompt tokens waiting for prefill. "
        "Please try again later, or send the request to another instance."
    )

    def __init__(
        self,
        message: str | None = None,
        *,
        queued_tokens: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.queued_tokens = queued_tokens
        self.limit = limit


def is_token_backlog_full(queued_tokens: int, limit: int | None) -> bool:
    """The token rule: reject iff a limit is set and `queued_tokens >= limit` (ADM-CTL-4)."""
    return limit is not None and queued_tokens >= limit


# ---------------------------------------------------------------------------
# The controller
# ---------------------------------------------------------------------------


class AdmissionCheck:
    """One admission check of one server, taken one slot read at a time (ADM-CTL-7).

    Made by `AdmissionController.start_check`; `read_next()` reads exactly one
    slot (one `__getitem__`, counter 0, in index order, each slot once);
    `decide()` applies the protocol's decision once every slot is read.
    `check_admission` is `start_check` + `read_next` until `done` + `decide`;
    tests and models drive the steps themselves to interleave other servers.
    In reserve mode the reservation is already in the own slot when the
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
        """Close the check; write the reservation back if one is held (ADM-CTL-6)."""
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
        """Read the next slot: one `__getitem__` of counter 0 of that slot (ADM-CTL-7).

        Without shared stats the single "slot" is the local count (unfinished
        requests plus outstanding reservations). A corrupt value or a failing
        buffer gives the reservation back and raises (ADM-CTL-8).
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
        """Admit (return the view read, None without a request limit) or raise (ADM-CTL-3).

        The request limit first (`QueueOverflowError`), then the token limit
        (`MaxQueuedTokensError`, ADM-CTL-4). A rejection gives a reservation
        back, so it leaves every count as it was (ADM-CTL-6); an admission in
        reserve mode keeps it, for the tracker registration to take over.
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
        """Close the check without deciding, giving a reservation back (ADM-CTL-6)."""
        self._give_back()


def _tracker_matches(tracker: RequestTracker | None, shared_stats: object) -> bool:
    return tracker is None or tracker.shared_stats is shared_stats


class AdmissionController:
    """Per-server admission control: `check_admission(n)` admits or raises (ADM-CTL-3).

    `mode="shared"` (default) is vLLM 0.30.0's check-then-write: read the count
    (the global sum of the shared slots, or the local unfinished count), admit
    iff `count + n <= max_num_queued_reqs`; the caller's tracker registration
    then writes the own slot. `mode="reserve"` is write-then-check: add `n` to
    the own slot first, read, keep the reservation iff the sum read is
    `<= max_num_queued_reqs`, else write it back and reject (ADM-CTL-9).
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
        lambda mode: mode in MODES, "ADM-CTL-1: mode is 'shared' or 'reserve'", error=ValueError
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
        mode: AdmissionMode = "shared",
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
        from queueref.tracker import RequestTracker

        self._max_num_queued_reqs = max_num_queued_reqs
        self._max_num_queued_tokens = max_num_queued_tokens
        self._tracker = tracker if tracker is not None else RequestTracker(shared_stats)
        self._shared_stats = shared_stats
        self._mode: AdmissionMode = mode
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
    def mode(self) -> AdmissionMode:
        """`"shared"` (check-then-write) or `"reserve"` (write-then-check)."""
        return self._mode

    @property
    def protocol(self) -> protocol.Protocol:
        """The protocol `decide` applies."""
        return self._protocol

    @property
    def reserves(self) -> bool:
        """Whether a check writes a reservation before reading (ADM-CTL-9)."""
        return self._mode == "reserve" and self._max_num_queued_reqs is not None

    @icontract.require(
        lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1", error=ValueError
    )
    @icontract.snapshot(lambda self: self.tracker.num_reserved, name="reserved")
    @icontract.ensure(
        lambda self, n, OLD, result: (
            self.tracker.num_reserved == OLD.reserved + (n if self.reserves else 0)
        ),
        "ADM-CTL-9: reserve mode writes its reservation first; shared mode writes nothing",
    )
    @icontract.ensure(lambda self, result: result.is_open, "ADM-CTL-7: a started check is open")
    def start_check(self, n: int = 1) -> AdmissionCheck:
        """Start a check of a request of weight `n`; in reserve mode, reserve first (ADM-CTL-9)."""
        if not is_int(n) or n < 1:
            raise ValueError(f"ADM-CTL-2: n must be an int >= 1, got {n!r}")
        if self._max_num_queued_reqs is None:
            num_slots = 0  # no request limit: nothing to read (vLLM 0.30.0 reads nothing)
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
        "ADM-CTL-9: an admission in reserve mode keeps its reservation; shared mode writes nothing",
    )
    @icontract.ensure(
        lambda self, result: (result is None) == (self.max_num_queued_reqs is None),
        "ADM-CTL-3: the view is returned iff there is a request limit",
    )
    @icontract.ensure(
        lambda self, n, result: (
            result is None
            or self.max_num_queued_reqs is None
            or (self.mode == "shared" and result + n <= self.max_num_queued_reqs)
            or (self.mode == "reserve" and result <= self.max_num_queued_reqs)
        ),
        "ADM-CTL-3: an admission read view + n <= M (shared) or view <= M (reserve)",
    )
    @icontract.ensure(
        lambda self: (
            self.max_num_queued_tokens is None
            or self.tracker.get_num_queued_tokens() < self.max_num_queued_tokens
        ),
        "ADM-CTL-4: an admitted request found the token backlog below its limit",
    )
    def check_admission(self, n: int = 1) -> int | None:
        """Admit a request of `n` parallel samples or raise `AdmissionRejected` (ADM-CTL-3).

        Returns the count the check read (None when there is no request
        limit). Raises `QueueOverflowError` when the request limit would be
        exceeded, then `MaxQueuedTokensError` when the server's queued prompt
        tokens reached the token limit; a rejection changes no count
        (ADM-CTL-6). The read is per slot, in index order (ADM-CTL-7).

        The cap is approximate in shared mode: check and write are not atomic
        across servers (ADM-BOUND-1). In reserve mode an admission leaves its
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
        """Give back an admission that will not be registered (ADM-CTL-9).

        In reserve mode this writes the reservation back; in shared mode an
        admission wrote nothing, so there is nothing to give back.
        """
        if not is_int(n) or n < 1:
            raise ValueError(f"ADM-CTL-2: n must be an int >= 1, got {n!r}")
        if self.reserves:
            self._tracker.release_reservation(n)
