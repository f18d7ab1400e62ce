"""Run, for one mutant, only the tests that execute the mutated code: cosmic-ray's test command.

cosmic-ray writes the mutant into the module in place and runs its test command. This
command compares the module with its unmutated copy (`--pristine`), finds the changed
lines, widens them to the innermost statement that holds them, and runs the tests that
executed any line of that statement unmutated (`--map`, written once per module by
`tools/mutation_coverage.py`), fastest first, stopping at the first failure (`-x`):

* a statement that also runs at import (a module or class constant) changes what every
  test sees: all the module's tests run;
* a statement no test executes: nothing runs; the mutant survives, reported `uncovered`
  (the exit status is 0, the output says so);
* a def: the tests that run any line of its body (its decorators' contracts run on each
  call), not every test, although its `def` line runs at import;
* a class's own lines (its decorators, its bases): all the module's tests, as at import,
  for what they make has no line of its own (a dataclass's `__init__` and `__eq__`, its
  frozen `__setattr__`) and every test that uses the class sees it;
* the decorators of a def nested in a function (`@functools.wraps(func)` on a wrapper):
  they run when the enclosing function runs, so the tests that execute those lines,
  all of them when that happens at import.
* a mutant that does not compile (an operator made a syntax error: `*,` -> `+,` in a
  signature): the module no longer imports, which every test sees, wherever the line is:
  all the module's tests run (`tests/package/test_import.py` fails for it; the files
  that import the module fail to collect and are set aside).

    python tools/mutation_select.py --map M.json --pristine P.py --module path.py \
        [--log progress.log] -- python -m pytest -x -q ...
    python tools/mutation_select.py --whole T1,T2 --seconds S --pristine P.py ...  # all of them

Prints one line starting `selected`, `uncovered`, `timeout` or `error`. A kill is a
failing test and nothing else: pytest's exit status 1. Any other non-zero status (2
interrupted, 3 internal error, 4 usage error, 5 no tests collected) is an `error` line,
and a run over its time limit is run once more with `RETRY_SLOWDOWN` times the limit
before it is a `timeout`; both exit non-zero (cosmic-ray reads any non-zero status as
killed), and `tools/mutation.py` reads the line and lists them apart from the kills.

A test file that fails to collect (exit 2 or 4 with `ERROR collecting F`: a test module that
builds a constant or a broken variant from the mutated source at import) is set aside,
printed on an `uncollectable:` line, and the rest of the selected tests run again: they
decide the verdict (1 killed, 0 survived), so the mutant's behavioural tests still run.
A collection error alone is never a kill: when every selected file fails to collect,
nothing is left to run and the mutant is an `error`.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: A hung mutant gets this many times the tests' unmutated duration, plus `GRACE` seconds.
#: The durations were measured under the line tracer, which slows the tests down (two to
#: four times on the explorers), so 1.5 of them is still several unmutated runs.
SLOWDOWN = 1.5
GRACE = 30.0
#: A run over its limit is tried once more with this many times the limit (a loaded
#: machine, not a hung mutant, may have made it slow).
RETRY_SLOWDOWN = 3.0
#: pytest's exit status for "some test failed": the only status that is a kill.
TESTS_FAILED = 1
#: pytest's exit status when collection errors stop the session before any test runs.
INTERRUPTED = 2
#: How pytest names a test file that failed to collect, in its report.
_COLLECTION_ERROR = re.compile(r"ERROR collecting (\S+?\.py)\b")


@dataclass(frozen=True)
class Selection:
    """The tests to run against one mutant and why."""

    reason: str  # covered | import | syntax | decorator | uncovered | whole
    tests: tuple[str, ...]  # node ids, fastest first
    span: tuple[int, int]  # the statement's first and last line
    seconds: float  # the selected tests' unmutated duration


def changed_lines(original: str, mutated: str) -> set[int]:
    """The 1-based lines of `original` that `mutated` changes or deletes; an insertion
    counts as a change of the line before it."""
    before, after = original.splitlines(), mutated.splitlines()
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2:
            changed.add(max(i1, 1))
        else:
            changed.update(range(i1 + 1, i2 + 1))
    return changed


def _first_line(node: ast.stmt) -> int:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return node.lineno


def statement_span(source: str, lines: set[int]) -> tuple[int, int, str]:
    """The innermost statement of `source` holding every line of `lines`: its first line
    (decorators included), last line, and its kind: "def", "class" or "statement"."""
    best: tuple[int, int, str] | None = None
    low, high = min(lines), max(lines)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        first, last = _first_line(node), node.end_lineno
        if first <= low and high <= last and (best is None or last - first < best[1] - best[0]):
            kind = "statement"
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "def"
            elif isinstance(node, ast.ClassDef):
                kind = "class"
            best = (first, last, kind)
    return best if best is not None else (low, high, "statement")


def _decorated_defs(source: str, nested: bool) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The decorated defs of `source`; with `nested`, only those inside a function."""
    defs = ast.FunctionDef | ast.AsyncFunctionDef
    tree = ast.parse(source)
    outers = [n for n in ast.walk(tree) if isinstance(n, defs)] if nested else [tree]
    return [
        node
        for outer in outers
        for node in ast.walk(outer)
        if node is not outer and isinstance(node, defs) and node.decorator_list
    ]


def _decorators_holding(source: str, lines: set[int], nested: bool) -> tuple[int, int] | None:
    """The first and last decorator line of a def whose decorators hold every non-blank
    line of `lines` (removing a decorator takes the blank line above with it)."""
    text = source.splitlines()
    lines = {line for line in lines if 0 < line <= len(text) and text[line - 1].strip()}
    if not lines:
        return None
    for node in _decorated_defs(source, nested):
        low = min(d.lineno for d in node.decorator_list)
        high = max(d.end_lineno or d.lineno for d in node.decorator_list)
        if all(low <= line <= high for line in lines):
            return low, high
    return None


def nested_decorators(source: str, lines: set[int]) -> tuple[int, int] | None:
    """The decorator lines of a def nested in a function, when `lines` are all among them:
    such decorators run each time the enclosing function runs (a wrapper made at class
    creation runs them at import), not when the def's own body runs."""
    return _decorators_holding(source, lines, nested=True)


def decorator_lines(source: str, lines: set[int]) -> tuple[int, int] | None:
    """The decorator lines of any def, when `lines` are all among them. A decorator is
    applied at import: a test whose call a precondition it adds refuses before the body
    runs executes no line of the def, yet sees the change."""
    return _decorators_holding(source, lines, nested=False)


def compiles(source: str) -> bool:
    """Whether `source` is valid Python (a mutant may not be: `def f(a, +, b)`)."""
    try:
        compile(source, "<mutant>", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def select(coverage: dict[str, Any], original: str, mutated: str) -> Selection:
    """The tests `coverage` (the map of `tools/mutation_coverage.py`) says execute the
    statement the mutant changes, fastest first."""
    tests: dict[str, dict[str, Any]] = coverage["tests"]
    fastest = sorted(tests, key=lambda t: (tests[t]["seconds"], t))
    changed = changed_lines(original, mutated)
    if not changed:  # the same text: every test, the mutant cannot be told apart
        return Selection("import", tuple(fastest), (0, 0), sum(tests[t]["seconds"] for t in tests))
    first, last, kind = statement_span(original, changed)
    if not compiles(mutated):  # the module no longer imports: every test sees it
        total = sum(tests[t]["seconds"] for t in tests)
        return Selection("syntax", tuple(fastest), (first, last), total)
    decorators = nested_decorators(original, changed)
    if decorators is not None:  # the tests that run the decorator lines themselves
        (first, last), kind = decorators, "statement"
    span = set(range(first, last + 1))
    if kind == "class" or (kind == "statement" and span & set(coverage["import_lines"])):
        total = sum(tests[t]["seconds"] for t in tests)
        return Selection("import", tuple(fastest), (first, last), total)
    chosen = tuple(t for t in fastest if span & set(tests[t]["lines"]))
    if kind == "def" and decorator_lines(original, changed) is not None:
        # The tests that run the def first (they most likely kill it), then all the rest.
        rest = tuple(t for t in fastest if t not in chosen)
        total = sum(tests[t]["seconds"] for t in tests)
        return Selection("decorator", chosen + rest, (first, last), total)
    seconds = sum(tests[t]["seconds"] for t in chosen)
    return Selection("covered" if chosen else "uncovered", chosen, (first, last), seconds)


def uncollectable_files(output: str) -> list[str]:
    """The test files pytest's `output` reports failing to collect, in report order."""
    return list(dict.fromkeys(_COLLECTION_ERROR.findall(output)))


def _run_once(command: list[str], limit: float) -> tuple[int, str, str]:
    """Run pytest once on the mutant, retrying a slow run: (status, verdict, output)."""
    for attempt, seconds in enumerate((limit, RETRY_SLOWDOWN * limit)):
        try:
            run = subprocess.run(command, timeout=seconds, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            if attempt == 0:
                print(f"slow: the tests ran over {seconds:.0f} s; once more with a longer limit")
                continue
            print(f"timeout: the tests ran over {seconds:.0f} s")
            return 1, "timeout", ""
        output = run.stdout + run.stderr
        print(output, end="" if output.endswith("\n") or not output else "\n", flush=True)
        if run.returncode == 0:
            return 0, "survived", output
        if run.returncode == TESTS_FAILED:
            return TESTS_FAILED, "killed", output
        return run.returncode, "error", output
    raise AssertionError("unreachable")


def run_tests(
    command: list[str], tests: tuple[str, ...], limit: float
) -> tuple[int, str, tuple[str, ...]]:
    """Run `tests` on the mutant: (exit status for cosmic-ray, verdict, files set aside).

    survived (0), killed (pytest's 1), error (any other status: the run did not say
    whether a test fails), timeout (over the limit twice, the second time with
    `RETRY_SLOWDOWN` times it). Files that fail to collect are set aside and the rest
    run again; they alone decide, and with none left the mutant is an error.
    """
    set_aside: list[str] = []
    remaining = list(tests)
    while True:
        status, verdict, output = _run_once([*command, *remaining], limit)
        broken = [f for f in uncollectable_files(output) if f not in set_aside]
        # Exit 2 (interrupted) or, for a file named by node ids, 4 ("no collectors").
        if verdict != "error" or not broken:
            break
        set_aside += broken
        print(f"uncollectable: {' '.join(broken)} (a collection error: set aside, not a kill)")
        remaining = [t for t in remaining if t.split("::")[0] not in set_aside]
        if not remaining:
            print(f"error: pytest exited {INTERRUPTED}: every selected test file fails to collect")
            return INTERRUPTED, "error", tuple(set_aside)
    if verdict == "error":
        print(f"error: pytest exited {status}, which is not a failing test")
    return status, verdict, tuple(set_aside)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        raise SystemExit(
            "usage: mutation_select.py (--map M | --whole T,..) --pristine P --module F -- COMMAND"
        )
    split = args.index("--")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--map", type=Path, help="the line map to select from")
    parser.add_argument("--whole", help="comma-separated tests to run, all of them (no map)")
    parser.add_argument("--seconds", type=float, default=0.0, help="--whole's unmutated time")
    parser.add_argument("--pristine", required=True, type=Path)
    parser.add_argument("--module", required=True, type=Path)
    parser.add_argument("--log", type=Path, default=None)
    options = parser.parse_args(args[:split])
    if (options.map is None) == (options.whole is None):
        parser.error("give either --map or --whole")
    command = args[split + 1 :]
    original = options.pristine.read_text()
    mutated = options.module.read_text()
    if options.whole is not None:  # every test, under the same rule: only exit 1 kills
        changed = changed_lines(original, mutated) or {0}
        span = (min(changed), max(changed))
        chosen = Selection("whole", tuple(options.whole.split(",")), span, options.seconds)
    else:
        chosen = select(json.loads(options.map.read_text()), original, mutated)
    began = time.perf_counter()
    where = f"lines {chosen.span[0]}-{chosen.span[1]}"
    if chosen.reason == "uncovered":
        status, verdict = 0, "uncovered"
        print(f"uncovered: no test executes {where}")
    else:
        print(f"selected {len(chosen.tests)} tests ({chosen.reason}) for {where}", flush=True)
        status, verdict, set_aside = run_tests(
            command, chosen.tests, SLOWDOWN * chosen.seconds + GRACE
        )
        if set_aside:
            verdict += f" (uncollectable: {len(set_aside)} files)"
    if options.log is not None:
        with options.log.open("a") as log:
            log.write(
                f"{time.strftime('%H:%M:%S')} {options.module.name} {where} "
                f"{chosen.reason} {len(chosen.tests)} tests -> {verdict} "
                f"({time.perf_counter() - began:.1f} s)\n"
            )
    return status


if __name__ == "__main__":
    sys.exit(main())
