"""Admission cases: the counter layout and the check, by the arithmetic of specs/admission.md.

The `expect_*` functions never call `queueref.admission.controller` or `queueref.admission.tracker`.

Models no vLLM file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from queueref.admission.protocol import Protocol, parse_protocol
from queueref.oracle.vectors.common import Case, Expect, make_case
from queueref.validators import is_int_at_least

SLOT = 8  # COUNTERS_PER_SLOT: counter 0 of slot i is counter 8 * i (ADM-LAYOUT-3)


def expect_num_counters(client_count: Any) -> Expect:
    """Client_count * 8 for an int >= 1, else ValueError."""
    if is_int_at_least(client_count, 1):
        return {"result": client_count * SLOT}
    return {"error": "ValueError"}


def expect_check(
    setup: dict[str, Any], n: int
) -> tuple[Expect, list[int] | None, list[int] | None, int | None]:
    """(outcome, reads, slots after, local count after) of one check."""
    limit = setup["max_num_queued_reqs"]
    token_limit = setup["max_num_queued_tokens"]
    reserve = parse_protocol(setup["mode"]) is Protocol.WRITE_THEN_CHECK
    shared = setup["num_servers"] is not None
    slots = list(setup["slots"]) if shared else [setup["unfinished"]]
    own = setup["server"] if shared else 0
    before = list(slots)
    reads: list[int] = []

    def outcome(expect: Expect, kept: bool) -> tuple[Expect, list[int] | None, Any, Any]:
        after = slots if kept else before
        if shared:
            return expect, reads, after, None
        return expect, None, None, after[0]

    if n < 1:
        return outcome({"error": "ValueError"}, False)
    view = None
    if limit is not None:
        if reserve:
            slots[own] += n  # the reservation is written before the first read
        view = 0
        for index, value in enumerate(slots):
            if shared:
                reads.append(index * SLOT)
            if value < 0:
                return outcome({"error": "AdmissionCounterError"}, False)
            view += value
        fits = view <= limit if reserve else view + n <= limit
        if not fits:
            return outcome(
                {
                    "error": "QueueOverflowError",
                    "http_status": 503,
                    "view": view,
                    "n": n,
                    "limit": limit,
                },
                False,
            )
    if token_limit is not None and setup["queued_tokens"] >= token_limit:
        return outcome({"error": "MaxQueuedTokensError", "http_status": 503}, False)
    return outcome({"result": view}, True)


def _check_case(
    name: str, requirements: Iterable[str], description: str, setup: dict[str, Any], n: int
) -> Case:
    expect, reads, slots_after, count_after = expect_check(setup, n)
    found = set(requirements) | {"ADM-CTL-3"}
    if setup["num_servers"] is not None:
        found.add("ADM-CTL-7")  # the reads are recorded only on a shared buffer
    if "error" in expect:
        found.add("ADM-CTL-6")
    if expect.get("http_status") == 503:
        found.add("ADM-ERR-1")
    if parse_protocol(setup["mode"]) is Protocol.WRITE_THEN_CHECK:
        found.add("ADM-CTL-9")
    fields: dict[str, Any] = {"setup": setup, "n": n, "expect": expect}
    if reads is not None:
        fields["reads"] = reads
        fields["slots_after"] = slots_after
    else:
        fields["count_after"] = count_after
    return make_case(
        "check_admission", f"admission/check/{name}", found, description=description, **fields
    )


def _setup(
    mode: str,
    limit: int | None,
    *,
    slots: Sequence[int] | None = None,
    server: int = 0,
    unfinished: int = 0,
    tokens: int = 0,
    token_limit: int | None = None,
    padding: Sequence[int] | None = None,
) -> dict[str, Any]:
    setup: dict[str, Any] = {
        "mode": mode,
        "max_num_queued_reqs": limit,
        "max_num_queued_tokens": token_limit,
        "num_servers": len(slots) if slots is not None else None,
        "queued_tokens": tokens,
    }
    if slots is not None:
        setup["server"] = server
        setup["slots"] = list(slots)
        setup["padding"] = list(padding) if padding is not None else [0] * len(slots)
    else:
        setup["unfinished"] = unfinished
    return setup


def check_cases() -> list[Case]:
    """Check_admission at the limit minus one, the limit and plus one."""
    cases: list[Case] = []
    for mode in (Protocol.CHECK_THEN_WRITE.value, Protocol.WRITE_THEN_CHECK.value):
        for limit in (0, 1, 2, 3):
            for n in (1, 2):
                for current in sorted({max(0, limit - n - 1), max(0, limit - n), limit, limit + 1}):
                    name = f"{mode}/one_server/m{limit}_count{current}_n{n}"
                    cases.append(
                        _check_case(
                            name,
                            ["ADM-CTL-5"] if limit == 0 else [],
                            f"one server, own count {current}, cap {limit}, n {n}",
                            _setup(mode, limit, unfinished=current),
                            n,
                        )
                    )
                    other = max(0, current - 1)
                    own = current - other
                    name = f"{mode}/three_servers/m{limit}_slots{own}_{other}_0_server0_n{n}"
                    cases.append(
                        _check_case(
                            name,
                            ["ADM-STATS-3"] + (["ADM-CTL-5"] if limit == 0 else []),
                            f"three servers, slots ({own}, {other}, 0), cap {limit}, n {n}",
                            _setup(mode, limit, slots=[own, other, 0], unfinished=own),
                            n,
                        )
                    )
        cases.append(
            _check_case(
                f"{mode}/no_limit",
                ["ADM-CTL-3"],
                "no request limit: nothing is read, the view is null",
                _setup(mode, None, slots=[5, 7]),
                3,
            )
        )
        for tokens in (9, 10, 11):
            cases.append(
                _check_case(
                    f"{mode}/tokens/t10_queued{tokens}",
                    ["ADM-CTL-4", "ADM-RISK-2"],
                    f"token limit 10, own queued tokens {tokens}",
                    _setup(mode, 5, slots=[1, 0], unfinished=1, tokens=tokens, token_limit=10),
                    1,
                )
            )
        cases.append(
            _check_case(
                f"{mode}/tokens/both_limits_hit",
                ["ADM-CTL-4"],
                "both limits hit: the request limit is reported",
                _setup(mode, 1, slots=[1, 0], tokens=50, token_limit=10),
                1,
            )
        )
        cases.append(
            _check_case(
                f"{mode}/tokens/counter1_not_read",
                ["ADM-RISK-2", "ADM-LAYOUT-3"],
                "counter 1 of every slot holds junk; the check reads counter 0 only",
                _setup(mode, 4, slots=[1, 1], tokens=0, token_limit=10, padding=[99, 99]),
                1,
            )
        )
        cases.append(
            _check_case(
                f"{mode}/corrupt_slot",
                ["ADM-CTL-8"],
                "another server's slot holds -1: an error, never an admission",
                _setup(mode, 5, slots=[0, -1, 0]),
                1,
            )
        )
        cases.append(
            _check_case(
                f"{mode}/stale_slot_of_dead_server",
                ["ADM-RISK-1"],
                "a dead server's stale slot holds the whole cap: every request is rejected",
                _setup(mode, 2, slots=[0, 2]),
                1,
            )
        )
        for n in (0, -1):
            cases.append(
                _check_case(
                    f"{mode}/bad_n_{n}",
                    ["ADM-CTL-2"],
                    f"n = {n} is not a request weight",
                    _setup(mode, 2, slots=[0, 0]),
                    n,
                )
            )
    for limits in ((-1, None), (None, -1)):
        cases.append(
            make_case(
                "admission_controller",
                f"admission/controller/limits_{limits[0]}_{limits[1]}",
                ["ADM-CTL-1"],
                description="a negative limit is a configuration error",
                max_num_queued_reqs=limits[0],
                max_num_queued_tokens=limits[1],
                mode=Protocol.CHECK_THEN_WRITE.value,
                expect={"error": "ValueError"},
            )
        )
    cases.append(
        make_case(
            "admission_controller",
            "admission/controller/mode_atomic",
            ["ADM-CTL-1"],
            description="an unknown mode",
            max_num_queued_reqs=1,
            max_num_queued_tokens=None,
            mode="atomic",
            expect={"error": "ValueError"},
        )
    )
    return cases


def layout_cases() -> list[Case]:
    """The constants, num_counters, allocation and the shared stats."""
    cases: list[Case] = [
        make_case(
            "admission_layout",
            "admission/layout/constants",
            ["ADM-LAYOUT-1"],
            description="one 64-byte slot of eight 8-byte counters per server",
            constants={"CACHE_LINE_BYTES": 64, "COUNTER_BYTES": 8, "COUNTERS_PER_SLOT": 8},
        )
    ]
    for count in (-1, 0, 1, 2, 3, 4):
        cases.append(
            make_case(
                "num_counters",
                f"admission/layout/num_counters_{count}",
                ["ADM-LAYOUT-2"],
                description=f"num_counters({count})",
                client_count=count,
                expect=expect_num_counters(count),
            )
        )
    for servers in (0, 1, 2, 3):
        for limit in (None, 0, 1, -1):
            if servers < 1 or (limit is not None and limit < 0):
                expect: Expect = {"error": "ValueError"}
            elif servers == 1 or limit is None:
                expect = {"result": None}
            else:
                expect = {"result": {"length": servers * SLOT, "zeroed": True}}
            cases.append(
                make_case(
                    "allocate_admission_counters",
                    f"admission/allocate/servers_{servers}_limit_{limit}",
                    ["ADM-ALLOC-1"],
                    description="a buffer only for several servers with a request limit",
                    num_servers=servers,
                    max_num_queued_reqs=limit,
                    expect=expect,
                )
            )
    for count, index, length in (
        (2, 0, 16),
        (2, 1, 16),
        (2, 2, 16),
        (2, -1, 16),
        (0, 0, 8),
        (3, 0, 16),
        (3, 2, 24),
    ):
        ok = count >= 1 and 0 <= index < count and length >= count * SLOT
        cases.append(
            make_case(
                "shared_stats_init",
                f"admission/shared_stats/init_count{count}_index{index}_len{length}",
                ["ADM-STATS-1"],
                description="the constructor checks count, index and the buffer length",
                client_count=count,
                client_index=index,
                buffer_length=length,
                expect={"result": None} if ok else {"error": "ValueError"},
            )
        )
    cases.append(_shared_stats_case())
    return cases


def _shared_stats_case() -> Case:
    """Writes go to counter 0 of the own slot only."""
    counters = [0] * (3 * SLOT)
    steps: list[dict[str, Any]] = []

    def write(server: int, count: int) -> None:
        if count < 0:
            steps.append(
                {
                    "server": server,
                    "op": "set_num_requests",
                    "count": count,
                    "expect": {"error": "ValueError"},
                    "counters_after": list(counters),
                }
            )
            return
        counters[server * SLOT] = count
        steps.append(
            {
                "server": server,
                "op": "set_num_requests",
                "count": count,
                "expect": {"result": None},
                "counters_after": list(counters),
            }
        )

    def total(server: int) -> None:
        steps.append(
            {
                "server": server,
                "op": "get_num_requests",
                "expect": {"result": sum(counters[i * SLOT] for i in range(3))},
            }
        )

    for server, count in ((0, 2), (1, 3), (2, 0)):
        write(server, count)
    total(0)
    write(0, 1)
    total(2)
    write(1, -1)
    for slot in range(3):
        steps.append(
            {
                "server": 2,
                "op": "read_slot",
                "slot": slot,
                "expect": {"result": counters[slot * SLOT]},
            }
        )
    steps.append({"server": 0, "op": "read_slot", "slot": 3, "expect": {"error": "IndexError"}})
    return make_case(
        "shared_stats",
        "admission/shared_stats/three_servers",
        ["ADM-STATS-2", "ADM-STATS-3", "ADM-STATS-4", "ADM-LAYOUT-3"],
        description="three servers write their own slot and read the sum",
        num_servers=3,
        steps=steps,
    )
