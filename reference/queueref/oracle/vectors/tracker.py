"""Tracker cases: one server's bookkeeping step by step, expected by `TrackerModel`.

Models no vLLM file.
"""

from __future__ import annotations

from typing import Any

from queueref.admission.tracker_model import TrackerModel
from queueref.oracle.vectors.common import Case, make_case


def tracker_cases() -> list[Case]:
    """The tracker's bookkeeping and slot refresh, step by step."""
    scripts: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "add_finish_abort": [
            ("add", {"request_id": "solo", "n": 1, "num_prompt_tokens": 100}),
            ("add", {"request_id": "fan", "n": 3, "num_prompt_tokens": 10}),
            ("prefill_done", {"request_id": "solo"}),
            ("finish", {"request_id": "0_fan"}),
            ("abort", {"request_ids": ["fan"]}),
            ("abort", {"request_ids": ["fan", "nobody"]}),
            ("finish", {"request_id": "solo"}),
            ("finish", {"request_id": "solo"}),
            ("prefill_done", {"request_id": "solo"}),
        ],
        "taken_ids": [
            ("add", {"request_id": "a", "n": 2, "num_prompt_tokens": 1}),
            ("add", {"request_id": "a", "n": 1, "num_prompt_tokens": 1}),
            ("add", {"request_id": "0_a", "n": 1, "num_prompt_tokens": 1}),
            ("add", {"request_id": "b", "n": 0, "num_prompt_tokens": 1}),
            ("add", {"request_id": "b", "n": 1, "num_prompt_tokens": -1}),
            ("abort", {"request_ids": ["1_a"]}),
            ("finish", {"request_id": "0_a"}),
            ("add", {"request_id": "a", "n": 1, "num_prompt_tokens": 0}),
        ],
        "reservations": [
            ("reserve", {"n": 2}),
            ("add", {"request_id": "x", "n": 1, "num_prompt_tokens": 3}),
            ("release_reservation", {"n": 2}),
            ("release_reservation", {"n": 1}),
            ("reserve", {"n": 0}),
            ("reserve", {"n": 3}),
            ("add", {"request_id": "y", "n": 3, "num_prompt_tokens": 0}),
            ("abort", {"request_ids": []}),
        ],
    }
    requirements = {
        "add": {"ADM-TRK-1", "ADM-TRK-5", "ADM-TRK-6"},
        "abort": {"ADM-TRK-2", "ADM-TRK-5"},
        "finish": {"ADM-TRK-3", "ADM-TRK-5"},
        "prefill_done": {"ADM-TRK-4"},
        "reserve": {"ADM-TRK-7"},
        "release_reservation": {"ADM-TRK-7"},
    }
    cases = []
    for name, script in scripts.items():
        model = TrackerModel()
        steps = []
        found: set[str] = {"ADM-TRK-4", "ADM-TRK-6"}
        for op, arguments in script:
            if op == "add":
                expect = model.add(
                    arguments["request_id"], arguments["n"], arguments["num_prompt_tokens"]
                )
            elif op == "abort":
                expect = model.abort(arguments["request_ids"])
            else:
                expect = getattr(model, op)(*arguments.values())
            found |= requirements[op]
            steps.append({"op": op, **arguments, "expect": expect, "after": model.state()})
        cases.append(
            make_case(
                "tracker",
                f"admission/tracker/{name}",
                found,
                description="one server's tracker (server 1 of 2 sharing counters)",
                num_servers=2,
                server=1,
                steps=steps,
            )
        )
    return cases
