"""The package imports: `import queueref` and every module of it succeed in a fresh Python.

Every other test file imports queueref at its top, so a package that fails to
import (a module that raises while it loads: a clause table built wrong, a
decorator applied to the wrong thing) breaks their collection, which pytest
reports as an error, not as a failing test. This file imports nothing of
queueref: it runs the imports in a child Python and fails, naming the error,
when one fails (`tools/mutation.py` runs it for every module's mutants). For
that to reach a verdict, nothing imports queueref before the tests run:
`tests/conftest.py` does not, and the project's addopts keep queueref's own
pytest11 plugin (which imports the package) out of this suite's runs
(`-p no:queueref`; `tests/oracle/test_oracle_plugin.py` loads it as another
project does, in a fresh run).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from environment import clean_environment

#: The checkout's `reference/` folder: the package every other test exercises.
REFERENCE = Path(__file__).resolve().parents[2] / "reference"

#: Imports the package, then each of its modules (a `__main__` would run the CLI), and
#: prints where the package came from. `walk_packages` ignores an ImportError of a
#: subpackage unless `onerror` raises it.
_PROBE = """
import importlib, pathlib, pkgutil, queueref

def reraise(name):
    raise

for info in pkgutil.walk_packages(queueref.__path__, "queueref.", onerror=reraise):
    if info.name.rpartition(".")[2] != "__main__":
        importlib.import_module(info.name)
print(pathlib.Path(queueref.__file__).resolve())
"""


def import_failure(folder: Path) -> str | None:
    """None when `import queueref` and the import of each of its modules succeed in a
    fresh Python with `folder` on its path, the package coming from `folder`; else the
    problem, in one line."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_environment(folder),
        cwd=folder,
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()
        return f"importing queueref failed: {last[-1] if last else f'exit {done.returncode}'}"
    found = Path(done.stdout.strip())
    if not found.is_relative_to(folder.resolve()):
        return f"importing queueref found {found}, not the package in {folder}"
    return None


def test_the_package_and_every_module_import() -> None:
    """The checkout's package and each of its modules import in a fresh Python."""
    assert import_failure(REFERENCE) is None


@pytest.mark.parametrize("module", ["queues/contracts.py", "oracle/trace_report.py"])
def test_a_module_that_raises_at_import_is_reported(tmp_path: Path, module: str) -> None:
    """A copy of the package with one module that raises while it loads fails the
    check, with the error: what a mutant that breaks an import is killed by. The
    queue contracts load with the package; the trace report only when imported."""
    shutil.copytree(
        REFERENCE / "queueref",
        tmp_path / "queueref",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    planted = tmp_path / "queueref" / module
    planted.write_text(planted.read_text() + '\nraise TypeError("planted at import")\n')
    failure = import_failure(tmp_path)
    assert failure == "importing queueref failed: TypeError: planted at import"


def test_a_folder_without_the_package_is_reported(tmp_path: Path) -> None:
    """A folder that holds no package fails the check: the import must come from the
    folder named, not from an installed copy elsewhere."""
    failure = import_failure(tmp_path)
    assert failure is not None
    assert failure.startswith(("importing queueref found ", "importing queueref failed: "))
