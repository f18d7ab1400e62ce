"""ADM-CTL-11: over a C-level counter buffer a check reads each pass in one C-level pass.

The one-pass read must be the same reads as the stepwise path (counter 0 of every slot,
then counter 1 of every slot, in index order) and the same decision. These tests compare
the two paths on the same slot values, and show that the comparison refutes a one-pass
read with a wrong stride or a skipped slot.
"""

from __future__ import annotations

import ctypes
import multiprocessing
from typing import Any

import icontract
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queueref.admission.shared_stats as shared_stats_module
from queueref import AdmissionController, RequestTracker, SharedAdmissionStats
from queueref.admission import protocol
from queueref.errors import AdmissionCounterError, AdmissionRejected

STEP = SharedAdmissionStats.COUNTERS_PER_SLOT
REQUESTS, TOKENS = SharedAdmissionStats.REQUEST_COUNT, SharedAdmissionStats.QUEUED_TOKENS


def raw(requests: list[int], tokens: list[int] | None = None) -> Any:
    """A RawArray("q") with counter 0 and counter 1 of consecutive slots set; the other
    counters of each slot hold a marker no pass may read."""
    counters = multiprocessing.get_context("spawn").RawArray("q", len(requests) * STEP)
    for index, value in enumerate(requests):
        counters[index * STEP + REQUESTS] = value
        counters[index * STEP + TOKENS] = tokens[index] if tokens else 0
        for other in range(2, STEP):
            counters[index * STEP + other] = 10**6 + index
    return counters


def make_controller(counters: Any, servers: int, **kwargs: Any) -> AdmissionController:
    """A controller of the last server (its slot is the last one read)."""
    stats = SharedAdmissionStats(counters, servers, servers - 1)
    return AdmissionController(tracker=RequestTracker(stats), shared_stats=stats, **kwargs)


def one_pass_agrees(requests: list[int], tokens: list[int]) -> bool:
    """Whether both one-pass reads return, counter by counter, what the slot reads read."""
    stats = SharedAdmissionStats(raw(requests, tokens), len(requests), 0)
    slots = range(len(requests))
    return (
        stats.reads_in_one_pass
        and [stats.read_slot(i) for i in slots] == requests
        and [stats.read_tokens_slot(i) for i in slots] == tokens
        and stats.pass_reader(REQUESTS)() == sum(requests)
        and stats.pass_reader(TOKENS)() == sum(tokens)
        and stats.get_num_requests() == sum(requests)
        and stats.get_num_queued_tokens() == sum(tokens)
    )


def test_only_c_level_buffers_read_in_one_pass() -> None:
    """ADM-CTL-11: a RawArray("q") or a c_int64 array does; a list, a 4-byte ctypes array
    or a buffer whose `__getitem__` is Python code keeps the stepwise read."""

    class PythonBuffer(list[int]):
        def __getitem__(self, index: Any) -> Any:
            return super().__getitem__(index)

    assert SharedAdmissionStats(raw([0, 0]), 2, 0).reads_in_one_pass
    assert SharedAdmissionStats((ctypes.c_int64 * 16)(), 2, 0).reads_in_one_pass
    assert not SharedAdmissionStats([0] * 16, 2, 0).reads_in_one_pass
    assert not SharedAdmissionStats((ctypes.c_int32 * 16)(), 2, 0).reads_in_one_pass
    assert not SharedAdmissionStats(PythonBuffer([0] * 16), 2, 0).reads_in_one_pass


@given(st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), min_size=1, max_size=64))
def test_one_pass_reads_what_the_slot_reads_read(slots: list[tuple[int, int]]) -> None:
    """ADM-CTL-11, ADM-CTL-7, ADM-TOK-2: counter 0 (then counter 1) of every slot, in
    index order, nothing else; the sums are those of the slot reads."""
    assert one_pass_agrees([r for r, _ in slots], [t for _, t in slots])


@given(st.integers(-(2**40), 2**40), st.lists(st.integers(0, 2**62), max_size=64))
def test_read_all_is_the_accumulate_fold(view: int, values: list[int]) -> None:
    """ADM-CTL-11: `read_all` is `accumulate` folded over the values in index order."""
    folded = view
    for value in values:
        folded = protocol.accumulate(folded, value)
    assert protocol._read_all(view, values) == folded


def outcome(server: AdmissionController, n: int, prompt: int) -> Any:
    try:
        return ("admitted", server.check_admission(n, prompt))
    except AdmissionRejected as error:  # the name, the message and what it read
        return (type(error).__name__, str(error), sorted(vars(error).items()))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), min_size=1, max_size=5),
    st.one_of(st.none(), st.integers(0, 14)),
    st.one_of(st.none(), st.integers(0, 60)),
    st.integers(1, 3),
    st.integers(0, 8),
    st.sampled_from(["check-then-write", "write-then-check"]),
    st.sampled_from(["ge", "fits"]),
    st.sampled_from([None, "local"]),
)
def test_one_pass_check_decides_as_the_stepwise_check(
    slots: list[tuple[int, int]],
    cap: int | None,
    token_cap: int | None,
    n: int,
    prompt: int,
    mode: str,
    rule: str,
    scope: str | None,
) -> None:
    """ADM-CTL-11: the same slot values give the same outcome (view or rejection, with its
    message), the same counters and the same reservations afterwards, on the one-pass
    path (a RawArray) as on the stepwise path (a list)."""
    servers = len(slots)
    fast = raw([r for r, _ in slots], [t for _, t in slots])
    slow = list(fast)
    kwargs: dict[str, Any] = {"max_num_queued_reqs": cap, "max_num_queued_tokens": token_cap}
    kwargs |= {"mode": mode, "token_rule": rule, "token_scope": scope}
    fast_server, slow_server = (
        make_controller(fast, servers, **kwargs),
        make_controller(slow, servers, **kwargs),
    )
    assert fast_server.shared_stats is not None and fast_server.shared_stats.reads_in_one_pass
    assert slow_server.shared_stats is not None and not slow_server.shared_stats.reads_in_one_pass
    assert outcome(fast_server, n, prompt) == outcome(slow_server, n, prompt)
    assert list(fast) == slow
    for attribute in ("num_reserved", "num_reserved_tokens"):
        assert getattr(fast_server.tracker, attribute) == getattr(slow_server.tracker, attribute)


@pytest.mark.guard
@pytest.mark.parametrize("counter", [REQUESTS, TOKENS], ids=["requests", "tokens"])
def test_a_negative_slot_is_refused_naming_it_and_reservations_given_back(counter: int) -> None:
    """ADM-CTL-8, ADM-CTL-11: a negative value in either pass is an AdmissionCounterError
    naming the slot and counter, as on the stepwise path; the reservations are written
    back."""
    messages = []
    for make in (raw, list):
        counters = make(raw([1, 0, 0], [0, 0, 0]))
        counters[1 * STEP + counter] = -3
        server = make_controller(
            counters, 3, max_num_queued_reqs=10, max_num_queued_tokens=100, mode="write-then-check"
        )
        with pytest.raises(AdmissionCounterError, match=f"slot 1 counter {counter}") as error:
            server.check_admission(2, 5)
        messages.append(str(error.value))
        assert counters[2 * STEP + REQUESTS] == 0 and counters[2 * STEP + TOKENS] == 0
        assert server.tracker.num_reserved == 0 and server.tracker.num_reserved_tokens == 0
    assert messages[0] == messages[1]


def test_check_admission_takes_the_one_pass_and_start_check_stays_stepwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADM-CTL-11, ADM-CTL-7: over a RawArray check_admission makes no slot read through
    Python; start_check/read_next still read one slot per step."""
    server = make_controller(
        raw([2, 3], [4, 5]), 2, max_num_queued_reqs=10, max_num_queued_tokens=99
    )
    stats = server.shared_stats
    assert stats is not None
    calls: list[tuple[int, int]] = []
    original = SharedAdmissionStats._read

    def recording_read(self: SharedAdmissionStats, index: int, counter: int) -> int:
        calls.append((index, counter))
        return original(self, index, counter)

    monkeypatch.setattr(SharedAdmissionStats, "_read", recording_read)
    assert server.check_admission(1) == 5 and calls == []
    check = server.start_check(1)
    while not check.done:
        check.read_next()
    assert check.decide() == 5
    assert calls == [(0, REQUESTS), (1, REQUESTS), (0, TOKENS), (1, TOKENS)]


def wrong_stride(counters: object, client_count: int, counter: int) -> memoryview | None:
    """Broken: stride 1, so item 1 is counter 1 of slot 0 instead of counter 0 of slot 1."""
    if not isinstance(counters, ctypes.Array):
        return None  # lists keep the stepwise read, as with the real view
    return memoryview(counters).cast("B").cast("q")[counter : counter + client_count]


def skipped_slot(counters: object, client_count: int, counter: int) -> memoryview | None:
    """Broken: starts one slot late, so slot 0 is never read."""
    if not isinstance(counters, ctypes.Array):
        return None  # lists keep the stepwise read, as with the real view
    return memoryview(counters).cast("B").cast("q")[counter + STEP : client_count * STEP : STEP]


@pytest.mark.parametrize("broken", [wrong_stride, skipped_slot])
def test_the_comparison_refutes_a_broken_one_pass_read(
    monkeypatch: pytest.MonkeyPatch, broken: Any
) -> None:
    """ADM-CTL-11 has teeth: a wrong stride reads other counters as slots, a skipped slot
    loses its count; the comparison with the slot reads catches both, and the check
    admits a request the stepwise check rejects."""
    requests, tokens = [3, 4, 2], [7, 1, 5]
    assert one_pass_agrees(requests, tokens)  # the control: the real view agrees
    monkeypatch.setattr(shared_stats_module, "_strided_counter_view", broken)
    assert not one_pass_agrees(requests, tokens)
    counters = raw(requests, tokens)
    fast = make_controller(counters, 3, max_num_queued_reqs=9)
    slow = make_controller(list(counters), 3, max_num_queued_reqs=9)
    slow_outcome, fast_outcome = outcome(slow, 1, 1), outcome(fast, 1, 1)
    assert slow_outcome[0] == "QueueOverflowError" and ("view", 9) in slow_outcome[2]
    assert fast_outcome != slow_outcome  # wrong stride: view 3 + 7 + 10**6; skipped: 4 + 2


@pytest.mark.contracts
@pytest.mark.parametrize("mode", ["check-then-write", "write-then-check"])
def test_the_postconditions_bind_the_one_pass_check(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """ADM-CTL-3, ADM-CTL-4 on the one-pass path: the inline postconditions catch a
    decision step that always admits."""
    full = make_controller(raw([5, 5]), 2, max_num_queued_reqs=6, mode=mode)
    monkeypatch.setattr(protocol, "admits", lambda *args: True)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-3"):
        full.check_admission(2)
    monkeypatch.setattr(protocol, "admits_tokens", lambda *args: True)
    monkeypatch.setattr(protocol, "keeps_reservation", lambda *args: True)
    server = make_controller(raw([0, 0]), 2, max_num_queued_tokens=10, mode=mode)
    server.tracker.add("own", num_prompt_tokens=10)
    with pytest.raises(icontract.ViolationError, match="ADM-CTL-4"):
        server.check_admission(1, 1)
