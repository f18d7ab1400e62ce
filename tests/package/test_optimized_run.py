"""The run with contracts off (`python -O`): it really is off, and the guards kept for it bite.

queueref keeps some checks as plain code on purpose, so that bad input gets a clear
error under `python -O` too, where icontract skips every condition. `make test` runs
the tests of those guards under -O. These tests show that such a run means something:

* a copy of the package with ONE kept guard removed (a named substitution that must
  match exactly once) fails the -O run of the test that covers the guard, naming that
  test, while the unbroken copy passes the same command;
* in an -O run the pytest-xdist workers run optimized too (`tests/conftest.py` passes
  the flag on) and icontract is off in them: a contract-breaking call raises nothing;
* no test is marked `contracts` in a module that never mentions a contract.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reference" / "queueref"
TESTS = ROOT / "tests"


@dataclass(frozen=True)
class GuardRemoval:
    """One guard kept under -O, removed from a copy by replacing `old` (exactly once) by `new`."""

    name: str
    module: str  # path inside the package
    old: str
    new: str
    test_file: str  # the tests/ file whose test covers the guard
    test: str


GUARD_REMOVALS = [
    GuardRemoval(
        name="RQ-ALL-3 duplicate id accepted",
        module="queues/base.py",
        old="        if queued is not None:\n            raise ValueError(\n",
        new="        if False:\n            raise ValueError(\n",
        test_file="queues/test_queues.py",
        test="test_duplicate_request_is_rejected_and_queue_unchanged",
    ),
    GuardRemoval(
        name="ADM-TRK-1 tracked id accepted",
        module="admission/tracker.py",
        old='        if taken:\n            raise ValueError(f"ADM-TRK-1: ids already tracked',
        new='        if False:\n            raise ValueError(f"ADM-TRK-1: ids already tracked',
        test_file="admission/test_tracker.py",
        test="test_child_id_collision_with_a_later_parent",
    ),
    GuardRemoval(
        # A precondition declared once (`queueref.preconditions.require`) is the guard.
        name="ADM-TOK-6 negative token limit accepted",
        module="admission/contracts/shared_stats.py",
        old='lambda max_num_queued_tokens: is_limit(max_num_queued_tokens),\n    "ADM-TOK-6',
        new='lambda max_num_queued_tokens: True,\n    "ADM-TOK-6',
        test_file="admission/test_admission_tokens.py",
        test="test_allocation_for_a_token_limit_alone",
    ),
    GuardRemoval(
        name="WL-ENQ-2 running request enqueued",
        module="waiting/lifecycle.py",
        old="not is_lifecycle_request(request)\n            or request.status in READY_STATUSES",
        new="True\n            or request.status in READY_STATUSES",
        test_file="waiting/test_waiting.py",
        test="test_enqueue_rejects",
    ),
]


def substitute(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` in `path`; `old` must occur exactly once (so it cannot drift)."""
    text = path.read_text()
    count = text.count(old)
    if count != 1:
        raise AssertionError(f"{path.name}: the text to replace occurs {count} times, not once")
    path.write_text(text.replace(old, new))


def copy_package(tmp_path: Path, removal: GuardRemoval | None = None) -> Path:
    """A copy of queueref under `tmp_path`, with one guard removed; returns its PYTHONPATH."""
    shutil.copytree(PACKAGE, tmp_path / "queueref", ignore=shutil.ignore_patterns("__pycache__"))
    if removal is not None:
        substitute(tmp_path / "queueref" / removal.module, removal.old, removal.new)
    return tmp_path


def pytest_optimized(
    args: list[str], *, cwd: Path, pythonpath: Path | None = None, optimize: bool = True
) -> subprocess.CompletedProcess[str]:
    """`python [-O] -m pytest ARGS` in a child, with the package from `pythonpath` if given."""
    env = dict(os.environ)
    env.pop("PYTHONOPTIMIZE", None)  # the flag below alone says whether the child optimizes
    env["COLUMNS"] = "400"  # summary lines keep their reason
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    command = [sys.executable, *(["-O"] if optimize else []), "-m", "pytest"]
    return subprocess.run(
        [*command, "-q", "-rf", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def covering_run(removal: GuardRemoval, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    return pytest_optimized(
        ["-p", "no:xdist", str(TESTS / removal.test_file), "-k", removal.test],
        cwd=ROOT,
        pythonpath=pythonpath,
    )


def test_substitute_refuses_text_that_does_not_match_exactly_once(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_text("x = 1\nx = 1\n")
    with pytest.raises(AssertionError, match="occurs 2 times"):
        substitute(target, "x = 1", "x = 2")
    with pytest.raises(AssertionError, match="occurs 0 times"):
        substitute(target, "y = 1", "y = 2")
    assert target.read_text() == "x = 1\nx = 1\n"


@pytest.mark.multiprocess
def test_the_unbroken_copy_passes_every_covering_test_under_O(tmp_path: Path) -> None:
    """The control: the same commands on the copy without a change pass."""
    pythonpath = copy_package(tmp_path)
    for removal in GUARD_REMOVALS:
        done = covering_run(removal, pythonpath)
        assert done.returncode == 0, done.stdout + done.stderr
        assert " passed" in done.stdout and "failed" not in done.stdout, done.stdout


@pytest.mark.multiprocess
@pytest.mark.parametrize("removal", GUARD_REMOVALS, ids=lambda removal: removal.name)
def test_removing_a_kept_guard_fails_its_test_under_O(
    tmp_path: Path, removal: GuardRemoval
) -> None:
    """Under -O the guard alone refuses the input: without it the covering test fails."""
    done = covering_run(removal, copy_package(tmp_path, removal))
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert failed, done.stdout
    assert all(f"{removal.test_file}::{removal.test}" in line for line in failed), failed
    # The reason: the bad input was accepted, not some other error of the copy.
    assert all("DID NOT RAISE" in line for line in failed), failed


PROBE = """
import sys

import icontract

from queueref import FCFSRequestQueue, Request


class ForgetsTheRequest(FCFSRequestQueue):
    def add_request(self, request: Request) -> None:  # breaks RQ-ALL-1's postcondition
        pass


def test_worker_runs_optimized() -> None:
    assert sys.flags.optimize >= 1 and not __debug__


def test_icontract_is_off() -> None:
    ForgetsTheRequest().add_request(Request("a"))
"""


def probe_run(tmp_path: Path, *, optimize: bool, conftest: str) -> subprocess.CompletedProcess[str]:
    """The probe run by two xdist workers, beside `conftest` (the project's, or a variant)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # rootdir here, not the project's
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_probe.py").write_text(PROBE)
    return pytest_optimized(["-n", "2", "test_probe.py"], cwd=tmp_path, optimize=optimize)


@pytest.mark.multiprocess
def test_workers_of_an_optimized_run_have_contracts_off(tmp_path: Path) -> None:
    done = probe_run(tmp_path, optimize=True, conftest=(TESTS / "conftest.py").read_text())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout


@pytest.mark.multiprocess
def test_without_the_conftest_line_the_workers_keep_contracts_on(tmp_path: Path) -> None:
    """The broken variant: plain `python -O -m pytest -n 2` tests with contracts on."""
    conftest = TESTS / "conftest.py"
    variant = tmp_path / "conftest_variant.py"
    shutil.copy(conftest, variant)
    substitute(variant, "if sys.flags.optimize:\n", "if False:\n")
    done = probe_run(tmp_path, optimize=True, conftest=variant.read_text())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed" in done.stdout, done.stdout
    assert "test_worker_runs_optimized - assert" in done.stdout, done.stdout
    assert "test_icontract_is_off - icontract.errors.ViolationError" in done.stdout, done.stdout


@pytest.mark.multiprocess
def test_the_probe_breaks_a_contract_when_contracts_are_on(tmp_path: Path) -> None:
    """Without -O the probe's call is a ViolationError: its silence under -O means something."""
    done = probe_run(tmp_path, optimize=False, conftest=(TESTS / "conftest.py").read_text())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_icontract_is_off - icontract.errors.ViolationError" in done.stdout, done.stdout
    assert "RQ-ALL-1" in done.stdout + done.stderr, done.stdout


def marked_tests(source: str, marker: str) -> set[str]:
    """The test functions of a module that carry `@pytest.mark.<marker>`."""
    return {
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d) == f"pytest.mark.{marker}" for d in node.decorator_list)
    }


def test_marked_tests_reads_the_decorators() -> None:
    module = "@pytest.mark.guard\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n"
    assert marked_tests(module, "guard") == {"test_a"}
    assert marked_tests(module, "contracts") == set()


def test_the_guards_removed_above_are_in_the_optimized_run_of_make_test() -> None:
    """The broken copies are caught by tests `make test` runs under -O (marked `guard`)."""
    for removal in GUARD_REMOVALS:
        source = (TESTS / removal.test_file).read_text()
        assert removal.test in marked_tests(source, "guard"), removal.name
        assert removal.test not in marked_tests(source, "contracts"), removal.name


def _about_contracts(source: str) -> bool:
    return "icontract" in source or "ViolationError" in source


def mis_marked_contract_tests(
    source: str, contract_helpers: frozenset[str] = frozenset()
) -> list[str]:
    """Tests marked `contracts` in a module that never mentions icontract or ViolationError,
    itself or through a helper module of `contract_helpers` it imports from."""
    tree = ast.parse(source)
    helpers_used = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in contract_helpers
    }
    if _about_contracts(source) or helpers_used:
        return []
    marked: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            if "mark.contracts" in ast.unparse(node.value):
                marked.append("pytestmark")
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if any("mark.contracts" in ast.unparse(d) for d in node.decorator_list):
                marked.append(node.name)
    return marked


def test_the_hygiene_check_flags_a_mis_marked_test() -> None:
    module = "import pytest\n\n@pytest.mark.contracts\ndef test_x() -> None:\n    assert 1\n"
    assert mis_marked_contract_tests(module) == ["test_x"]
    assert mis_marked_contract_tests("import pytest\npytestmark = pytest.mark.contracts\n") == [
        "pytestmark"
    ]
    about_contracts = "import icontract\n" + module
    assert mis_marked_contract_tests(about_contracts) == []
    # a helper that raises or matches the violations counts; any other helper does not
    with_helper = "from gap_helpers import violation\n" + module
    assert mis_marked_contract_tests(with_helper, frozenset({"gap_helpers"})) == []
    assert mis_marked_contract_tests(with_helper, frozenset({"other_helpers"})) == ["test_x"]


def test_every_contracts_marker_is_in_a_module_about_contracts() -> None:
    helpers = frozenset(
        path.stem
        for path in (TESTS / "helpers").glob("*.py")
        if not path.name.startswith("test_") and _about_contracts(path.read_text())
    )
    assert {"queue_gap_helpers", "waiting_gap_helpers"} <= helpers
    found = {
        path.name: names
        for path in sorted(TESTS.rglob("*.py"))
        if (names := mis_marked_contract_tests(path.read_text(), helpers))
    }
    assert found == {}
