"""Run every CrossHair obligation of `proofs/generated/manifests/*.json`; check each outcome.

Each manifest entry (format in CONTRIBUTING.md) names a target `FILE:FUNCTION`, its model,
N and what it must yield: `confirmed` (then also a mutant, which must be refuted: a check
that cannot fail proves nothing) or `refuted`. Each target is run as

    python -m crosshair check --analysis_kind=icontract --report_all \
        --per_condition_timeout=SECONDS FILE:LINE

(LINE: the `def` line of FUNCTION), from the repository root, with `reference/` on
PYTHONPATH, two at a time. The status is read from CrossHair's own words:

* every condition reported "Confirmed over all paths."           -> confirmed
* a "FILE:LINE: error: ..." line (a counterexample or an exception) -> refuted
* anything else ("Not confirmed.", nothing reported, a timeout)     -> not-confirmed
* CrossHair itself failed (exit status 2, a traceback, no report)   -> error

A refutation counts only when it is the one intended. Every entry that must be refuted (a
mutant, or an entry with `"expect": "refuted"`) names in `"breaks"` the description of the
`icontract.ensure` it must break, and the runner accepts it only when CrossHair reports
"error: false when calling FUNCTION(...)" on the line of that condition's lambda. An
exception ("NameError: ... when calling"), a failed import, a timeout or a counterexample
to another condition (a precondition of a callee, another postcondition) fails the step;
the report names the condition each one refuted, or what happened instead.

Results go to `build/obligations.json` as a list of
`{"name", "model", "servers", "expect", "status", "seconds", "detail", "refuted", "mutant": {...}}`
(`refuted`: the condition CrossHair refuted, or why it is not the intended one),
and a table is printed. Exit status 1 when any entry does not yield what it expects, or a
confirmed obligation's mutant is not refuted (or has none).

Extra evidence, not CrossHair: `proofs/z3_inductive.py` runs the same invariants and
step functions on z3 variables for larger N (`--z3 5-6` by default, `--z3 none` to skip),
in the same pool; its results go to `build/z3-inductive.json` and a failure fails the run.

Options: `--jobs N` (default 2), `--timeout SECONDS` per condition (default 60),
`--only SUBSTRING` to run the entries whose target contains it, `--manifest PATH`
(repeatable) to run other manifests.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "proofs" / "generated" / "manifests"
OUTPUT = ROOT / "build" / "obligations.json"

CONFIRMED = "confirmed"
REFUTED = "refuted"
NOT_CONFIRMED = "not-confirmed"
ERROR = "error"

# "<file>:<line>: <severity>: <message>" -- CrossHair's machine-readable report lines.
REPORT_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<severity>\w+): (?P<message>.*)$")
CONFIRMED_MESSAGE = "Confirmed over all paths."


@dataclass(frozen=True)
class Report:
    """One "FILE:LINE: SEVERITY: MESSAGE" line of CrossHair's output."""

    file: str
    line: int
    severity: str
    message: str


@dataclass(frozen=True)
class Run:
    """The outcome of one `crosshair check` of one target."""

    target: str
    status: str
    seconds: float
    detail: str
    command: str
    reports: tuple[Report, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "seconds": round(self.seconds, 2),
            "detail": self.detail,
            "command": self.command,
        }


@dataclass(frozen=True)
class Refutation:
    """Whether a run refuted the condition it had to, and which condition it refuted."""

    intended: bool
    refuted: str  # the condition's description, or what happened instead


def def_line(path: Path, function: str) -> int:
    """The line of `def function` at the top level of `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            return node.lineno
    raise LookupError(f"{path}: no top-level function {function!r}")


def parse_reports(stdout: str) -> tuple[Report, ...]:
    """CrossHair's report lines, in order."""
    found = []
    for text in stdout.splitlines():
        m = REPORT_LINE.match(text.strip())
        if m is not None:
            found.append(
                Report(m.group("file"), int(m.group("line")), m.group("severity"), m["message"])
            )
    return tuple(found)


def conditions(path: Path, function: str) -> dict[str, tuple[int, int]]:
    """The icontract conditions on top-level `function` of `path`: description -> the lines
    of the condition (its lambda, or the name it is given by)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            found: dict[str, tuple[int, int]] = {}
            for decorator in node.decorator_list:
                if not isinstance(decorator, ast.Call) or len(decorator.args) < 2:
                    continue
                condition, description = decorator.args[0], decorator.args[1]
                if isinstance(description, ast.Constant) and isinstance(description.value, str):
                    end = condition.end_lineno or condition.lineno
                    found[description.value] = (condition.lineno, end)
            return found
    raise LookupError(f"{path}: no top-level function {function!r}")


def refutation(run: Run, breaks: str) -> Refutation:
    """Did `run` refute the condition described by `breaks`, with a counterexample?

    Only "error: false when calling FUNCTION(" on a line of that condition counts. The
    `refuted` text says which condition was refuted, or what happened instead."""
    file_part, _, function = run.target.rpartition(":")
    if run.status != REFUTED:
        return Refutation(False, f"not refuted ({run.status}: {run.detail})")
    try:
        known = conditions(ROOT / file_part, function)
    except (OSError, SyntaxError, LookupError) as error:
        return Refutation(False, f"cannot read the conditions: {error}")
    if breaks not in known:
        return Refutation(False, f"no condition {breaks!r} on {function}")
    first, last = known[breaks]
    errors = [r for r in run.reports if r.severity == "error"]
    counterexample = f"false when calling {function}("
    for report in errors:
        if report.message.startswith(counterexample) and first <= report.line <= last:
            return Refutation(True, breaks)
    report = errors[0]
    if not report.message.startswith("false when calling"):
        return Refutation(False, f"an error, not a counterexample: {report.message[:200]}")
    for description, (low, high) in known.items():
        if low <= report.line <= high and report.message.startswith(counterexample):
            return Refutation(False, f"another condition: {description}")
    return Refutation(False, f"another condition (line {report.line}): {report.message[:200]}")


def classify(returncode: int, stdout: str, stderr: str) -> tuple[str, str]:
    """The status and a one-line detail, from CrossHair's exit status and report."""
    lines = [REPORT_LINE.match(line.strip()) for line in stdout.splitlines()]
    reports = [m for m in lines if m is not None]
    errors = [m for m in reports if m.group("severity") == "error"]
    if errors:
        return REFUTED, errors[0].group("message")[:300]
    if returncode == 2 or "Traceback" in stderr or (not reports and stderr.strip()):
        tail = (stderr.strip().splitlines() or ["crosshair failed"])[-1]
        return ERROR, tail[:300]
    if reports and all(m.group("message").strip() == CONFIRMED_MESSAGE for m in reports):
        return CONFIRMED, f"{len(reports)} conditions confirmed over all paths"
    others = [m.group("message") for m in reports if m.group("message") != CONFIRMED_MESSAGE]
    return NOT_CONFIRMED, (others[0] if others else "no condition reported")[:300]


def run_target(target: str, per_condition_timeout: float) -> Run:
    """`crosshair check` one `FILE:FUNCTION` target."""
    file_part, _, function = target.rpartition(":")
    path = ROOT / file_part
    began = time.perf_counter()
    try:
        line = def_line(path, function)
    except (OSError, SyntaxError, LookupError) as error:
        return Run(target, ERROR, 0.0, str(error), "")
    argv = [
        sys.executable,
        "-m",
        "crosshair",
        "check",
        "--analysis_kind=icontract",
        "--report_all",
        f"--per_condition_timeout={per_condition_timeout:g}",
        f"{file_part}:{line}",
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "reference"), *filter(None, [env.get("PYTHONPATH")])]
    )
    command = "PYTHONPATH=reference " + " ".join(["python", *argv[1:]])
    try:
        proc = subprocess.run(
            argv,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            # Several conditions per target, plus start-up: a generous overall ceiling.
            timeout=per_condition_timeout * 6 + 60,
        )
    except subprocess.TimeoutExpired:
        return Run(target, NOT_CONFIRMED, time.perf_counter() - began, "timed out", command)
    status, detail = classify(proc.returncode, proc.stdout, proc.stderr)
    seconds = time.perf_counter() - began
    return Run(target, status, seconds, detail, command, parse_reports(proc.stdout))


def run_z3(servers: str) -> Run:
    """`proofs/z3_inductive.py --servers SERVERS`: proved on every path, or not."""
    began = time.perf_counter()
    argv = [
        sys.executable,
        str(ROOT / "proofs" / "z3_inductive.py"),
        "--servers",
        servers,
        "--json",
        str(ROOT / "build" / "z3-inductive.json"),
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    lines = proc.stdout.strip().splitlines() or [proc.stderr.strip() or "no output"]
    status = CONFIRMED if proc.returncode == 0 else ERROR if "Traceback" in proc.stderr else REFUTED
    return Run("proofs/z3_inductive.py", status, time.perf_counter() - began, lines[-1], "")


def load_entries(manifests: list[Path]) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    for manifest in manifests:
        for entry in json.loads(manifest.read_text()):
            entry = dict(entry)
            entry["_manifest"] = str(manifest)
            entries.append(entry)
    return entries


def verdict(entry: dict[str, object], main: Run, mutant: Run | None) -> list[str]:
    """Why an entry fails (empty when it yields what it expects).

    What must be refuted -- the mutant of a confirmed entry, or a refuted entry itself --
    must be refuted on the condition the entry names in "breaks", with a counterexample."""
    problems = []
    expect = entry.get("expect")
    breaks = entry.get("breaks")
    if main.status != expect:
        problems.append(f"expected {expect}, got {main.status}")
    elif expect == REFUTED:
        problems += _refutation_problems("", main, breaks)
    if expect == CONFIRMED:
        if mutant is None:
            problems.append("no mutant: a confirmation nothing refutes is not evidence")
        else:
            problems += _refutation_problems("mutant ", mutant, breaks)
    return problems


def _refutation_problems(who: str, run: Run, breaks: object) -> list[str]:
    if not isinstance(breaks, str) or not breaks:
        return [f'{who}names no condition to break ("breaks")']
    found = refutation(run, breaks)
    return [] if found.intended else [f"{who}not refuted on {breaks!r}: {found.refuted}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="per condition, seconds")
    parser.add_argument("--only", default="", help="run entries whose target contains this")
    parser.add_argument("--manifest", action="append", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--z3", default="5-6", help="N range for the z3 check, or 'none'")
    args = parser.parse_args(argv)
    manifests = (
        [p.resolve() for p in args.manifest] if args.manifest else sorted(MANIFESTS.glob("*.json"))
    )
    entries = [e for e in load_entries(manifests) if args.only in str(e["target"])]
    began = time.perf_counter()
    targets: list[str] = []
    for entry in entries:
        targets.append(str(entry["target"]))
        if entry.get("mutant"):
            targets.append(str(entry["mutant"]))
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        z3_job = None if args.z3 == "none" or args.only else pool.submit(run_z3, args.z3)
        results = list(pool.map(lambda t: run_target(t, args.timeout), targets))
        z3_run = z3_job.result() if z3_job is not None else None
    runs = dict(zip(targets, results, strict=True))
    records: list[dict[str, object]] = []
    failures = 0
    print(f"{'obligation':<44} {'model':<16} {'N':>2} {'status':<13} {'s':>6}  mutant")
    for entry in entries:
        main_run = runs[str(entry["target"])]
        mutant_run = runs[str(entry["mutant"])] if entry.get("mutant") else None
        problems = verdict(entry, main_run, mutant_run)
        failures += bool(problems)
        breaks = str(entry.get("breaks") or "")
        record: dict[str, object] = {
            "name": entry["target"],
            "model": entry.get("model"),
            "servers": entry.get("servers"),
            "expect": entry.get("expect"),
            "breaks": breaks or None,
            **main_run.to_json(),
            "ok": not problems,
            "problems": problems,
        }
        if entry.get("expect") == REFUTED:
            record["refuted"] = refutation(main_run, breaks).refuted
        found = refutation(mutant_run, breaks) if mutant_run is not None else None
        if mutant_run is not None and found is not None:
            record["mutant"] = {
                "name": entry["mutant"],
                "model": entry.get("model"),
                "servers": entry.get("servers"),
                "expect": REFUTED,
                "breaks": breaks or None,
                **mutant_run.to_json(),
                "refuted": found.refuted,
                "refuted_as_intended": found.intended,
            }
        records.append(record)
        mutant_text = "-"
        if mutant_run is not None and found is not None:
            mutant_text = f"{mutant_run.status} ({mutant_run.seconds:.1f} s)"
            mutant_text += f": {found.refuted}" if found.intended else ""
        flag = "" if not problems else "   <-- FAIL: " + "; ".join(problems)
        name = str(entry["target"]).removeprefix("proofs/")
        print(
            f"{name:<44} {str(entry.get('model')):<16} {str(entry.get('servers')):>2} "
            f"{main_run.status:<13} {main_run.seconds:>6.1f}  {mutant_text}{flag}",
            flush=True,
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(records, indent=1) + "\n")
    if z3_run is not None:
        print(f"z3, same functions, N = {args.z3}: {z3_run.detail} ({z3_run.seconds:.1f} s)")
        failures += z3_run.status != CONFIRMED
    seconds = time.perf_counter() - began
    confirmed = sum(1 for r in records if r["status"] == CONFIRMED)
    print(
        f"{len(records)} obligations ({confirmed} confirmed over all paths, "
        f"{len(records) - confirmed} other), {failures} not as expected; "
        f"{seconds:.1f} s wall with {args.jobs} workers; wrote {args.output}"
    )
    return 1 if failures or not records else 0


if __name__ == "__main__":
    sys.exit(main())
