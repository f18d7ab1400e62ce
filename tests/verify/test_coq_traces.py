"""OB-MODEL-1, OB-ONE-1: the Coq model and the Python step functions are one transition system.

Thousands of random valid traces -- walks with `queueref.admission.protocol`'s step functions
and walks of the explorer's model -- are written with their Python final states as Coq
examples checked by computation on `Model.run` (the executable step function that
`Model.step_exec` proves equal to the step relation); coqc must accept them all. One
impossible action and one wrong final state per kind of action must each be rejected, by a
failing proof step inside that example.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(relative: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def traces() -> ModuleType:
    _load("tools/run_coq.py", "run_coq")  # coq_traces imports it by that name
    return _load("tools/coq_traces.py", "coq_traces")


def test_python_traces_are_coq_traces(traces: ModuleType, tmp_path: Path) -> None:
    """OB-MODEL-1, OB-ONE-1: 2000 random Python traces agree with Coq; 8 invalid ones don't."""
    run_coq = sys.modules["run_coq"]
    run_coq.copy_sources(tmp_path, {"Model.v": (ROOT / "proofs/coq/Model.v").read_text()})
    assert run_coq.compile_file(tmp_path, "Model.v").ok
    result = traces.check(tmp_path, count=2000, seed=7)
    assert result["valid"] == 2001 and result["accepted"], result["detail"]
    names = {bad["name"]: bad for bad in result["invalid"]}
    kinds = ("start", "read", "decide", "finish")
    assert set(names) == {f"{how}_{kind}" for how in ("refused", "wrong") for kind in kinds}
    for bad in names.values():
        assert bad["status"] == "rejected", bad
        assert "Invalid_" in bad["detail"]  # located in its own file, at its proof step
    text = (tmp_path / "Traces.v").read_text()
    assert text.count("Example walk_") >= 1000 and text.count("Example explorer_") >= 1000


def test_the_python_side_refuses_what_coq_must_reject(traces: ModuleType) -> None:
    """The invalid actions are refused by the Python step functions too."""
    state = traces.initial(2)
    state = traces.apply(state, ("start", 0, 1), 1, 1)
    for action in [("start", 0, 1), ("decide", 0, 0), ("finish", 1, 0), ("start", 1, 2)]:
        with pytest.raises(ValueError, match="not enabled"):
            traces.apply(state, action, 1, 1)
    state = traces.apply(state, ("read", 0, 0), 1, 1)
    state = traces.apply(state, ("read", 0, 0), 1, 1)
    with pytest.raises(ValueError, match="not enabled"):
        traces.apply(state, ("read", 0, 0), 1, 1)
    state = traces.apply(state, ("decide", 0, 0), 1, 1)
    assert state.slots == (1, 0) and state.checks == (None, None)


def test_explorer_rejections_expand_to_reads_and_a_decision(traces: ModuleType) -> None:
    """The explorer's early `reject` is the fine model's remaining reads and a rejection."""
    import random

    rng = random.Random(3)
    for _ in range(200):
        actions, (slots, checks) = traces.explorer_walk(rng, 3, 2, 2, 30)
        state = traces.initial(3)
        for action in actions:
            state = traces.apply(state, action, 2, 2)
        assert state.slots == slots
        assert tuple(None if c is None else (c.n, c.next_slot) for c in state.checks) == checks
