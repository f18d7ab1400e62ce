"""The admission core's contracts, declared beside the logic, bind whatever is imported first.

`queueref.admission.contracts` attaches them when the package `queueref.admission` is
imported, which Python does before any of its modules. Each test runs a fresh
interpreter that imports one module first, with contracts on and under `python -O`,
and probes one contract of each class and the module function: with contracts on the
icontract wording (the condition's text, `is_limit(...)`), under `python -O` the
preconditions `require` keeps (their description, without the condition's text). A copy of the
package whose `queueref.admission` no longer attaches them shows the probe failing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reference" / "queueref"

FIRST_IMPORTS = [
    "import queueref",
    "import queueref.admission.controller",
    "from queueref.admission.shared_stats import allocate_admission_counters",
    "from queueref.admission.tracker import RequestTracker",
    "import queueref.admission.check",
    "import queueref.admission.contracts.tracker",
    "import queueref.verify.search",
    "import queueref.runtime.servers",
]

PROBE = """
import icontract
from icontract._checkers import find_checker
{first}
import queueref
from queueref import AdmissionController, RequestTracker, SharedAdmissionStats
from queueref.admission import shared_stats
from queueref.admission.check import AdmissionCheck

def check(holds, what):  # not `assert`: python -O strips those
    if not holds:
        raise AssertionError(what)

def refusal(call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except (ValueError, IndexError, KeyError, RuntimeError) as error:
        return str(error)
    return "accepted"

on = __debug__
allocate = shared_stats.allocate_admission_counters
check(queueref.allocate_admission_counters is allocate, "the public name is the checked one")
# kept under -O: the preconditions declared with `require`
check("ADM-ALLOC-1" in refusal(allocate, 0, 1), "ADM-ALLOC-1")
check("ADM-STATS-1" in refusal(SharedAdmissionStats, [0] * 8, 1, 1), "ADM-STATS-1")
# icontract's wording with contracts on, the kept precondition's under -O
limit = refusal(AdmissionController, max_num_queued_reqs=-1)
check(("is_limit(max_num_queued_reqs)" in limit) == on, limit)
check("ADM-CTL-1: max_num_queued_reqs is None or an int >= 0" in limit, limit)
for method in (RequestTracker.add, AdmissionCheck.read_next, SharedAdmissionStats.read_slot,
               AdmissionController.start_check, AdmissionController.cancel_admission):
    check((find_checker(method) is not None) == on, method)
check(hasattr(AdmissionController.check_admission, "__wrapped__") == on, "postconditions")
check((getattr(RequestTracker, "__invariants__", None) is not None) == on, "invariants")
print("bound")
"""


def probe(first: str, *, optimize: bool, pythonpath: Path | None = None) -> str:
    """The probe's output (stdout and stderr) in a fresh interpreter."""
    env = dict(os.environ)
    env.pop("PYTHONOPTIMIZE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    command = [sys.executable, *(["-O"] if optimize else []), "-c", PROBE.format(first=first)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    return done.stdout + done.stderr


@pytest.mark.parametrize("optimize", [False, True], ids=["contracts on", "python -O"])
@pytest.mark.parametrize("first", FIRST_IMPORTS)
def test_the_contracts_bind_whatever_is_imported_first(first: str, optimize: bool) -> None:
    """ADM-CTL-1, ADM-ALLOC-1, ADM-STATS-1: the contracts and kept preconditions declared
    beside the admission logic are attached whichever module is imported first."""
    assert probe(first, optimize=optimize).strip().endswith("bound")


@pytest.mark.parametrize("optimize", [False, True], ids=["contracts on", "python -O"])
def test_the_probe_fails_when_the_package_does_not_attach_them(
    tmp_path: Path, optimize: bool
) -> None:
    """ADM-ALLOC-1: without `queueref.admission` importing its contracts, the probe fails:
    the allocation's kept precondition is gone (both modes), and the contracts too."""
    shutil.copytree(PACKAGE, tmp_path / "queueref", ignore=shutil.ignore_patterns("__pycache__"))
    init = tmp_path / "queueref" / "admission" / "__init__.py"
    attach = "from queueref.admission import contracts as contracts"
    assert init.read_text().count(attach) == 1
    init.write_text(init.read_text().replace(attach, "pass"))
    output = probe("import queueref.admission.controller", optimize=optimize, pythonpath=tmp_path)
    assert "AssertionError" in output and not output.strip().endswith("bound"), output
    assert "ADM-ALLOC-1" in output, output  # the first assertion to fail names its clause
