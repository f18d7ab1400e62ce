"""Specs read as documentation; requirement IDs live in specs, contracts and tests.

* Every spec starts with a fresh table of contents (`tools/spec_toc.py`).
* The docstrings of the cleaned modules cite no requirement ID: the ID goes
  in the contract description, the error message or a comment beside the code
  that enforces it (where `tools/trace.py` finds it), not in prose.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reference" / "queueref"
ID = re.compile(r"\b(?:RQ|WL|ADM|OB|ORC|E2E)-[A-Z0-9]+(?:-[A-Z0-9]+)*\b")

#: Modules whose docstrings carry no requirement ID. The modules of other
#: branches (queues, waiting, http, oracle checkers, ...) join this list as they are cleaned.
CLEAN_MODULES = (
    "admission/check.py",
    "admission/contracts/__init__.py",
    "admission/contracts/check.py",
    "admission/contracts/controller.py",
    "admission/contracts/shared_stats.py",
    "admission/contracts/tracker.py",
    "admission/controller.py",
    "errors.py",
    "trace/events.py",
    "admission/front.py",
    "queues/base.py",
    "queues/checks.py",
    "queues/clauses.py",
    "queues/contracts.py",
    "queues/fcfs.py",
    "queues/priority.py",
    "queues/factory.py",
    "request.py",
    "runtime/servers.py",
    "admission/shared_stats.py",
    "runtime/stress.py",
    "admission/tracker.py",
    "validators.py",
    "waiting/lifecycle.py",
    "waiting/checks.py",
    "waiting/leave.py",
    "waiting/places.py",
    "waiting/state.py",
    "waiting/step.py",
    "waiting/stream.py",
    "cli/bound_table.py",
    "cli/vectors.py",
    "admission/protocol.py",
    "admission/tracker_model.py",
    "oracle/vectors/__init__.py",
    "oracle/vectors/admission.py",
    "oracle/vectors/bound.py",
    "oracle/vectors/common.py",
    "oracle/vectors/events.py",
    "oracle/vectors/queue.py",
    "oracle/vectors/tracker.py",
    "trace/files.py",
    "oracle/trace_bounds.py",
    "oracle/trace_replay.py",
    "oracle/trace_report.py",
    "verify/search.py",
)


def spec_toc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spec_toc", ROOT / "tools" / "spec_toc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_spec_starts_with_fresh_contents() -> None:
    toc = spec_toc()
    for spec in sorted((ROOT / "specs").glob("*.md")):
        text = spec.read_text(encoding="utf-8")
        assert text.split("\n", 3)[2] == toc.START, spec.name
        assert toc.with_contents(text) == text, f"{spec.name}: run python tools/spec_toc.py --write"


def test_a_new_heading_makes_the_contents_stale() -> None:
    toc = spec_toc()
    text = (ROOT / "specs" / "admission.md").read_text(encoding="utf-8")
    grown = text + "\n## A section added later\n\nText.\n"
    assert toc.with_contents(grown) != grown
    assert "- [A section added later](#a-section-added-later)" in toc.with_contents(grown)
    assert toc.with_contents("# T\n\nNo contents yet.\n\n## One\n") != "# T\n\nNo contents yet.\n"


def test_anchors_are_github_anchors() -> None:
    toc = spec_toc()
    assert toc.anchor("Paper proof of OB-BOUND-1") == "paper-proof-of-ob-bound-1"
    assert toc.anchor("Write-then-check: a hard cap, and its price") == (
        "write-then-check-a-hard-cap-and-its-price"
    )
    assert toc.anchor("`check_admission` and `decide`") == "check_admission-and-decide"


def ids_in_docstrings(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found += ID.findall(doc)
    return found


def test_docstrings_cite_no_requirement_id() -> None:
    for name in CLEAN_MODULES:
        source = (PACKAGE / name).read_text(encoding="utf-8")
        assert ids_in_docstrings(source) == [], name


def test_an_id_in_a_docstring_is_found_but_not_one_in_a_contract() -> None:
    source = '''
import icontract

@icontract.require(lambda n: n >= 1, "ADM-CTL-2: n is an int >= 1")
def check(n: int) -> None:
    """Admit or raise (ADM-CTL-3)."""
    # ADM-CTL-8: a comment is where an ID may sit beside the code.
'''
    assert ids_in_docstrings(source) == ["ADM-CTL-3"]


# --- one heading and one runnable example per public function --------------------------

#: The modules whose public functions `specs/admission.md` documents in "API reference".
API_MODULES = (
    "validators",
    "admission.shared_stats",
    "admission.tracker",
    "admission.check",
    "admission.controller",
    "admission.front",
    "trace.events",
    "admission.protocol",
    "runtime.servers",
    "runtime.stress",
)

#: They start real processes: shown in "Real processes", run by tests/runtime/test_servers.py.
PROCESS_STARTING = {
    "ServerGroup.start",
    "ServerGroup.join",
    "ServerGroup.reap",
    "ServerGroup.restart",
    "ServerGroup.start_reaper",
    "ServerGroup.close",
    "ServerGroup.slot_counts",
    "run_stress",
    "stress_worker",
}


def public_functions(module_names: tuple[str, ...]) -> list[str]:
    """`name` or `Class.method` of every public function defined in the modules."""
    import importlib
    import inspect

    names = []
    for module_name in module_names:
        module = importlib.import_module(f"queueref.{module_name}")
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj):
                names.append(name)
            elif inspect.isclass(obj) and not getattr(obj, "_is_protocol", False):
                # A typing.Protocol declares what another class implements: documented there.
                for attr, value in vars(obj).items():
                    method = isinstance(value, staticmethod | classmethod)
                    if not attr.startswith("_") and (method or inspect.isfunction(value)):
                        names.append(f"{name}.{attr}")
    return names


def reference_problems(names: list[str], spec: str) -> list[str]:
    """Every name without exactly one `### \\`name\\`` heading followed by a `>>>` example."""
    section = spec.split("\n## API reference\n", 1)[-1].split("\n## ", 1)[0]
    parts = re.split(r"^### `([^`]+)`$", section, flags=re.MULTILINE)
    bodies: dict[str, list[str]] = {}
    for title, body in zip(parts[1::2], parts[2::2], strict=True):
        bodies.setdefault(title, []).append(body)
    problems = []
    for name in names:
        found = bodies.get(name, [])
        if len(found) != 1:
            problems.append(f"{name}: {len(found)} headings")
        elif "```python\n>>> " not in found[0]:
            problems.append(f"{name}: no runnable example")
    return problems


def test_every_public_function_has_one_heading_and_one_example() -> None:
    names = [n for n in public_functions(API_MODULES) if n not in PROCESS_STARTING]
    assert len(names) > 50
    spec = (ROOT / "specs" / "admission.md").read_text(encoding="utf-8")
    assert reference_problems(names, spec) == []
    names = public_functions(("request",))
    assert "request_key" in names and "RequestStatus.is_blocked" in names
    spec = (ROOT / "specs" / "request-queue.md").read_text(encoding="utf-8")
    assert reference_problems(names, spec) == []


def test_a_function_without_a_reference_entry_is_reported() -> None:
    spec = (ROOT / "specs" / "admission.md").read_text(encoding="utf-8")
    doubled = spec + "\n### `sweep`\n\n```python\n>>> 1\n1\n\n```\n"
    assert reference_problems(["sweep", "not_documented"], doubled) == [
        "sweep: 2 headings",
        "not_documented: 0 headings",
    ]
    bare = spec.replace("### `sweep`\n\n```python\n>>> ", "### `sweep`\n\n```text\n")
    assert reference_problems(["sweep"], bare) == ["sweep: no runnable example"]
