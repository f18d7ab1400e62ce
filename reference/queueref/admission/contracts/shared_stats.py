"""The contracts of the shared counters, declared beside them and attached when
`queueref.admission` is imported (`queueref.admission.contracts`).

Each stub below names a method of `queueref.admission.shared_stats.SharedAdmissionStats`
or the module's `allocate_admission_counters`; `original` hands its conditions the real
function and `install` puts the checked one back, as if the decorators were written over
it. The preconditions declared with `require` are kept under `python -O` too.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import icontract

from queueref import config
from queueref.admission import shared_stats as stats_module
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.preconditions import install, original, require
from queueref.validators import is_index, is_int_at_least, is_limit

__all__ = ["is_private_buffer"]

_Reader = TypeVar("_Reader", bound=Callable[..., int])


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
    stats: SharedAdmissionStats, count: int, before: list[int] | None, counter: int = 0
) -> bool:
    """The frame condition of a write: counter `counter` of the own slot, nothing else."""
    if before is None:
        return True
    # Computed from the index, not from the cached offset, so a corrupt offset is caught.
    own = stats.client_index * stats.COUNTERS_PER_SLOT + counter
    expected = [count if index == own else value for index, value in enumerate(before)]
    return _whole_buffer(stats.counters) == expected


def _buffer_holds(counters: object, client_count: object) -> bool:
    """Whether a buffer of known length holds the counters of `client_count` servers."""
    length = _buffer_length(counters)
    if length is None or not is_int_at_least(client_count, 1):
        return True
    return length >= SharedAdmissionStats.num_counters(client_count)


def _buffer_length(counters: object) -> int | None:
    """The length of a buffer when it has one (lists and ctypes arrays do)."""
    if isinstance(counters, (list, ctypes.Array)):
        return len(counters)
    try:
        return len(counters)  # type: ignore[arg-type]
    except TypeError:
        return None


def _is_the_sum_of(stats: SharedAdmissionStats, result: int, counter: int) -> bool:
    """The deep postcondition of a sum: it equals counter `counter` summed over every slot.

    Re-reads the slots, so only over a private buffer and with deep checks on.
    """
    if not config.deep_checks() or not is_private_buffer(stats.counters):
        return True
    step = stats.COUNTERS_PER_SLOT
    return result == sum(
        stats.counters[index * step + counter] for index in range(stats.client_count)
    )


def _slot_in_range(self: SharedAdmissionStats, client_index: int) -> bool:
    return is_index(client_index, self.client_count)


def _not_negative(result: int) -> bool:
    return result >= 0


def _slot_read(requirement: str, what: str) -> Callable[[_Reader], _Reader]:
    """The contracts of a one-slot read: the index is in range, the value is never negative.

    Named conditions, not lambdas: icontract shows a lambda's source only
    when it is written in a decorator line.
    """

    def wrap(read: _Reader) -> _Reader:
        read = icontract.ensure(_not_negative, f"{requirement}: a {what} read is never negative")(
            read
        )
        # Kept under `python -O`: a negative index would silently read another
        # server's slot from the end of the buffer.
        in_range = f"{requirement}: a slot index is in range"
        return require(_slot_in_range, in_range, error=IndexError)(read)

    return wrap


@install(SharedAdmissionStats)
@require(
    lambda client_count: is_int_at_least(client_count, 1),
    "ADM-STATS-1: client_count is an int >= 1",
)
@require(
    lambda client_count, client_index: (
        not is_int_at_least(client_count, 1)  # refused by the count's own precondition
        or is_index(client_index, client_count)
    ),
    "ADM-STATS-1: 0 <= client_index < client_count",
)
@require(
    lambda counters, client_count: _buffer_holds(counters, client_count),
    "ADM-STATS-1: the buffer holds num_counters(client_count) counters",
)
@original(SharedAdmissionStats)
def __init__() -> None: ...


@install(SharedAdmissionStats)
@require(
    lambda counter: (
        counter in (SharedAdmissionStats.REQUEST_COUNT, SharedAdmissionStats.QUEUED_TOKENS)
    ),
    "ADM-CTL-11: the counter is 0 (requests) or 1 (queued tokens)",
)
@original(SharedAdmissionStats)
def pass_reader() -> None: ...


@install(SharedAdmissionStats)
@require(
    lambda client_count: is_int_at_least(client_count, 1),
    "ADM-LAYOUT-2: client_count is an int >= 1",
)
@icontract.ensure(
    lambda cls, client_count, result: result == client_count * cls.COUNTERS_PER_SLOT,
    "ADM-LAYOUT-2: one slot of COUNTERS_PER_SLOT counters per server",
)
@original(SharedAdmissionStats)
def num_counters() -> None: ...


def _config_of(client_addresses: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the config mapping holds (None: nothing), as a copy; named, because icontract
    cannot render `x or {}` in a failing condition (it raised RuntimeError instead)."""
    return dict(client_addresses or {})


@install(SharedAdmissionStats)
@icontract.snapshot(lambda client_addresses: _config_of(client_addresses), name="config")
@icontract.ensure(
    lambda client_addresses, OLD: _config_of(client_addresses) == OLD.config,
    "ADM-RISK-3: reading the config never changes it",
)
@original(SharedAdmissionStats)
def from_config() -> None: ...


@install(SharedAdmissionStats)
@_slot_read("ADM-STATS-3", "count")
@original(SharedAdmissionStats)
def read_slot() -> None: ...


@install(SharedAdmissionStats)
@_slot_read("ADM-TOK-2", "token count")
@original(SharedAdmissionStats)
def read_tokens_slot() -> None: ...


@install(SharedAdmissionStats)
@require(
    lambda count: is_int_at_least(count, 0),
    "ADM-TOK-1: a token count is an int >= 0",
)
@icontract.snapshot(lambda self: _whole_buffer(self.counters), name="buffer")
@icontract.ensure(
    lambda self, count, OLD: _only_own_counter_changed(
        self, count, OLD.buffer, SharedAdmissionStats.QUEUED_TOKENS
    ),
    "ADM-TOK-1: a token write changes counter 1 of the writer's own slot and nothing else",
)
@original(SharedAdmissionStats)
def set_num_queued_tokens() -> None: ...


@install(SharedAdmissionStats)
@icontract.ensure(lambda result: result >= 0, "ADM-TOK-2: the sum is never negative")
@icontract.ensure(
    lambda self, result: _is_the_sum_of(self, result, SharedAdmissionStats.QUEUED_TOKENS),
    "ADM-TOK-2: the sum equals the sum of counter 1 of every slot",
)
@original(SharedAdmissionStats)
def get_num_queued_tokens() -> None: ...


@install(SharedAdmissionStats)
@require(
    lambda count: is_int_at_least(count, 0),
    "ADM-STATS-2: a count is an int >= 0",
)
@icontract.snapshot(lambda self: _whole_buffer(self.counters), name="buffer")
@icontract.ensure(
    lambda self, count, OLD: _only_own_counter_changed(self, count, OLD.buffer),
    "ADM-STATS-2: a write changes counter 0 of the writer's own slot and nothing else",
)
@original(SharedAdmissionStats)
def set_num_requests() -> None: ...


@install(SharedAdmissionStats)
@icontract.ensure(lambda result: result >= 0, "ADM-STATS-3: the sum is never negative")
@icontract.ensure(
    lambda self, result: _is_the_sum_of(self, result, SharedAdmissionStats.REQUEST_COUNT),
    "ADM-STATS-3: the sum equals the sum of counter 0 of every slot",
)
@original(SharedAdmissionStats)
def get_num_requests() -> None: ...


@install(stats_module)
@require(
    lambda num_servers: is_int_at_least(num_servers, 1),
    "ADM-ALLOC-1: num_servers is an int >= 1",
)
@require(
    lambda max_num_queued_reqs: is_limit(max_num_queued_reqs),
    "ADM-ALLOC-1: max_num_queued_reqs is None or an int >= 0",
)
@require(
    lambda max_num_queued_tokens: is_limit(max_num_queued_tokens),
    "ADM-TOK-6: max_num_queued_tokens is None or an int >= 0",
)
@icontract.ensure(
    lambda num_servers, max_num_queued_reqs, max_num_queued_tokens, result: (
        (result is None)
        == (num_servers == 1 or (max_num_queued_reqs is None and max_num_queued_tokens is None))
    ),
    "ADM-ALLOC-1, ADM-TOK-6: a buffer only for several servers with a request or token limit",
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
@original(stats_module)
def allocate_admission_counters() -> None: ...
