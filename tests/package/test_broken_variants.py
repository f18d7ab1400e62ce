"""A broken variant is derived from the source, never written by hand (tests/README.md).

`method_variants.broken_class(Class, "Name", Change(...))` builds a variant from the real
method's source by a named change that must match exactly once, so a variant cannot
drift from what it breaks. A class written in a test file that derives from a class of
the `queueref` package (directly, or through classes the tests define) and overrides a
method one of those classes defines is a hand-written variant: this test fails naming
each one, unless `ALLOWED` lists it with the reason it stays hand-written (it counts
calls, or is correct and shows a check raises no false alarm, ...). Someone else's queue
written from scratch implements the abstract methods of `RequestQueue` and overrides
nothing: it is no variant; a subclass of it that overrides one of its methods is.

Read statically (the AST of every file under tests/, the queueref classes imported), so
no test module is imported. Classes inside strings (a user's module written to a
temporary project, a program run under `python -O`) are not seen.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import icontract
import pytest
from method_variants import VARIANT_CHANGES, Change, ChangeDoesNotApply, broken_class

from queueref import FCFSRequestQueue, Request

TESTS = Path(__file__).resolve().parents[1]

#: path (under tests/) :: class -> why it stays hand-written.
ALLOWED: dict[str, str] = {
    "queues/test_queue_checks.py::CountsReads": (
        "correct: counts which reads of its front the snapshots make"
    ),
    "queues/test_queue_priority.py::CountsSorts": (
        "correct: counts the calls of `_in_order` behind an iteration"
    ),
    "queues/test_queue_contract_cost.py::CountsFronts": (
        "correct: counts the reads of its front by the snapshots"
    ),
    "queues/test_queue_base.py::TaggingFCFS": (
        "correct: a wider signature (a tag after the request), to show the checker binds the "
        "request, not a further argument"
    ),
    "queues/test_queue_base.py::AbstractAdd": (
        "declares add abstract again, to show the checker leaves an abstract method abstract"
    ),
    "queues/test_queue_base.py::ConcreteAdd": (
        "the concrete subclass below AbstractAdd: that it can be made and adds"
    ),
    "oracle/test_oracle_size.py::Counting": (
        "correct: counts the programs and the longest queue the oracle builds"
    ),
    "oracle/test_oracle_size.py::CallCounting": "correct: counts the calls a rule makes",
}


@dataclass(frozen=True)
class _TestClass:
    path: Path
    node: ast.ClassDef


def _modules(root: Path) -> dict[str, tuple[Path, ast.Module]]:
    """Every module under `root` by the name the tests import it by (its file's stem)."""
    return {
        path.stem: (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted(root.rglob("*.py"))
    }


def _queueref_class(module: str, name: str) -> type | None:
    if module != "queueref" and not module.startswith("queueref."):
        return None
    found = getattr(importlib.import_module(module), name, None)
    return found if isinstance(found, type) else None


class _Resolver:
    """Resolves a class's bases to queueref classes and to classes of other test files."""

    def __init__(self, root: Path) -> None:
        self.modules = _modules(root)

    def base(self, path: Path, tree: ast.Module, expr: ast.expr) -> type | _TestClass | None:
        if isinstance(expr, ast.Attribute):  # `queueref.FCFSRequestQueue`, `fcfs.FCFS...`
            return self._dotted(tree, expr)
        if not isinstance(expr, ast.Name):
            return None
        name = expr.id
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return _TestClass(path, node)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return self._imported(node.module, alias.name)
        return None

    def _dotted(self, tree: ast.Module, expr: ast.Attribute) -> type | None:
        """A base written `module.Class`, its module imported by `import` or `from`."""
        parts: list[str] = []
        root: ast.expr = expr
        while isinstance(root, ast.Attribute):
            parts.insert(0, root.attr)
            root = root.value
        if not isinstance(root, ast.Name):
            return None
        for node in ast.walk(tree):
            for alias in getattr(node, "names", ()) if isinstance(node, ast.Import) else ():
                bound = alias.asname or alias.name.split(".")[0]
                if bound == root.id:
                    prefix = alias.name if alias.asname else root.id
                    return _queueref_class(".".join([prefix, *parts[:-1]]), parts[-1])
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == root.id:
                        module = ".".join([node.module, alias.name, *parts[:-1]])
                        return _queueref_class(module, parts[-1])
        return None

    def _imported(self, module: str, name: str) -> type | _TestClass | None:
        if module in self.modules:  # another test file or a helper
            path, tree = self.modules[module]
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name == name:
                    return _TestClass(path, node)
            return None
        return _queueref_class(module, name)

    def tree(self, path: Path) -> ast.Module:
        return self.modules[path.stem][1]

    def bases(self, cls: _TestClass) -> Iterator[type | _TestClass]:
        for expr in cls.node.bases:
            found = self.base(cls.path, self.tree(cls.path), expr)
            if found is not None:
                yield found

    def from_queueref(self, cls: _TestClass) -> bool:
        """Whether `cls` derives from a queueref class (through test classes or not)."""
        return any(isinstance(base, type) or self.from_queueref(base) for base in self.bases(cls))

    def defined_above(self, cls: _TestClass, method: str) -> bool:
        """Whether a queueref ancestor, or a test ancestor deriving from queueref, defines
        `method` concretely (so that `cls` defining it overrides it)."""
        for base in self.bases(cls):
            if isinstance(base, type):
                for owner in base.__mro__:
                    defined = vars(owner).get(method)
                    if (
                        defined is not None
                        and owner.__module__.startswith("queueref")
                        and not getattr(defined, "__isabstractmethod__", False)
                    ):
                        return True
            elif self.from_queueref(base) and (
                method in _concrete_methods(base.node) or self.defined_above(base, method)
            ):
                return True
        return False


def _concrete_methods(node: ast.ClassDef) -> set[str]:
    def abstract(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        return any(
            isinstance(d, ast.Attribute | ast.Name)
            and (d.attr if isinstance(d, ast.Attribute) else d.id) == "abstractmethod"
            for d in function.decorator_list
        )

    return {
        item.name
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and not abstract(item)
    }


def hand_written_variants(root: Path) -> dict[str, list[str]]:
    """`path::Class` (path under `root`) -> the queueref-derived methods it overrides, for
    every class under `root` that overrides one."""
    resolver = _Resolver(root)
    found: dict[str, list[str]] = {}
    for path, tree in resolver.modules.values():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            cls = _TestClass(path, node)
            if not resolver.from_queueref(cls):
                continue
            methods = [
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and resolver.defined_above(cls, item.name)
            ]
            if methods:
                found[f"{path.relative_to(root).as_posix()}::{node.name}"] = methods
    return found


def test_no_broken_variant_is_written_by_hand() -> None:
    """Every class of the tests that overrides a method of a queueref class is listed in
    ALLOWED with its reason; any other is a broken variant written by hand."""
    unlisted = {k: v for k, v in hand_written_variants(TESTS).items() if k not in ALLOWED}
    assert not unlisted, (
        "hand-written variants (build them with method_variants.broken_class, or list them "
        f"in ALLOWED with the reason they stay): {unlisted}"
    )


def test_the_allow_list_names_only_classes_that_exist() -> None:
    """A stale entry (the class gone, or derived now) is taken out of ALLOWED."""
    stale = set(ALLOWED) - set(hand_written_variants(TESTS))
    assert not stale, f"ALLOWED lists classes that override nothing any more: {sorted(stale)}"


PLANTED_HELPER = '''
from queueref import RequestQueue


class FromScratch(RequestQueue):
    """Someone else's queue: implements the abstract methods, overrides nothing."""

    def __init__(self):
        self.items = []

    def add_request(self, request):
        self.items.append(request)

    def pop_request(self):
        return self.items.pop(0)
'''

PLANTED_TESTS = """
from method_variants import Change, broken_class
from planted_helper import FromScratch

import queueref
import queueref.queues.priority as priority
from queueref import FCFSRequestQueue as Queue
from queueref.admission import tracker
from queueref.admission.tracker import RequestTracker


class BackPop(Queue):
    def pop_request(self):
        return self._items.pop()


class PopsTwice(FromScratch):
    def pop_request(self):
        self.items.pop(0)
        return self.items.pop(0)


class PeeksTheBack(queueref.FCFSRequestQueue):
    def peek_request(self):
        return self._items[-1]


class SlowPriority(priority.PriorityRequestQueue):
    def add_request(self, request):
        pass


class SkipsTheSlot(tracker.RequestTracker):
    def _refresh(self):
        pass


class CountsAdds(FromScratch):
    def count(self):
        return 0


def test_something():
    class LazyTracker(RequestTracker):
        def _refresh(self):
            pass


Derived = broken_class(Queue, "Derived", Change("pop_request", "x", "popleft()", "pop()"))
"""


def test_a_planted_hand_written_variant_is_found(tmp_path: Path) -> None:
    """The check has teeth: hand-written broken queues and trackers (imported under another
    name, or named through their module), a broken subclass of someone else's queue
    defined in another file, and one defined inside a test function are found with the
    methods they override; the foreign queue itself, a subclass that only adds a method,
    and a derived variant are not."""
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "planted_helper.py").write_text(PLANTED_HELPER)
    (tmp_path / "test_planted.py").write_text(PLANTED_TESTS)
    assert hand_written_variants(tmp_path) == {
        "test_planted.py::BackPop": ["pop_request"],
        "test_planted.py::PopsTwice": ["pop_request"],
        "test_planted.py::LazyTracker": ["_refresh"],
        "test_planted.py::PeeksTheBack": ["peek_request"],
        "test_planted.py::SlowPriority": ["add_request"],
        "test_planted.py::SkipsTheSlot": ["_refresh"],
    }


# --- broken_class itself -----------------------------------------------------------------


class _Base:
    def greet(self) -> str:
        return "base"


class _Child(_Base):
    def greet(self) -> str:
        return "child of " + super().greet()


def test_a_queue_variant_is_checked_by_the_queue_contracts() -> None:
    """RQ-COST-2: the variant is a subclass, so `RequestQueue.__init_subclass__` wraps its
    rebuilt method, and the contracts catch the change: a pop from the back breaks RQ-ALL-4
    ("pop returns what peek returned")."""
    back_pop = broken_class(
        FCFSRequestQueue,
        "BackPopForTheRule",
        Change("pop_request", "pops the back", "self._items.popleft()", "self._items.pop()"),
    )
    assert getattr(vars(back_pop)["pop_request"], "_queue_contracts", False)
    assert back_pop.__doc__ == "BROKEN: pops the back."
    assert VARIANT_CHANGES[back_pop][0].bug == "pops the back"
    queue = back_pop([Request("a"), Request("b"), Request("c")])
    with pytest.raises(icontract.ViolationError, match="RQ-ALL-4: pop returns what peek returned"):
        queue.pop_request()


def test_a_change_that_does_not_apply_fails_naming_it() -> None:
    """Drift is loud: a change whose text is gone, or found twice, raises naming the variant,
    the method and the bug."""
    gone = Change("pop_request", "pops nothing", "self._items.popright()", "None")
    with pytest.raises(ChangeDoesNotApply, match="Drifted: pop_request: 'pops nothing': .* 0"):
        broken_class(FCFSRequestQueue, "Drifted", gone)
    twice = Change("add_request", "ambiguous", "request_id", "rid")
    with pytest.raises(ChangeDoesNotApply, match="Twice: add_request: 'ambiguous': .* [2-9]"):
        broken_class(FCFSRequestQueue, "Twice", twice)


def test_super_in_a_rebuilt_method_means_what_it_meant() -> None:
    """The rebuilt method's `super()` reaches past the class that defines the original, as the
    original's does (not back into that class)."""
    variant = broken_class(
        _Child, "Renamed", Change("greet", "renamed", '"child of "', '"kin of "')
    )
    assert variant().greet() == "kin of base"
    assert _Child().greet() == "child of base"
