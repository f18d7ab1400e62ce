"""Event cases: event lines (valid and not) and the two sweeps of `queueref.trace.events`.

Models no vLLM file.
"""

from __future__ import annotations

from typing import Any

from queueref.oracle.vectors.common import Case, Expect, make_case
from queueref.trace.events import sweep


def event_cases() -> list[Case]:
    """Event lines (valid and not) and the two sweeps."""
    cases: list[Case] = []
    lines: list[tuple[str, str, Expect]] = [
        (
            "admit",
            '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":2,"view":0}',
            {"result": "same"},
        ),
        (
            "finish_with_t_before",
            '{"t":2.0,"server":1,"event":"finish","request_id":"0_a","n":1,"view":null,'
            '"t_before":1.5}',
            {"result": "same"},
        ),
        ("bad_kind", '{"t":1.0,"server":0,"event":"admitted","request_id":"a","n":1}', {}),
        ("n_zero", '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":0}', {}),
        ("negative_server", '{"t":1.0,"server":-1,"event":"admit","request_id":"a","n":1}', {}),
        (
            "view_on_departure",
            '{"t":1.0,"server":0,"event":"abort","request_id":"a","n":1,"view":3}',
            {},
        ),
        (
            "t_before_after_t",
            '{"t":1.0,"server":0,"event":"finish","request_id":"a","n":1,"t_before":2.0}',
            {},
        ),
        ("missing_n", '{"t":1.0,"server":0,"event":"admit","request_id":"a"}', {}),
        ("unknown_key", '{"t":1.0,"server":0,"event":"admit","request_id":"a","n":1,"x":1}', {}),
        (
            "preflight_reserve",
            '{"t":1.0,"server":0,"event":"reserve","request_id":"a","n":2,"view":1}',
            {"result": "same"},
        ),
        (
            "preflight_release_with_view",
            '{"t":1.0,"server":0,"event":"release","request_id":"a","n":2,"view":1}',
            {},
        ),
    ]
    for name, line, expect in lines:
        if not expect:
            expect = {"error": "ValueError"}
        elif name == "finish_with_t_before":
            expect = {
                "result": '{"t":2.0,"server":1,"event":"finish","request_id":"0_a","n":1,'
                '"view":null,"t_before":1.5}'
            }
        else:
            expect = {"result": line}
        cases.append(
            make_case(
                "event_json",
                f"admission/events/json_{name}",
                ["ADM-EV-1", "ADM-EV-2", *(["ADM-EV-7"] if name.startswith("preflight") else [])],
                description="parse one line; a valid event writes back as the same line",
                line=line,
                expect=expect,
            )
        )
    traces: dict[str, list[dict[str, Any]]] = {
        "spec_example": [
            {"t": 1.0, "server": 0, "event": "admit", "request_id": "a", "n": 2, "view": 0},
            {"t": 2.0, "server": 1, "event": "admit", "request_id": "b", "n": 1, "view": 2},
            {
                "t": 2.0,
                "server": 0,
                "event": "finish",
                "request_id": "0_a",
                "n": 1,
                "view": None,
                "t_before": 1.9,
            },
            {"t": 3.0, "server": 1, "event": "reject", "request_id": "c", "n": 1, "view": 2},
        ],
        "ties_and_early_release": [
            {"t": 1.0, "server": 0, "event": "admit", "request_id": "a", "n": 1, "view": 0},
            {
                "t": 3.0,
                "server": 0,
                "event": "finish",
                "request_id": "a",
                "n": 1,
                "view": None,
                "t_before": 2.0,
            },
            {"t": 2.0, "server": 1, "event": "admit", "request_id": "b", "n": 1, "view": 0},
            {"t": 3.0, "server": 1, "event": "admit", "request_id": "c", "n": 1, "view": 1},
        ],
        "empty": [],
    }
    for name, events in traces.items():
        in_flight = [
            (
                e["t"],
                0 if e["event"] == "admit" else 1,
                e["n"] if e["event"] == "admit" else -e["n"],
            )
            for e in events
            if e["event"] != "reject"
        ]
        admitted = [
            (e["t"], 1, e["n"]) if e["event"] == "admit" else (e["t_before"], 0, -e["n"])
            for e in events
            if e["event"] != "reject"
        ]
        cases.append(
            make_case(
                "event_sweep",
                f"admission/events/sweep_{name}",
                ["ADM-EV-4", "ADM-EV-5"],
                description="max_in_flight and max_admitted_in_flight of a trace",
                events=events,
                expect={
                    "max_in_flight": sweep(in_flight),
                    "max_admitted_in_flight": sweep(admitted),
                },
            )
        )
    return cases
