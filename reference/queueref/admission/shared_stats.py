"""The shared admission counters: slot layout, `SharedAdmissionStats`, allocation.

Models `vllm/v1/engine/admission_control.py` (`SharedAdmissionStats`,
`AdmissionCounterBuffer`) and the allocation in `APIServerProcessManager.__init__`
of `vllm/v1/utils.py` (vLLM PR #54746). The semantics are stated in
`specs/admission.md` (sections "Layout of the shared counters", "Shared stats",
"Allocation").

Deliberate divergences from vLLM:

* `SharedAdmissionStats.from_config` reads the config dict without changing
  it; vLLM 0.30.0 pops the buffer from it, so the order of construction matters.
* Counts are validated: a negative count is never written, and a negative
  value read from a slot is an `AdmissionCounterError`, never an admission.
* A sum reads the slots strictly one `__getitem__` per slot, in index order --
  or, over a buffer of C-level 8-byte counters, in one C-level pass of the same
  reads.
"""

from __future__ import annotations

import ctypes
import multiprocessing
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from queueref.admission import protocol
from queueref.errors import AdmissionCounterError
from queueref.validators import is_int

#: The key under which vLLM 0.30.0 hands the buffer to a server (ADM-RISK-3).
CONFIG_KEY: Final = "mp_admission_counters"


class AdmissionCounterBuffer(Protocol):
    """Integer reads and writes by index: a `RawArray("q", ...)` in production, a list in
    tests, any object whose `__getitem__` calls back between reads (trace replay)."""

    def __getitem__(self, index: int, /) -> int: ...

    def __setitem__(self, index: int, value: int, /) -> None: ...


# ADM-CTL-11: the one-pass read of a whole pass over a C-level counter buffer.
def _strided_counter_view(counters: object, client_count: int, counter: int) -> memoryview | None:
    """A view whose item i is counter `counter` of slot i, for a buffer of C-level signed
    8-byte counters (one aligned load per item, as its `__getitem__` makes); else None:
    a list or a buffer whose `__getitem__` is Python code is read slot by slot."""
    if not isinstance(counters, ctypes.Array):
        return None
    if counters._type_ not in (ctypes.c_int64, ctypes.c_longlong, ctypes.c_long):
        return None
    if ctypes.sizeof(counters._type_) != SharedAdmissionStats.COUNTER_BYTES:
        return None
    step = SharedAdmissionStats.COUNTERS_PER_SLOT
    flat = memoryview(counters).cast("B").cast("q")
    return flat[counter : counter + client_count * step : step]


def _corrupt(slot: int, counter: int, value: object) -> AdmissionCounterError:
    """The error of a slot that holds no count: never decide on it."""  # ADM-CTL-8
    return AdmissionCounterError(
        f"ADM-CTL-8: slot {slot} counter {counter} holds {value!r}, not a count; "
        "refusing to decide on a corrupt counter"
    )


class SharedAdmissionStats:
    """Lock-free admission counters shared by the API server processes.

    Server `i` owns slot `i`, one 64-byte cache line of counters, so that two servers'
    writes never invalidate each other's line (false sharing). Counter 0 of a slot is
    the server's unfinished-request count, counter 1 its queued prompt tokens when they
    are shared. A server writes only its own slot; a reader sums one counter of every slot.
    """

    # ADM-STATS-4: no lock -- one writer per slot, each slot its own cache line.
    # ADM-LAYOUT-1: one slot is one cache line of 8-byte counters.
    CACHE_LINE_BYTES: Final = 64
    COUNTER_BYTES: Final = 8
    COUNTERS_PER_SLOT: Final = CACHE_LINE_BYTES // COUNTER_BYTES

    # ADM-LAYOUT-3: the counters of a slot.
    REQUEST_COUNT: Final = 0
    QUEUED_TOKENS: Final = 1

    def __init__(
        self, counters: AdmissionCounterBuffer, client_count: int, client_index: int
    ) -> None:
        self._counters = counters
        self._client_count = client_count
        self._client_index = client_index
        self._slot_offset = client_index * self.COUNTERS_PER_SLOT
        # ADM-CTL-11: made once; one C-level pass over a C-level buffer.
        self._reads_in_one_pass = (
            _strided_counter_view(counters, client_count, self.REQUEST_COUNT) is not None
        )
        self._pass_readers = (
            self._make_pass_reader(self.REQUEST_COUNT),
            self._make_pass_reader(self.QUEUED_TOKENS),
        )

    @property
    def reads_in_one_pass(self) -> bool:
        """Whether a whole pass reads every slot in one C-level pass."""  # ADM-CTL-11
        return self._reads_in_one_pass

    def pass_reader(self, counter: int) -> Callable[[], int]:
        """The read of one whole pass (made with the stats): counter `counter` of every
        slot in index order, folded by `protocol._read_all`; a negative value raises
        `AdmissionCounterError` naming the first such slot. Not a snapshot."""
        return self._pass_readers[counter]

    def _make_pass_reader(self, counter: int) -> Callable[[], int]:
        """`pass_reader(counter)`: one C-level pass over a C-level buffer, else one
        checked `__getitem__` per slot."""  # ADM-CTL-11
        view = _strided_counter_view(self._counters, self._client_count, counter)
        slots = range(self._client_count)
        if view is None:
            return lambda: protocol._read_all(0, [self._read(slot, counter) for slot in slots])
        load = view.tolist  # every item once, in index order, no Python code between two

        def read_in_one_pass() -> int:
            values = load()
            if min(values) < 0:
                slot = next(slot for slot in slots if values[slot] < 0)
                raise _corrupt(slot, counter, values[slot])
            return protocol._read_all(0, values)

        return read_in_one_pass

    @classmethod
    def num_counters(cls, client_count: int) -> int:
        """How many counters `client_count` servers need."""
        return client_count * cls.COUNTERS_PER_SLOT

    @classmethod
    def from_config(
        cls,
        client_addresses: Mapping[str, Any] | None,
        client_count: int,
        client_index: int,
    ) -> SharedAdmissionStats | None:
        """The stats named by vLLM 0.30.0's config key, or None when absent (the mapping
        is read, not changed)."""
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
        """The index of counter 0 of this server's slot."""
        return self._slot_offset

    def read_slot(self, client_index: int) -> int:
        """Counter 0 of slot `client_index`: exactly one `__getitem__`, checked."""
        return self._read(client_index, self.REQUEST_COUNT)

    def _read(self, client_index: int, counter: int) -> int:
        """One `__getitem__` of counter `counter` of slot `client_index`, checked."""
        value = self._counters[client_index * self.COUNTERS_PER_SLOT + counter]
        if (type(value) is not int and not is_int(value)) or value < 0:
            raise _corrupt(client_index, counter, value)
        return value

    def read_tokens_slot(self, client_index: int) -> int:
        """Counter 1 of slot `client_index` (its queued tokens): one `__getitem__`, checked."""
        return self._read(client_index, self.QUEUED_TOKENS)

    def set_num_queued_tokens(self, count: int) -> None:
        """Write this server's queued prompt tokens to counter 1 of its own slot."""
        self._counters[self._slot_offset + self.QUEUED_TOKENS] = count

    def get_num_queued_tokens(self) -> int:
        """The global queued prompt tokens: counter 1 of every slot (`pass_reader`)."""
        return self._pass_readers[self.QUEUED_TOKENS]()

    def set_num_requests(self, count: int) -> None:
        """Write this server's unfinished count to counter 0 of its own slot."""
        self._counters[self._slot_offset + self.REQUEST_COUNT] = count

    def get_num_requests(self) -> int:
        """The global unfinished count: counter 0 of every slot (`pass_reader`)."""
        return self._pass_readers[self.REQUEST_COUNT]()


def allocate_admission_counters(
    num_servers: int, max_num_queued_reqs: int | None, max_num_queued_tokens: int | None = None
) -> Any:
    """A zeroed `RawArray("q", num_counters(num_servers))` (no lock: each server writes
    only its own slot) for several servers and a limit; else None (no shared memory)."""
    if num_servers == 1 or (max_num_queued_reqs is None and max_num_queued_tokens is None):
        return None
    context = multiprocessing.get_context("spawn")
    return context.RawArray("q", SharedAdmissionStats.num_counters(num_servers))
