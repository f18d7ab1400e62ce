"""The pure queue semantics: the classes follow them, and CrossHair refutes a broken copy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queueref import FCFSRequestQueue, PriorityRequestQueue, Request
from queueref.queues import semantics as sem

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "proofs/generated/broken/queue_semantics_broken.py"  # relative to ROOT, as crosshair wants

# An operation: (name, key). Keys are small so that operations collide on them.
operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "prepend", "pop", "remove", "remove_all", "prepend_all"]),
        st.integers(0, 9),
    ),
    max_size=30,
)


def request_for(key: int) -> Request:
    # priority == key, so the key order of the semantics is the requests' order.
    return Request(f"r{key}", priority=key, arrival_time=0.0)


def run_both(policy: str, ops: list[tuple[str, int]]) -> None:
    queue = FCFSRequestQueue() if policy == "fcfs" else PriorityRequestQueue()
    model: tuple[int, ...] = ()
    live: dict[int, Request] = {}
    for name, key in ops:
        if name in ("add", "prepend") and key not in live:
            live[key] = request_for(key)
            if policy == "fcfs" and name == "add":
                queue.add_request(live[key])
                model = sem.fcfs_add(model, key)
            elif policy == "fcfs":
                queue.prepend_request(live[key])
                model = sem.fcfs_prepend(model, key)
            else:
                getattr(queue, f"{name}_request")(live[key])
                model = sem.priority_add(model, key)
        elif name == "pop" and model:
            popped = queue.pop_request()
            key_out, model = sem.fcfs_pop(model) if policy == "fcfs" else sem.priority_pop(model)
            assert popped is live.pop(key_out)
        elif name == "remove" and key in live:
            queue.remove_request(live.pop(key))
            model = sem.remove(model, key)
        elif name == "remove_all":
            named = tuple(k for k in (key, key + 1, 42) if k in live or k == 42)
            queue.remove_requests([live.pop(k) for k in named if k in live] + [request_for(42)])
            model = sem.remove_all(model, named)
        elif name == "prepend_all":
            incoming = tuple(k for k in (key, key + 3) if k not in live)
            other = FCFSRequestQueue()
            for k in dict.fromkeys(incoming):
                live[k] = request_for(k)
                other.add_request(live[k])
            queue.prepend_requests(other)
            incoming = tuple(dict.fromkeys(incoming))
            if policy == "fcfs":
                model = sem.fcfs_prepend_all(model, incoming)
            else:
                for k in incoming:
                    model = sem.priority_add(model, k)
        assert tuple(r.priority for r in queue) == model


@given(operations)
def test_fcfs_class_follows_the_semantics(ops: list[tuple[str, int]]) -> None:
    """RQ-FCFS-1, RQ-FCFS-2, RQ-FCFS-3, RQ-FCFS-4, RQ-ALL-6, RQ-ALL-7"""
    run_both("fcfs", ops)


@given(operations)
def test_priority_class_follows_the_semantics(ops: list[tuple[str, int]]) -> None:
    """RQ-PRI-1, RQ-PRI-2, RQ-PRI-3, RQ-PRI-4, RQ-ALL-6, RQ-ALL-7"""
    run_both("priority", ops)


def crosshair(target: str, timeout: float = 3) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosshair",
            "check",
            "--analysis_kind=icontract",
            f"--per_condition_timeout={timeout}",
            target,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    return done.stdout + done.stderr


@pytest.mark.contracts
def test_crosshair_refutes_the_broken_copy() -> None:
    """RQ-FCFS-3, RQ-ALL-6: the check `make verify` runs on the module refutes a broken copy.

    Each seeded bug is reported as a counterexample with concrete arguments.
    """
    out = crosshair(BROKEN)
    assert "error: false when calling fcfs_prepend(" in out, out
    assert "error: false when calling remove(" in out, out
