"""Traceability: every requirement in specs/ is enforced, tested and (where possible) proved.

Reads the requirement IDs that `specs/*.md` define, then scans the code with
`ast` for the places that cite them (rules in CONTRIBUTING.md). Writes
`build/trace.json` and fails when

* an ID is cited anywhere (code, tests, proofs, specs, README) but defined nowhere;
* an ID is defined twice;
* a defined ID is tested nowhere, or is neither enforced nor proved anywhere;
* `proofs/coq/theorems.json` names a theorem its file does not state.

A Coq theorem of `proofs/coq/theorems.json` counts as **proved_by** its requirement, as
`proofs/coq/FILE.v:theorem` (`tools/run_coq.py` checks it has no assumption).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIXES = "RQ|WL|ADM|OB|ORC|E2E"
ID = re.compile(rf"\b(?:{PREFIXES})-[A-Z0-9]+(?:-[A-Z0-9]+)*\b")
COQ_MANIFEST = ROOT / "proofs" / "coq" / "theorems.json"
COQ_STATEMENT = r"^\s*(?:Theorem|Lemma|Corollary|Proposition)\s+{name}\b"
DEFINITION = re.compile(rf"^\s*(?:[-*]\s+)?\*\*((?:{PREFIXES})-[A-Z0-9]+(?:-[A-Z0-9]+)*)\*\*")


def definitions() -> tuple[dict[str, str], list[str]]:
    defined: dict[str, str] = {}
    problems: list[str] = []
    for spec in sorted((ROOT / "specs").glob("*.md")):
        for number, line in enumerate(spec.read_text().splitlines(), 1):
            match = DEFINITION.match(line)
            if not match:
                continue
            rid = match.group(1)
            where = f"{spec.relative_to(ROOT)}:{number}"
            if rid in defined:
                problems.append(f"{rid} is defined twice: {defined[rid]} and {where}")
            defined.setdefault(rid, where)
    return defined, problems


def cited_by_definition(path: Path) -> dict[str, set[str]]:
    """ID -> qualified names of the defs/classes (or the module) whose own source cites it."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    owner: list[str | None] = [None] * (len(lines) + 2)  # line -> innermost qualname

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                for line in range(first, (child.end_lineno or child.lineno) + 1):
                    owner[line] = name
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    found: dict[str, set[str]] = defaultdict(set)
    for number, line in enumerate(lines, 1):
        for rid in ID.findall(line):
            found[rid].add(owner[number] or "<module>")
    return found


def scan(directory: str, sep: str) -> dict[str, list[str]]:
    """ID -> `path{sep}qualname` of every definition under `directory` whose source cites it."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / directory).rglob("*.py")):
        rel = path.relative_to(ROOT)
        if "mutants" in rel.parts or "broken" in rel.parts:
            continue
        for rid, names in cited_by_definition(path).items():
            if ("vectors" in rel.parts or path.name == "vectors.py") and not rid.startswith("ORC"):
                continue  # a vector covering a requirement is not what enforces it
            out[rid].extend(f"{rel}{sep}{name}" for name in sorted(names))
    return out


def coq_proofs(manifest: Path = COQ_MANIFEST) -> tuple[dict[str, list[str]], list[str]]:
    """ID -> `file:theorem` of the Coq theorems that prove it, and the manifest's problems."""
    proved: dict[str, list[str]] = defaultdict(list)
    problems: list[str] = []
    if not manifest.exists():
        return proved, problems
    for entry in json.loads(manifest.read_text()):
        where = f"{entry['file']}:{entry['theorem']}"
        path = ROOT / entry["file"]
        pattern = re.compile(COQ_STATEMENT.format(name=re.escape(entry["theorem"])), re.M)
        if not path.is_file() or not pattern.search(path.read_text()):
            problems.append(f"{manifest.name} names {where}, which its file does not state")
            continue
        proved[entry["requirement"]].append(where)
    return proved, problems


def all_citations() -> dict[str, list[str]]:
    """Every place an ID is written, for the 'cited but not defined' check."""
    cited: dict[str, list[str]] = defaultdict(list)
    files = [*ROOT.glob("specs/*.md"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]
    for directory in ("reference", "tests", "proofs", "tools"):
        files.extend((ROOT / directory).rglob("*.py"))
        files.extend((ROOT / directory).rglob("*.json"))
        files.extend((ROOT / directory).rglob("*.v"))
    for path in files:
        if not path.is_file() or path.name == "trace.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for rid in ID.findall(line):
                cited[rid].append(f"{path.relative_to(ROOT)}:{number}")
    return cited


def main() -> int:
    defined, problems = definitions()
    enforced = scan("reference", ":")
    tested = scan("tests", "::")
    proved = scan("proofs", ":")
    coq, coq_problems = coq_proofs()
    problems.extend(coq_problems)
    for rid, places in coq.items():
        proved[rid].extend(places)
    for rid, places in sorted(all_citations().items()):
        if rid not in defined:
            problems.append(f"{rid} is cited but not defined in specs/: {', '.join(places[:3])}")
    rows = []
    for rid, spec in sorted(defined.items()):
        row = {
            "id": rid,
            "spec": spec.split(":")[0],
            "enforced_by": sorted(set(enforced.get(rid, []))),
            "tested_by": sorted(set(tested.get(rid, []))),
            "proved_by": sorted(set(proved.get(rid, []))),
        }
        rows.append(row)
        if not row["tested_by"]:
            problems.append(f"{rid} ({spec}) is tested nowhere")
        if not row["enforced_by"] and not row["proved_by"]:
            problems.append(f"{rid} ({spec}) is neither enforced nor proved anywhere")
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "trace.json").write_text(json.dumps(rows, indent=1))
    width = max((len(r["id"]) for r in rows), default=10)
    print(f"{'requirement':<{width}}  enforced  tested  proved")
    for r in rows:
        print(
            f"{r['id']:<{width}}  {len(r['enforced_by']):>8}  {len(r['tested_by']):>6}"
            f"  {len(r['proved_by']):>6}"
        )
    print(f"{len(rows)} requirements traced")
    for problem in problems:
        print(f"TRACE FAILURE: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
