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
from pathlib import Path
from typing import Any

import mutation_score  # beside this file: the last committed `make mutation` score

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"

# (name, make target, what it establishes)
STEPS = [
    ("test", "test", "pytest: unit, Hypothesis machines, spec doctests, multiprocess, e2e"),
    (
        "soak",
        "soak",
        "the slow tests: a soak run of serve with faults; the oracle installed in a fresh venv",
    ),
    ("lint", "lint", "ruff check and ruff format --check"),
    ("types", "types", "mypy --strict on the package, tests, tools and proofs generator"),
    ("crosshair-queues", "crosshair-queues", "CrossHair over the queue semantics module"),
    ("proofs", "proofs", "CrossHair proof obligations and their mutants"),
    (
        "proofs-coq",
        "proofs-coq",
        "Coq: the bound for every N, no assumption, mutants refuted, Python traces accepted",
    ),
    ("bound-table", "bound-table", "exhaustive model checking of the admission protocols"),
    ("vectors", "vectors", "test vectors written and replayed"),
    ("trace", "trace", "every requirement enforced, tested and proved"),
]


def run_step(target: str) -> tuple[str, float]:
    started = time.monotonic()
    print(f"\n=== make {target} ===", flush=True)
    done = subprocess.run(["make", "--no-print-directory", target], cwd=ROOT)
    return ("pass" if done.returncode == 0 else "fail"), time.monotonic() - started


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
    print(
        f"\nTotal {report['seconds']:.1f} s. "
        + ("FAILED: " + ", ".join(failed) if failed else "All steps passed.")
    )
    print(f"JSON report: {(BUILD / 'verify-report.json').relative_to(ROOT)}")


def main() -> int:
    BUILD.mkdir(exist_ok=True)
    for stale in ("obligations.json", "bound-table.json", "trace.json", "coq.json"):
        (BUILD / stale).unlink(missing_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    clock = time.monotonic()
    steps = []
    only = os.environ.get("VERIFY_STEPS")  # e.g. VERIFY_STEPS=lint,trace for a quick run
    for name, target, what in STEPS:
        if only and name not in only.split(","):
            steps.append({"name": name, "status": "skipped", "seconds": 0.0, "checks": what})
            continue
        status, seconds = run_step(target)
        steps.append({"name": name, "status": status, "seconds": round(seconds, 1), "checks": what})
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
