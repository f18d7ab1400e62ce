"""The package's import graph: no cycle, and the layers of issue 17 hold.

Every `import` and `from ... import` of every module counts, wherever it is
written: at the top, under `if TYPE_CHECKING:`, or inside a function. A
module may import only modules below it:

    request -> queue_checks -> queue_base -> queue_fcfs -> queue_priority -> queues
        -> waiting_state -> waiting_checks -> waiting_step -> waiting
    waiting_places -> waiting_state;  waiting_checks -> waiting_stream, waiting_leave -> waiting
    validators, errors -> models/protocol -> shared_stats -> tracker -> admission
        -> front -> servers -> stress, http

Each check is also run on a copy of the package with one planted import, to
show that it fails for the reason it claims.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reference" / "queueref"

#: Lower layers first; a module must never reach (even indirectly) one later in its chain.
CHAINS: tuple[tuple[str, ...], ...] = (
    # The queues, split by job, then the waiting lifecycle, split by job, on top of them.
    (
        "request",
        "queue_checks",
        "queue_base",
        "queue_fcfs",
        "queue_priority",
        "queues",
        "waiting_state",
        "waiting_checks",
        "waiting_step",
        "waiting",
    ),
    ("waiting_places", "waiting_state"),
    ("waiting_checks", "waiting_stream", "waiting"),
    ("waiting_checks", "waiting_leave", "waiting"),
    (
        "validators",
        "models.protocol",
        "shared_stats",
        "tracker",
        "admission",
        "front",
        "servers",
        "stress",
    ),
    ("errors", "shared_stats"),
    ("servers", "http_server"),
)

#: Modules at the bottom: they import nothing of queueref.
LEAVES = ("validators", "errors", "config")


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
    assert "tracker" in graph and "shared_stats" in graph["tracker"]
    assert find_cycle(graph) is None


def test_the_layers_hold() -> None:
    graph = import_graph(PACKAGE)
    assert list(layering_violations(graph)) == []
    # The re-exports the public API promises come from the lower layers.
    assert {"shared_stats", "errors", "validators", "tracker"} <= graph["admission"]


def test_every_kind_of_import_is_seen() -> None:
    """TYPE_CHECKING and function-level imports count as much as top-level ones."""
    graph = import_graph(PACKAGE)
    assert "" in graph["oracle.vectors"]  # `from queueref import __version__`, in a function


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    copy = tmp_path / "queueref"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_planted_cycle_is_found(planted: Path) -> None:
    """The old cycle, planted back as admission.py had it: a hidden, function-level import."""
    stats = planted / "shared_stats.py"
    stats.write_text(
        stats.read_text(encoding="utf-8")
        + "\n\ndef _late() -> None:\n    from queueref.tracker import RequestTracker  # noqa\n",
        encoding="utf-8",
    )
    cycle = find_cycle(import_graph(planted))
    assert cycle is not None and {"shared_stats", "tracker"} <= set(cycle)


def test_a_planted_type_checking_import_breaks_the_layers(planted: Path) -> None:
    request = planted / "request.py"
    request.write_text(
        request.read_text(encoding="utf-8")
        + "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from queueref.queues import RequestQueue  # noqa\n",
        encoding="utf-8",
    )
    graph = import_graph(planted)
    assert "request imports queues, a layer above it" in list(layering_violations(graph))
    assert find_cycle(graph) is not None  # queues imports request: a cycle too
