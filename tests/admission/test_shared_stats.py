"""The two sums and the two slot reads of `SharedAdmissionStats`, and the teeth of their contracts.

`get_num_requests` / `get_num_queued_tokens` share one summing loop and
`read_slot` / `read_tokens_slot` one pair of contracts; each public method
keeps its own requirement, and each contract is shown failing on a broken
variant for the reason it states. Expected values are written out by hand.
"""

from __future__ import annotations

import ctypes
from multiprocessing.sharedctypes import RawArray
from typing import Any

import icontract
import pytest
from method_variants import Change, broken_class, method_variant

import queueref.admission.shared_stats as stats_module
from queueref import config
from queueref.admission.shared_stats import SharedAdmissionStats, allocate_admission_counters

# Three servers: counter 0 (requests) and counter 1 (tokens) of each slot.
REQUESTS = [2, 0, 5]
TOKENS = [30, 7, 0]


def buffer() -> list[int]:
    counters = [0] * 24
    for slot in range(3):
        counters[8 * slot] = REQUESTS[slot]
        counters[8 * slot + 1] = TOKENS[slot]
    return counters


class ReadLog(list[int]):
    """A list that logs the index of every read (not private: the deep checks stay off it)."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(values)
        self.reads: list[int] = []

    def __getitem__(self, index: int) -> int:  # type: ignore[override]
        self.reads.append(index)
        return list.__getitem__(self, index)


class ClaimsToBe(type):
    """A metaclass whose classes say they equal the type they name as `claimed`: `==`
    lies, `is` does not."""

    def __eq__(cls, other: object) -> bool:
        return other is getattr(cls, "claimed", None) or type.__eq__(cls, other)

    def __ne__(cls, other: object) -> bool:
        return not cls.__eq__(other)

    __hash__ = type.__hash__


class ReadLogClaimingToBeList(ReadLog, metaclass=ClaimsToBe):
    """A `ReadLog` whose type compares equal to `list`: still a buffer that calls back."""

    claimed = list


@pytest.mark.parametrize("kind", [ReadLog, ReadLogClaimingToBeList])
def test_each_sum_reads_its_own_counter_once_per_slot_in_index_order(kind: type) -> None:
    """ADM-STATS-3, ADM-TOK-2: counter 0 of slots 0, 1, 2; then counter 1 of slots 0, 1, 2,
    with deep checks on: a buffer is re-read by a contract only if its type is `list`
    itself, not a type that says it equals `list`."""
    assert type(ReadLogClaimingToBeList([])) == list  # noqa: E721 -- the lie not to believe
    log = kind(buffer())
    stats = SharedAdmissionStats(log, 3, 1)
    assert stats.get_num_requests() == 7
    assert log.reads == [0, 8, 16]
    log.reads.clear()
    assert stats.get_num_queued_tokens() == 37
    assert log.reads == [1, 9, 17]


def test_the_one_pass_sums_agree_with_the_slots() -> None:
    """ADM-CTL-11: over a C-level buffer each sum is one pass, with the same totals."""
    raw = (ctypes.c_int64 * 24)(*buffer())
    stats = SharedAdmissionStats(raw, 3, 0)
    assert stats.reads_in_one_pass
    assert (stats.get_num_requests(), stats.get_num_queued_tokens()) == (7, 37)
    assert [stats.read_slot(i) for i in range(3)] == REQUESTS
    assert [stats.read_tokens_slot(i) for i in range(3)] == TOKENS


SumsTheOtherCounter = broken_class(
    SharedAdmissionStats,
    "SumsTheOtherCounter",
    Change(
        "get_num_requests",
        "the request sum reads counter 1 of every slot",
        "self._pass_readers[self.REQUEST_COUNT]",
        "self._pass_readers[self.QUEUED_TOKENS]",
    ),
    Change(
        "get_num_queued_tokens",
        "the token sum reads counter 0 of every slot",
        "self._pass_readers[self.QUEUED_TOKENS]",
        "self._pass_readers[self.REQUEST_COUNT]",
    ),
)


@pytest.mark.contracts
def test_each_sum_contract_names_its_counter() -> None:
    """ADM-STATS-3, ADM-TOK-2 have teeth: a sum of the wrong counter breaks each one's own."""
    assert config.deep_checks()  # the deep postconditions re-read the private buffer
    stats = SumsTheOtherCounter(buffer(), 3, 0)
    with pytest.raises(icontract.ViolationError, match="ADM-STATS-3: the sum equals the sum"):
        stats.get_num_requests()
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-2: the sum equals the sum"):
        stats.get_num_queued_tokens()


@pytest.mark.contracts
def test_token_sum_contract_catches_a_loop_that_drops_the_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-TOK-2 has teeth: a read loop that drops the values violates the postcondition."""
    import queueref.admission.protocol as protocol_module

    stats = SharedAdmissionStats(buffer(), 3, 0)
    monkeypatch.setattr(protocol_module, "_read_all", lambda view, slot_values: view)
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-2"):
        stats.get_num_queued_tokens()


ReadsMinusOne = broken_class(
    SharedAdmissionStats,
    "ReadsMinusOne",
    Change("_read", "a slot read that lets a negative value through", "return value", "return -1"),
)


@pytest.mark.contracts
def test_each_slot_read_contract_refuses_a_negative_value() -> None:
    """ADM-STATS-3, ADM-TOK-2 have teeth: a read that returns -1 breaks each one's own."""
    stats = ReadsMinusOne(buffer(), 3, 0)
    with pytest.raises(icontract.ViolationError, match="ADM-STATS-3: a count read is never"):
        stats.read_slot(0)
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-2: a token count read is never"):
        stats.read_tokens_slot(0)


@pytest.mark.contracts
@pytest.mark.parametrize("index", [-1, 3])
def test_each_slot_read_refuses_an_index_out_of_range(index: int) -> None:
    """ADM-STATS-3, ADM-TOK-2: a slot index outside 0..N-1 is an IndexError naming the ID."""
    stats = SharedAdmissionStats(buffer(), 3, 0)
    with pytest.raises(IndexError, match="ADM-STATS-3: a slot index is in range"):
        stats.read_slot(index)
    with pytest.raises(IndexError, match="ADM-TOK-2: a slot index is in range"):
        stats.read_tokens_slot(index)


class _Count(int):
    """An int subclass (not a bool), as a buffer of another library may hand out."""


@pytest.mark.guard
@pytest.mark.parametrize("read", ["read_slot", "read_tokens_slot"])
def test_adm_ctl_8_a_slot_read_takes_an_int_subclass_and_refuses_a_float(read: str) -> None:
    """ADM-CTL-8: a slot holding an int subclass is read as that count; a slot holding a
    float (2.5) is refused as corrupt, in both modes, and so is its pass."""
    from queueref.errors import AdmissionCounterError

    counters: list[object] = [0] * 16
    counter = 0 if read == "read_slot" else 1
    counters[8 + counter] = _Count(3)
    stats = SharedAdmissionStats(counters, 2, 0)  # type: ignore[arg-type]
    assert getattr(stats, read)(1) == 3
    assert stats.pass_reader(counter)() == 3
    counters[8 + counter] = 2.5
    with pytest.raises(AdmissionCounterError, match=f"slot 1 counter {counter} holds 2.5"):
        getattr(stats, read)(1)
    with pytest.raises(AdmissionCounterError, match=f"slot 1 counter {counter} holds 2.5"):
        stats.pass_reader(counter)()


class _FakeCount(metaclass=ClaimsToBe):
    """Not a count, though its type compares equal to `int` and it is never below 0."""

    claimed = int

    def __lt__(self, other: object) -> bool:
        return False


@pytest.mark.guard
@pytest.mark.parametrize("read", ["read_slot", "read_tokens_slot"])
def test_adm_ctl_8_a_value_whose_type_claims_to_be_int_is_refused(read: str) -> None:
    """ADM-CTL-8: the type of a slot's value is asked by identity: an object whose type
    compares equal to `int` is still refused as corrupt, in both modes."""
    from queueref.errors import AdmissionCounterError

    counters: list[object] = [0] * 16
    counter = 0 if read == "read_slot" else 1
    counters[8 + counter] = _FakeCount()
    stats = SharedAdmissionStats(counters, 2, 0)  # type: ignore[arg-type]
    assert type(_FakeCount()) == int  # noqa: E721 -- the lie the read must not believe
    with pytest.raises(AdmissionCounterError, match=f"slot 1 counter {counter} holds"):
        getattr(stats, read)(1)


@pytest.mark.parametrize("size", [4, 16])
def test_adm_ctl_11_a_long_array_whose_long_is_not_8_bytes_is_read_slot_by_slot(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADM-CTL-11: one-pass reads need 8-byte counters; where a C `long` is 4 bytes (or
    any size but 8), an array of them keeps the stepwise read. The size is simulated:
    this machine's `long` is 8 bytes."""
    counters = (ctypes.c_long * 16)()
    assert SharedAdmissionStats(counters, 2, 0).reads_in_one_pass
    real_sizeof = ctypes.sizeof
    monkeypatch.setattr(ctypes, "sizeof", lambda t: size if t is ctypes.c_long else real_sizeof(t))
    assert not SharedAdmissionStats(counters, 2, 0).reads_in_one_pass


# --- each contract of the counters catches the bug it names (a broken variant each) ---


@pytest.mark.guard
def test_adm_stats_1_a_client_count_below_one_is_refused_by_its_own_precondition() -> None:
    """ADM-STATS-1: zero servers is refused for what it is (a count below one), not by the
    index check behind it."""
    with pytest.raises(ValueError, match="ADM-STATS-1: client_count is an int >= 1"):
        SharedAdmissionStats([0] * 8, 0, 0)


@pytest.mark.guard
@pytest.mark.parametrize("index", [1, -1])
def test_adm_stats_1_one_server_owns_slot_zero_only(index: int) -> None:
    """ADM-STATS-1: with one server the only slot is 0: index 1 (past the buffer's one
    slot) or -1 (the last slot, from the end) is refused naming the range."""
    with pytest.raises(ValueError, match="ADM-STATS-1: 0 <= client_index < client_count"):
        SharedAdmissionStats([0] * 8, 1, index)


@pytest.mark.guard
@pytest.mark.parametrize("counter", [2, -1])
def test_adm_ctl_11_a_pass_reader_of_another_counter_is_refused(counter: int) -> None:
    """ADM-CTL-11: only counters 0 and 1 have a pass: 2, or -1 (which indexing would take
    for the token pass), is a ValueError naming them."""
    stats = SharedAdmissionStats([0] * 16, 2, 0)
    with pytest.raises(ValueError, match="ADM-CTL-11: the counter is 0 .requests. or 1"):
        stats.pass_reader(counter)


def _counts(off_by: str) -> Any:
    """`SharedAdmissionStats` whose `num_counters` is off the slots by `off_by`."""
    return broken_class(
        SharedAdmissionStats,
        "CountsOff",
        Change(
            "num_counters",
            f"the slots' counters {off_by}",
            "return client_count * cls.COUNTERS_PER_SLOT",
            f"return client_count * cls.COUNTERS_PER_SLOT {off_by}",
        ),
    )


@pytest.mark.contracts
@pytest.mark.parametrize("off_by", ["+ 1", "- 1"])
def test_adm_layout_2_a_count_of_counters_off_the_slots_is_caught(off_by: str) -> None:
    """ADM-LAYOUT-2 has teeth: `num_counters` one above, or one below, a slot per server
    breaks it (exactly the slots, not at most or at least)."""
    with pytest.raises(icontract.ViolationError, match="ADM-LAYOUT-2: one slot of"):
        _counts(off_by).num_counters(3)


SumsOneBelow = broken_class(
    SharedAdmissionStats,
    "SumsOneBelow",
    Change(
        "get_num_requests",
        "the request sum one below the slots",
        "return self._pass_readers[self.REQUEST_COUNT]()",
        "return self._pass_readers[self.REQUEST_COUNT]() - 1",
    ),
    Change(
        "get_num_queued_tokens",
        "the token sum one below the slots",
        "return self._pass_readers[self.QUEUED_TOKENS]()",
        "return self._pass_readers[self.QUEUED_TOKENS]() - 1",
    ),
)


@pytest.mark.contracts
def test_the_sums_are_never_negative_even_by_one() -> None:
    """ADM-STATS-3, ADM-TOK-2 have teeth: a sum of -1 over zeroed slots is refused (the
    buffer is shared, a `RawArray`, so the deep re-read of the slots stays out of it)."""
    stats = SumsOneBelow(RawArray("q", 16), 2, 0)
    with pytest.raises(icontract.ViolationError, match="ADM-STATS-3: the sum is never negative"):
        stats.get_num_requests()
    with pytest.raises(icontract.ViolationError, match="ADM-TOK-2: the sum is never negative"):
        stats.get_num_queued_tokens()


def _allocation_variant(bug: str, old: str, new: str) -> Any:
    """`allocate_admission_counters` rebuilt with one change, its contracts and all."""
    return method_variant(
        stats_module,  # type: ignore[arg-type]
        "allocate_admission_counters",
        Change("allocate_admission_counters", bug, old, new),
    )


@pytest.mark.contracts
def test_adm_alloc_1_no_buffer_for_several_servers_with_a_limit_is_caught() -> None:
    """ADM-ALLOC-1 has teeth: an allocation that hands three servers with a cap no buffer
    (as one server gets) breaks "a buffer only for several servers with a limit"."""
    never = _allocation_variant(
        "no buffer ever", 'context = multiprocessing.get_context("spawn")', "return None"
    )
    with pytest.raises(icontract.ViolationError, match="ADM-ALLOC-1, ADM-TOK-6: a buffer only"):
        never(3, 10)


@pytest.mark.contracts
def test_adm_alloc_1_a_buffer_for_one_server_is_caught() -> None:
    """ADM-ALLOC-1 has teeth the other way too: an allocation that hands one server a
    buffer (it needs none: its own count decides) breaks the same postcondition."""
    always = _allocation_variant("a buffer even for one server", "return None", "pass")
    with pytest.raises(icontract.ViolationError, match="ADM-ALLOC-1, ADM-TOK-6: a buffer only"):
        always(1, 10)


@pytest.mark.contracts
@pytest.mark.parametrize(
    ("new", "bug"),
    [
        ('RawArray("q", SharedAdmissionStats.num_counters(num_servers) + 1)', "a counter too many"),
        ('RawArray("q", SharedAdmissionStats.num_counters(num_servers) - 1)', "a counter too few"),
        (
            'RawArray("q", [1] * SharedAdmissionStats.num_counters(num_servers))',
            "a counter not zero",
        ),
        (
            'RawArray("q", [-1] * SharedAdmissionStats.num_counters(num_servers))',
            "a counter below zero",
        ),
    ],
    ids=["too many", "too few", "not zero", "below zero"],
)
def test_adm_alloc_1_a_buffer_of_the_wrong_size_or_content_is_caught(new: str, bug: str) -> None:
    """ADM-ALLOC-1 has teeth: one counter too many or too few, or one not zeroed (above
    or below), is caught by "num_counters(num_servers) counters, all zero"."""
    broken = _allocation_variant(
        bug, 'RawArray("q", SharedAdmissionStats.num_counters(num_servers))', new
    )
    with pytest.raises(icontract.ViolationError, match="ADM-ALLOC-1: num_counters"):
        broken(3, 10)


def test_adm_alloc_1_a_large_buffer_is_counted_by_value() -> None:
    """ADM-ALLOC-1: 40 servers take 320 counters, a count past CPython's small-int cache:
    the postcondition compares the length by value (an identity test would refuse it)."""
    counters = allocate_admission_counters(40, 10)
    assert counters is not None and len(counters) == 320


@pytest.mark.contracts
def test_the_deep_counter_contracts_hold_past_the_small_int_cache() -> None:
    """ADM-STATS-2, ADM-STATS-3: with deep checks on, over a private list, a write to a slot
    whose counter index is above 256 (server 39 of 40) changes that counter only, and a
    sum above 256 equals its slots: both postconditions compare ints by value, not by
    identity (CPython keeps one object per int only in -5..256)."""
    assert config.deep_checks()
    counters = [0] * SharedAdmissionStats.num_counters(40)
    stats = SharedAdmissionStats(counters, 40, 39)
    stats.set_num_requests(300)
    stats.set_num_queued_tokens(1000)
    assert counters[39 * 8] == 300 and counters[39 * 8 + 1] == 1000
    assert stats.get_num_requests() == 300
    assert stats.get_num_queued_tokens() == 1000


TakesTheConfig = broken_class(
    SharedAdmissionStats,
    "TakesTheConfig",
    Change(
        "from_config",
        "takes the buffer out of the config instead of reading it",
        "counters = client_addresses.get(CONFIG_KEY)",
        "counters = client_addresses.pop(CONFIG_KEY)",
    ),
)


@pytest.mark.contracts
def test_adm_risk_3_a_from_config_that_changes_the_config_is_caught() -> None:
    """ADM-RISK-3 has teeth: a `from_config` that takes the buffer out of the engine's
    config (another server of the group would then find none) is caught."""
    config_map = {stats_module.CONFIG_KEY: buffer()}
    with pytest.raises(icontract.ViolationError, match="ADM-RISK-3"):
        TakesTheConfig.from_config(config_map, 3, 0)  # type: ignore[attr-defined]
    stats = SharedAdmissionStats.from_config(
        {stats_module.CONFIG_KEY: buffer()}, 3, 0
    )  # the real one reads it
    assert stats is not None and stats.get_num_requests() == 7


@pytest.mark.guard
@pytest.mark.parametrize("length", [0, 7])
def test_adm_stats_1_a_buffer_too_short_for_one_server_is_refused(length: int) -> None:
    """ADM-STATS-1, ADM-LAYOUT-2: one server needs one slot of 8 counters; a shorter buffer
    is refused in both modes, as for several servers."""
    with pytest.raises(ValueError, match="ADM-STATS-1: the buffer holds"):
        SharedAdmissionStats([0] * length, 1, 0)
