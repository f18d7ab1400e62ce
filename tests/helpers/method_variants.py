"""Broken methods of a contracted class, each made from the real method by one named change.

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

import inspect
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import icontract

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "proofs"))
from mutations import Change, ChangeDoesNotApply  # noqa: E402

__all__ = ["Change", "ChangeDoesNotApply", "decorated_source", "method_variant"]


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
    installed = icontract._checkers.find_checker(getattr(owner, name))
    if installed is not None and not source.lstrip().startswith("@"):
        function = icontract._checkers.decorate_with_checker(function)
        for conditions in (
            "__preconditions__",
            "__postcondition_snapshots__",
            "__postconditions__",
        ):
            setattr(function, conditions, getattr(installed, conditions))
    return function
