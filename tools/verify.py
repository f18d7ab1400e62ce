"""`make verify`: run every check as a named step, then print the verification report.

Each step is a make target that also runs alone (`make test`, `make proofs`, ...).
A failing step does not stop the others, so the report always prints; the exit
code is non-zero when any step failed. The report is also written as JSON to
`build/verify-report.json` (the format is in README.md).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mutation_score  # beside this file: the last committed `make mutation` score

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"


@dataclass(frozen=True)
class Step:
    name: str
    target: str  # the make target: each step also runs alone (`make test-fast`, ...)
    cores: int  # the cores it keeps busy: pytest -n 2, the proofs' two workers, ...
    checks: str  # what it establishes
    # It mostly waits (on servers it starts, pip, sockets): it takes no core, and at most
    # one such step runs at a time, so two never compete for ports or for timing.
    waits: bool = False


# Whenever a step ends, the first steps in this order that fit start: those whose
# cores fit in the machine's (`os.cpu_count()`; a step wider than the machine runs
# alone), and one waiting step beside them. Measured on 2 cores: the waiting steps
# use about half a core (pytest -m multiprocess: 118 s of CPU in a 250 s run; the
# soak: 140 s of CPU, mostly pip installs and a 60 s load run).
STEPS = [
    Step("test", "test-fast", 2, "pytest, in process: unit, Hypothesis machines, spec doctests"),
    Step(
        "test-processes",
        "test-processes",
        0,
        "pytest: the tests that start processes and servers, e2e",
        waits=True,
    ),
    Step(
        "soak",
        "soak",
        0,
        "the slow tests: a soak run of serve with faults; the oracle installed in a fresh venv",
        waits=True,
    ),
    Step("bound-table", "bound-table", 1, "exhaustive model checking of the admission protocols"),
    Step("crosshair-queues", "crosshair-queues", 1, "CrossHair over the queue semantics module"),
    # Two jobs, but its files mostly wait for the ones they import: about 1.6 cores over
    # 43 s measured. Counted as one, it takes the core crosshair-queues leaves while the
    # bound table still runs, instead of running alone at the end.
    Step(
        "proofs-coq",
        "proofs-coq",
        1,
        "Coq: the bound for every N, no assumption, mutants refuted, Python traces accepted",
    ),
    Step("types", "types", 1, "mypy --strict on the package, tests, tools and proofs generator"),
    Step("lint", "lint", 1, "ruff check and ruff format --check"),
    Step("vectors", "vectors", 1, "test vectors written and replayed"),
    Step("trace", "trace", 1, "every requirement enforced, tested and proved"),
    Step("test-guards", "test-guards", 2, "pytest under python -O: bad input refused"),
    Step("proofs", "proofs", 2, "CrossHair proof obligations and their mutants"),
]

INSTALL = ("setup", "coq", "spin")  # what the steps need installed before they start
LOGS = BUILD / "verify-logs"
PROGRESS_EVERY = 60.0  # seconds between "still running" lines


@dataclass
class Running:
    step: Step
    process: subprocess.Popen[bytes]
    started: float
    log: Path


def start(step: Step) -> Running:
    log = LOGS / f"{step.name}.log"
    with log.open("wb") as out:  # the child keeps its own handle
        process = subprocess.Popen(
            ["make", "--no-print-directory", step.target],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    print(f"[verify] start  {step.name} (make {step.target}; log {log.relative_to(ROOT)})")
    return Running(step, process, time.monotonic(), log)


def finish(run: Running, returncode: int) -> dict[str, Any]:
    seconds = time.monotonic() - run.started
    status = "pass" if returncode == 0 else "fail"
    print(f"[verify] {status:<6} {run.step.name} in {seconds:.1f} s", flush=True)
    if status == "fail":  # its output, where the reader looks first
        lines = run.log.read_text(errors="replace").splitlines()
        print(f"--- the last lines of {run.log.relative_to(ROOT)} ---")
        print("\n".join(lines[-150:]), flush=True)
    return {"name": run.step.name, "status": status, "seconds": round(seconds, 1)}


def startable(pending: list[Step], running: list[Step], cores: int) -> list[Step]:
    """The steps of `pending` to start now, beside `running`, in order: a CPU-bound step
    when its cores fit in what the running ones leave of `cores` (or when no CPU-bound
    step runs: a step wider than the machine runs alone); a waiting step when no other
    waiting step runs."""
    busy = sum(min(step.cores, cores) for step in running if not step.waits)
    computing = any(not step.waits for step in running)
    waiting = any(step.waits for step in running)
    chosen = []
    for step in pending:
        if step.waits:
            fits = not waiting
            waiting = waiting or fits
        else:
            fits = not computing or busy + min(step.cores, cores) <= cores
            if fits:
                busy += min(step.cores, cores)
                computing = True
        if fits:
            chosen.append(step)
    return chosen


def run_steps(steps: list[Step], cores: int) -> dict[str, dict[str, Any]]:
    """Run `steps` in order, several at once while their cores fit in `cores`."""
    LOGS.mkdir(parents=True, exist_ok=True)
    pending = list(steps)
    running: list[Running] = []
    done: dict[str, dict[str, Any]] = {}
    last_progress = time.monotonic()
    while pending or running:
        for step in startable(pending, [r.step for r in running], cores):
            pending.remove(step)
            running.append(start(step))
        time.sleep(0.2)
        for run in list(running):
            returncode = run.process.poll()
            if returncode is not None:
                running.remove(run)
                done[run.step.name] = finish(run, returncode)
        now = time.monotonic()
        if running and now - last_progress >= PROGRESS_EVERY:
            last_progress = now
            names = ", ".join(f"{r.step.name} {now - r.started:.0f} s" for r in running)
            print(f"[verify] running: {names}; {len(pending)} to start", flush=True)
    return done


def load(name: str) -> Any:
    path = BUILD / name
    return json.loads(path.read_text()) if path.exists() else []


def version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    return "unknown"


def print_report(report: dict[str, Any]) -> None:
    print("\n" + "=" * 78)
    print(f"queueref {report['queueref_version']} verification report  ({report['started']})")
    print("=" * 78)
    print("\nSteps")
    for step in report["steps"]:
        print(
            f"  {step['name']:<18} {step['status']:<6} {step['seconds']:8.1f} s"
            f"  {step.get('checks', '')}"
        )

    print("\nRequirements (enforced by / tested by / proved by)")
    for req in report["requirements"]:
        print(
            f"  {req['id']:<16} {len(req['enforced_by']):>3} in code  "
            f"{len(req['tested_by']):>3} test(s)  {len(req['proved_by']):>3} proof(s)"
        )
        for kind in ("enforced_by", "tested_by", "proved_by"):
            for where in req[kind][:2]:
                print(f"      {kind.split('_')[0]:<9}{where}")

    print("\nProof obligations (CrossHair)")
    counts: dict[str, int] = {}
    for ob in report["obligations"]:
        key = f"expected {ob.get('expect', '?')}, got {ob['status']}"
        counts[key] = counts.get(key, 0) + 1
        mutant = ob.get("mutant") or {}
        mutant_status = mutant.get("status", "-") if isinstance(mutant, dict) else "-"
        print(
            f"  {ob['name']:<58} {ob['status']:<13} {ob['seconds']:6.1f} s  mutant: {mutant_status}"
        )
    print("  totals: " + "; ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    print(
        "  (confirmed = CrossHair's 'Confirmed over all paths', a proof at that N; the expected"
        " refutations are the dropped-conjunct and natural-potential mutants)"
    )

    print("\nCoq theorems (every N; proofs/coq/theorems.json)")
    coq = report["coq"]
    if not coq:
        print("  (no build/coq.json: the proofs-coq step did not run)")
    else:
        print(f"  {coq.get('coqc', '')}; {coq.get('seconds', 0)} s in all")
        for thm in coq.get("theorems", []):
            name = f"{Path(thm['file']).name}:{thm['theorem']}"
            print(
                f"  {thm['requirement']:<12} {name:<30} {thm['status']:<7}"
                f" {thm['seconds']:6.1f} s  {thm['assumptions']}"
            )
            for mutant in thm.get("mutants", []):
                print(
                    f"      mutant {mutant['name']:<30} {mutant['status']:<12}"
                    f" at {mutant.get('where', '-')}"
                )
        traces = coq.get("traces")
        if traces:
            rejected = sum(1 for bad in traces["invalid"] if bad["status"] == "rejected")
            print(
                f"  Python traces: {traces['valid']} valid, accepted: {traces['accepted']};"
                f" invalid rejected: {rejected} of {len(traces['invalid'])}"
            )

    print("\nBound table (exhaustive; worst global count vs the bound)")
    print(f"  {'protocol':<17} {'N':>2} {'M':>2} {'W':>2} {'worst':>5} {'bound':>5} {'states':>9}")
    for row in report["bound_table"]:
        print(
            f"  {row['protocol']:<17} {row['servers']:>2} {row['cap']:>2} {row['weight']:>2}"
            f" {row['worst_total']:>5} {row['bound']:>5} {row['states']:>9}"
        )
    print("\nMutation testing (not run by verify: too slow)")
    for line in mutation_score.lines(report["mutation"]):
        print(f"  {line}")
    failed = [s["name"] for s in report["steps"] if s["status"] == "fail"]
    summed = sum(s["seconds"] for s in report["steps"])
    print(
        f"\nTotal {report['seconds']:.1f} s of wall time ({summed:.1f} s of steps, some at once). "
        + ("FAILED: " + ", ".join(failed) if failed else "All steps passed.")
    )
    print(f"JSON report: {(BUILD / 'verify-report.json').relative_to(ROOT)}")


def main() -> int:
    BUILD.mkdir(exist_ok=True)
    for stale in ("obligations.json", "bound-table.json", "trace.json", "coq.json"):
        (BUILD / stale).unlink(missing_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    clock = time.monotonic()
    only = os.environ.get("VERIFY_STEPS")  # e.g. VERIFY_STEPS=lint,trace for a quick run
    chosen = [s for s in STEPS if not only or s.name in only.split(",")]
    cores = os.cpu_count() or 1
    # Install first, once: steps running at once must not race to make the venv.
    if subprocess.run(["make", "--no-print-directory", *INSTALL], cwd=ROOT).returncode:
        print(f"[verify] make {' '.join(INSTALL)} failed: nothing was checked", file=sys.stderr)
        return 1
    print(f"[verify] {len(chosen)} steps on {cores} cores; each step's output in {LOGS}")
    done = run_steps(chosen, cores)
    skipped = {"status": "skipped", "seconds": 0.0}
    steps = [{"name": s.name, **done.get(s.name, skipped), "checks": s.checks} for s in STEPS]
    report = {
        "queueref_version": version(),
        "python": platform.python_version(),
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - clock, 1),
        "steps": steps,
        "requirements": load("trace.json"),
        "obligations": load("obligations.json"),
        "bound_table": load("bound-table.json"),
        "coq": load("coq.json"),
        "mutation": (
            json.loads(mutation_score.SCORE.read_text()) if mutation_score.SCORE.exists() else {}
        ),
    }
    (BUILD / "verify-report.json").write_text(json.dumps(report, indent=1))
    print_report(report)
    return 1 if any(s["status"] == "fail" for s in steps) else 0


if __name__ == "__main__":
    sys.exit(main())
