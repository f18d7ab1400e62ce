"""The reading path of a module: its lines plus those of every queueref module it imports.

Issue 25's proxy for how much a newcomer reads to understand one class: the lines
of the module that defines it and of the queueref modules its import statements
name, transitively. `from queueref.x import y` counts the submodule `queueref.x.y`
when `y` is one, else the module `queueref.x`; the parent packages Python runs on
the way (`queueref/__init__.py` re-exports everything) are not read to understand
the class, so they count only when an import names them for a name they define.
Imports inside functions count too: the reader follows them all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "reference"


def module_file(name: str) -> Path | None:
    path = PACKAGE_ROOT.joinpath(*name.split("."))
    if (path / "__init__.py").exists():
        return path / "__init__.py"
    file = path.with_suffix(".py")
    return file if file.exists() else None


def imported_modules(name: str, file: Path) -> set[str]:
    """The queueref modules `file` (module `name`) imports, by the rule above."""
    package = name if file.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "queueref")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base.split(".")[0] != "queueref":
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if module_file(submodule) else base)
    return found


def reading_path(name: str) -> dict[str, int]:
    """Every module on `name`'s reading path, with its number of lines."""
    lines: dict[str, int] = {}
    todo = [name]
    while todo:
        module = todo.pop()
        file = module_file(module)
        if module in lines or file is None:
            continue
        lines[module] = len(file.read_text().splitlines())
        todo.extend(imported_modules(module, file))
    return lines
