"""The per-mutant test selection of `make mutation` (tools/mutation_select.py) and the line
map it reads (tools/mutation_coverage.py): a mutant runs the tests that execute its
statement, fastest first; a mutant no test executes survives without running anything."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(relative: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


select = _load("tools/mutation_select.py", "mutation_select")
mutation = _load("tools/mutation.py", "mutation")

# A module under test: line numbers matter (the map below refers to them).
TOY = """\
LIMIT = 3


def fits(n):
    return n <= LIMIT


@decorate
def double(n):
    if n > 0:
        return 2 * n
    return 0


def unused(n):
    return n - 1


@dataclass(frozen=True)
class Point:
    x: int
"""
#: What tools/mutation_coverage.py would record for two tests of TOY.
MAP: dict[str, Any] = {
    "module": "toy.py",
    "import_lines": [1, 4, 8, 9, 15],
    "tests": {
        "t.py::test_fits": {"seconds": 2.0, "lines": [5]},
        "t.py::test_double": {"seconds": 0.5, "lines": [10, 11]},
        "t.py::test_both": {"seconds": 1.0, "lines": [5, 10, 12]},
    },
}


def test_changed_lines_of_a_replacement_a_deletion_and_an_insertion() -> None:
    assert select.changed_lines(TOY, TOY.replace("n <= LIMIT", "n < LIMIT")) == {5}
    assert select.changed_lines(TOY, TOY.replace("@decorate\n", "")) == {8}
    assert select.changed_lines(TOY, TOY.replace("LIMIT = 3\n", "LIMIT = 3\nX = 1\n")) == {1}
    assert select.changed_lines(TOY, TOY) == set()


def test_a_mutant_on_a_covered_line_selects_the_tests_that_execute_it_fastest_first() -> None:
    chosen = select.select(MAP, TOY, TOY.replace("n <= LIMIT", "n < LIMIT"))
    assert chosen.reason == "covered"
    assert chosen.tests == ("t.py::test_both", "t.py::test_fits")  # not test_double
    assert chosen.span == (5, 5) and chosen.seconds == 3.0


def test_a_mutant_in_a_compound_statement_header_selects_the_tests_of_its_body() -> None:
    chosen = select.select(MAP, TOY, TOY.replace("if n > 0:", "if n >= 0:"))
    assert chosen.span == (10, 11)
    assert chosen.tests == ("t.py::test_double", "t.py::test_both")


def test_a_removed_decorator_selects_the_tests_that_call_the_function_then_the_rest() -> None:
    """The decorator and `def` lines run at import; the tests that run the function's body
    most likely see the decorator's effect and come first, but a test whose call a
    precondition of the decorator refuses before the body runs (waiting_leave.py's
    `@lifecycle_operation("abort")`, among stacked decorators) runs no line of the def and
    sees it too: the rest follow. A change in the body still selects only the tests that
    run it."""
    chosen = select.select(MAP, TOY, TOY.replace("@decorate\n", ""))
    assert chosen.reason == "decorator" and chosen.span == (8, 12)
    assert chosen.tests == ("t.py::test_double", "t.py::test_both", "t.py::test_fits")
    assert select.decorator_lines(TOY, {8}) == (8, 8)
    assert select.decorator_lines(TOY, {8, 9}) is None  # the def line too: not only decorators
    body = select.select(MAP, TOY, TOY.replace("if n > 0:", "if n >= 0:"))
    assert body.reason == "covered"


def test_a_mutant_of_a_statement_run_at_import_selects_every_test() -> None:
    chosen = select.select(MAP, TOY, TOY.replace("LIMIT = 3", "LIMIT = 4"))
    assert chosen.reason == "import"
    assert chosen.tests == ("t.py::test_double", "t.py::test_both", "t.py::test_fits")


def test_a_mutant_of_a_class_decorator_selects_every_test() -> None:
    """`frozen=True` made `frozen=False`: the class's body runs only at import and the
    methods the decorator makes have no line, so no test "covers" it, yet every test that
    uses the class would see the change: all of them run, as for an import-time line."""
    chosen = select.select(MAP, TOY, TOY.replace("frozen=True", "frozen=False"))
    assert chosen.reason == "import" and chosen.span == (19, 21)
    assert chosen.tests == ("t.py::test_double", "t.py::test_both", "t.py::test_fits")


def test_a_mutant_that_does_not_compile_selects_every_test() -> None:
    """`*` made `+` in a def: a syntax error, so the module no longer imports and every
    test sees it, not only those that run the def (they fail to collect; a test that
    imports the package in a child Python fails). A mutant that compiles does not."""
    broken = TOY.replace("return 2 * n", "return 2 * * n")
    assert not select.compiles(broken) and select.compiles(TOY)
    chosen = select.select(MAP, TOY, broken)
    assert chosen.reason == "syntax" and chosen.span == (11, 11)
    assert chosen.tests == ("t.py::test_double", "t.py::test_both", "t.py::test_fits")
    assert chosen.seconds == 3.5
    assert select.select(MAP, TOY, TOY.replace("2 * n", "2 / n")).reason == "covered"


def test_a_mutant_on_a_line_no_test_executes_is_uncovered() -> None:
    chosen = select.select(MAP, TOY, TOY.replace("n - 1", "n + 1"))
    assert chosen.reason == "uncovered" and chosen.tests == ()


def _files(tmp_path: Path, mutated: str) -> list[str]:
    (tmp_path / "map.json").write_text(json.dumps(MAP))
    (tmp_path / "pristine.py").write_text(TOY)
    (tmp_path / "toy.py").write_text(mutated)
    return [
        *("--map", str(tmp_path / "map.json"), "--pristine", str(tmp_path / "pristine.py")),
        *("--module", str(tmp_path / "toy.py"), "--log", str(tmp_path / "log")),
    ]


def test_an_uncovered_mutant_survives_without_running_the_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(ran)!r}, 'w'); raise SystemExit(1)"]
    status = select.main([*_files(tmp_path, TOY.replace("n - 1", "n + 1")), "--", *command])
    assert status == 0  # cosmic-ray reads 0 as survived
    assert capsys.readouterr().out.startswith("uncovered: no test executes lines 16-16")
    assert not ran.exists()
    assert "uncovered 0 tests -> uncovered" in (tmp_path / "log").read_text()


@pytest.mark.parametrize(("exit_status", "verdict"), [(0, "survived"), (1, "killed")])
def test_a_covered_mutant_runs_the_command_on_the_selected_tests(
    tmp_path: Path, exit_status: int, verdict: str
) -> None:
    argv = tmp_path / "argv"
    script = f"import sys; open({str(argv)!r}, 'w').write(' '.join(sys.argv[1:]))"
    command = [sys.executable, "-c", f"{script}; raise SystemExit({exit_status})"]
    mutated = TOY.replace("n <= LIMIT", "n < LIMIT")
    assert select.main([*_files(tmp_path, mutated), "--", *command]) == exit_status
    assert argv.read_text() == "t.py::test_both t.py::test_fits"
    assert f"covered 2 tests -> {verdict}" in (tmp_path / "log").read_text()


def test_a_mutant_that_hangs_the_tests_twice_is_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(select, "SLOWDOWN", 0.0)
    monkeypatch.setattr(select, "GRACE", 0.5)
    command = [sys.executable, "-c", "import time; time.sleep(30)"]
    mutated = TOY.replace("n <= LIMIT", "n < LIMIT")
    assert select.main([*_files(tmp_path, mutated), "--", *command]) == 1
    assert "timeout: the tests ran over" in capsys.readouterr().out


def test_the_coverage_plugin_maps_each_test_to_the_lines_it_executes(tmp_path: Path) -> None:
    """tools/mutation_coverage.py on a real pytest run: the lines each test executes, the
    lines run at import, and every test's duration."""
    (tmp_path / "toy.py").write_text(
        "LIMIT = 3\n\n\ndef fits(n):\n    return n <= LIMIT\n\n\ndef double(n):\n    return 2 * n\n"
    )
    (tmp_path / "test_toy.py").write_text(
        "import toy\n\n\ndef test_fits():\n    assert toy.fits(3)\n\n\n"
        "def test_double():\n    assert toy.double(2) == 4\n"
    )
    out = tmp_path / "map.json"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT / "tools")]),
        MUTATION_COVERAGE_TARGET=str(tmp_path / "toy.py"),
        MUTATION_COVERAGE_OUT=str(out),
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "mutation_coverage", "-p", "no:queueref", "test_toy.py"]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    found = json.loads(out.read_text())
    assert found["import_lines"] == [1, 4, 8]
    assert found["tests"]["test_toy.py::test_fits"]["lines"] == [5]
    assert found["tests"]["test_toy.py::test_double"]["lines"] == [9]
    assert all(t["seconds"] >= 0 for t in found["tests"].values())


def test_an_equivalent_survivor_named_by_occurrence_leaves_its_neighbour_a_survivor() -> None:
    """tools/mutation.py: a survivors-file row `operator#occurrence` marks that one mutant
    equivalent; another mutant of the same operator on the same line still survives."""
    code = "if rule is _GE or TokenRule(rule) is _GE:"
    outcomes = [
        mutation.Outcome(167, "core/Op", 2, code, "survived", "diff 2"),
        mutation.Outcome(167, "core/Op", 3, code, "survived", "diff 3"),
        mutation.Outcome(168, "core/Op", 4, "return view < limit", "killed", ""),
    ]
    target = mutation.MODULES["admission/protocol.py"]
    known = {("admission/protocol.py", "core/Op#3", code)}
    result = mutation.summarize("admission/protocol.py", target, outcomes, 3, known)
    assert (result["killed"], result["survived"], result["equivalent"]) == (1, 1, 1)
    assert [s["occurrence"] for s in result["survivors"]] == [2]
    assert result["score"] == 0.5
    everything = {("admission/protocol.py", "core/Op", code)}
    result = mutation.summarize("admission/protocol.py", target, outcomes, 3, everything)
    assert (result["survived"], result["equivalent"], result["score"]) == (0, 2, 1.0)


def test_a_pipe_in_the_code_of_a_survivors_row_is_written_escaped(tmp_path: Path) -> None:
    """tools/mutation.py: Markdown tables need `\\|` for a `|` inside a cell; the code of an
    equivalent row is read back with its `|`, and a row with the pipe unescaped does not
    name that code (its cells split at the pipe)."""
    rows = tmp_path / "survivors.md"
    rows.write_text(
        "| m.py | 59 | core/ReplaceBinaryOperator_BitOr_BitXor | `A: R \\| B,` | equivalent "
        "| `R` and `B` are disjoint, so `^` is `\\|` |\n"
        "| m.py | 60 | core/Op | `C: R | B,` | equivalent | unescaped |\n"
    )
    found = mutation.equivalents(rows)
    assert ("m.py", "core/ReplaceBinaryOperator_BitOr_BitXor", "A: R | B,") in found
    assert not any(code.startswith("C:") and "|" in code for _, _, code in found)


NESTED = """\
def wrap(func):
    @functools.wraps(func)
    def inner(*args):
        return func(*args)
    return inner


@wrap
def f(n):
    return n
"""
#: `wrap` runs at import (for `f`); one test reads only `f.__name__`, one calls `f`.
NESTED_MAP: dict[str, Any] = {
    "module": "nested.py",
    "import_lines": [1, 2, 3, 5, 8, 9],
    "tests": {
        "t.py::test_name": {"seconds": 0.5, "lines": []},
        "t.py::test_call": {"seconds": 1.0, "lines": [4, 10]},
    },
}


def test_a_decorator_of_a_nested_def_runs_the_tests_that_run_the_enclosing_function() -> None:
    """A mutant removing `@functools.wraps(func)` from a wrapper made at import changes what
    every test sees (`f.__name__`), not only what the tests calling the wrapper see: all
    the tests run, `test_name` among them. A mutant in the wrapper's body still runs only
    the tests that call it."""
    removed = NESTED.replace("    @functools.wraps(func)\n", "")
    chosen = select.select(NESTED_MAP, NESTED, removed)
    assert chosen.reason == "import" and set(chosen.tests) == {"t.py::test_name", "t.py::test_call"}
    assert select.nested_decorators(NESTED, {2}) == (2, 2)
    assert select.nested_decorators(NESTED, {8}) is None  # a module-level def's decorator
    # cosmic-ray removes the blank line above a decorator with it (queue_base's
    # `_checked_init`): the blank line does not hide the decorator.
    spaced = NESTED.replace("(func):\n", "(func):\n\n", 1)
    assert spaced.splitlines()[1] == "" and spaced.splitlines()[2].strip().startswith("@")
    assert select.nested_decorators(spaced, {2, 3}) == (3, 3)
    assert select.nested_decorators(spaced, {2}) is None  # a blank line alone
    body = select.select(NESTED_MAP, NESTED, NESTED.replace("func(*args)", "func()"))
    assert body.reason == "covered" and body.tests == ("t.py::test_call",)


@pytest.mark.parametrize("exit_status", [2, 3, 4, 5])
def test_a_pytest_error_is_not_a_kill(
    tmp_path: Path, exit_status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2-5 (interrupted, internal, usage, no tests) say nothing about the tests."""
    command = [sys.executable, "-c", f"raise SystemExit({exit_status})"]
    mutated = TOY.replace("n <= LIMIT", "n < LIMIT")
    assert select.main([*_files(tmp_path, mutated), "--", *command]) == exit_status
    assert f"error: pytest exited {exit_status}" in capsys.readouterr().out
    assert "-> error" in (tmp_path / "log").read_text()
    assert mutation.killed_verdict(f"selected 2 tests\nerror: pytest exited {exit_status}") == (
        "errored"
    )


def test_a_slow_run_is_retried_once_with_a_longer_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run over its limit once is tried again: only a second miss is a timeout."""
    monkeypatch.setattr(select, "SLOWDOWN", 0.0)
    monkeypatch.setattr(select, "GRACE", 1.0)
    monkeypatch.setattr(select, "RETRY_SLOWDOWN", 20.0)
    marker = tmp_path / "once"
    # Slow the first time only: the retry, with 20 s, finishes and its test fails.
    script = (
        f"import os, time, sys\nif not os.path.exists({str(marker)!r}):\n"
        f"    open({str(marker)!r}, 'w'); time.sleep(5)\nsys.exit(1)"
    )
    mutated = TOY.replace("n <= LIMIT", "n < LIMIT")
    assert select.main([*_files(tmp_path, mutated), "--", sys.executable, "-c", script]) == 1
    out = capsys.readouterr().out
    assert "once more with a longer limit" in out and "timeout:" not in out
    assert "-> killed" in (tmp_path / "log").read_text()


def test_only_a_failing_test_counts_as_a_kill_in_the_score() -> None:
    """Timeouts, errors and incompetent runs are listed apart and count against the score."""
    outcomes = [
        mutation.Outcome(1, "op", 0, "a", "killed", ""),
        mutation.Outcome(2, "op", 0, "b", "timed-out", ""),
        mutation.Outcome(3, "op", 0, "c", "errored", ""),
        mutation.Outcome(4, "op", 0, "d", "incompetent", ""),
    ]
    target = mutation.Target("x.py", ())
    result = mutation.summarize("x.py", target, outcomes, 4, set())
    assert result["killed"] == 1 and result["timed_out"] == 1 and result["errored"] == 1
    assert result["score"] == 0.25


def test_a_stale_equivalence_row_is_named(tmp_path: Path) -> None:
    """A row whose line, operator and code no survivor matches is stale; a matching one is not."""
    survivors = tmp_path / "survivors.md"
    survivors.write_text(
        "| module | line | operator | code | verdict | reason |\n|---|---|---|---|---|---|\n"
        "| x.py | 3 | core/ReplaceTrueWithFalse | `flag = True` | equivalent | unused |\n"
        "| x.py | 9 | core/NumberReplacer#1 | `n = 2` | equivalent | moved since |\n",
        encoding="utf-8",
    )
    rows = mutation.equivalence_rows(survivors)
    assert [row[1] for row in rows] == [3, 9]
    outcomes = [
        mutation.Outcome(3, "core/ReplaceTrueWithFalse", 0, "flag = True", "survived", ""),
        mutation.Outcome(7, "core/NumberReplacer", 1, "n = 2", "survived", ""),  # moved: line 7
    ]
    assert mutation.stale_equivalents("x.py", outcomes, rows) == [
        "x.py:9 core/NumberReplacer#1 `n = 2`: no surviving mutant matches this row"
    ]
    assert mutation.stale_equivalents("y.py", outcomes, rows) == []


#: A planted project: one test file builds a constant from the module's text at import (as
#: `broken_class(..., Change(old, new))` does), one tests its behaviour.
PLANTED = "LIMIT = 3\n\n\ndef fits(n):\n    return n <= LIMIT\n"
PLANTED_TESTS = {
    "test_built_at_import.py": (
        "from pathlib import Path\n"
        "TEXT = (Path(__file__).parent / 'toy.py').read_text()\n"
        "if 'n <= LIMIT' not in TEXT:\n"
        "    raise LookupError('the change does not apply')\n"
        "def test_text():\n"
        "    assert TEXT\n"
    ),
    "test_behaviour.py": (
        "from toy import fits\ndef test_fits_at_the_limit():\n    assert fits(3)\n"
    ),
}
PLANTED_MAP: dict[str, Any] = {
    "module": "toy.py",
    "import_lines": [1, 4],
    "tests": {
        "test_built_at_import.py::test_text": {"seconds": 0.1, "lines": [5]},
        "test_behaviour.py::test_fits_at_the_limit": {"seconds": 0.2, "lines": [5]},
    },
}


def _planted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutated: str, tests: dict[str, Any]
) -> list[str]:
    """The planted project in `tmp_path` (the working directory), `mutated` as its module,
    `tests` as its line map: the selector's arguments, pytest its command."""
    monkeypatch.setattr(select, "GRACE", 60.0)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name, text in PLANTED_TESTS.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "map.json").write_text(json.dumps(dict(PLANTED_MAP, tests=tests)))
    (tmp_path / "pristine.py").write_text(PLANTED)
    (tmp_path / "toy.py").write_text(mutated)
    monkeypatch.chdir(tmp_path)
    return [
        *("--map", str(tmp_path / "map.json"), "--pristine", str(tmp_path / "pristine.py")),
        *("--module", str(tmp_path / "toy.py"), "--log", str(tmp_path / "log")),
        *("--", sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"),
    ]


@pytest.mark.parametrize(
    ("mutated", "status", "verdict"),
    [
        # `fits(3)` fails: the behavioural test kills it, the import failure does not.
        ("n < LIMIT", 1, "killed"),
        # The same behaviour: the import failure alone is no kill, the remaining test passes.
        ("LIMIT >= n", 0, "survived"),
    ],
)
def test_a_collection_error_is_set_aside_and_the_remaining_tests_decide(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mutated: str,
    status: int,
    verdict: str,
) -> None:
    tests = PLANTED_MAP["tests"]
    argv = _planted(tmp_path, monkeypatch, PLANTED.replace("n <= LIMIT", mutated), tests)
    assert select.main(argv) == status
    out = capsys.readouterr().out
    assert "uncollectable: test_built_at_import.py (a collection error" in out
    assert mutation.uncollectable_files(out) == ("test_built_at_import.py",)
    assert f"-> {verdict} (uncollectable: 1 files)" in (tmp_path / "log").read_text()
    # Unmutated, both files collect and pass: the set-aside file was the mutant's doing.
    (tmp_path / "toy.py").write_text(PLANTED)
    assert select.main(argv) == 0
    assert "uncollectable:" not in capsys.readouterr().out


def test_a_collection_error_with_nothing_left_to_run_is_an_error_not_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = {"test_built_at_import.py::test_text": {"seconds": 0.1, "lines": [5]}}
    argv = _planted(tmp_path, monkeypatch, PLANTED.replace("n <= LIMIT", "n < LIMIT"), tests)
    assert select.main(argv) == select.INTERRUPTED
    out = capsys.readouterr().out
    assert mutation.killed_verdict(out) == "errored"
    assert "-> error (uncollectable: 1 files)" in (tmp_path / "log").read_text()
    outcome = mutation.Outcome(5, "op", 0, "c", "errored", "", ("test_built_at_import.py",))
    result = mutation.summarize("x.py", mutation.Target("x.py", ()), [outcome], 1, set())
    assert result["killed"] == 0 and result["errored"] == 1 and result["uncollectable"] == 1
    assert result["outcomes"][0]["uncollectable"] == ["test_built_at_import.py"]


@pytest.mark.parametrize(("exit_status", "verdict"), [(0, "survived"), (1, "killed"), (4, "error")])
def test_whole_runs_every_test_named_under_the_same_rule(
    tmp_path: Path, exit_status: int, verdict: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--whole` (tools/mutation.py --whole): no map, every test named runs, even for a
    line no test of the map executes; only exit 1 kills, exit 4 is an error."""
    files = _files(tmp_path, TOY.replace("n - 1", "n + 1"))  # `unused`: in no test's lines
    files[:2] = ["--whole", "t.py::a,t.py::b", "--seconds", "1.0"]
    script = f"import sys; print(sys.argv[1:]); raise SystemExit({exit_status})"
    assert select.main([*files, "--", sys.executable, "-c", script]) == exit_status
    out = capsys.readouterr().out
    assert "selected 2 tests (whole)" in out and "['t.py::a', 't.py::b']" in out
    assert f"-> {verdict}" in (tmp_path / "log").read_text()


def test_either_a_map_or_whole_is_given(tmp_path: Path) -> None:
    """Neither, or both: a usage error naming the two, before anything runs."""
    files = _files(tmp_path, TOY)
    with pytest.raises(SystemExit):
        select.main([*files[2:], "--", sys.executable, "-c", "pass"])
    with pytest.raises(SystemExit):
        select.main([*files, "--whole", "t.py::a", "--", sys.executable, "-c", "pass"])
