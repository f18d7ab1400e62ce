"""The reading path of a class: what a newcomer reads to understand one queue, or the
admission controller.

Issue 25's targets: the FCFS queue's module and the queueref modules it imports,
transitively, at most 900 lines (it was 1,425 while the contract checker and the
clause tables lived in the queue modules); `AdmissionController`'s at most 1,200 (it
was 2,175 with the flat copy of the check and the models' protocol module). The
contracts live beside the logic (`queueref.queues.checks`, `clauses`, `contracts`,
`queueref.admission.contracts`), which the logic modules do not import;
`tests/helpers/reading_path.py` says how the lines are counted. The check is also run
on a copy of the package with one planted import, to show that it fails for the
reason it claims.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import reading_path
from reading_path import reading_path as path_of

#: At most this many lines on the reading path of each queue (issue 25).
LIMIT = 900
#: At most this many lines on the reading path of the admission controller (issue 25).
CONTROLLER_LIMIT = 1200


def too_long(module: str, limit: int = LIMIT) -> str | None:
    """Why `module`'s reading path breaks the limit (every module on it, with its lines),
    or None when it keeps to it."""
    lines = path_of(module)
    total = sum(lines.values())
    if total <= limit:
        return None
    listing = ", ".join(f"{name} {count}" for name, count in sorted(lines.items()))
    return f"{module}: {total} lines on its reading path, more than {limit}: {listing}"


@pytest.mark.parametrize("module", ["queueref.queues.fcfs", "queueref.queues.priority"])
def test_a_queue_reads_in_at_most_900_lines(module: str) -> None:
    """A queue module and what it imports: the data structure, the interface, the request."""
    assert too_long(module) is None, too_long(module)
    assert not {"queueref.queues.contracts", "queueref.queues.clauses"} & set(path_of(module))


def test_the_controller_reads_in_at_most_1200_lines() -> None:
    """The controller, the check, the counters, the tracker, the protocol's steps, the
    errors and the argument checks; not its contracts, not the bound, not the models."""
    why = too_long("queueref.admission.controller", CONTROLLER_LIMIT)
    assert why is None, why
    path = set(path_of("queueref.admission.controller"))
    assert not any(".contracts" in module or ".verify" in module for module in path)


def test_a_planted_import_of_the_contracts_breaks_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue module of a copy imports the contract machinery again (as it did before
    issue 25): its reading path takes the checker, the clause tables and what they import
    with it, and the check names them."""
    copy = tmp_path / "queueref"
    shutil.copytree(
        reading_path.PACKAGE_ROOT / "queueref", copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    fcfs = copy / "queues" / "fcfs.py"
    fcfs.write_text(
        fcfs.read_text(encoding="utf-8")
        + "\n\nfrom queueref.queues.contracts import _checked_init  # noqa: E402\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(reading_path, "PACKAGE_ROOT", tmp_path)
    why = too_long("queueref.queues.fcfs")
    assert why is not None
    assert why.startswith("queueref.queues.fcfs: ") and "more than 900" in why
    for module in (
        "queueref.queues.contracts",
        "queueref.queues.clauses",
        "queueref.queues.checks",
    ):
        assert module in why
    assert too_long("queueref.queues.priority") is None  # the planted import is fcfs's alone
    controller = copy / "admission" / "controller.py"
    controller.write_text(
        controller.read_text(encoding="utf-8")
        + "\n\nfrom queueref.admission.contracts import controller as _c  # noqa: E402\n",
        encoding="utf-8",
    )
    why = too_long("queueref.admission.controller", CONTROLLER_LIMIT)
    assert why is not None and "queueref.admission.contracts.controller" in why
