"""The test vectors: written, replayed against the reference, covering every requirement.

The vectors' expectations come from the list model and the arithmetic of
specs/admission.md (queueref.oracle.vectors), the replay runs the reference,
so a clean replay is an agreement of two independent statements. A few
expectations are also checked here by hand, and a broken queue must fail
the replay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from method_variants import Change, broken_class

from queueref import FCFSRequestQueue
from queueref.cli.main import main
from queueref.oracle.replay import replay_case, replay_request_queue
from queueref.oracle.vectors import all_cases, read_vectors, write_vectors

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = re.compile(r"^\s*(?:[-*]\s+)?\*\*((?:RQ|ADM)-[A-Z0-9]+(?:-[A-Z0-9]+)*)\*\*")

# The requirements no vector can state, and why. They are written as (prefix,
# rest) pairs rather than as IDs on purpose: naming a requirement in a test
# counts as testing it for tools/trace.py, and listing it here is the opposite.
NOT_VECTORISED: dict[tuple[str, str], str] = {
    ("RQ", "PRI-6"): "the heap property is internal structure, invisible through the interface",
    ("RQ", "IMPL-1"): "the id index is internal structure, invisible through the interface",
    ("RQ", "IMPL-2"): "copying a queue through Python's pickle or copy.deepcopy: a Python"
    " object's copy, not an operation of the queue's interface",
    ("RQ", "COST-1"): "what a contract costs is not an input/output behaviour",
    ("RQ", "COST-2"): "where and when contracts are checked (every subclass, not under"
    " python -O) is not an input/output behaviour",
    ("RQ", "REQ-4"): "the constructor of queueref's own Request class; other languages build"
    " requests their own way (what a queue demands of one is RQ-REQ-3, which is vectorised)",
    ("ADM", "CTL-11"): "how a check loads the slots (one C-level pass over a ctypes buffer);"
    " its inputs and outputs are those of ADM-CTL-7, which is vectorised",
    ("ADM", "EV-3"): "when real processes take their timestamps, relative to the slot write",
    ("ADM", "FRONT-1"): "no await between check and registration: coroutine scheduling",
    ("ADM", "FRONT-2"): "all or nothing under failing submissions and cancelled coroutines",
    ("ADM", "SRV-1"): "spawned server processes sharing one array",
    ("ADM", "SRV-2"): "the parent reaping the slot of a dead process",
    ("ADM", "SRV-3"): "stopping and joining processes",
    ("ADM", "RISK-3"): "the construction order of Python objects from a config mapping",
    ("ADM", "TOK-1"): "the shared token limit (issue 15) is newer than the vector schema, "
    "which has no counter-1 setup yet; it is tested in tests/admission/test_admission_tokens.py",
    ("ADM", "TOK-2"): "the shared token limit (issue 15) is newer than the vector schema, "
    "which has no counter-1 setup yet; it is tested in tests/admission/test_admission_tokens.py",
    ("ADM", "TOK-3"): "the shared token limit (issue 15) is newer than the vector schema, "
    "which has no counter-1 setup yet; it is tested in tests/admission/test_admission_tokens.py",
    ("ADM", "TOK-4"): "the shared token limit (issue 15) is newer than the vector schema, "
    "which has no counter-1 setup yet; it is tested in tests/admission/test_admission_tokens.py",
    ("ADM", "TOK-5"): "the shared token limit (issue 15) is newer than the vector schema, "
    "which has no counter-1 setup yet; it is tested in tests/admission/test_admission_tokens.py",
    ("ADM", "TOK-6"): "the shared token limit (issue 15) is newer than the vector schema, "
    "which has no counter-1 setup yet; it is tested in tests/admission/test_admission_tokens.py",
    ("ADM", "EV-6"): "the token records (issue 15) are newer than the vector schema, whose "
    "event cases have no token fields yet; they are tested in "
    "tests/oracle/test_check_trace_tokens.py",
    ("ADM", "PRE-1"): "the whole admission path (preflight, rendering, registration) is a "
    "model of the explorer, not a vector case; tested in tests/verify/test_adm_preflight_paths.py",
    ("ADM", "PRE-2"): "the whole admission path (preflight, rendering, registration) is a "
    "model of the explorer, not a vector case; tested in tests/verify/test_adm_preflight_paths.py",
    ("ADM", "PRE-3"): "the whole admission path (preflight, rendering, registration) is a "
    "model of the explorer, not a vector case; tested in tests/verify/test_adm_preflight_paths.py",
    ("ADM", "PRE-4"): "the whole admission path (preflight, rendering, registration) is a "
    "model of the explorer, not a vector case; tested in tests/verify/test_adm_preflight_paths.py",
    ("ADM", "PRE-5"): "the whole admission path (preflight, rendering, registration) is a "
    "model of the explorer, not a vector case; tested in tests/verify/test_adm_preflight_paths.py",
    ("ADM", "PRE-6"): "the whole admission path (preflight, rendering, registration) is a "
    "model of the explorer, not a vector case; tested in tests/verify/test_adm_preflight_paths.py",
    ("ADM", "PRE-7"): "the whole admission path (preflight, rendering, registration) is a "
    "model of the explorer, not a vector case; tested in tests/verify/test_adm_preflight_paths.py",
    ("ADM", "TOK-7"): "streaming updates of a registered request are a model of the "
    "explorer, not a vector case; tested in tests/verify/test_adm_tok_streaming.py",
    ("ADM", "TOK-8"): "streaming updates of a registered request are a model of the "
    "explorer, not a vector case; tested in tests/verify/test_adm_tok_streaming.py",
}


def defined_requirements() -> set[str]:
    found = set()
    for spec in ("request-queue.md", "admission.md"):
        for line in (ROOT / "specs" / spec).read_text(encoding="utf-8").splitlines():
            match = DEFINITION.match(line)
            if match:
                found.add(match.group(1))
    return found


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vectors")
    write_vectors(out)
    return out


def test_every_vector_replays_clean_against_the_reference(tree: Path) -> None:
    """ORC-VEC-3, ORC-VEC-1: read back from disk, every case agrees with the reference."""
    cases = read_vectors(tree)
    assert len(cases) == len(all_cases()) > 300
    failures = {case["name"]: replay_case(case) for case in cases}
    assert {name: problems for name, problems in failures.items() if problems} == {}


def test_every_queue_and_admission_requirement_is_in_a_vector(tree: Path) -> None:
    """ORC-VEC-2: each RQ/ADM requirement of specs/ is in a case, or excluded with a reason."""
    defined = defined_requirements()
    assert len(defined) > 50  # both specs were read
    excluded = {f"{prefix}-{rest}" for prefix, rest in NOT_VECTORISED}
    covered = {rid for case in read_vectors(tree) for rid in case["requirements"]}
    assert sorted(defined - covered - excluded) == []
    assert sorted(excluded - defined) == [], "an exclusion names no requirement"
    assert sorted(excluded & covered) == [], "an excluded requirement is in a vector after all"
    assert sorted(covered - defined) == [], "a vector cites an undefined requirement"


def test_the_tree_is_documented_and_deterministic(tree: Path, tmp_path: Path) -> None:
    """ORC-VEC-1: one file per case named after it, an index, the same bytes every time."""
    index = json.loads((tree / "index.json").read_text(encoding="utf-8"))
    names = [entry["name"] for entry in index["cases"]]
    assert len(names) == len(set(names))
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*.json"))
    assert files == sorted([*(f"{name}.json" for name in names), "index.json"])
    for case in read_vectors(tree):
        assert case["format"] == 1 and case["requirements"], case["name"]
    write_vectors(tmp_path)
    for relative in files:
        assert (tmp_path / relative).read_bytes() == (tree / relative).read_bytes(), relative


def case_named(name: str) -> dict[str, Any]:
    (found,) = [case for case in all_cases() if case["name"] == name]
    return found


def test_some_expectations_by_hand() -> None:
    """ORC-VEC-3, RQ-FCFS-4, RQ-PRI-4, ADM-CTL-3, ADM-CTL-9, ADM-BOUND-1: spot checks."""
    fcfs = case_named("request_queue/fcfs/prepend_requests/queued_2_other_3")
    prepend = [op for op in fcfs["operations"] if op["op"] == "prepend_requests"][0]
    assert prepend["after"] == ["o3", "o2", "o1", "r1", "r2"]
    priority = case_named("request_queue/priority/prepend_requests/queued_2_other_3")
    prepend = [op for op in priority["operations"] if op["op"] == "prepend_requests"][0]
    # o2 (-1, 3.0) < o3 (0, 0.0) < o1 (0, 1.0) < r2 (0, 1.0) < r1 (1, 2.0)
    assert prepend["after"] == ["o2", "o3", "o1", "r2", "r1"]
    check = case_named("admission/check/check-then-write/three_servers/m2_slots1_1_0_server0_n1")
    assert check["expect"] == {
        "error": "QueueOverflowError",
        "http_status": 503,
        "view": 2,
        "n": 1,
        "limit": 2,
    }
    assert check["reads"] == [0, 8, 16] and check["slots_after"] == [1, 1, 0]
    reserve = case_named("admission/check/write-then-check/three_servers/m2_slots1_0_0_server0_n1")
    assert reserve["expect"] == {"result": 2} and reserve["slots_after"] == [2, 0, 0]
    bound = case_named("admission/bound/check-then-write/n3_m2_w1")
    assert bound["expect"] == {"global_count": 4, "bound": 4}
    assert case_named("admission/bound/write-then-check/n3_m2_w1")["expect"]["global_count"] == 1


_NoReversal = broken_class(
    FCFSRequestQueue,
    "_NoReversal",
    Change(
        "prepend_requests",
        "the reference with the FCFS reversal of prepend_requests taken out",
        "self._items.extendleft(incoming)",
        "self._items.extendleft(reversed(incoming))",
    ),
)


def test_a_wrong_queue_fails_the_replay() -> None:
    """ORC-VEC-3, RQ-FCFS-4: the replay reports the vectors a broken queue disagrees with."""
    import queueref.config

    was = queueref.config.deep_checks()
    queueref.config.set_deep_checks(False)  # let the replay, not a contract, see the bug
    try:
        failing = {
            case["name"]
            for case in all_cases()
            if case["kind"] == "request_queue"
            and case["policy"] == "fcfs"
            and replay_request_queue(case, factory=_NoReversal)
        }
    finally:
        queueref.config.set_deep_checks(was)
    assert "request_queue/fcfs/prepend_requests/queued_2_other_3" in failing
    assert "request_queue/fcfs/prepend_requests/queued_0_other_1" not in failing
    assert "request_queue/fcfs/add_pop/size_3" not in failing


def test_the_vectors_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ORC-VEC-1, ORC-VEC-3: `queueref vectors --out DIR` writes and replays; errors: one line."""
    assert main(["vectors", "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert f"cases to {tmp_path / 'v'}" in out
    assert "all agree" in out
    assert (tmp_path / "v" / "index.json").is_file()
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    assert main(["vectors", "--out", str(blocker / "v")]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "cannot write" in captured.err
