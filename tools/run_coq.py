"""`make proofs-coq`: check the Coq development of `proofs/coq/` (the bound for every N).

What it checks, in order (each failure fails the step):

1. No source in `proofs/coq/*.v` uses `Admitted`, `admit`, `Axiom(s)`, `Parameter(s)`,
   `Conjecture` or `give_up` (comments and strings are ignored).
2. Every file compiles with `coqc -Q <dir> Queueref`, in dependency order (from the
   `From Queueref Require Import ...` lines), in a copy under `build/coq/src/`, so no
   build product lands in the source tree.
3. Every theorem of the manifest `proofs/coq/theorems.json` (format in CONTRIBUTING.md)
   answers `Print Assumptions` with exactly "Closed under the global context".
4. Every mutant of the manifest -- the original sources with ONE named textual
   substitution (the old text must occur exactly once) -- fails to compile, and the first
   error is a proof-step error inside the lemma the manifest names: coqc's error location
   (file, line) must fall inside that lemma's proof, and the message must not be a syntax,
   name or library error. A mutant that compiles, or fails elsewhere or for another
   reason, fails the step: it would show nothing about the proof.
5. The Python-tied traces (`tools/coq_traces.py`): random valid traces of
   `queueref.admission.protocol` and of the explorer, with their Python final states, are
   accepted by the executable step function of Model.v; each invalid trace is rejected.

Results go to `build/coq.json`. Options: `--traces N` (random traces, default 2000),
`--jobs N` (mutants built at once, default 2), `--no-mutants`, `--no-traces`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "proofs" / "coq"
MANIFEST = SOURCES / "theorems.json"
BUILD = ROOT / "build" / "coq"
OUTPUT = ROOT / "build" / "coq.json"
LOGICAL = "Queueref"
CLOSED = "Closed under the global context"
COMPILE_TIMEOUT = 150
TRACE_SEED = 14

FORBIDDEN = (
    "Admitted",
    "admit",
    "Axiom",
    "Axioms",
    "Parameter",
    "Parameters",
    "Conjecture",
    "give_up",
)
FORBIDDEN_WORD = re.compile(r"\b(" + "|".join(FORBIDDEN) + r")\b")
IMPORT = re.compile(rf"\bFrom\s+{LOGICAL}\s+Require\s+(?:Import\s+|Export\s+)?([^.]*)\.")
# coqc: 'File "./Bound.v", line 344, characters 10-12:' then 'Error: ...'.
ERROR_AT = re.compile(
    r'File "(?P<file>[^"]+)", line (?P<line>\d+), characters (?P<start>\d+)-(?P<end>\d+):\s*'
    r"\n(?:Error|Anomaly):?\s*(?P<message>.*)",
    re.DOTALL,
)
# Errors that say the mutant is not well formed, not that a proof step failed.
NOT_A_PROOF_STEP = re.compile(
    r"Syntax error|Lexer error|was not found in the current environment|"
    r"Unknown interpretation|is not a defined object|Unbound|Cannot find a physical path|"
    r"Unable to locate library|Cannot find library|already exists|Anomaly"
)
DECLARATION = re.compile(
    r"^\s*(?:Local\s+|Global\s+)?(Theorem|Lemma|Corollary|Proposition|Fact|Remark|Example|"
    r"Definition|Fixpoint|Inductive|Record|Ltac|Goal)\s*([A-Za-z_][A-Za-z0-9_']*)?"
)
PROOF_START = re.compile(r"^\s*Proof\b")


# ------------------------------------------------------------------ sources


def strip_comments(text: str) -> str:
    """`text` with Coq comments (nested) and string literals blanked, newlines kept."""
    out: list[str] = []
    depth = 0
    in_string = False
    i = 0
    while i < len(text):
        two = text[i : i + 2]
        char = text[i]
        if in_string:
            if char == '"':
                in_string = False
            out.append(char if char == "\n" else " ")
            i += 1
        elif two == "(*":
            depth += 1
            out.append("  ")
            i += 2
        elif two == "*)" and depth:
            depth -= 1
            out.append("  ")
            i += 2
        elif depth:
            out.append(char if char == "\n" else " ")
            i += 1
        elif char == '"':
            in_string = True
            out.append(" ")
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def forbidden_uses(name: str, text: str) -> list[str]:
    """`name:line: word` for every forbidden word outside comments and strings."""
    found = []
    for number, line in enumerate(strip_comments(text).splitlines(), 1):
        for match in FORBIDDEN_WORD.finditer(line):
            found.append(f"{name}:{number}: {match.group(1)}")
    return found


def dependencies(sources: dict[str, str]) -> dict[str, set[str]]:
    """File name -> the files of the development it imports."""
    deps: dict[str, set[str]] = {}
    for name, text in sources.items():
        wanted: set[str] = set()
        for match in IMPORT.finditer(strip_comments(text)):
            for module in match.group(1).split():
                wanted.add(module.split(".")[-1] + ".v")
        deps[name] = {d for d in wanted if d in sources and d != name}
    return deps


def build_order(deps: dict[str, set[str]]) -> list[str]:
    """A topological order of the files (dependencies first); ValueError on a cycle."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "active":
            raise ValueError(f"import cycle through {name}")
        state[name] = "active"
        for dep in sorted(deps[name]):
            visit(dep)
        state[name] = "done"
        order.append(name)

    for name in sorted(deps):
        visit(name)
    return order


def dependents(deps: dict[str, set[str]], changed: str) -> set[str]:
    """`changed` and every file that imports it, directly or not."""
    out = {changed}
    grew = True
    while grew:
        grew = False
        for name, wanted in deps.items():
            if name not in out and wanted & out:
                out.add(name)
                grew = True
    return out


def ancestors(deps: dict[str, set[str]], name: str) -> set[str]:
    """`name` and every file it imports, directly or not."""
    out = {name}
    todo = [name]
    while todo:
        for dep in deps.get(todo.pop(), set()):
            if dep not in out:
                out.add(dep)
                todo.append(dep)
    return out


# ------------------------------------------------------------------ coqc


@dataclass(frozen=True)
class CoqError:
    file: str
    line: int
    message: str


@dataclass(frozen=True)
class Compiled:
    file: str
    ok: bool
    seconds: float
    output: str


def parse_error(output: str) -> CoqError | None:
    """The first located error of a coqc run, or None."""
    match = ERROR_AT.search(output)
    if not match:
        return None
    message = " ".join(match.group("message").split())
    return CoqError(Path(match.group("file")).name, int(match.group("line")), message)


def enclosing(text: str, line: int) -> tuple[str | None, bool]:
    """The declaration around `line` (1-based) and whether `line` is inside its proof."""
    name: str | None = None
    in_proof = False
    for number, source_line in enumerate(strip_comments(text).splitlines(), 1):
        if number > line:
            break
        declared = DECLARATION.match(source_line)
        if declared:
            name, in_proof = declared.group(2), False
        if PROOF_START.match(source_line):
            in_proof = True
    return name, in_proof


def coqc_version() -> str:
    done = subprocess.run(["coqc", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 else ""


def compile_file(directory: Path, name: str) -> Compiled:
    started = time.monotonic()
    try:
        done = subprocess.run(
            ["coqc", "-q", "-Q", ".", LOGICAL, name],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT,
            check=False,
        )
        ok, output = done.returncode == 0, done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        ok, output = False, f"coqc timed out after {COMPILE_TIMEOUT} s"
    return Compiled(name, ok, round(time.monotonic() - started, 2), output)


def compile_in_order(directory: Path, order: list[str]) -> list[Compiled]:
    """Compile `order` in `directory`, stopping at the first failure."""
    results = []
    for name in order:
        result = compile_file(directory, name)
        results.append(result)
        if not result.ok:
            break
    return results


def compile_parallel(
    directory: Path, deps: dict[str, set[str]], order: list[str], jobs: int
) -> list[Compiled]:
    """Compile every file of `order`, up to `jobs` at once, each once its imports are
    compiled; a file whose import failed is not compiled (it is missing from the result)."""
    done: dict[str, Compiled] = {}
    running: dict[Future[Compiled], str] = {}
    waiting = list(order)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        while waiting or running:
            for name in list(waiting):
                if len(running) >= max(1, jobs):
                    break
                if deps[name] - set(done):
                    if any(dep in done and not done[dep].ok for dep in deps[name]):
                        waiting.remove(name)  # an import failed: never compiled
                    continue
                waiting.remove(name)
                running[pool.submit(compile_file, directory, name)] = name
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done[running.pop(future)] = future.result()
    return [done[name] for name in order if name in done]


MARK = "@@theorem "


def print_all_assumptions(directory: Path, theorems: list[tuple[str, str]]) -> dict[str, str]:
    """`file:theorem` -> what `Print Assumptions` says about it, from one coqc run over
    the files compiled in `directory`; "error: ..." when coqc fails."""
    modules = sorted({Path(file).stem for file, _ in theorems})
    lines = [f"From {LOGICAL} Require {' '.join(modules)}."]
    for file, theorem in theorems:
        module = Path(file).stem
        lines.append(f'Goal True. idtac "{MARK}{file}:{theorem}". Abort.')
        lines.append(f"Print Assumptions {LOGICAL}.{module}.{theorem}.")
    probe = directory / "Assumptions.v"
    probe.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        ["coqc", "-q", "-Q", ".", LOGICAL, probe.name],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=COMPILE_TIMEOUT,
        check=False,
    )
    output = done.stdout + done.stderr
    said: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith(MARK):
            current = said.setdefault(line[len(MARK) :].strip(), [])
        elif current is not None:
            current.append(line)
    out = {}
    for file, theorem in theorems:
        key = f"{file}:{theorem}"
        text = " ".join(" ".join(said.get(key, [])).split())
        out[key] = text if done.returncode == 0 and key in said else f"error: {output[-300:]}"
    return out


def print_assumptions(directory: Path, file: str, theorem: str) -> str:
    """What `Print Assumptions` says about `theorem` of `file` (compiled in `directory`)."""
    return print_all_assumptions(directory, [(file, theorem)])[f"{file}:{theorem}"]


def copy_sources(target: Path, sources: dict[str, str]) -> None:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name, text in sources.items():
        (target / name).write_text(text)


# ------------------------------------------------------------------ mutants


def apply_substitution(text: str, old: str, new: str) -> str:
    """`text` with the one occurrence of `old` replaced; ValueError unless there is one."""
    count = text.count(old)
    if count != 1:
        raise ValueError(f"the substitution applies {count} times (must be exactly once)")
    return text.replace(old, new)


def judge_mutant(error: CoqError | None, sources: dict[str, str], fails_in: str) -> str | None:
    """None when the failure is a proof step inside `fails_in` ("File.v:lemma"), else why not."""
    if error is None:
        return "it compiled (or failed without a located error): the proofs do not depend on it"
    where_file, _, lemma = fails_in.partition(":")
    text = sources.get(error.file, "")
    name, in_proof = enclosing(text, error.line)
    at = f"{error.file}:{error.line} in {name}"
    if NOT_A_PROOF_STEP.search(error.message):
        return f"not a proof-step error at {at}: {error.message[:160]}"
    if error.file != where_file or name != lemma:
        return f"failed at {at}, expected {fails_in}: {error.message[:160]}"
    if not in_proof:
        return f"failed in the statement of {name}, not in its proof: {error.message[:160]}"
    return None


def run_mutant(
    spec: dict[str, Any],
    sources: dict[str, str],
    deps: dict[str, set[str]],
    order: list[str],
    built: Path,
    extra: dict[str, str],
) -> dict[str, Any]:
    """Build one mutant; `extra` are generated files (e.g. Traces.v) compiled last."""
    started = time.monotonic()
    target_file = Path(spec["file"]).name
    result: dict[str, Any] = {
        "name": spec["name"],
        "file": spec["file"],
        "fails_in": spec["fails_in"],
    }
    try:
        mutated = dict(sources)
        mutated[target_file] = apply_substitution(sources[target_file], spec["replace"], spec["by"])
    except (KeyError, ValueError) as problem:
        result.update(status="bad-mutant", detail=f"{spec['file']}: {problem}", seconds=0.0)
        return result
    all_sources = {**mutated, **extra}
    all_deps = {**deps, **dependencies(all_sources)}
    directory = BUILD / "mutants" / re.sub(r"[^A-Za-z0-9_-]", "_", spec["name"])
    copy_sources(directory, all_sources)
    touched = dependents(all_deps, target_file)
    # Files the substitution cannot affect are taken from the original build.
    for name in order:
        if name not in touched:
            for product in built.glob(Path(name).stem + ".vo*"):
                shutil.copy2(product, directory / product.name)
    # Only what the expected failure needs: its file and the files that file imports.
    needed = ancestors(all_deps, spec["fails_in"].partition(":")[0])
    todo = [name for name in order + list(extra) if name in touched and name in needed]
    compiled = compile_in_order(directory, todo)
    failed = next((c for c in compiled if not c.ok), None)
    error = parse_error(failed.output) if failed else None
    why_not = judge_mutant(error, all_sources, spec["fails_in"])
    result["seconds"] = round(time.monotonic() - started, 2)
    if error is not None:
        lemma, _ = enclosing(all_sources.get(error.file, ""), error.line)
        result["where"] = f"{error.file}:{error.line}:{lemma}"
        result["message"] = error.message[:300]
    result["status"] = "refuted" if why_not is None else "not-refuted"
    if why_not:
        result["detail"] = why_not
    return result


# ------------------------------------------------------------------ main


def load_manifest(path: Path = MANIFEST) -> list[dict[str, Any]]:
    entries = json.loads(path.read_text())
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a JSON list of theorem entries")
    for entry in entries:
        missing = {"file", "theorem", "requirement", "expect"} - set(entry)
        if missing:
            raise ValueError(f"{path}: entry {entry.get('theorem')} lacks {sorted(missing)}")
    return entries


def read_sources() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(SOURCES.glob("*.v"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-mutants", action="store_true")
    parser.add_argument("--no-traces", action="store_true")
    args = parser.parse_args(argv)
    began = time.monotonic()
    version = coqc_version()
    if not version:
        print("proofs-coq: coqc not found; run `make proofs-coq` (installs Debian's coq)")
        return 1
    problems: list[str] = []
    sources = read_sources()
    entries = load_manifest()
    report: dict[str, Any] = {"coqc": version, "files": [], "theorems": [], "forbidden": []}

    for name, text in sources.items():
        report["forbidden"].extend(forbidden_uses(name, text))
    problems.extend(f"forbidden: {use}" for use in report["forbidden"])

    deps = dependencies(sources)
    order = build_order(deps)
    built = BUILD / "src"
    copy_sources(built, sources)
    compiled = compile_parallel(built, deps, order, args.jobs)
    by_file = {c.file: c for c in compiled}
    for name in order:
        c = by_file.get(name)
        status = "not-compiled" if c is None else ("ok" if c.ok else "failed")
        report["files"].append({"file": name, "status": status, "seconds": c.seconds if c else 0.0})
        print(f"  coqc {name:<22} {status:<12} {c.seconds if c else 0.0:6.2f} s")
        if c is not None and not c.ok:
            problems.append(f"{name} does not compile:\n{c.output.strip()}")
        elif c is None:
            problems.append(f"{name} not compiled (an earlier file failed)")

    extra: dict[str, str] = {}
    all_compiled = len(compiled) == len(order) and all(c.ok for c in compiled)
    pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
    traces_job = None
    if not args.no_traces and all_compiled:
        sys.path.insert(0, str(ROOT / "tools"))
        import coq_traces

        extra = {"Traces.v": coq_traces.source(args.traces, TRACE_SEED)}
        traces_job = pool.submit(coq_traces.check, built, args.traces, TRACE_SEED)

    said = print_all_assumptions(
        built,
        [
            (Path(e["file"]).name, e["theorem"])
            for e in entries
            if by_file.get(Path(e["file"]).name) and by_file[Path(e["file"]).name].ok
        ],
    )
    mutant_jobs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for entry in entries:
        module = Path(entry["file"]).name
        c = by_file.get(module)
        assumptions = said.get(f"{module}:{entry['theorem']}", "not compiled")
        closed = assumptions == CLOSED
        status = "closed" if closed else "open"
        row = {
            "file": entry["file"],
            "theorem": entry["theorem"],
            "requirement": entry["requirement"],
            "statement": entry.get("statement", ""),
            "expect": entry["expect"],
            "status": status,
            "seconds": c.seconds if c else 0.0,
            "assumptions": assumptions,
            "mutants": [],
        }
        report["theorems"].append(row)
        print(
            f"  {entry['requirement']:<12} {module}:{entry['theorem']:<24} {status:<7}"
            f" {assumptions}"
        )
        if status != entry["expect"]:
            problems.append(f"{module}:{entry['theorem']}: {assumptions}")
        if not entry.get("mutants"):
            problems.append(f"{module}:{entry['theorem']} has no mutant")
        for spec in entry.get("mutants", []):
            mutant_jobs.append((row, spec))

    names = [spec["name"] for _, spec in mutant_jobs]
    problems.extend(
        f"mutant name {name} is used twice" for name in sorted(set(names)) if names.count(name) > 1
    )
    futures = []
    if not args.no_mutants and all_compiled:
        futures = [
            (row, pool.submit(run_mutant, spec, sources, deps, order, built, extra))
            for row, spec in mutant_jobs
        ]
    if traces_job is not None:
        traces = traces_job.result()
        report["traces"] = traces
        print(
            f"  traces: {traces['valid']} valid accepted: {traces['accepted']}; "
            f"{len(traces['invalid'])} invalid, rejected: {traces['all_invalid_rejected']}"
            f" ({traces['seconds']} s)"
        )
        if not traces["accepted"]:
            problems.append(f"Coq rejected the valid traces: {traces['detail']}")
        for bad in traces["invalid"]:
            if bad["status"] != "rejected":
                problems.append(f"invalid trace {bad['name']} not rejected: {bad['detail']}")
    for row, future in futures:
        outcome = future.result()
        row["mutants"].append(outcome)
        print(
            f"  mutant {outcome['name']:<28} {outcome['status']:<12} at {outcome.get('where', '-')}"
        )
        if outcome["status"] != "refuted":
            problems.append(f"mutant {outcome['name']}: {outcome.get('detail')}")
    pool.shutdown()

    report["seconds"] = round(time.monotonic() - began, 1)
    report["ok"] = not problems
    report["problems"] = problems
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(report, indent=1))
    for problem in problems:
        print(f"COQ FAILURE: {problem}", file=sys.stderr)
    print(f"proofs-coq: {'ok' if not problems else 'FAILED'} in {report['seconds']} s")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
