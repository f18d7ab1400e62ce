"""Mutation testing of the reference with cosmic-ray: how many wrong versions do the tests kill?

For each module of `MODULES`, cosmic-ray makes every mutant (one small change: an operator,
a constant, a comparison, a removed decorator, ...), runs tests against it and records
whether they fail (killed) or pass (survived). Mutants inside type annotations are left
out: they cannot change behaviour. The run happens in a copy of the repository under
`build/mutation/`, so the working tree is never touched, with one worker (the machine is
shared) and `HYPOTHESIS_PROFILE=ci` (derandomized: a mutant's verdict does not depend on
luck).

A full run is affordable because each mutant runs only the tests that execute the
statement it changes: the module's tests run once unmutated with the line recorder
`tools/mutation_coverage.py` (they must pass), and cosmic-ray's test command is
`tools/mutation_select.py`, which picks the covering tests, fastest first, `-x`. A mutant
on a statement no test executes survives without running anything (`uncovered`).
`--whole` runs every mutant against the module's whole test list instead.

    python tools/mutation.py [--sample 60] [--seed 1] [--modules events,tracker]
    python tools/mutation.py --modules events --only-survivors  # after new tests
    python tools/mutation.py --modules events --only-survivors --tests tests/test_new.py
    python tools/mutation.py --modules admission --work /tmp/m --resume  # after a stop

`--sample N` runs a seeded random sample of N mutants per module instead of all of them;
`--only-survivors` runs again only the last run's survivors and undecided mutants (errors,
timeouts, incompetent runs; keyed by operator and occurrence) and updates that run, against
the module's tests or only the new ones (`--tests`: a mutant some tests kill is killed; one
they miss stays a survivor).
`--resume` goes on with a run that was stopped (its cosmic-ray session in `--work` keeps
every verdict reached): only the mutants not yet run are run, on the module's unmutated
text (a stopped run leaves its last mutant written in the copy; the resume undoes it).
Writes `build/mutation.json` (per module: mutants, killed, survived, uncovered, timed
out, incompetent, equivalent, score; every mutant's verdict and every survivor's diff),
records the summary in `docs/mutation/score.json` and the table of docs/mutation/README.md
("Mutation score"); progress goes to `build/mutation-progress.log`, one line per mutant.

A survivor listed in `docs/mutation/survivors.md` with verdict `equivalent` (it cannot
change behaviour) is counted as equivalent, not as survived; the score is
killed / (mutants - equivalent), a kill being a failing test only. Timeouts (after one
retry with a longer limit), errors and incompetent runs are listed apart and count against
the score. Test files that fail to collect on a mutant are set aside by the selector and
the rest decide; each mutant's record lists them (`uncollectable`), and the summary counts
the mutants that had any.

An equivalence row names its module, line, operator and code; a full run of a module
fails when one of its rows matches no surviving mutant (`stale_equivalents`): the code
changed under it, and the claim must be re-read. It fails at the end, after every module's
verdicts are written (a stale row matches no survivor, so it counts nothing).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutation"
OUTPUT = ROOT / "build" / "mutation.json"
SCORE = ROOT / "docs" / "mutation" / "score.json"
SURVIVORS = ROOT / "docs" / "mutation" / "survivors.md"
PROGRESS = ROOT / "build" / "mutation-progress.log"
README = ROOT / "docs" / "mutation" / "README.md"
COPIED = ["reference", "tests", "specs", "proofs", "tools", "docs", "pyproject.toml", "README.md"]
COPIED += ["CONTRIBUTING.md"]
#: Tests that start processes or servers, or run CrossHair: too slow to run per mutant.
DESELECT = "not multiprocess and not e2e"


@dataclass(frozen=True)
class Target:
    """A module and the tests that cover it."""

    path: str
    tests: tuple[str, ...]


#: The waiting lifecycle is split by job over several modules; the same tests cover them all.
_LIFECYCLE_TESTS = (
    "tests/waiting/test_waiting.py",
    "tests/waiting/test_waiting_machine.py",
    "tests/waiting/test_waiting_variants.py",
    "tests/waiting/test_waiting_v033.py",
    "tests/waiting/test_waiting_streaming.py",
    "tests/waiting/test_waiting_guard.py",
    "tests/waiting/test_waiting_checks.py",
    "tests/waiting/test_waiting_state.py",
    "tests/waiting/test_waiting_step.py",
    "tests/waiting/test_waiting_lifecycle.py",
    "tests/waiting/test_waiting_stream.py",
    "tests/waiting/test_waiting_leave.py",
    "tests/waiting/test_waiting_releases.py",
    "tests/waiting/test_waiting_copies.py",
)
_LIFECYCLE_MODULES = (
    "waiting/places",
    "waiting/state",
    "waiting/checks",
    "waiting/step",
    "waiting/stream",
    "waiting/leave",
    "waiting/pause",
)

#: The queues' modules, split out of queues.py by job (issue 17); all run the queue tests.
_QUEUE_MODULES = (
    "queues/checks",
    "queues/clauses",
    "queues/contracts",
    "queues/base",
    "queues/fcfs",
    "queues/priority",
)
_QUEUE_TESTS = (
    "tests/queues/test_queues.py",
    "tests/queues/test_queue_laws.py",
    "tests/queues/test_queue_model.py",
    "tests/queues/test_queue_semantics.py",
    "tests/queues/test_queue_cost.py",
    "tests/queues/test_queue_contract_cost.py",
    "tests/admission/test_admission_pins.py",
    "tests/queues/test_queue_fcfs.py",
    "tests/queues/test_queue_priority.py",
    "tests/queues/test_queue_base.py",
    "tests/queues/test_queue_checks.py",
    "tests/queues/test_queue_contracts.py",
    "tests/queues/test_queue_copies.py",
    "tests/queues/test_queue_adversarial_requests.py",
)

#: The trace checker's tests: its modules (check, bounds, replay, report) share them.
_TRACE_CHECK_TESTS = (
    "tests/oracle/test_check_trace.py",
    "tests/oracle/test_check_trace_tokens.py",
    "tests/oracle/test_check_trace_peak.py",
    "tests/package/test_validators.py",
    "tests/admission/test_admission_pins.py",
    "tests/oracle/test_trace_check.py",
    "tests/oracle/test_check_trace_preflight.py",
    "tests/oracle/test_trace_bounds.py",
    "tests/oracle/test_trace_report.py",
)

#: The controller's tests; they also pin the step-wise check and the postconditions.
_CONTROLLER_TESTS = (
    "tests/admission/test_admission.py",
    "tests/admission/test_admission_front.py",
    "tests/admission/test_admission_machine.py",
    "tests/admission/test_admission_one_pass.py",
    "tests/admission/test_admission_tokens.py",
    "tests/package/test_validators.py",
    "tests/admission/test_admission_pins.py",
    "tests/admission/test_admission_controller.py",
    "tests/admission/test_admission_contracts.py",
    "tests/admission/test_admission_step_guard.py",
)

MODULES: dict[str, Target] = {
    "queues/factory.py": Target("reference/queueref/queues/factory.py", _QUEUE_TESTS),
    **{
        f"{name}.py": Target(f"reference/queueref/{name}.py", _QUEUE_TESTS)
        for name in _QUEUE_MODULES
    },
    "waiting/lifecycle.py": Target("reference/queueref/waiting/lifecycle.py", _LIFECYCLE_TESTS),
    **{
        f"{name}.py": Target(f"reference/queueref/{name}.py", _LIFECYCLE_TESTS)
        for name in _LIFECYCLE_MODULES
    },
    **{
        f"admission/{name}.py": Target(f"reference/queueref/admission/{name}.py", _CONTROLLER_TESTS)
        for name in ("controller", "check", "contracts/controller", "contracts/check")
    },
    "admission/tracker.py": Target(
        "reference/queueref/admission/tracker.py",
        (
            "tests/admission/test_tracker.py",
            "tests/admission/test_admission.py",
            "tests/admission/test_admission_front.py",
            "tests/admission/test_admission_machine.py",
            "tests/admission/test_admission_one_pass.py",
            "tests/admission/test_admission_tokens.py",
            "tests/package/test_validators.py",
            "tests/admission/test_admission_pins.py",
            "tests/admission/test_tracker_clauses.py",
        ),
    ),
    "admission/protocol.py": Target(
        "reference/queueref/admission/protocol.py",
        (
            "tests/verify/test_ob_explorer.py",
            "tests/verify/test_ob_one_transition_system.py",
            "tests/verify/test_ob_broken_variants.py",
            "tests/admission/test_admission.py",
            "tests/admission/test_admission_machine.py",
            "tests/admission/test_admission_one_pass.py",
            "tests/admission/test_admission_tokens.py",
            "tests/verify/test_token_model.py",
            "tests/package/test_validators.py",
            "tests/admission/test_admission_pins.py",
            "tests/admission/test_protocol.py",
        ),
    ),
    "trace/events.py": Target(
        "reference/queueref/trace/events.py",
        (
            "tests/trace/test_admission_events.py",
            "tests/oracle/test_check_trace.py",
            "tests/oracle/test_check_trace_tokens.py",
            "tests/package/test_validators.py",
            "tests/admission/test_admission_pins.py",
            "tests/trace/test_trace_events.py",
        ),
    ),
    "oracle/trace_check.py": Target(
        "reference/queueref/oracle/trace_check.py",
        _TRACE_CHECK_TESTS,
    ),
    "oracle/trace_bounds.py": Target(
        "reference/queueref/oracle/trace_bounds.py",
        _TRACE_CHECK_TESTS,
    ),
    "oracle/trace_replay.py": Target(
        "reference/queueref/oracle/trace_replay.py",
        _TRACE_CHECK_TESTS,
    ),
    "oracle/trace_report.py": Target(
        "reference/queueref/oracle/trace_report.py",
        _TRACE_CHECK_TESTS,
    ),
    "trace/files.py": Target(
        "reference/queueref/trace/files.py",
        (
            "tests/oracle/test_check_trace.py",
            "tests/oracle/test_check_trace_tokens.py",
            "tests/package/test_validators.py",
            "tests/admission/test_admission_pins.py",
            "tests/trace/test_trace_files.py",
        ),
    ),
}
#: The shared counters, and their contracts declared beside them.
for _name in ("shared_stats", "contracts/shared_stats"):
    MODULES[f"admission/{_name}.py"] = Target(
        f"reference/queueref/admission/{_name}.py",
        (
            "tests/admission/test_shared_stats.py",
            "tests/admission/test_shared_stats_guard.py",
            *_CONTROLLER_TESTS,
        ),
    )
#: The tracker's contracts, declared beside it, are pinned by the tracker's own tests.
MODULES["admission/contracts/tracker.py"] = Target(
    "reference/queueref/admission/contracts/tracker.py", MODULES["admission/tracker.py"].tests
)
#: A mutant that makes a module raise while it loads breaks the collection of every test
#: file that imports queueref (an error, never a kill); this test imports nothing of it and
#: fails in a child Python that imports the package and each module.
IMPORT_TEST = "tests/package/test_import.py"
MODULES = {name: Target(t.path, (*t.tests, IMPORT_TEST)) for name, t in MODULES.items()}


@dataclass(frozen=True)
class Outcome:
    """One mutant's result."""

    line: int
    operator: str
    occurrence: int  # cosmic-ray's index of this operator's mutants: with it, the key
    code: str  # the original line, stripped
    verdict: str  # killed | survived | uncovered | timed-out | errored | incompetent
    diff: str
    #: Test files that failed to collect on this mutant and were set aside (the rest decided).
    uncollectable: tuple[str, ...] = ()


def annotation_ranges(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) positions of every type annotation in `source`."""
    ranges = []
    for node in ast.walk(ast.parse(source)):
        notes: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            notes.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            notes.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
        for note in notes:
            if note is not None and note.end_lineno is not None and note.end_col_offset is not None:
                start = (note.lineno, note.col_offset)
                ranges.append((start, (note.end_lineno, note.end_col_offset)))
    return ranges


def equivalents(path: Path = SURVIVORS) -> set[tuple[str, str, str]]:
    """(module, operator, code) of the survivors `docs/mutation/survivors.md` calls
    equivalent: rows `| module | line | operator | `code` | equivalent | reason |`; an
    operator written `operator#occurrence` names one of several mutants of that line. A
    `|` inside a cell is written `\\|`, as Markdown tables need."""
    found: set[tuple[str, str, str]] = set()
    if not path.exists():
        return found
    for row in re.findall(r"^\|(.+)\|\s*$", path.read_text(), flags=re.MULTILINE):
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]
        if len(cells) >= 5 and cells[4] == "equivalent":
            found.add((cells[0], cells[2], cells[3].strip("`")))
    return found


def equivalence_rows(path: Path = SURVIVORS) -> list[tuple[str, int, str, str]]:
    """(module, line, operator, code) of every `equivalent` row of `path`."""
    rows: list[tuple[str, int, str, str]] = []
    if not path.exists():
        return rows
    for row in re.findall(r"^\|(.+)\|\s*$", path.read_text(), flags=re.MULTILINE):
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]
        if len(cells) >= 5 and cells[4] == "equivalent" and cells[1].isdigit():
            rows.append((cells[0], int(cells[1]), cells[2], cells[3].strip("`")))
    return rows


def stale_equivalents(
    name: str, outcomes: list[Outcome], rows: list[tuple[str, int, str, str]]
) -> list[str]:
    """The equivalence rows of module `name` that no survivor of a full run matches, by
    line, operator (or `operator#occurrence`) and code: each names a claim to re-read."""
    survivors = {
        (o.line, key, o.code)
        for o in outcomes
        if o.verdict in ("survived", "uncovered")
        for key in (o.operator, _key(o.operator, o.occurrence))
    }
    return [
        f"{module}:{line} {operator} `{code}`: no surviving mutant matches this row"
        for module, line, operator, code in rows
        if module == name and (line, operator, code) not in survivors
    ]


def copy_tree(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, work / name)


def _command(target: Target, work: Path) -> list[str]:
    tests = [t for t in target.tests if (work / t).exists()]
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    return argv + ["-m", DESELECT, "-k", "not crosshair", *tests]


def _slug(name: str) -> str:
    return name.replace("/", "_").replace(".py", "")


def _unmutated_failure(name: str, run: subprocess.CompletedProcess[str]) -> str:
    return f"{name}: the tests fail unmutated:\n{run.stdout[-2000:]}{run.stderr[-2000:]}"


def measure_coverage(name: str, target: Target, work: Path, env: dict[str, str]) -> Path:
    """Run the module's tests once, unmutated, with `tools/mutation_coverage.py`: they must
    pass, and the map of the lines each test executes is written beside the session."""
    out = work / f"{_slug(name)}.coverage.json"
    traced = dict(
        env,
        PYTHONPATH=os.pathsep.join([str(work / "reference"), str(work / "tools")]),
        MUTATION_COVERAGE_TARGET=str((work / target.path).resolve()),
        MUTATION_COVERAGE_OUT=str(out),
    )
    command = _command(target, work)
    command[3:3] = ["-p", "mutation_coverage"]
    baseline = subprocess.run(command, cwd=work, env=traced, capture_output=True, text=True)
    if baseline.returncode != 0 or not out.exists():
        raise SystemExit(_unmutated_failure(name, baseline))
    return out


def _key(operator: str, occurrence: int) -> str:
    return f"{operator}#{occurrence}"


def run_module(
    name: str,
    target: Target,
    work: Path,
    sample: int | None,
    seed: int,
    *,
    whole: bool = False,
    only: set[str] | None = None,
    resume: bool = False,
) -> tuple[list[Outcome], int]:
    """Init a cosmic-ray session for one module, choose its mutants (all, a sample, or the
    `only` keys `operator#occurrence`), run them, read the results.

    Each mutant runs the tests that execute its statement (`tools/mutation_select.py`),
    or, with `whole`, the module's whole test list. With `resume`, the session an
    interrupted run left in `work` goes on: its mutants not yet run are run, nothing
    is chosen or measured again."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    env = dict(os.environ, PYTHONPATH=str(work / "reference"), HYPOTHESIS_PROFILE="ci")
    env.pop("CI", None)
    if resume:
        return _resume_module(name, target, work, env)
    began = time.perf_counter()
    if whole:  # no line map needed: the tests must pass unmutated, untraced
        baseline = subprocess.run(
            _command(target, work), cwd=work, env=env, capture_output=True, text=True
        )
        if baseline.returncode != 0:
            raise SystemExit(_unmutated_failure(name, baseline))
        total_seconds = time.perf_counter() - began
    else:
        coverage_map = measure_coverage(name, target, work, env)
        tests = json.loads(coverage_map.read_text())["tests"]
        total_seconds = sum(t["seconds"] for t in tests.values())
    slug = _slug(name)
    pristine = work / "pristine" / f"{slug}.py"
    pristine.parent.mkdir(exist_ok=True)
    shutil.copy2(work / target.path, pristine)
    command = _command(target, work)
    # Through the selector either way: only a failing test (exit 1) is a kill.
    select = [sys.executable, str(work / "tools" / "mutation_select.py")]
    if whole:
        tests = [t for t in target.tests if (work / t).exists()]
        select += ["--whole", ",".join(tests), "--seconds", f"{total_seconds:.1f}"]
    else:
        select += ["--map", str(coverage_map)]
    select += ["--pristine", str(pristine)]
    select += ["--module", str(work / target.path), "--log", str(PROGRESS), "--"]
    command = select + command[: command.index("-m", 3)] + ["-m", DESELECT]
    if whole:
        command += ["-k", "not crosshair"]
    # The selector times a hung mutant out itself; this is the backstop.
    timeout = max(60.0, 4 * total_seconds + 60)
    config = work / f"{slug}.toml"
    session = work / f"{slug}.sqlite"
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{target.path}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(shlex.join(command))}\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    cosmic = [str(Path(sys.executable).parent / "cosmic-ray")]
    subprocess.run([*cosmic, "init", str(config), str(session)], cwd=work, env=env, check=True)
    source = pristine.read_text()
    notes = annotation_ranges(source)
    skipped = WorkResult(worker_outcome=WorkerOutcome.SKIPPED)
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(
            db.pending_work_items,
            key=lambda i: (i.mutations[0].start_pos, i.mutations[0].operator_name, i.job_id),
        )
        kept = []
        for item in items:
            m = item.mutations[0]
            if any(low <= m.start_pos and m.end_pos <= high for low, high in notes):
                db.set_result(item.job_id, skipped)
            else:
                kept.append(item)
        chosen = kept
        if only is not None:
            chosen = [
                i
                for i in kept
                if _key(i.mutations[0].operator_name, i.mutations[0].occurrence) in only
            ]
        elif sample is not None and sample < len(kept):
            chosen = random.Random(f"{seed}:{name}").sample(kept, sample)
        chosen_ids = {item.job_id for item in chosen}
        for item in kept:
            if item.job_id not in chosen_ids:
                db.set_result(item.job_id, skipped)
    with PROGRESS.open("a") as log:
        log.write(
            f"{time.strftime('%H:%M:%S')} {name}: {len(kept)} mutants, running {len(chosen)}"
            f" ({'whole test list' if whole else 'covering tests'}; unmutated tests"
            f" {time.perf_counter() - began:.0f} s traced)\n"
        )
    subprocess.run([*cosmic, "exec", str(config), str(session)], cwd=work, env=env, check=True)
    return _read_outcomes(session, source, chosen_ids), len(kept)


def _resume_module(
    name: str, target: Target, work: Path, env: dict[str, str]
) -> tuple[list[Outcome], int]:
    """Go on with the cosmic-ray session of `name` in `work`: run its pending mutants and
    read every chosen one's result (the chosen ones are those not marked skipped)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome

    slug = _slug(name)
    session, config = work / f"{slug}.sqlite", work / f"{slug}.toml"
    pristine = work / "pristine" / f"{slug}.py"
    if not session.exists() or not pristine.exists():
        raise SystemExit(f"{name}: no interrupted run in {work} to resume")
    if pristine.read_text() != (ROOT / target.path).read_text():
        print(
            f"{name}: note: {target.path} changed since the run began; its lines are the old ones"
        )
    source = pristine.read_text()
    # A stopped cosmic-ray leaves the mutant it was running written into the module: put
    # the unmutated text back, or every mutant from here on would carry that one too.
    (work / target.path).write_text(source)
    notes = annotation_ranges(source)
    with use_db(str(session), WorkDB.Mode.open) as db:
        pending = [item.job_id for item in db.pending_work_items]
        done = {
            item.job_id
            for item, result in db.completed_work_items
            if result.worker_outcome != WorkerOutcome.SKIPPED
        }
        kept = sum(
            1
            for item in db.work_items
            if not any(
                low <= item.mutations[0].start_pos and item.mutations[0].end_pos <= high
                for low, high in notes
            )
        )
    with PROGRESS.open("a") as log:
        log.write(
            f"{time.strftime('%H:%M:%S')} {name}: resuming, {len(done)} run, "
            f"{len(pending)} to run\n"
        )
    cosmic = [str(Path(sys.executable).parent / "cosmic-ray")]
    subprocess.run([*cosmic, "exec", str(config), str(session)], cwd=work, env=env, check=True)
    return _read_outcomes(session, source, done | set(pending)), kept


def killed_verdict(output: str) -> str:
    """What cosmic-ray's "killed" was, from the selector's output: only a failing test
    (pytest's exit 1) is a kill; a timeout (after its retry) and an error are listed apart."""
    if output == "timeout" or "timeout: the tests ran over" in output:
        return "timed-out"
    if "error: pytest exited" in output:
        return "errored"
    return "killed"


def uncollectable_files(output: str) -> tuple[str, ...]:
    """The test files the selector set aside for a mutant (its `uncollectable:` lines)."""
    found = re.findall(r"^uncollectable: (.+?) \(a collection error", output, flags=re.MULTILINE)
    return tuple(f for line in found for f in line.split())


def _read_outcomes(session: Path, source: str, chosen_ids: set[str]) -> list[Outcome]:
    """Every chosen mutant's verdict, from the cosmic-ray session."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    lines = source.splitlines()
    outcomes = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if item.job_id not in chosen_ids:
                continue
            m = item.mutations[0]
            code = lines[m.start_pos[0] - 1].strip()
            output = result.output or ""
            if result.worker_outcome != WorkerOutcome.NORMAL:
                verdict = "incompetent"
            elif result.test_outcome == TestOutcome.SURVIVED:
                verdict = "uncovered" if output.startswith("uncovered") else "survived"
            elif result.test_outcome == TestOutcome.KILLED:
                verdict = killed_verdict(output)
            else:
                verdict = "incompetent"
            outcomes.append(
                Outcome(
                    m.start_pos[0],
                    m.operator_name,
                    m.occurrence,
                    code,
                    verdict,
                    result.diff or "",
                    uncollectable_files(output),
                )
            )
    return outcomes


def summarize(
    name: str, target: Target, outcomes: list[Outcome], total: int, known: set[tuple[str, str, str]]
) -> dict[str, Any]:
    """Count a module's outcomes; survivors `known` as equivalent count as equivalent."""
    verdicts = [
        "equivalent"
        if o.verdict in ("survived", "uncovered")
        and bool(
            {(name, o.operator, o.code), (name, _key(o.operator, o.occurrence), o.code)} & known
        )
        else o.verdict
        for o in outcomes
    ]
    count = {v: verdicts.count(v) for v in VERDICTS}
    # A kill is a failing test and nothing else: timeouts, errors and incompetent runs
    # are listed apart and count against the score (they said nothing about the tests).
    killed = count["killed"]
    scored = len(outcomes) - count["equivalent"]
    ordered = sorted(zip(outcomes, verdicts, strict=True), key=lambda p: (p[0].line, p[0].operator))
    return {
        "path": target.path,
        "tests": list(target.tests),
        "all_mutants": total,
        "mutants": len(outcomes),
        "killed": count["killed"],
        "timed_out": count["timed-out"],
        "incompetent": count["incompetent"],
        "errored": count["errored"],
        "survived": count["survived"] + count["uncovered"],
        "uncovered": count["uncovered"],
        # Mutants some of whose test files failed to collect: the other files decided.
        "uncollectable": sum(1 for o in outcomes if o.uncollectable),
        "equivalent": count["equivalent"],
        "score": round(killed / scored, 3) if scored else None,
        "survivors": [
            {
                "line": o.line,
                "operator": o.operator,
                "occurrence": o.occurrence,
                "code": o.code,
                "uncovered": v == "uncovered",
                "diff": o.diff,
            }
            for o, v in ordered
            if v in ("survived", "uncovered")
        ],
        "outcomes": [
            {
                "line": o.line,
                "operator": o.operator,
                "occurrence": o.occurrence,
                "code": o.code,
                "verdict": o.verdict,
                **({"uncollectable": list(o.uncollectable)} if o.uncollectable else {}),
            }
            for o, _ in ordered
        ],
    }


VERDICTS = (
    "killed",
    "survived",
    "uncovered",
    "timed-out",
    "errored",
    "incompetent",
    "equivalent",
)
#: The verdicts of a run that did not say whether a test fails on the mutant.
UNDECIDED = ("timed-out", "errored", "incompetent")


def stored_outcomes(module: dict[str, Any]) -> list[Outcome]:
    """The outcomes a run of one module recorded in `build/mutation.json`."""
    diffs = {_key(s["operator"], s["occurrence"]): s["diff"] for s in module["survivors"]}
    return [
        Outcome(
            o["line"],
            o["operator"],
            o["occurrence"],
            o["code"],
            o["verdict"],
            diffs.get(_key(o["operator"], o["occurrence"]), ""),
            tuple(o.get("uncollectable", ())),
        )
        for o in module["outcomes"]
    ]


def rescore(run: dict[str, Any]) -> dict[str, Any]:
    """The same run with the survivors `docs/mutation/survivors.md` now calls equivalent
    counted as equivalent (nothing is run again)."""
    known = equivalents()
    for name, m in run["modules"].items():
        fresh = summarize(name, MODULES[name], stored_outcomes(m), m["all_mutants"], known)
        m.update(fresh)
    return run


def table(modules: dict[str, dict[str, Any]]) -> str:
    """The markdown table of a run's summary."""
    rows = [
        "| module | run | mutants run (of all) | killed | timed out | errors "
        "| survived (uncovered) | equivalent | score | uncollectable | date |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in modules.items():
        score = "-" if m["score"] is None else f"{100 * m['score']:.1f}%"
        kind = f"sample of {m['sample']}" if m.get("sample") else "full"
        rows.append(
            f"| `{name}` | {kind} | {m['mutants']} ({m['all_mutants']}) | {m['killed']} | "
            f"{m['timed_out']} | {m.get('errored', 0) + m.get('incompetent', 0)} | "
            f"{m['survived']} ({m.get('uncovered', 0)}) | {m['equivalent']} "
            f"| {score} | {m.get('uncollectable', '-')} | {m.get('date', '-')} |"
        )
    return "\n".join(rows) + "\n"


def record(run: dict[str, Any]) -> None:
    """Merge a run into `docs/mutation/score.json`; rewrite docs/mutation/README.md's table."""
    previous = json.loads(SCORE.read_text()) if SCORE.exists() else {"modules": {}}
    modules = dict(previous.get("modules", {}))
    for name, m in run["modules"].items():
        modules[name] = {k: v for k, v in m.items() if k not in ("survivors", "outcomes")}
        modules[name]["survivors"] = len(m["survivors"])
    ordered = {name: modules[name] for name in MODULES if name in modules}
    SCORE.write_text(
        json.dumps({"cosmic_ray": run["cosmic_ray"], "modules": ordered}, indent=1) + "\n"
    )
    text = README.read_text()
    begin, end = "<!-- mutation-score:begin -->\n", "<!-- mutation-score:end -->"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        README.write_text(head + begin + table(ordered) + end + tail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=None, help="mutants per module")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--modules", default="", help="comma-separated names or stems, in order")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="re-read docs/mutation/survivors.md for the last run's survivors; run nothing",
    )
    parser.add_argument(
        "--only-survivors",
        action="store_true",
        help="run again only the last run's survivors of each module, and update that run",
    )
    parser.add_argument(
        "--whole",
        action="store_true",
        help="run each mutant against the module's whole test list, not its covering tests",
    )
    parser.add_argument(
        "--tests",
        default="",
        help="with --only-survivors: comma-separated test files to run them against instead",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with the interrupted run in --work: run its mutants not yet run",
    )
    parser.add_argument("--work", type=Path, default=WORK, help="the copy to mutate in")
    args = parser.parse_args(argv)
    PROGRESS.parent.mkdir(exist_ok=True)  # build/: not in a fresh clone
    args.work = args.work.resolve()  # the tests run inside it: paths must not be relative
    if args.rescore:
        last = rescore(json.loads(OUTPUT.read_text()))
        OUTPUT.write_text(json.dumps(last, indent=1) + "\n")
        print(table(last["modules"]), end="")
        record(last)
        return 0
    from importlib.metadata import version

    wanted = [w for w in args.modules.split(",") if w]
    names = [n for w in wanted for n in MODULES if w in (n, Path(n).stem)] if wanted else MODULES
    chosen = {name: MODULES[name] for name in names}
    if not args.resume:  # a resumed run mutates the copy its session was made in
        copy_tree(args.work)
    run: dict[str, Any] = {
        "cosmic_ray": version("cosmic-ray"),
        "sample": args.sample,
        "seed": args.seed,
        "date": time.strftime("%Y-%m-%d"),
        "modules": {},
    }
    known = equivalents()
    stale: list[str] = []  # equivalence rows a full run found no survivor for
    for name, target in chosen.items():
        last = _last_run().get("modules", {}).get(name)
        if args.only_survivors:
            if last is None or "outcomes" not in last:
                raise SystemExit(f"{name}: no recorded run to take the survivors from")
            only = {_key(s["operator"], s["occurrence"]) for s in last["survivors"]}
            # An error or a timeout decided nothing: run it again too, after a fix.
            only |= {
                _key(o.operator, o.occurrence)
                for o in stored_outcomes(last)
                if o.verdict in UNDECIDED
            }
            # A mutant some of the tests kill is killed by all of them: `--tests` may
            # narrow a re-run to the new tests; the rest stay survivors of the full list.
            narrowed = Target(target.path, tuple(args.tests.split(","))) if args.tests else target
            again, _ = run_module(
                name, narrowed, args.work, None, args.seed, whole=args.whole, only=only
            )
            # Narrowed to some tests, only a kill is news: a miss (or a line those tests do
            # not run) leaves the verdict of the module's whole list.
            redone = {
                _key(o.operator, o.occurrence): o
                for o in again
                if not args.tests or o.verdict == "killed"
            }
            outcomes = [
                redone.get(_key(o.operator, o.occurrence), o) for o in stored_outcomes(last)
            ]
            result = summarize(name, target, outcomes, last["all_mutants"], known)
            result.update(sample=last.get("sample"), seed=last.get("seed"))
            # What the last re-run ran: how many survivors, against which tests.
            result["rerun"] = {"survivors": len(only), "tests": list(narrowed.tests)}
        else:
            outcomes, total = run_module(
                name,
                target,
                args.work,
                args.sample,
                args.seed,
                whole=args.whole,
                resume=args.resume,
            )
            result = summarize(name, target, outcomes, total, known)
            result.update(sample=args.sample, seed=args.seed)
            if args.sample is None:  # a full run: every equivalence row must still match
                stale += stale_equivalents(name, outcomes, equivalence_rows())
        result["date"] = run["date"]
        run["modules"][name] = result
        # Another run may have written other modules meanwhile: read, merge, write.
        merged = _last_run()
        merged = {**run, "modules": {**merged.get("modules", {}), name: result}}
        OUTPUT.write_text(json.dumps(merged, indent=1) + "\n")
        record(run)
    print(table(run["modules"]), end="")
    print(f"wrote {OUTPUT.relative_to(ROOT)}, {SCORE.relative_to(ROOT)}")
    if stale:  # after the verdicts are kept: a stale row matches no survivor, counts nothing
        raise SystemExit("stale equivalence rows:\n" + "\n".join(stale))
    return 0


def _last_run() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(OUTPUT.read_text()) if OUTPUT.exists() else {}
    return found


if __name__ == "__main__":
    sys.exit(main())
