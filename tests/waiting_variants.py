"""Broken `WaitingQueues`, each made from the real method by one named change.

A broken variant is never written by hand: `broken_variant` reads the source of
the method its change names (as `WaitingQueues` has it, whichever module of the
lifecycle defines it), applies the change (`Change` of `proofs/mutations.py`:
one exact piece of text replaced by another, which must match exactly once in
that method), and defines the result in a subclass. The subclass inherits the
method's contracts from `WaitingQueues`, so what the tests show is that the
contracts (or the state machine's model) catch the bug the change plants.

When the original changes so that a change no longer applies, building the
variant raises `ChangeDoesNotApply` naming the variant and the change, and every
test that uses it fails: a broken copy cannot drift from what it breaks.
`tests/test_waiting_variants.py` shows that, and that each variant differs from
the original by its change alone.

The changes apply to the method's source without its decorators and dedented
(`def` at column 0, its body at 4 spaces).
"""

from __future__ import annotations
import __future__

import ast
import inspect
import sys
import textwrap
from pathlib import Path
from typing import Any

from queueref import WaitingQueues

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "proofs"))
from mutations import Change, ChangeDoesNotApply  # noqa: E402

__all__ = [
    "CHANGES",
    "AbortMissesSkipped",
    "Change",
    "ChangeDoesNotApply",
    "EnqueueIgnoresBlocked",
    "FinishLosesRequest",
    "ForgetsToPark",
    "ParksWithoutReversal",
    "PreemptsToBack",
    "PromotesWithoutAsking",
    "SkippedFirstPriority",
    "WaitingFirst",
    "broken_variant",
    "changed_source",
    "method_source",
]


def method_source(name: str) -> str:
    """The source of `WaitingQueues.<name>` (its contracts' wrappers undone), without
    its decorators, dedented."""
    function = inspect.unwrap(getattr(WaitingQueues, name))
    source = textwrap.dedent(inspect.getsource(function))
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef) and node.name == name, name
    return "".join(source.splitlines(keepends=True)[node.lineno - 1 :])


def changed_source(variant: str, changes: tuple[Change, ...]) -> dict[str, str]:
    """Method name -> its source with every change of `variant` applied (each exactly once)."""
    sources: dict[str, str] = {}
    for change in changes:
        source = sources.get(change.function) or method_source(change.function)
        count = source.count(change.old)
        if count != 1:
            raise ChangeDoesNotApply(
                f"{variant}: {change.function}: {change.bug!r}: {change.old!r} found {count} times"
            )
        sources[change.function] = source.replace(change.old, change.new)
    return sources


#: Every variant built, by name: the changes it was built with.
CHANGES: dict[str, tuple[Change, ...]] = {}


def broken_variant(name: str, *changes: Change) -> type[WaitingQueues]:
    """A subclass of `WaitingQueues` whose methods named by `changes` have them applied."""
    namespace: dict[str, Any] = {
        "__doc__": "BROKEN: " + "; ".join(change.bug for change in changes) + ".",
        "__module__": __name__,
    }
    for method, source in changed_source(name, changes).items():
        original = inspect.unwrap(getattr(WaitingQueues, method))
        scope = dict(original.__globals__)  # the names the original's module sees
        code = compile(
            source,
            f"<{name}.{method}>",
            "exec",
            flags=__future__.annotations.compiler_flag,
            dont_inherit=True,
        )
        exec(code, scope)
        namespace[method] = scope[method]
    CHANGES[name] = changes
    return type(name, (WaitingQueues,), namespace)


ForgetsToPark = broken_variant(
    "ForgetsToPark",
    Change(
        "_park",
        "drops the step's skipped requests instead of prepending them back",
        "self.skipped_waiting.prepend_requests(step_skipped)",
        "pass",
    ),
)

ParksWithoutReversal = broken_variant(
    "ParksWithoutReversal",
    Change(
        "_park",
        "puts step_skipped in front in its own order: the second reversal is missing",
        "self.skipped_waiting.prepend_requests(step_skipped)",
        "for request in reversed(list(step_skipped)):\n"
        "            self.skipped_waiting.prepend_request(request)",
    ),
)

WaitingFirst = broken_variant(
    "WaitingFirst",
    Change(
        "_select",
        "FCFS prefers waiting over skipped_waiting",
        "return self.skipped_waiting or self.waiting or None",
        "return self.waiting or self.skipped_waiting or None",
    ),
)

SkippedFirstPriority = broken_variant(
    "SkippedFirstPriority",
    Change(
        "_select",
        "PRIORITY uses the FCFS rule: skipped_waiting whatever the heads",
        "if self.policy is SchedulingPolicy.FCFS:",
        "if True:",
    ),
)

PromotesWithoutAsking = broken_variant(
    "PromotesWithoutAsking",
    Change(
        "_promote",
        "treats every blocked request as promoted, whatever try_promote says",
        "promoted = try_promote(request)",
        "promoted = try_promote(request) or True",
    ),
)

PreemptsToBack = broken_variant(
    "PreemptsToBack",
    Change(
        "preempt",
        "preemption with add_request: the preempted request loses its place",
        "self.waiting.prepend_request(request)",
        "self.waiting.add_request(request)",
    ),
)

FinishLosesRequest = broken_variant(
    "FinishLosesRequest",
    Change(
        "finish",
        "finishing takes the request out of running and forgets to keep it",
        "self.finished[request.request_id] = request",
        "pass",
    ),
)

AbortMissesSkipped = broken_variant(
    "AbortMissesSkipped",
    Change(
        "abort",
        "aborts requests in skipped_waiting without taking them out of the queue",
        "self._aside.remove_requests(by_place[self._aside_place])",
        "pass",
    ),
)

EnqueueIgnoresBlocked = broken_variant(
    "EnqueueIgnoresBlocked",
    Change(
        "_queue_for",
        "puts every request in waiting, blocked ones too",
        "return self.skipped_waiting, IN_SKIPPED",
        "return self.waiting, IN_WAITING",
    ),
)
