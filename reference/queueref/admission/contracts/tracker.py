"""The contracts of `RequestTracker`, declared beside it and attached when
`queueref.admission` is imported (`queueref.admission.contracts`).

Each stub below names a method of `queueref.admission.tracker.RequestTracker`;
`original` hands its conditions the real method and `install` puts the checked
method back, as if the decorators were written over it. The class invariants are
attached last, as a class decorator is applied after the methods'. The guards that
keep bad input out under `python -O` stay in the methods' bodies.
"""

from __future__ import annotations

import icontract

from queueref import config
from queueref.admission import tracker as tracker_module
from queueref.admission.contracts.shared_stats import is_private_buffer
from queueref.admission.tracker import child_request_ids
from queueref.preconditions import install, original, require
from queueref.validators import is_int_at_least

__all__ = ["consistent"]


def consistent(tracker: tracker_module.RequestTracker) -> bool:
    """The whole-structure invariant: caches equal the traversal."""
    states = tracker._states
    queued = sum(state.num_prompt_tokens for state in states.values() if state.is_prefilling)
    if queued != tracker._queued_tokens:
        return False
    for parent_id, children in tracker._parents.items():
        if not children or parent_id in states:
            return False
        for child_id in children:
            state = states.get(child_id)
            if state is None or state.parent_id != parent_id:
                return False
    return all(
        state.parent_id is None or request_id in tracker._parents.get(state.parent_id, ())
        for request_id, state in states.items()
    )


def _own_slot_current(tracker: tracker_module.RequestTracker) -> bool:
    """The own slot holds unfinished + reserved (checked on private buffers only)."""
    stats = tracker.shared_stats
    if stats is None or not is_private_buffer(stats.counters):
        return True
    return bool(
        stats.counters[stats.slot_offset + stats.REQUEST_COUNT]
        == tracker.get_num_unfinished_requests() + tracker.num_reserved
    )


def _own_tokens_current(tracker: tracker_module.RequestTracker) -> bool:
    """Counter 1 holds queued + reserved tokens when shared, else 0 (private buffers only)."""
    stats = tracker.shared_stats
    if stats is None or not is_private_buffer(stats.counters):
        return True
    expected = (
        tracker.get_num_queued_tokens() + tracker.num_reserved_tokens
        if tracker.shares_tokens
        else 0
    )
    return bool(stats.counters[stats.slot_offset + stats.QUEUED_TOKENS] == expected)


@install(tracker_module.RequestTracker)
@require(
    lambda self: self.shared_stats is not None,
    "ADM-TOK-1: only a tracker with shared stats can share its tokens",
)
@icontract.ensure(lambda self: self.shares_tokens, "ADM-TOK-1: the tokens are shared")
@icontract.ensure(
    lambda self: _own_tokens_current(self), "ADM-TOK-1: counter 1 holds the queued tokens"
)
@original(tracker_module.RequestTracker)
def share_tokens() -> None: ...


@install(tracker_module.RequestTracker)
@icontract.snapshot(lambda self: self.get_num_unfinished_requests(), name="unfinished")
@icontract.snapshot(lambda self: self.num_reserved, name="reserved")
@icontract.snapshot(lambda self: self.get_num_queued_tokens(), name="tokens")
@icontract.ensure(
    lambda self, n, OLD: self.get_num_unfinished_requests() == OLD.unfinished + n,
    "ADM-TRK-1: all n children are registered",
)
@icontract.ensure(
    lambda self, n, num_prompt_tokens, OLD: (
        self.get_num_queued_tokens() == OLD.tokens + n * num_prompt_tokens
    ),
    "ADM-TRK-4: every child queues its prompt tokens",
)
@icontract.ensure(
    lambda self, n, OLD: self.num_reserved == OLD.reserved - min(OLD.reserved, n),
    "ADM-TRK-7: a registration takes over outstanding reservations",
)
@icontract.ensure(
    lambda request_id, n, result: result == child_request_ids(request_id, n),
    "ADM-TRK-1: the internal ids are the request id, or 0_id .. (n-1)_id",
)
@icontract.snapshot(lambda self: self.num_reserved_tokens, name="reserved_tokens")
@icontract.ensure(
    lambda self, n, num_prompt_tokens, OLD: (
        self.num_reserved_tokens
        == OLD.reserved_tokens - min(OLD.reserved_tokens, n * num_prompt_tokens)
    ),
    "ADM-TOK-5: a registration takes over outstanding token reservations",
)
@icontract.ensure(lambda self: _own_slot_current(self), "ADM-TRK-5: add refreshes the slot")
@icontract.ensure(lambda self: _own_tokens_current(self), "ADM-TOK-1: add writes the queued tokens")
@original(tracker_module.RequestTracker)
def add() -> None: ...


@install(tracker_module.RequestTracker)
@icontract.snapshot(lambda self: self.get_num_unfinished_requests(), name="unfinished")
@icontract.ensure(
    lambda self, result, OLD: self.get_num_unfinished_requests() == OLD.unfinished - len(result),
    "ADM-TRK-2: exactly the returned requests are gone",
)
@icontract.ensure(
    lambda self, result: not any(self.has_request(rid) for rid in result),
    "ADM-TRK-2: an aborted request is no longer tracked",
)
@icontract.ensure(lambda self: _own_slot_current(self), "ADM-TRK-5: abort refreshes the slot")
@icontract.ensure(
    lambda self: _own_tokens_current(self), "ADM-TOK-1: abort writes the queued tokens"
)
@original(tracker_module.RequestTracker)
def abort() -> None: ...


@install(tracker_module.RequestTracker)
@require(
    lambda self, request_id: request_id in self._states,
    "ADM-TRK-3: only a tracked internal request can finish",
    error=KeyError,
)
@icontract.snapshot(lambda self: self.get_num_unfinished_requests(), name="unfinished")
@icontract.ensure(
    lambda self, OLD: self.get_num_unfinished_requests() == OLD.unfinished - 1,
    "ADM-TRK-3: finishing ends exactly one internal request",
)
@icontract.ensure(lambda self: _own_slot_current(self), "ADM-TRK-5: finish refreshes the slot")
@icontract.ensure(
    lambda self: _own_tokens_current(self), "ADM-TOK-1: finish writes the queued tokens"
)
@original(tracker_module.RequestTracker)
def finish() -> None: ...


@install(tracker_module.RequestTracker)
@require(
    lambda self, request_id: request_id in self._states,
    "ADM-TRK-4: only a tracked internal request leaves prefill",
    error=KeyError,
)
@icontract.snapshot(lambda self: self.get_num_unfinished_requests(), name="unfinished")
@icontract.snapshot(lambda self: self.get_num_queued_tokens(), name="tokens")
@icontract.snapshot(lambda self, request_id: self.prefill_tokens(request_id), name="own")
@icontract.ensure(
    lambda self, OLD: self.get_num_unfinished_requests() == OLD.unfinished,
    "ADM-TRK-4: leaving prefill is not finishing",
)
@icontract.ensure(
    lambda self, OLD: self.get_num_queued_tokens() == OLD.tokens - OLD.own,
    "ADM-TOK-4: exactly the request's prompt tokens leave the count (once)",
)
@icontract.ensure(
    lambda self: _own_tokens_current(self), "ADM-TOK-1: prefill_done writes the queued tokens"
)
@original(tracker_module.RequestTracker)
def prefill_done() -> None: ...


@install(tracker_module.RequestTracker)
@require(lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1")
@icontract.snapshot(lambda self: self.num_reserved, name="reserved")
@icontract.ensure(
    lambda self, n, OLD: self.num_reserved == OLD.reserved + n,
    "ADM-TRK-7: a reservation adds n",
)
@icontract.ensure(lambda self: _own_slot_current(self), "ADM-CTL-9: the reservation is in the slot")
@original(tracker_module.RequestTracker)
def reserve() -> None: ...


@install(tracker_module.RequestTracker)
@require(lambda n: is_int_at_least(n, 1), "ADM-CTL-2: n is an int >= 1")
@require(
    lambda self, n: not is_int_at_least(n, 1) or n <= self.num_reserved,
    "ADM-TRK-7: only a held reservation can be given back",
)
@icontract.snapshot(lambda self: self.num_reserved, name="reserved")
@icontract.ensure(
    lambda self, n, OLD: self.num_reserved == OLD.reserved - n,
    "ADM-CTL-6: the rollback removes exactly the reservation",
)
@icontract.ensure(lambda self: _own_slot_current(self), "ADM-CTL-6: the slot is rolled back")
@original(tracker_module.RequestTracker)
def release_reservation() -> None: ...


@install(tracker_module.RequestTracker)
@require(
    lambda tokens: is_int_at_least(tokens, 0),
    "ADM-TOK-5: a token reservation is an int >= 0",
)
@icontract.snapshot(lambda self: self.num_reserved_tokens, name="reserved")
@icontract.ensure(
    lambda self, tokens, OLD: self.num_reserved_tokens == OLD.reserved + tokens,
    "ADM-TOK-5: a token reservation adds its tokens",
)
@icontract.ensure(
    lambda self: _own_tokens_current(self), "ADM-TOK-5: the token reservation is in counter 1"
)
@original(tracker_module.RequestTracker)
def reserve_tokens() -> None: ...


@install(tracker_module.RequestTracker)
@require(
    lambda tokens: is_int_at_least(tokens, 0),
    "ADM-TOK-5: a token reservation is an int >= 0",
)
@require(
    lambda self, tokens: not is_int_at_least(tokens, 0) or tokens <= self.num_reserved_tokens,
    "ADM-TOK-5: only a held token reservation can be given back",
)
@icontract.snapshot(lambda self: self.num_reserved_tokens, name="reserved")
@icontract.ensure(
    lambda self, tokens, OLD: self.num_reserved_tokens == OLD.reserved - tokens,
    "ADM-TOK-5: the rollback removes exactly the token reservation",
)
@icontract.ensure(lambda self: _own_tokens_current(self), "ADM-TOK-5: counter 1 is rolled back")
@original(tracker_module.RequestTracker)
def release_token_reservation() -> None: ...


@icontract.invariant(
    lambda self: (
        self.num_reserved >= 0
        and self.get_num_queued_tokens() >= 0
        and self.num_reserved_tokens >= 0
    ),
    "ADM-TRK-7, ADM-TOK-5: counts are never negative",
)
@icontract.invariant(
    lambda self: not config.deep_checks() or consistent(self),
    "ADM-TRK-6: the cached counts equal the tracked requests",
)
@original(tracker_module)
class RequestTracker: ...  # the real class, given its invariants in place (after the methods')
