"""The package's import graph: no cycle, and the subsystems' layers hold.

Every `import` and `from ... import` of every module counts, wherever it is
written: at the top, under `if TYPE_CHECKING:`, or inside a function.

Package level: each module belongs to a subsystem (its folder under `queueref/`, or
`top` for the few modules at the top; the trace records sit below admission, whose
front door writes them). A subsystem may import only the subsystems
`ALLOWED` names for it, and the subsystems form no cycle. The core (queues, waiting,
admission) imports none of the runtime, the oracle, the verification machinery or
the CLI.

Module level: inside the core, a module may import only modules below it in its
chain:

    request -> queues.base -> queues.fcfs -> queues.priority -> queues.factory
        -> waiting.state -> waiting.checks -> waiting.step -> waiting.lifecycle
    queues.priority -> queues.checks -> queues.clauses -> queues.contracts
    validators, errors -> admission.protocol -> admission.shared_stats -> admission.tracker
        -> admission.check -> admission.controller -> admission.front

Each check is also run on a copy of the package with one planted import, to
show that it fails for the reason it claims.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reference" / "queueref"

CORE = ("queues", "waiting", "admission")

#: subsystem -> the subsystems it may import (besides itself and `top`).
ALLOWED: dict[str, frozenset[str]] = {
    "top": frozenset(),
    "queues": frozenset(),
    "waiting": frozenset({"queues"}),
    # The front door records its decisions as trace events.
    "admission": frozenset({"queues", "trace"}),
    "trace": frozenset(),
    "verify": frozenset(CORE),
    "oracle": frozenset({*CORE, "trace", "verify"}),
    # The experiments check the traces their servers wrote with the oracle's checker;
    # the fault runs take each fault's expected overshoot from its exhaustive model.
    "runtime": frozenset({*CORE, "trace", "oracle", "verify"}),
    "cli": frozenset({*CORE, "trace", "verify", "oracle", "runtime"}),
    # `queueref/__init__.py`: the public API, from the core only.
    "api": frozenset(CORE),
}

#: Lower layers first; a module must never reach (even indirectly) one later in its chain.
CHAINS: tuple[tuple[str, ...], ...] = (
    (
        "request",
        "queues.base",
        "queues.fcfs",
        "queues.priority",
        "queues.factory",
        "waiting.state",
        "waiting.checks",
        "waiting.step",
        "waiting.lifecycle",
    ),
    # The queues' contracts live beside the logic: no queue module reaches them.
    ("queues.priority", "queues.checks", "queues.clauses", "queues.contracts"),
    ("waiting.places", "waiting.state"),
    ("waiting.checks", "waiting.stream", "waiting.lifecycle"),
    ("waiting.checks", "waiting.leave", "waiting.lifecycle"),
    (
        "validators",
        "admission.protocol",
        "admission.shared_stats",
        "admission.tracker",
        "admission.check",
        "admission.controller",
        "admission.front",
        "runtime.servers",
        "runtime.stress",
    ),
    ("errors", "admission.shared_stats"),
)

#: Modules at the bottom: they import nothing of queueref.
LEAVES = ("validators", "errors", "config")

#: At most this many modules at the top of the package (issue 25).
MAX_TOP_MODULES = 12


def subsystem(module: str) -> str:
    """The folder a module lives in (`top` for a top-level module, `api` for the package)."""
    if module == "":
        return "api"
    if module == "__main__":  # `python -m queueref` is the command
        return "cli"
    head, _, rest = module.partition(".")
    return head if rest or head in ALLOWED else "top"


def module_names(root: Path) -> dict[str, Path]:
    """`a.b` -> file, for every module of the package at `root` (`""` for `__init__`)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The package modules `path` imports anywhere in its source."""
    package = name.rsplit(".", 1)[0] if "." in name else ""
    if path.name == "__init__.py":
        package = name
    found: set[str] = set()

    def local(dotted: str) -> str | None:
        if dotted == "queueref":
            return ""
        if dotted.startswith("queueref."):
            return dotted[len("queueref.") :]
        return None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = local(alias.name)
                if target is not None:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                resolved = local(node.module or "")
                if resolved is None:
                    continue
                base = resolved
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                found.add(sub if sub in known else base)
    found.discard(name)
    return {target for target in found if target in known}


def import_graph(root: Path) -> dict[str, set[str]]:
    known = module_names(root)
    return {name: imports_of(path, name, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path `[a, b, ..., a]`, or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph with every module replaced by its subsystem."""
    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        edges = packages.setdefault(subsystem(name), set())
        edges.update(subsystem(target) for target in targets if target != "")
    for name, edges in packages.items():
        edges.discard(name)
        edges.discard("top")
    return packages


def package_violations(graph: dict[str, set[str]]) -> Iterator[str]:
    for package, targets in sorted(package_graph(graph).items()):
        for target in sorted(targets - ALLOWED.get(package, frozenset())):
            yield f"{package} imports {target}"


def layering_violations(graph: dict[str, set[str]]) -> Iterator[str]:
    for chain in CHAINS:
        present = [name for name in chain if name in graph]
        for low_index, low in enumerate(present):
            below = reachable(graph, low)
            for high in present[low_index + 1 :]:
                if high in below:
                    yield f"{low} imports {high}, a layer above it"
    for leaf in LEAVES:
        if graph.get(leaf):
            yield f"{leaf} imports {sorted(graph[leaf])}"


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert "admission.shared_stats" in graph["admission.tracker"]
    assert find_cycle(graph) is None
    assert find_cycle(package_graph(graph)) is None


def test_the_layers_hold() -> None:
    graph = import_graph(PACKAGE)
    assert list(layering_violations(graph)) == []
    assert list(package_violations(graph)) == []
    # The controller builds on the lower layers of its subsystem.
    assert {"admission.check", "admission.shared_stats", "admission.tracker"} <= graph[
        "admission.controller"
    ]


def test_every_module_belongs_to_a_subsystem_and_few_stay_at_the_top() -> None:
    graph = import_graph(PACKAGE)
    top = sorted(name for name in graph if subsystem(name) == "top")
    assert len(top) <= MAX_TOP_MODULES, top
    assert {subsystem(name) for name in graph} <= {*ALLOWED, "top"}


def test_every_kind_of_import_is_seen() -> None:
    """TYPE_CHECKING and function-level imports count as much as top-level ones."""
    graph = import_graph(PACKAGE)
    assert "" in graph["oracle.vectors"]  # `from queueref import __version__`, in a function


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    copy = tmp_path / "queueref"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def plant(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_a_planted_cycle_is_found(planted: Path) -> None:
    """The old cycle, planted back as admission.py had it: a hidden, function-level import."""
    plant(
        planted / "admission" / "shared_stats.py",
        "\n\ndef _late() -> None:\n"
        "    from queueref.admission.tracker import RequestTracker  # noqa\n",
    )
    cycle = find_cycle(import_graph(planted))
    assert cycle is not None and {"admission.shared_stats", "admission.tracker"} <= set(cycle)


def test_a_planted_type_checking_import_breaks_the_layers(planted: Path) -> None:
    plant(
        planted / "request.py",
        "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from queueref.queues.factory import RequestQueue  # noqa\n",
    )
    graph = import_graph(planted)
    assert "request imports queues.factory, a layer above it" in list(layering_violations(graph))
    assert find_cycle(graph) is not None  # the queues import request: a cycle too


def test_a_planted_import_of_the_runtime_from_the_core_is_found(planted: Path) -> None:
    """The core must not know the runtime: one function-level import is enough to say so."""
    plant(
        planted / "admission" / "controller.py",
        "\n\ndef _late() -> None:\n    from queueref.runtime import servers  # noqa\n",
    )
    graph = import_graph(planted)
    assert list(package_violations(graph)) == ["admission imports runtime"]
    assert find_cycle(package_graph(graph)) is not None  # the runtime imports admission


def test_a_planted_module_at_the_top_is_counted(planted: Path) -> None:
    for index in range(MAX_TOP_MODULES):
        (planted / f"extra_{index}.py").write_text("", encoding="utf-8")
    graph = import_graph(planted)
    assert len([name for name in graph if subsystem(name) == "top"]) > MAX_TOP_MODULES
