"""Broken `WaitingQueues`, each made from the real method by one named change.

A broken variant is never written by hand: `broken_variant` (the lifecycle's
name for `method_variants.broken_class(WaitingQueues, ...)`) reads the source of
the method its change names (as `WaitingQueues` has it, whichever module of the
lifecycle defines it), applies the change (`Change` of `proofs/mutations.py`:
one exact piece of text replaced by another, which must match exactly once in
that method), and defines the result in a subclass. The subclass inherits the
method's contracts from `WaitingQueues`, so what the tests show is that the
contracts (or the state machine's model) catch the bug the change plants.

When the original changes so that a change no longer applies, building the
variant raises `ChangeDoesNotApply` naming the variant and the change, and every
test that uses it fails: a broken copy cannot drift from what it breaks.
`tests/waiting/test_waiting_variants.py` shows that, and that each variant differs from
the original by its change alone.

The changes apply to the method's source without its decorators and dedented
(`def` at column 0, its body at 4 spaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import method_variants
from method_variants import Change, ChangeDoesNotApply

from queueref import WaitingQueues

__all__ = [
    "CHANGES",
    "AbortMissesSkipped",
    "AsksTheGuardTwice",
    "Change",
    "ChangeDoesNotApply",
    "EnqueueIgnoresBlocked",
    "EnqueueIgnoresKV",
    "FinishLosesRequest",
    "ForgetsThePause",
    "ForgetsToDefer",
    "ForgetsToPark",
    "IgnoresTheGuard",
    "NeverAsksTheGuard",
    "ParksReversed",
    "ParksWithoutReversal",
    "PreemptKeepsKV",
    "PreemptsToBack",
    "PromotedSessionStaysPaused",
    "PromotesWithoutAsking",
    "RequeuesPausedSession",
    "SkippedFirstPriority",
    "SkipsBackToWaiting",
    "SlotsIgnorePausedSessions",
    "WaitingBeforeKVHolding",
    "WaitingFirst",
    "broken_variant",
    "changed_source",
    "method_source",
]


def method_source(name: str) -> str:
    """The source of `WaitingQueues.<name>` (its contracts' wrappers undone), without
    its decorators, dedented."""
    return method_variants.method_source(WaitingQueues, name)


def changed_source(variant: str, changes: tuple[Change, ...]) -> dict[str, str]:
    """Method name -> its source with every change of `variant` applied (each exactly once)."""
    return method_variants.changed_sources(WaitingQueues, variant, changes)


#: Every variant built, by name: the changes it was built with.
CHANGES: dict[str, tuple[Change, ...]] = {}


def broken_variant(
    name: str, *changes: Change, uses: Mapping[str, Any] | None = None
) -> type[WaitingQueues]:
    """A subclass of `WaitingQueues` whose methods named by `changes` have them applied
    (`method_variants.broken_class`; `uses`: names the new text needs)."""
    variant: type[WaitingQueues] = method_variants.broken_class(
        WaitingQueues, name, *changes, uses=uses, module=__name__
    )
    CHANGES[name] = changes
    return variant


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

# -- the vllm-0.33 layout (tests/waiting/test_waiting_v033.py)

WaitingBeforeKVHolding = broken_variant(
    "WaitingBeforeKVHolding",
    Change(
        "_select",
        "vllm-0.33 takes waiting before kv_holding_waiting",
        "return self.kv_holding_waiting or self.waiting or None",
        "return self.waiting or self.kv_holding_waiting or None",
    ),
)

SkipsBackToWaiting = broken_variant(
    "SkipsBackToWaiting",
    Change(
        "_skip_v033",
        "puts every skipped request back in waiting, whatever its KV state",
        "if self._holds_kv(request):",
        "if False:",
    ),
)

ForgetsToDefer = broken_variant(
    "ForgetsToDefer",
    Change(
        "_skip_v033",
        "skips without adding to deferred_waiting",
        "self.deferred_waiting.add(request.request_id)",
        "self.deferred_waiting.discard(request.request_id)",
    ),
)

EnqueueIgnoresKV = broken_variant(
    "EnqueueIgnoresKV",
    Change(
        "_queue_for",
        "enqueues a request holding KV blocks into waiting",
        "return self.kv_holding_waiting, IN_KV_HOLDING",
        "return self.waiting, IN_WAITING",
    ),
)

ParksReversed = broken_variant(
    "ParksReversed",
    Change(
        "_park_v033",
        "puts the skipped KV holders back in the reverse of their examination order",
        "self.kv_holding_waiting.prepend_requests(skipped_kv)",
        "for request in reversed(list(skipped_kv)):\n"
        "            self.kv_holding_waiting.prepend_request(request)",
    ),
    Change(
        "_park_v033",
        "and the skipped others too",
        "self.waiting.prepend_requests(skipped_waiting)",
        "for request in reversed(list(skipped_waiting)):\n"
        "            self.waiting.prepend_request(request)",
    ),
)

PreemptKeepsKV = broken_variant(
    "PreemptKeepsKV",
    Change(
        "preempt",
        "forgets that preemption frees the KV blocks",
        "self._kv_held.discard(request.request_id)",
        "self._kv_held.add(request.request_id)",
    ),
)

# -- streaming sessions (tests/waiting/test_waiting_streaming.py)

ForgetsThePause = broken_variant(
    "ForgetsThePause",
    Change(
        "await_stream",
        "await_stream does not record the paused session",
        "self._paused.add(request.request_id)",
        "pass",
    ),
)

RequeuesPausedSession = broken_variant(
    "RequeuesPausedSession",
    Change(
        "continue_stream",
        "continue_stream moves a paused session to the back of waiting",
        "    self._paused.discard(request.request_id)",
        "    self._paused.discard(request.request_id)\n"
        "    self._aside.remove_request(request)\n"
        "    self.waiting.add_request(request)\n"
        "    self._where[request.request_id] = IN_WAITING",
    ),
)

SlotsIgnorePausedSessions = broken_variant(
    "SlotsIgnorePausedSessions",
    Change(
        "_slots_full",
        "max_running counts only running (vLLM before streaming sessions)",
        "len(self.running) + len(self._paused) >= max_running",
        "len(self.running) >= max_running",
    ),
)

PromotedSessionStaysPaused = broken_variant(
    "PromotedSessionStaysPaused",
    Change(
        "_note_status",
        "forgets that a promoted session is no longer paused",
        "self._paused.discard(request.request_id)",
        "pass",
    ),
)

# -- the budget guard (tests/waiting/test_waiting_guard.py)

IgnoresTheGuard = broken_variant(
    "IgnoresTheGuard",
    Change(
        "_may_continue",
        "asks should_continue but goes on after False",
        "return answer",
        "return True",
    ),
)

NeverAsksTheGuard = broken_variant(
    "NeverAsksTheGuard",
    Change(
        "_may_continue",
        "forgets should_continue altogether",
        "if should_continue is None:",
        "if True:",
    ),
)

AsksTheGuardTwice = broken_variant(
    "AsksTheGuardTwice",
    Change(
        "_may_continue",
        "asks the guard twice per iteration",
        "    answer = should_continue()",
        "    answer = should_continue()\n"
        "    if answer is True:\n"
        "        self._continue_answers.append(answer)\n"
        "        answer = should_continue()",
    ),
)
