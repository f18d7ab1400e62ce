"""docs/architecture.md lists every module of the package, and the Makefile every target.

A module is listed when its path appears in the table, or when the table has a
row for its directory that names the file. A package's `__init__.py` is listed
by any row inside its directory.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def module_map(page: str) -> dict[str, str]:
    """path -> content of each row of the "Every module" table."""
    section = page.split("## Every module", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def unlisted(rows: dict[str, str], package: Path, root: Path) -> list[str]:
    missing = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        directory = rel.rsplit("/", 1)[0] + "/"
        if rel in rows:
            continue
        if directory in rows and f"`{path.name}`" in rows[directory]:
            continue
        if path.name == "__init__.py" and any(row.startswith(directory) for row in rows):
            continue
        missing.append(rel)
    return missing


def test_every_module_is_in_the_architecture_page() -> None:
    rows = module_map(ARCHITECTURE.read_text(encoding="utf-8"))
    assert unlisted(rows, ROOT / "reference" / "queueref", ROOT) == []


def test_a_new_module_missing_from_the_page_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "reference" / "queueref"
    (package / "admission").mkdir(parents=True)
    for name in ("request.py", "fresh.py", "admission/controller.py", "admission/new.py"):
        (package / name).write_text("", encoding="utf-8")
    rows = module_map(ARCHITECTURE.read_text(encoding="utf-8"))
    assert unlisted(rows, package, tmp_path) == [
        "reference/queueref/admission/new.py",
        "reference/queueref/fresh.py",
    ]


MAKEFILE = ROOT / "Makefile"


def undocumented_targets(makefile: str) -> list[str]:
    """The phony targets without a `## target: what it does` line."""
    phony = {
        name
        for line in makefile.splitlines()
        if line.startswith(".PHONY:")
        for name in line.split(":", 1)[1].split()
    }
    documented = set(re.findall(r"^## ([a-z-]+): \S", makefile, flags=re.MULTILINE))
    return sorted(phony - documented)


def test_make_help_lists_every_target_with_one_line() -> None:
    import subprocess

    text = MAKEFILE.read_text(encoding="utf-8")
    assert undocumented_targets(text) == []
    shown = subprocess.run(
        ["make", "--no-print-directory", "-s", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    names = [line.split()[0] for line in shown]
    assert sorted(names) == sorted(set(re.findall(r"^## ([a-z-]+):", text, re.MULTILINE)))
    assert len(names) == len(set(names)) and "verify" in names and "help" in names


def test_a_target_without_a_help_line_is_reported() -> None:
    text = MAKEFILE.read_text(encoding="utf-8") + "\n.PHONY: frobnicate\nfrobnicate:\n\ttrue\n"
    assert undocumented_targets(text) == ["frobnicate"]
