"""Unit tests of the shared counters, the allocation, the controller and its errors.

Expected values are written out by hand from `specs/admission.md` (and from
the upstream test suite's cases), never computed by the code under test.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import icontract
import pytest

from queueref import (
    AdmissionController,
    AdmissionRejected,
    MaxQueuedTokensError,
    QueueOverflowError,
    RequestTracker,
    SharedAdmissionStats,
    allocate_admission_counters,
)
from queueref.errors import AdmissionCounterError

SPEC = Path(__file__).resolve().parents[2] / "specs" / "admission.md"


class RecordingBuffer:
    """A counter buffer that logs every read and write, and has no length."""

    def __init__(self, size: int) -> None:
        self.values = [0] * size
        self.log: list[tuple[str, int, int]] = []

    def __getitem__(self, index: int) -> int:
        self.log.append(("read", index, self.values[index]))
        return self.values[index]

    def __setitem__(self, index: int, value: int) -> None:
        self.log.append(("write", index, value))
        self.values[index] = value

    def reads(self) -> list[int]:
        return [index for kind, index, _ in self.log if kind == "read"]

    def writes(self) -> list[tuple[int, int]]:
        return [(index, value) for kind, index, value in self.log if kind == "write"]


def local_server(unfinished: int = 0, queued_tokens: int = 0, **limits: Any) -> AdmissionController:
    """A single server with `unfinished` requests (no prompt) and `queued_tokens` in prefill."""
    tracker = RequestTracker()
    for i in range(unfinished):
        tracker.add(f"r{i}", num_prompt_tokens=0)
    if queued_tokens:
        tracker.add("tokens", num_prompt_tokens=queued_tokens)
    return AdmissionController(tracker=tracker, **limits)


def shared_servers(
    count: int, limit: int | None, mode: str = "check-then-write", counters: Any = None
) -> list[AdmissionController]:
    buffer = counters if counters is not None else [0] * (8 * count)
    made = []
    for index in range(count):
        stats = SharedAdmissionStats(buffer, count, index)
        made.append(
            AdmissionController(
                limit,
                tracker=RequestTracker(stats),
                shared_stats=stats,
                mode=mode,  # type: ignore[arg-type]
            )
        )
    return made


# ---------------------------------------------------------------------------
# Layout and the constants table of the spec


def spec_constants(text: str) -> dict[str, int]:
    """The `| `NAME` | value | ...` rows of the constants table."""
    rows = re.findall(r"^\| `([A-Z_]+)` \| (\d+) \|", text, flags=re.MULTILINE)
    return {name: int(value) for name, value in rows}


def constants_mismatch(spec_text: str, stats: object) -> dict[str, Any]:
    """The constants on which the spec's table and the class disagree: name -> (spec, code)."""
    table = spec_constants(spec_text)
    code = {name: getattr(stats, name, None) for name in table}
    return {name: (table[name], code[name]) for name in table if table[name] != code[name]}


def test_constants_table_matches_the_code() -> None:
    """ADM-LAYOUT-1: the table in the spec and the class constants agree."""
    text = SPEC.read_text(encoding="utf-8")
    table = spec_constants(text)
    assert table == {"CACHE_LINE_BYTES": 64, "COUNTER_BYTES": 8, "COUNTERS_PER_SLOT": 8}
    assert constants_mismatch(text, SharedAdmissionStats) == {}
    assert SharedAdmissionStats.COUNTERS_PER_SLOT == 64 // 8


def test_adm_layout_1_a_wrong_constant_in_the_spec_or_the_code_is_caught() -> None:
    """ADM-LAYOUT-1: the comparison catches a spec with a wrong value, and code with one."""
    text = SPEC.read_text(encoding="utf-8")
    broken_spec = text.replace("| `COUNTER_BYTES` | 8 |", "| `COUNTER_BYTES` | 4 |")
    assert broken_spec != text
    assert constants_mismatch(broken_spec, SharedAdmissionStats) == {"COUNTER_BYTES": (4, 8)}

    wrong_slot = SimpleNamespace(CACHE_LINE_BYTES=64, COUNTER_BYTES=8, COUNTERS_PER_SLOT=16)
    assert constants_mismatch(text, wrong_slot) == {"COUNTERS_PER_SLOT": (8, 16)}


@pytest.mark.parametrize(("count", "expected"), [(1, 8), (2, 16), (3, 24), (64, 512)])
def test_num_counters(count: int, expected: int) -> None:
    """ADM-LAYOUT-2: one slot of 8 counters per server."""
    assert SharedAdmissionStats.num_counters(count) == expected


@pytest.mark.guard
@pytest.mark.parametrize("count", [0, -1, 1.0, True, "2", None])
def test_num_counters_bad_input(count: Any) -> None:
    """ADM-LAYOUT-2: not a positive int -> ValueError."""
    with pytest.raises(ValueError, match="ADM-LAYOUT-2"):
        SharedAdmissionStats.num_counters(count)


def test_slot_layout_and_reserved_counters() -> None:
    """ADM-LAYOUT-3: counter 0 of slot i is at 8*i; counters 1..7 stay 0 (ADM-RISK-2)."""
    counters = [0] * 24
    servers = shared_servers(3, 100, counters=counters)
    servers[2].tracker.add("a", n=3, num_prompt_tokens=50)
    servers[1].tracker.add("b", num_prompt_tokens=7)
    assert counters[16] == 3 and counters[8] == 1 and counters[0] == 0
    assert [value for index, value in enumerate(counters) if index % 8 != 0] == [0] * 21
    stats = servers[2].shared_stats
    assert stats is not None and stats.slot_offset == 16 and stats.REQUEST_COUNT == 0
    assert stats.QUEUED_TOKENS == 1


# ---------------------------------------------------------------------------
# Shared stats


def test_shared_stats_aggregate_api_servers() -> None:
    """ADM-STATS-2, ADM-STATS-3: 2 + 3 = 5 seen by both; after server 0 writes 1, 4."""
    counters = allocate_admission_counters(2, 10)
    server_0 = SharedAdmissionStats(counters, 2, 0)
    server_1 = SharedAdmissionStats(counters, 2, 1)
    server_0.set_num_requests(2)
    assert server_0.get_num_requests() == 2
    server_1.set_num_requests(3)
    assert server_0.get_num_requests() == server_1.get_num_requests() == 5
    server_0.set_num_requests(1)
    assert server_0.get_num_requests() == 4
    assert server_1.read_slot(0) == 1 and server_1.read_slot(1) == 3


@pytest.mark.parametrize(
    ("count", "index"), [(2, 2), (2, -1), (0, 0), (3, 1.0), (True, 0), (2, None)]
)
def test_shared_stats_index_out_of_range(count: Any, index: Any) -> None:
    """ADM-STATS-1: 0 <= client_index < client_count, both ints."""
    with pytest.raises(ValueError, match="ADM-STATS-1"):
        SharedAdmissionStats([0] * 64, count, index)


def test_shared_stats_short_buffer() -> None:
    """ADM-STATS-1: a buffer with fewer than num_counters(client_count) counters is refused."""
    with pytest.raises(ValueError, match="ADM-STATS-1"):
        SharedAdmissionStats([0] * 15, 2, 0)
    raw = (ctypes.c_longlong * 8)()
    with pytest.raises(ValueError, match="ADM-STATS-1"):
        SharedAdmissionStats(raw, 2, 1)
    SharedAdmissionStats([0] * 16, 2, 1)  # exactly long enough is fine


@pytest.mark.guard
@pytest.mark.parametrize("count", [-1, 1.5, True, "3"])
def test_set_num_requests_refuses_bad_counts(count: Any) -> None:
    """ADM-STATS-2: counts are never negative; nothing is written."""
    counters = [0] * 16
    stats = SharedAdmissionStats(counters, 2, 1)
    stats.set_num_requests(4)
    with pytest.raises(ValueError, match="ADM-STATS-2"):
        stats.set_num_requests(count)
    assert counters == [0] * 8 + [4] + [0] * 7


def test_set_num_requests_writes_only_the_own_slot() -> None:
    """ADM-STATS-2, ADM-STATS-4: one write, to counter 0 of the own slot."""
    buffer = RecordingBuffer(32)
    SharedAdmissionStats(buffer, 4, 2).set_num_requests(9)
    assert buffer.log == [("write", 16, 9)]


@pytest.mark.contracts
def test_write_contract_catches_a_write_into_another_slot() -> None:
    """ADM-STATS-2 has teeth: a corrupt slot offset writing the neighbour's slot is caught."""
    counters = [0] * 16
    stats = SharedAdmissionStats(counters, 2, 0)
    stats._slot_offset = 8  # deliberately broken: server 0 now writes server 1's slot
    with pytest.raises(icontract.ViolationError, match="ADM-STATS-2"):
        stats.set_num_requests(3)


def test_get_num_requests_reads_one_slot_at_a_time() -> None:
    """ADM-STATS-3: one __getitem__ per slot, counter 0, in index order."""
    buffer = RecordingBuffer(40)
    for index, value in enumerate([1, 0, 4, 2, 3]):
        buffer.values[8 * index] = value
    assert SharedAdmissionStats(buffer, 5, 3).get_num_requests() == 10
    assert buffer.reads() == [0, 8, 16, 24, 32]


@pytest.mark.contracts
def test_adm_stats_3_a_read_loop_that_drops_the_values_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-STATS-3 has teeth: a read loop that drops the values violates the postcondition."""
    import queueref.admission.protocol as protocol_module

    counters = [0] * 24
    counters[16] = 5
    stats = SharedAdmissionStats(counters, 3, 0)
    monkeypatch.setattr(protocol_module, "_read_all", lambda view, slot_values: view)
    with pytest.raises(icontract.ViolationError, match="ADM-STATS-3"):
        stats.get_num_requests()


def test_read_slot_out_of_range() -> None:
    """ADM-STATS-3: a slot index outside 0..N-1 is an IndexError."""
    stats = SharedAdmissionStats([0] * 16, 2, 0)
    with pytest.raises(IndexError):
        stats.read_slot(2)


@pytest.mark.guard
@pytest.mark.parametrize("bad", [-1, -(2**63)])
def test_negative_slot_value_is_an_error(bad: int) -> None:
    """ADM-CTL-8: a negative count read from a slot is an error, never an admission."""
    counters = [0] * 16
    servers = shared_servers(2, 10, counters=counters)
    counters[8] = bad
    with pytest.raises(AdmissionCounterError, match="ADM-CTL-8"):
        servers[0].check_admission()
    with pytest.raises(AdmissionCounterError):
        servers[0].shared_stats.get_num_requests()  # type: ignore[union-attr]
    assert counters[0] == 0


def test_negative_slot_value_in_write_then_check_mode_rolls_back() -> None:
    """ADM-CTL-8, ADM-CTL-6: the reservation is given back before the error propagates."""
    counters = [0] * 16
    servers = shared_servers(2, 10, mode="write-then-check", counters=counters)
    servers[0].tracker.add("held")
    counters[8] = -3
    with pytest.raises(AdmissionCounterError):
        servers[0].check_admission(2)
    assert counters[0] == 1 and servers[0].tracker.num_reserved == 0


def test_from_config_reads_without_popping() -> None:
    """ADM-RISK-3: the config mapping is unchanged; a second reader still finds the buffer."""
    counters = allocate_admission_counters(2, 4)
    client_addresses: dict[str, Any] = {"mp_admission_counters": counters, "input": "tcp://x"}
    first = SharedAdmissionStats.from_config(client_addresses, 2, 0)
    second = SharedAdmissionStats.from_config(client_addresses, 2, 1)
    assert client_addresses == {"mp_admission_counters": counters, "input": "tcp://x"}
    assert first is not None and second is not None
    first.set_num_requests(3)
    assert second.get_num_requests() == 3
    assert SharedAdmissionStats.from_config({"input": "tcp://x"}, 2, 0) is None
    assert SharedAdmissionStats.from_config(None, 2, 0) is None


# ---------------------------------------------------------------------------
# Allocation


def test_allocation_only_with_several_servers_and_a_limit() -> None:
    """ADM-ALLOC-1: a zeroed RawArray("q") of num_counters(N), else None."""
    assert allocate_admission_counters(1, 10) is None
    assert allocate_admission_counters(3, None) is None
    assert allocate_admission_counters(1, None) is None
    counters = allocate_admission_counters(3, 0)
    assert counters is not None
    assert len(counters) == 24 and list(counters) == [0] * 24
    assert ctypes.sizeof(counters) == 3 * 64  # one 64-byte cache line per server
    assert counters._type_ is ctypes.c_longlong


@pytest.mark.guard
@pytest.mark.parametrize(("servers", "limit"), [(0, 10), (-1, 10), (2, -1), (2, 1.5), (2.0, 3)])
def test_allocation_bad_input(servers: Any, limit: Any) -> None:
    """ADM-ALLOC-1: bad input is a ValueError."""
    with pytest.raises(ValueError, match="ADM-ALLOC-1"):
        allocate_admission_counters(servers, limit)


# ---------------------------------------------------------------------------
# The check: the upstream test suite's cases


def test_no_limits_admit_everything() -> None:
    """ADM-CTL-3: without limits nothing is read and everything is admitted."""
    assert local_server(999, 999).check_admission() is None


def test_request_limit_under() -> None:
    """ADM-CTL-3: 5 unfinished, limit 10 -> admitted (the view 5 is returned)."""
    assert local_server(5, max_num_queued_reqs=10).check_admission() == 5


def test_request_limit_at() -> None:
    """ADM-CTL-3: 10 of 10 -> QueueOverflowError carrying view, n and limit."""
    with pytest.raises(QueueOverflowError) as caught:
        local_server(10, max_num_queued_reqs=10).check_admission()
    assert (caught.value.view, caught.value.n, caught.value.limit) == (10, 1, 10)


def test_request_limit_with_n() -> None:
    """ADM-CTL-3: 8 of 10 with n=3 -> rejected; 7 of 10 with n=3 -> admitted."""
    with pytest.raises(QueueOverflowError):
        local_server(8, max_num_queued_reqs=10).check_admission(3)
    assert local_server(7, max_num_queued_reqs=10).check_admission(3) == 7


def test_zero_limits_reject_everything() -> None:
    """ADM-CTL-5: a request limit of 0 and a token limit of 0 reject an empty server."""
    with pytest.raises(QueueOverflowError):
        local_server(0, max_num_queued_reqs=0).check_admission()
    with pytest.raises(MaxQueuedTokensError):
        local_server(0, 0, max_num_queued_tokens=0).check_admission()
    with pytest.raises(QueueOverflowError):
        shared_servers(3, 0)[1].check_admission()
    with pytest.raises(QueueOverflowError):
        shared_servers(3, 0, mode="write-then-check")[1].check_admission()


@pytest.mark.parametrize(
    ("queued", "rejected"), [(500, False), (999, False), (1000, True), (1500, True)]
)
def test_token_limit(queued: int, rejected: bool) -> None:
    """ADM-CTL-4: queued tokens >= limit -> MaxQueuedTokensError."""
    server = local_server(0, queued, max_num_queued_tokens=1000)
    if rejected:
        with pytest.raises(MaxQueuedTokensError) as caught:
            server.check_admission()
        assert (caught.value.queued_tokens, caught.value.limit) == (queued, 1000)
    else:
        assert server.check_admission() is None


def test_both_limits_independent_and_request_limit_first() -> None:
    """ADM-CTL-4: tokens alone reject; with both limits hit the request limit is reported."""
    with pytest.raises(MaxQueuedTokensError):
        local_server(5, 1000, max_num_queued_reqs=100, max_num_queued_tokens=1000).check_admission()
    with pytest.raises(QueueOverflowError):
        local_server(10, 1000, max_num_queued_reqs=10, max_num_queued_tokens=1000).check_admission()


def test_prefill_done_lowers_the_token_backlog() -> None:
    """ADM-CTL-4, ADM-TRK-4: a request out of prefill no longer counts against the token limit."""
    server = local_server(0, 1000, max_num_queued_tokens=1000)
    with pytest.raises(MaxQueuedTokensError):
        server.check_admission()
    server.tracker.prefill_done("tokens")
    assert server.check_admission() is None


# ---------------------------------------------------------------------------
# Shared stats in the check


def test_shared_snapshot_enforces_the_global_limit() -> None:
    """ADM-CTL-3, ADM-CTL-6: own count 0, shared total at the limit -> rejected, no slot written."""
    counters = allocate_admission_counters(2, 2)
    stats_0 = SharedAdmissionStats(counters, 2, 0)
    stats_1 = SharedAdmissionStats(counters, 2, 1)
    stats_0.set_num_requests(2)
    controller = AdmissionController(2, shared_stats=stats_1)
    assert controller.tracker.get_num_unfinished_requests() == 0
    with pytest.raises(QueueOverflowError) as caught:
        controller.check_admission()
    assert caught.value.view == 2
    assert stats_0.get_num_requests() == 2
    assert list(counters) == [2] + [0] * 15


def test_shared_check_reads_each_slot_once_in_order() -> None:
    """ADM-CTL-7: one read of counter 0 per slot, in index order, the own slot once, no write."""
    buffer = RecordingBuffer(32)
    buffer.values[0], buffer.values[8], buffer.values[24] = 1, 2, 3
    stats = SharedAdmissionStats(buffer, 4, 2)
    controller = AdmissionController(10, tracker=RequestTracker(stats), shared_stats=stats)
    assert controller.check_admission(4) == 6
    assert buffer.log == [("read", 0, 1), ("read", 8, 2), ("read", 16, 0), ("read", 24, 3)]


def test_write_then_check_writes_first_then_reads() -> None:
    """ADM-CTL-9, ADM-CTL-7: reservation written, then every slot read once (own included)."""
    buffer = RecordingBuffer(24)
    buffer.values[0] = 2
    stats = SharedAdmissionStats(buffer, 3, 1)
    controller = AdmissionController(
        5, tracker=RequestTracker(stats), shared_stats=stats, mode="write-then-check"
    )
    assert controller.check_admission(3) == 5
    assert buffer.log == [("write", 8, 3), ("read", 0, 2), ("read", 8, 3), ("read", 16, 0)]
    assert controller.tracker.num_reserved == 3
    buffer.log.clear()
    assert controller.tracker.add("r", n=3) == ["0_r", "1_r", "2_r"]
    assert buffer.log == [("write", 8, 3)]  # the reservation became the count: no double count
    assert controller.tracker.num_reserved == 0


def test_write_then_check_rejection_rolls_back_exactly() -> None:
    """ADM-CTL-9, ADM-CTL-6: a rejected reservation is written back to the value before."""
    buffer = RecordingBuffer(16)
    buffer.values[8] = 2
    stats = SharedAdmissionStats(buffer, 2, 0)
    tracker = RequestTracker(stats)
    tracker.add("own")
    controller = AdmissionController(
        4, tracker=tracker, shared_stats=stats, mode="write-then-check"
    )
    buffer.log.clear()
    with pytest.raises(QueueOverflowError) as caught:
        controller.check_admission(2)
    assert caught.value.view == 5
    assert buffer.log == [("write", 0, 3), ("read", 0, 3), ("read", 8, 2), ("write", 0, 1)]
    assert tracker.num_reserved == 0 and tracker.get_num_unfinished_requests() == 1


def test_write_then_check_token_rejection_rolls_back() -> None:
    """ADM-CTL-6, ADM-CTL-4: a token rejection in write-then-check mode also gives the
    reservation back."""
    counters = [0] * 16
    stats = SharedAdmissionStats(counters, 2, 1)
    tracker = RequestTracker(stats)
    tracker.add("long", num_prompt_tokens=100)
    controller = AdmissionController(
        10, 100, tracker=tracker, shared_stats=stats, mode="write-then-check"
    )
    with pytest.raises(MaxQueuedTokensError):
        controller.check_admission(2)
    assert counters[8] == 1 and tracker.num_reserved == 0


@pytest.mark.contracts
def test_write_then_check_on_the_local_count() -> None:
    """ADM-CTL-9: without shared stats the reservation is in the local count."""
    controller = local_server(2, max_num_queued_reqs=4, mode="write-then-check")
    assert controller.check_admission(2) == 4
    assert controller.tracker.num_reserved == 2
    with pytest.raises(QueueOverflowError):
        controller.check_admission(1)
    assert controller.tracker.num_reserved == 2
    controller.cancel_admission(2)
    assert controller.tracker.num_reserved == 0
    with pytest.raises(ValueError, match="ADM-CTL-9"):
        controller.cancel_admission(1)


def test_cancel_admission_in_check_then_write_mode_is_a_no_op() -> None:
    """ADM-CTL-9: check-then-write wrote nothing, so cancelling writes nothing."""
    counters = [0] * 16
    servers = shared_servers(2, 3, counters=counters)
    servers[0].check_admission(2)
    servers[0].cancel_admission(2)
    assert counters == [0] * 16


def test_write_then_check_without_request_limit_reserves_nothing() -> None:
    """ADM-CTL-9, ADM-CTL-3: no request limit: nothing to reserve, nothing read."""
    buffer = RecordingBuffer(16)
    stats = SharedAdmissionStats(buffer, 2, 0)
    controller = AdmissionController(
        None,
        10,
        tracker=RequestTracker(stats),
        shared_stats=stats,
        mode="write-then-check",
        token_scope="local",  # ADM-TOK-6: the shared scope reads counter 1 (tested below)
    )
    assert controller.check_admission(3) is None
    assert buffer.log == [] and controller.tracker.num_reserved == 0


def test_check_interleaves_between_reads() -> None:
    """ADM-CTL-7: a write between two reads of one check is seen only if its slot is read later."""
    counters = [0] * 24
    servers = shared_servers(3, 2, counters=counters)
    check = servers[0].start_check(1)
    assert check.read_next() == 0  # slot 0
    assert check.read_next() == 0  # slot 1
    servers[1].tracker.add("late")  # slot 1 already read: not seen
    servers[2].tracker.add("seen")  # slot 2 not read yet: seen
    assert check.read_next() == 1
    assert check.done and check.view == 1
    assert check.decide() == 1


@pytest.mark.contracts
@pytest.mark.guard
def test_step_api_misuse_is_refused() -> None:
    """ADM-CTL-7: decide before reading everything, or reading past the end, is refused
    (a `RuntimeError`, by the precondition or, under `python -O`, the guard)."""
    servers = shared_servers(2, 2)
    check = servers[0].start_check(1)
    with pytest.raises(RuntimeError, match="ADM-CTL-7"):
        check.decide()
    check.read_next()
    check.read_next()
    with pytest.raises(RuntimeError, match="ADM-CTL-7"):
        check.read_next()
    check.decide()
    with pytest.raises(RuntimeError, match="ADM-CTL-7"):
        check.decide()


def test_abandoned_check_gives_the_reservation_back() -> None:
    """ADM-CTL-6: an abandoned write-then-check check writes the reservation back."""
    counters = [0] * 16
    servers = shared_servers(2, 5, mode="write-then-check", counters=counters)
    check = servers[1].start_check(3)
    assert counters[8] == 3 and check.holds_reservation
    check.read_next()
    check.abandon()
    assert counters[8] == 0 and not check.is_open and servers[1].tracker.num_reserved == 0


@pytest.mark.contracts
def test_adm_ctl_3_a_decision_step_that_always_admits_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-3 has teeth: a decision step that always admits is caught by the postcondition."""
    monkeypatch.setattr("queueref.admission.controller.protocol.admits", lambda *args: True)
    server = local_server(10, max_num_queued_reqs=10)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-3"):
        server.check_admission()


def test_token_rule_uses_only_the_own_tokens() -> None:
    """ADM-RISK-2: in the local token scope counter 1 is never read; the own tokens decide."""
    buffer = RecordingBuffer(16)
    buffer.values[9] = 10**9  # another server's "queued tokens" counter
    stats = SharedAdmissionStats(buffer, 2, 0)
    tracker = RequestTracker(stats)
    tracker.add("mine", num_prompt_tokens=10)
    controller = AdmissionController(
        5, 11, tracker=tracker, shared_stats=stats, token_scope="local"
    )
    buffer.log.clear()
    assert controller.check_admission() == 1
    assert buffer.reads() == [0, 8]
    tracker.add("more", num_prompt_tokens=1)
    with pytest.raises(MaxQueuedTokensError):
        controller.check_admission()


# ---------------------------------------------------------------------------
# Bad input


@pytest.mark.guard
@pytest.mark.parametrize(
    "limits",
    [
        {"max_num_queued_reqs": -1},
        {"max_num_queued_tokens": -5},
        {"max_num_queued_reqs": 2.5},
        {"max_num_queued_reqs": 3.0},
        {"max_num_queued_tokens": "100"},
        {"max_num_queued_reqs": True},
    ],
)
def test_bad_limits(limits: dict[str, Any]) -> None:
    """ADM-CTL-1: negative or non-integer limits -> ValueError at construction."""
    with pytest.raises(ValueError, match="ADM-CTL-1"):
        AdmissionController(**limits)


@pytest.mark.guard
def test_bad_mode_and_mismatched_tracker() -> None:
    """ADM-CTL-1: an unknown mode, or a tracker refreshing other stats, is a ValueError."""
    with pytest.raises(ValueError, match="ADM-CTL-1"):
        AdmissionController(3, mode="optimistic")  # type: ignore[arg-type]
    stats = SharedAdmissionStats([0] * 16, 2, 0)
    with pytest.raises(ValueError, match="ADM-CTL-1"):
        AdmissionController(3, tracker=RequestTracker(), shared_stats=stats)
    with pytest.raises(ValueError, match="ADM-CTL-1"):
        AdmissionController(3, tracker=RequestTracker(stats))


@pytest.mark.guard
@pytest.mark.parametrize("n", [0, -1, 1.0, True, "1", None])
def test_bad_n(n: Any) -> None:
    """ADM-CTL-2: n must be an int >= 1; nothing changes."""
    counters = [0] * 16
    servers = shared_servers(2, 5, mode="write-then-check", counters=counters)
    with pytest.raises(ValueError, match="ADM-CTL-2"):
        servers[0].check_admission(n)
    assert counters == [0] * 16 and servers[0].tracker.num_reserved == 0


@pytest.mark.guard
def test_rejection_changes_no_count() -> None:
    """ADM-CTL-6: a rejected request leaves every slot and every tracker as they were."""
    for mode in ("check-then-write", "write-then-check"):
        counters = [0] * 24
        servers = shared_servers(3, 3, mode=mode, counters=counters)
        for index, server in enumerate(servers):
            server.tracker.add(f"r{index}")
        before = list(counters)
        with pytest.raises(QueueOverflowError):
            servers[1].check_admission(1)
        assert counters == before
        assert [s.tracker.get_num_unfinished_requests() for s in servers] == [1, 1, 1]
        assert [s.tracker.num_reserved for s in servers] == [0, 0, 0]


# ---------------------------------------------------------------------------
# Errors


def test_error_classes() -> None:
    """ADM-ERR-1: subclasses of AdmissionRejected, HTTP 503, busy/backlog + try again."""
    overflow = QueueOverflowError()
    tokens = MaxQueuedTokensError()
    for error in (overflow, tokens):
        assert isinstance(error, AdmissionRejected)
        assert error.http_status == 503
        assert "try again" in error.message.lower()
        assert str(error) == error.message
    assert "busy" in overflow.message.lower()
    assert "backlog" in tokens.message.lower()
    assert not isinstance(overflow, ValueError)
    custom = QueueOverflowError("custom", view=3, n=1, limit=3)
    assert (custom.message, custom.view, custom.n, custom.limit) == ("custom", 3, 1, 3)


# ---------------------------------------------------------------------------
# The bound, reached step by step


@pytest.mark.parametrize(
    ("servers", "cap", "weight", "worst"),
    [(2, 1, 1, 2), (3, 2, 1, 4), (3, 3, 2, 7), (4, 4, 2, 10), (2, 2, 3, 4), (4, 1, 3, 4)],
)
def test_check_then_write_reaches_the_bound(
    servers: int, cap: int, weight: int, worst: int
) -> None:
    """ADM-BOUND-1: server 0 fills to M - w alone, then all read before anyone writes."""
    w = min(cap, weight)
    controllers = shared_servers(servers, cap)
    for i in range(cap - w):
        controllers[0].check_admission(1)
        controllers[0].tracker.add(f"fill{i}")
    checks = [controller.start_check(w) for controller in controllers]
    for check in checks:
        while not check.done:
            check.read_next()
    assert [check.decide() for check in checks] == [cap - w] * servers
    for index, (controller, check) in enumerate(zip(controllers, checks, strict=True)):
        controller.tracker.add(f"late{index}", check.n)
    total = sum(c.tracker.get_num_unfinished_requests() for c in controllers)
    assert total == worst
    assert controllers[0].shared_stats.get_num_requests() == worst  # type: ignore[union-attr]


@pytest.mark.parametrize(("servers", "cap", "weight"), [(2, 1, 1), (3, 2, 1), (4, 4, 2)])
def test_write_then_check_refuses_the_same_schedule(servers: int, cap: int, weight: int) -> None:
    """ADM-BOUND-2: write-then-check refuses the same schedule whole (spurious rejections)."""
    w = min(cap, weight)
    controllers = shared_servers(servers, cap, mode="write-then-check")
    for i in range(cap - w):
        controllers[0].check_admission(1)
        controllers[0].tracker.add(f"fill{i}")
    checks = [controller.start_check(w) for controller in controllers]
    for check in checks:
        while not check.done:
            check.read_next()
    for check in checks:
        with pytest.raises(QueueOverflowError):
            check.decide()
    total = sum(c.tracker.get_num_unfinished_requests() for c in controllers)
    assert total == cap - w
    assert controllers[0].shared_stats.get_num_requests() == cap - w  # type: ignore[union-attr]


def test_spec_examples_fail_on_a_broken_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADM-CTL-3, ADM-BOUND-2: the runnable examples of the spec fail on a broken decision."""
    import doctest

    clean = doctest.testfile(str(SPEC), module_relative=False, report=False, verbose=False)
    assert clean.failed == 0 and clean.attempted > 40
    monkeypatch.setattr("queueref.admission.controller.protocol.admits", lambda *args: True)
    broken = doctest.testfile(str(SPEC), module_relative=False, report=False, verbose=False)
    assert broken.failed >= 3


def test_bad_input_is_refused_without_contracts_too() -> None:
    """ADM-CTL-1, ADM-CTL-2, ADM-STATS-1, ADM-CTL-8: the checks hold under `python -O`."""
    import os
    import subprocess
    import sys

    script = """
import queueref.admission.controller as a
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.admission.tracker import RequestTracker
from queueref.errors import AdmissionCounterError
assert not __debug__
def refused(call, error):
    try:
        call()
    except error as caught:
        return str(caught).split(":")[0]
    raise SystemExit("not refused")
print(refused(lambda: a.AdmissionController(-1), ValueError))
print(refused(lambda: a.AdmissionController(3).check_admission(0), ValueError))
print(refused(lambda: SharedAdmissionStats([0] * 8, 2, 0), ValueError))
print(refused(lambda: SharedAdmissionStats([0] * 16, 2, 0).set_num_requests(-1), ValueError))
counters = [0] * 16
stats = SharedAdmissionStats(counters, 2, 0)
counters[8] = -1
controller = a.AdmissionController(3, shared_stats=stats)
print(refused(controller.check_admission, AdmissionCounterError))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    completed = subprocess.run(
        [sys.executable, "-O", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout.split() == [
        "ADM-CTL-1",
        "ADM-CTL-2",
        "ADM-STATS-1",
        "ADM-STATS-2",
        "ADM-CTL-8",
    ]
