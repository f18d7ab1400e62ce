"""Broken variants of a class, each made from the real source by named changes.

The one way a test gets a broken variant of a class (a queue, the waiting lifecycle, a
tracker, someone else's queue written for a test): never by hand, always derived.

`broken_class(owner, "Name", Change(...), ...)` is a subclass of `owner` named `Name`
whose methods named by the changes are the originals' source with the changes applied,
compiled in the original's module namespace at the original's lines. Being a subclass
is the point: the checks that bind every subclass wrap the broken method as they wrap
the real one, so a test shows that those checks catch the bug the change plants.

* An icontract `DBC` class (the queues, the waiting lifecycle) gives an overriding
  method the contracts of the method it overrides, and `RequestQueue.__init_subclass__`
  puts its contract wrapper around each queue method: the method is rebuilt without
  its decorators, under the file name `<Name.method>`. (Monkeypatching a method onto an
  existing queue class would bypass the queue's wrapper.) A decorator that is not a
  contract (a queue's `_checked_init`) is not re-applied.
* Any other class (the tracker, the counters, the controller) has its contracts declared
  beside it (`queueref.admission.contracts`) or as decorators: the method is rebuilt
  under the module's own file name, where icontract reads a condition's text, and checked
  by the very conditions the installed method is checked by (or its decorators, re-run).

`super()` in a rebuilt method means what it meant in the original; a name the new text
needs that the original's module lacks is passed in `uses`. The method sees a copy of its
module's namespace taken when the variant is built (a later monkeypatch of the module
does not reach it).

`method_variant(owner, name, change)` reads the source of `owner.<name>` with its
decorators (its icontract conditions), applies `change` (`Change` of
`proofs/mutations.py`: one exact piece of text replaced by another, which must match
exactly once in that source), and compiles the result in the namespace of the
method's own module, under its file name and line numbers. The decorators run again,
so the broken method carries the same conditions as the real one: a test that
installs it (`monkeypatch.setattr`) shows that those conditions catch the bug the
change plants. A change that no longer applies raises `ChangeDoesNotApply`, so a
broken copy cannot drift from what it breaks.

Change the body, not a condition: icontract names a failing condition by reading its
source from the module's file, which keeps the original text. A method whose contracts
are declared beside it (`queueref.admission.contracts`) has no decorators in its source:
the variant gets the very conditions the installed method checks. A class invariant
(`icontract.invariant` on the class) is not re-applied: the tests that use these
variants are about the method's own conditions.
"""

from __future__ import annotations
import __future__

import ast
import inspect
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import icontract

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "proofs"))
from mutations import Change, ChangeDoesNotApply  # noqa: E402

__all__ = [
    "VARIANT_CHANGES",
    "Change",
    "ChangeDoesNotApply",
    "broken_class",
    "changed_sources",
    "decorated_source",
    "method_source",
    "method_variant",
]

#: Every variant `broken_class` built: the changes it was built with.
VARIANT_CHANGES: dict[type, tuple[Change, ...]] = {}


def _defining_class(owner: type, name: str) -> type:
    """The class of `owner`'s MRO whose own namespace defines `name`."""
    return next(cls for cls in owner.__mro__ if name in vars(cls))


def _source_lines(owner: type, name: str, decorators: bool) -> tuple[str, int]:
    """The source of `owner.<name>` (its wrappers undone), dedented, with or without its
    decorators, and the line of the module where that source starts."""
    function = inspect.unwrap(getattr(owner, name))
    source = textwrap.dedent(inspect.getsource(function))
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef), (owner, name)
    assert node.name == name, (owner, name)
    first = node.lineno - 1 if not decorators else 0  # line offset of the `def` or decorator
    lines = source.splitlines(keepends=True)
    return "".join(lines[first:]), function.__code__.co_firstlineno + first


def method_source(owner: type, name: str, decorators: bool = False) -> str:
    """The source of `owner.<name>` (its wrappers undone), dedented, without its decorators
    unless `decorators`."""
    return _source_lines(owner, name, decorators)[0]


def changed_sources(
    owner: type, variant: str, changes: tuple[Change, ...], decorators: bool = False
) -> dict[str, str]:
    """Method name -> its source with every change of `variant` applied (each exactly once)."""
    sources: dict[str, str] = {}
    for change in changes:
        source = sources.get(change.function) or method_source(owner, change.function, decorators)
        count = source.count(change.old)
        if count != 1:
            raise ChangeDoesNotApply(
                f"{variant}: {change.function}: {change.bug!r}: {change.old!r} found {count} times"
            )
        sources[change.function] = source.replace(change.old, change.new)
    return sources


def _compiled_method(
    owner: type, variant: str, method: str, source: str, uses: Mapping[str, Any], decorators: bool
) -> Any:
    """`source` (a `def`) compiled as the original `owner.<method>` was: in its module's
    namespace (and `uses`), at its lines, with `__class__` (what `super()` reads) the class
    that defines the original. With its `decorators`, under the module's file name (icontract
    reads a condition's text from there), else under `<variant.method>`."""
    original = inspect.unwrap(getattr(owner, method))
    scope = {**original.__globals__, **uses}  # the names the original's module sees
    first = _source_lines(owner, method, decorators)[1]
    # A closure over `__class__`, as a class body gives a method that calls `super()`; the
    # blank lines put each line of the method where it is in the module.
    body = "".join("    " + line if line.strip() else line for line in source.splitlines(True))
    text = "\n" * (first - 2) + f"def _make(__class__):\n{body}\n    return {method}\n"
    filename = inspect.getsourcefile(original) if decorators else None
    code = compile(
        text,
        filename or f"<{variant}.{method}>",
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    exec(code, scope)
    function = scope["_make"](_defining_class(owner, method))
    function.__qualname__ = f"{variant}.{method}"
    return function


def broken_class(
    owner: type,
    name: str,
    *changes: Change,
    uses: Mapping[str, Any] | None = None,
    label: str = "BROKEN",
    module: str | None = None,
) -> type:
    """A subclass of `owner` named `name` whose methods named by `changes` have them applied
    (see the module doc); its docstring names the bugs. `uses`: names a change's new text
    needs that the original's module does not have (a request type, say). `label`: the
    docstring's first word ("VARIANT" for a change that is no bug, which a test shows
    raises no false alarm). `module`: the variant's `__module__` (by default the caller's)."""
    assert changes, name
    namespace: dict[str, Any] = {
        "__doc__": f"{label}: " + "; ".join(change.bug for change in changes) + ".",
        # The module that builds it, as for a class written there: the oracle's failing
        # programs import a queue by its module and name.
        "__module__": module or sys._getframe(1).f_globals["__name__"],
        "__qualname__": name,
    }
    # icontract's DBC classes (the queues, the waiting lifecycle) give an overriding method
    # the contracts of the one it overrides; other classes' contracts are decorators, so
    # the variant's method is compiled with its original's decorators.
    decorators = not isinstance(owner, icontract.DBCMeta)
    for method, source in changed_sources(owner, name, changes, decorators).items():
        function = _compiled_method(owner, name, method, source, uses or {}, decorators)
        if decorators and not _has_contract_decorator(source):  # contracts declared apart
            function = _with_installed_contracts(function, owner, method)
        namespace[method] = function
    variant = type(owner)(name, (owner,), namespace)
    VARIANT_CHANGES[variant] = changes
    return variant


def decorated_source(owner: type, name: str) -> str:
    """The source of `owner.<name>`, decorators included, dedented."""
    function = inspect.unwrap(getattr(owner, name))
    return textwrap.dedent(inspect.getsource(function))


def method_variant(owner: type, name: str, *changes: Change) -> Callable[..., Any]:
    """`owner.<name>` rebuilt from its source with `changes` applied, contracts and all."""
    source = decorated_source(owner, name)
    for change in changes:
        assert change.function == name, (change, name)
        count = source.count(change.old)
        if count != 1:
            raise ChangeDoesNotApply(
                f"{owner.__name__}.{name}: {change.bug!r}: {change.old!r} found {count} times"
            )
        source = source.replace(change.old, change.new)
    original = inspect.unwrap(getattr(owner, name))
    scope = dict(original.__globals__)  # the names the original's module sees
    # Compiled under the original's file name and lines (decorators first): tracebacks
    # point into the module, icontract reads each condition's source from there, and
    # the line map of `make mutation` counts the test as executing the method, so a
    # mutant of its contracts runs this test.
    padded = "\n" * (original.__code__.co_firstlineno - 1) + source
    code = compile(
        padded,
        inspect.getsourcefile(original) or original.__code__.co_filename,
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    exec(code, scope)
    function: Callable[..., Any] = scope[name]
    if not _has_contract_decorator(source):
        function = _with_installed_contracts(function, owner, name)
    return function


def _has_contract_decorator(source: str) -> bool:
    """Whether the method's own source carries contracts (not only `@classmethod`)."""
    decorators = [line.strip() for line in source.splitlines() if line.strip().startswith("@")]
    return any(not line.startswith(("@classmethod", "@staticmethod")) for line in decorators)


def _with_installed_contracts(function: Any, owner: type, name: str) -> Any:
    """`function` checked by the conditions `owner.<name>` is checked by, when those are
    declared apart from its source (`queueref.admission.contracts`), else as it is."""
    if isinstance(function, classmethod):  # the contracts go around the function inside
        return classmethod(_with_installed_contracts(function.__func__, owner, name))
    rewrap = getattr(getattr(owner, name), "__contract_wrapper__", None)
    if rewrap is not None:  # a wrapper of inline checks (`check_admission`'s), made again
        return rewrap(function)
    installed = icontract._checkers.find_checker(getattr(owner, name))
    if installed is None:
        return function
    function = icontract._checkers.decorate_with_checker(function)
    for conditions in ("__preconditions__", "__postcondition_snapshots__", "__postconditions__"):
        setattr(function, conditions, getattr(installed, conditions))
    return function
