"""Where the queues' contracts bind (`queueref.queues.contracts`), whatever is imported first.

The contracts live beside the queue modules, which never import them: the package
`queueref.queues` imports `contracts`, which hands its binder to `watch_subclasses`
(`queueref.queues.base`). These tests import one queue module alone in a fresh
interpreter and show that a subclass made then is checked all the same (RQ-COST-2),
that the binder is handed the classes made before it as well as those made after,
and, on a copy of the package whose `queues/__init__.py` no longer imports the
contracts, that the same program then finds the subclass unchecked: the test sees
what it claims to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reference" / "queueref"

#: A broken subclass made right after importing one queue module alone (`{module}`), whose
#: `add_request` never queues the request; the last line says whether that was refuted.
ALONE = """
    import sys
    import {module} as alone
    from queueref.request import Request
    print("from", alone.__file__.startswith(sys.argv[1]))

    class Losing(alone.{base}):
        def add_request(self, request):
            pass  # bug: the request is never queued
{foreign}
    try:
        Losing().add_request(Request("a"))
        print("add unchecked")
    except AssertionError as error:  # icontract's ViolationError
        print("add checked", str(error).splitlines()[-1].split(":")[0])
"""

#: The rest of someone else's queue, a list with no index, for a subclass of the ABC itself.
FOREIGN = """
        def __init__(self):
            self.items = []
        def pop_request(self):
            return self.items.pop(0)
        def peek_request(self):
            return self.items[0]
        def prepend_request(self, request):
            self.items.insert(0, request)
        def prepend_requests(self, requests):
            self.items[:0] = reversed(list(requests))
        def remove_request(self, request):
            self.items.remove(request)
        def remove_requests(self, requests):
            self.items = [r for r in self.items if r not in list(requests)]
        def __bool__(self):
            return bool(self.items)
        def __len__(self):
            return len(self.items)
        def __iter__(self):
            return iter(list(self.items))
"""


def alone(module: str, base: str) -> str:
    return ALONE.format(module=module, base=base, foreign=FOREIGN if base == "RequestQueue" else "")


def run(program: str, *, root: Path, optimized: bool = False) -> list[str]:
    """`program` in a fresh interpreter that imports queueref from `root`."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, *(["-O"] if optimized else []), "-c", textwrap.dedent(program), str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.contracts
@pytest.mark.parametrize(
    "module, base",
    [
        ("queueref.queues.fcfs", "FCFSRequestQueue"),
        ("queueref.queues.priority", "PriorityRequestQueue"),
        ("queueref.queues.base", "RequestQueue"),
    ],
)
def test_a_subclass_made_after_importing_one_queue_module_alone_is_checked(
    module: str, base: str
) -> None:
    """RQ-COST-2, RQ-ALL-1: importing `queueref.queues.fcfs` (or `priority`, or `base` for
    someone else's queue) alone loads the package, and so the contracts, first: a broken
    subclass made then is refuted."""
    out = run(alone(module, base), root=PACKAGE.parent)
    assert out == ["from True", "add checked RQ-ALL-1"]


def test_under_python_dash_o_the_same_subclass_is_unchecked() -> None:
    """RQ-COST-2: the contracts stay off under `python -O`, bound through the hook or not."""
    out = run(
        alone("queueref.queues.fcfs", "FCFSRequestQueue"),
        root=PACKAGE.parent,
        optimized=True,
    )
    assert out == ["from True", "add unchecked"]


def test_without_the_package_import_the_subclass_would_be_unchecked(tmp_path: Path) -> None:
    """RQ-COST-2: what the test above guards against, planted: in a copy whose
    `queues/__init__.py` does not import the contracts, nothing binds them, and the same
    program finds the broken subclass unchecked."""
    copy = tmp_path / "queueref"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    init = copy / "queues" / "__init__.py"
    line = "from queueref.queues import contracts as contracts\n"
    text = init.read_text(encoding="utf-8")
    assert text.count(line) == 1
    init.write_text(text.replace(line, ""), encoding="utf-8")
    out = run(alone("queueref.queues.fcfs", "FCFSRequestQueue"), root=tmp_path)
    assert out == ["from True", "add unchecked"]


def test_the_binder_is_handed_the_subclasses_made_before_it_and_after() -> None:
    """RQ-COST-2: `watch_subclasses` calls a hook with every subclass of `RequestQueue` made
    already (each once, a class with two parents among them too) and then with each new
    one, so a class made before the contracts were loaded is bound too."""
    out = run(
        """
        from queueref.queues.base import RequestQueue, watch_subclasses

        class Before(RequestQueue):
            pass

        class BeforeChild(Before):
            pass

        class Diamond(BeforeChild, Before):
            pass

        seen = []
        watch_subclasses(lambda cls: seen.append(cls.__name__))
        print(" ".join(name for name in seen if name.startswith(("Before", "Diamond"))))
        print(seen.count("FCFSRequestQueue"), seen.count("PriorityRequestQueue"))

        class After(BeforeChild):
            pass

        print(seen[-1])
        """,
        root=PACKAGE.parent,
    )
    assert out == ["Before BeforeChild Diamond", "1 1", "After"]
