"""Bound cases: the schedule that reaches the bound of each protocol, read by read.

Models no vLLM file.
"""

from __future__ import annotations

from typing import Any

from queueref.admission.protocol import Protocol, parse_protocol
from queueref.admission.protocol import bound as protocol_bound
from queueref.oracle.vectors.common import Case, Expect, make_case


def bound_cases() -> list[Case]:
    """The schedule that reaches M + (N-1)*min(M, W), in both modes."""
    cases = []
    for mode in (Protocol.CHECK_THEN_WRITE.value, Protocol.WRITE_THEN_CHECK.value):
        for servers in (1, 2, 3):
            for limit in (0, 1, 2, 3):
                for weight in (1, 2):
                    cases.append(_bound_case(mode, servers, limit, weight))
    return cases


def _bound_case(mode: str, servers: int, limit: int, weight: int) -> Case:
    """Server 0 fills up to M - w alone; then all check w, all read, all decide, all register."""
    w = max(1, min(limit, weight))  # with M = 0 nothing fits; try weight 1
    slots = [0] * servers
    steps: list[dict[str, Any]] = []
    reserve = parse_protocol(mode) is Protocol.WRITE_THEN_CHECK

    def fits(view: int, n: int) -> bool:
        return view <= limit if reserve else view + n <= limit

    for index in range(max(0, limit - w)):
        view = sum(slots) + (1 if reserve else 0)
        admitted = fits(view, 1)
        steps.append(
            {
                "server": 0,
                "op": "admit",
                "request_id": f"warm{index}",
                "n": 1,
                "expect": {"result": view} if admitted else {"error": "QueueOverflowError"},
            }
        )
        if admitted:
            slots[0] += 1
    if reserve:
        for server in range(servers):
            slots[server] += w
    for server in range(servers):
        steps.append({"server": server, "op": "start_check", "n": w})
    views = [sum(slots)] * servers
    for server in range(servers):
        steps.append({"server": server, "op": "read_all", "expect": {"result": views[server]}})
    admitted_servers = []
    for server in range(servers):
        if fits(views[server], w):
            admitted_servers.append(server)
            expect: Expect = {"result": views[server]}
        else:
            if reserve:
                slots[server] -= w
            expect = {"error": "QueueOverflowError"}
        steps.append({"server": server, "op": "decide", "expect": expect})
    for server in admitted_servers:
        if not reserve:
            slots[server] += w
        steps.append({"server": server, "op": "register", "request_id": f"r{server}", "n": w})
    if reserve:
        requirements = ["ADM-BOUND-2", "ADM-CTL-7", "ADM-CTL-9"]
    else:
        requirements = ["ADM-BOUND-1", "ADM-CTL-7"]
    return make_case(
        "admission_schedule",
        f"admission/bound/{mode}/n{servers}_m{limit}_w{weight}",
        requirements,
        description="every server reads every slot before any of them writes",
        setup={"num_servers": servers, "max_num_queued_reqs": limit, "mode": mode},
        steps=steps,
        expect={
            "global_count": sum(slots),
            "bound": protocol_bound(parse_protocol(mode), servers, limit, weight),
        },
    )
