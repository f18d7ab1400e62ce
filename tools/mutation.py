"""Mutation testing of the reference with cosmic-ray: how many wrong versions do the tests kill?

For each module of `MODULES`, cosmic-ray makes every mutant (one small change: an operator,
a constant, a comparison, a removed decorator, ...), runs the tests that cover the module
against it and records whether they fail (killed) or pass (survived). Mutants inside type
annotations are left out: they cannot change behaviour. The run happens in a copy of the
repository under `build/mutation/`, so the working tree is never touched, with one worker
(the machine is shared) and `HYPOTHESIS_PROFILE=ci` (derandomized: a mutant's verdict does
not depend on luck).

    python tools/mutation.py [--sample 60] [--seed 1] [--modules queues,waiting]

`--sample N` runs a seeded random sample of N mutants per module instead of all of them.
Writes `build/mutation.json` (per module: mutants, killed, survived, timed out, incompetent,
equivalent, score; and every survivor with its diff), records the summary in
`tests/mutation-score.json` and the table of README.md ("Mutation score").

A survivor listed in `tests/mutation-survivors.md` with verdict `equivalent` (it cannot
change behaviour) is counted as equivalent, not as survived; the score is
killed / (mutants - equivalent). Timeouts count as killed (a mutant that makes the tests
hang is caught) and are shown apart.
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
SCORE = ROOT / "tests" / "mutation-score.json"
SURVIVORS = ROOT / "tests" / "mutation-survivors.md"
README = ROOT / "README.md"
COPIED = ["reference", "tests", "specs", "proofs", "tools", "docs", "pyproject.toml", "README.md"]
COPIED += ["CONTRIBUTING.md"]
#: Tests that start processes or servers, or run CrossHair: too slow to run per mutant.
DESELECT = "not multiprocess and not e2e"


@dataclass(frozen=True)
class Target:
    """A module and the tests that cover it."""

    path: str
    tests: tuple[str, ...]


MODULES: dict[str, Target] = {
    "queues.py": Target(
        "reference/queueref/queues.py",
        (
            "tests/test_queues.py",
            "tests/test_queue_laws.py",
            "tests/test_queue_model.py",
            "tests/test_queue_semantics.py",
            "tests/test_mutation_gaps.py",
        ),
    ),
    "waiting.py": Target(
        "reference/queueref/waiting.py",
        ("tests/test_waiting.py", "tests/test_waiting_machine.py"),
    ),
    "admission.py": Target(
        "reference/queueref/admission.py",
        (
            "tests/test_admission.py",
            "tests/test_admission_front.py",
            "tests/test_admission_machine.py",
            "tests/test_mutation_gaps.py",
        ),
    ),
    "tracker.py": Target(
        "reference/queueref/tracker.py",
        ("tests/test_tracker.py", "tests/test_admission.py", "tests/test_mutation_gaps.py"),
    ),
    "models/protocol.py": Target(
        "reference/queueref/models/protocol.py",
        (
            "tests/test_ob_explorer.py",
            "tests/test_ob_one_transition_system.py",
            "tests/test_ob_broken_variants.py",
            "tests/test_admission.py",
            "tests/test_mutation_gaps.py",
        ),
    ),
    "events.py": Target(
        "reference/queueref/events.py",
        (
            "tests/test_admission_events.py",
            "tests/test_check_trace.py",
            "tests/test_mutation_gaps.py",
        ),
    ),
    "oracle/trace_check.py": Target(
        "reference/queueref/oracle/trace_check.py",
        ("tests/test_check_trace.py", "tests/test_mutation_gaps.py"),
    ),
}


@dataclass(frozen=True)
class Outcome:
    """One mutant's result."""

    line: int
    operator: str
    code: str  # the original line, stripped
    verdict: str  # killed | survived | timed-out | incompetent | equivalent
    diff: str


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
    """(module, operator, code) of the survivors `tests/mutation-survivors.md` calls
    equivalent: rows `| module | line | operator | `code` | equivalent | reason |`."""
    found: set[tuple[str, str, str]] = set()
    if not path.exists():
        return found
    for row in re.findall(r"^\|(.+)\|\s*$", path.read_text(), flags=re.MULTILINE):
        cells = [cell.strip() for cell in row.split("|")]
        if len(cells) >= 5 and cells[4] == "equivalent":
            found.add((cells[0], cells[2], cells[3].strip("`")))
    return found


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


def run_module(
    name: str, target: Target, work: Path, sample: int | None, seed: int
) -> dict[str, Any]:
    """Init a cosmic-ray session for one module, sample it, run it, read the results."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    env = dict(os.environ, PYTHONPATH=str(work / "reference"), HYPOTHESIS_PROFILE="ci")
    env.pop("CI", None)
    command = _command(target, work)
    began = time.perf_counter()
    baseline = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    baseline_seconds = time.perf_counter() - began
    if baseline.returncode != 0:
        raise SystemExit(f"{name}: the tests fail unmutated:\n{baseline.stdout[-2000:]}")
    timeout = max(30.0, 4 * baseline_seconds)
    slug = name.replace("/", "_").replace(".py", "")
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
    source = (work / target.path).read_text()
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
        if sample is not None and sample < len(kept):
            chosen = random.Random(f"{seed}:{name}").sample(kept, sample)
        chosen_ids = {item.job_id for item in chosen}
        for item in kept:
            if item.job_id not in chosen_ids:
                db.set_result(item.job_id, skipped)
    print(f"{name}: {len(kept)} mutants, running {len(chosen)} (tests {baseline_seconds:.0f} s)")
    subprocess.run([*cosmic, "exec", str(config), str(session)], cwd=work, env=env, check=True)
    lines = source.splitlines()
    known = equivalents()
    outcomes = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if item.job_id not in chosen_ids:
                continue
            m = item.mutations[0]
            code = lines[m.start_pos[0] - 1].strip()
            if result.worker_outcome != WorkerOutcome.NORMAL:
                verdict = "incompetent"
            elif result.test_outcome == TestOutcome.SURVIVED:
                equivalent = (name, m.operator_name, code) in known
                verdict = "equivalent" if equivalent else "survived"
            elif result.test_outcome == TestOutcome.KILLED:
                verdict = "timed-out" if result.output == "timeout" else "killed"
            else:
                verdict = "incompetent"
            outcomes.append(
                Outcome(m.start_pos[0], m.operator_name, code, verdict, result.diff or "")
            )
    return summarize(name, target, outcomes, len(kept))


def summarize(name: str, target: Target, outcomes: list[Outcome], total: int) -> dict[str, Any]:
    count = {v: sum(o.verdict == v for o in outcomes) for v in VERDICTS}
    killed = count["killed"] + count["timed-out"] + count["incompetent"]
    scored = len(outcomes) - count["equivalent"]
    return {
        "path": target.path,
        "tests": list(target.tests),
        "all_mutants": total,
        "mutants": len(outcomes),
        "killed": count["killed"],
        "timed_out": count["timed-out"],
        "incompetent": count["incompetent"],
        "survived": count["survived"],
        "equivalent": count["equivalent"],
        "score": round(killed / scored, 3) if scored else None,
        "survivors": [
            {"line": o.line, "operator": o.operator, "code": o.code, "diff": o.diff}
            for o in sorted(outcomes, key=lambda o: (o.line, o.operator))
            if o.verdict == "survived"
        ],
    }


VERDICTS = ("killed", "survived", "timed-out", "incompetent", "equivalent")


def rescore(run: dict[str, Any]) -> dict[str, Any]:
    """The same run with the survivors `tests/mutation-survivors.md` now calls equivalent
    counted as equivalent (nothing is run again)."""
    known = equivalents()
    for name, m in run["modules"].items():
        kept = [s for s in m["survivors"] if (name, s["operator"], s["code"]) not in known]
        m["equivalent"] += len(m["survivors"]) - len(kept)
        m["survived"] = len(kept)
        m["survivors"] = kept
        killed = m["killed"] + m["timed_out"] + m["incompetent"]
        scored = m["mutants"] - m["equivalent"]
        m["score"] = round(killed / scored, 3) if scored else None
    return run


def table(modules: dict[str, dict[str, Any]]) -> str:
    """The markdown table of a run's summary."""
    rows = [
        "| module | mutants run (of all) | killed | timed out | survived | equivalent | score |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in modules.items():
        score = "-" if m["score"] is None else f"{100 * m['score']:.0f}%"
        rows.append(
            f"| `{name}` | {m['mutants']} ({m['all_mutants']}) | {m['killed']} | "
            f"{m['timed_out']} | {m['survived']} | {m['equivalent']} | {score} |"
        )
    return "\n".join(rows) + "\n"


def record(run: dict[str, Any]) -> None:
    """Merge a run into `tests/mutation-score.json` and rewrite README's table."""
    previous = json.loads(SCORE.read_text()) if SCORE.exists() else {"modules": {}}
    modules = dict(previous.get("modules", {}))
    for name, m in run["modules"].items():
        modules[name] = {k: v for k, v in m.items() if k != "survivors"}
        modules[name]["survivors"] = len(m["survivors"])
        modules[name].update(sample=run["sample"], seed=run["seed"], date=run["date"])
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
    parser.add_argument("--modules", default="", help="comma-separated names or stems")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="re-read tests/mutation-survivors.md for the last run's survivors; run nothing",
    )
    args = parser.parse_args(argv)
    if args.rescore:
        last = rescore(json.loads(OUTPUT.read_text()))
        OUTPUT.write_text(json.dumps(last, indent=1) + "\n")
        print(table(last["modules"]), end="")
        record(last)
        return 0
    from importlib.metadata import version

    wanted = [w for w in args.modules.split(",") if w]
    chosen = {
        name: target
        for name, target in MODULES.items()
        if not wanted or any(w in (name, Path(name).stem) for w in wanted)
    }
    copy_tree(WORK)
    run: dict[str, Any] = {
        "cosmic_ray": version("cosmic-ray"),
        "sample": args.sample,
        "seed": args.seed,
        "date": time.strftime("%Y-%m-%d"),
        "modules": {},
    }
    # A run of some modules keeps the last results of the others in build/mutation.json.
    merged: dict[str, Any] = json.loads(OUTPUT.read_text()) if OUTPUT.exists() else {}
    merged = {**run, "modules": {**merged.get("modules", {})}}
    for name, target in chosen.items():
        result = run_module(name, target, WORK, args.sample, args.seed)
        run["modules"][name] = merged["modules"][name] = result
        OUTPUT.write_text(json.dumps(merged, indent=1) + "\n")
    print(table(run["modules"]), end="")
    record(run)
    print(f"wrote {OUTPUT.relative_to(ROOT)}, {SCORE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
