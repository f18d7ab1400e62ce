"""Admission control of one API server: `AdmissionController`.

Models `AsyncLLM.check_admission` of `vllm/v1/engine/async_llm.py` (vLLM PR #54746);
the semantics are in `specs/admission.md`, the contracts in
`queueref.admission.contracts.controller`.

Deliberate divergences from vLLM:

* The check is also available step by step (`start_check`), so that models and
  tests can interleave other servers between two reads.
* write-then-check is queueref's addition: a hard global cap at the price of
  spurious rejections. The default check-then-write is vLLM 0.30.0's.
* Limits are validated here (vLLM 0.30.0: in `SchedulerConfig`).
* With shared stats the token limit is shared (`token_scope="shared"`: a second pass
  reads counter 1 of every slot); vLLM 0.30.0 compares the process's own
  `get_num_queued_tokens()`, `token_scope="local"`. The rule is vLLM 0.30.0's `>=`
  unless `token_rule="fits"`; write-then-check reserves the tokens too.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final, Literal

from queueref.admission import protocol
from queueref.admission.check import (
    AdmissionCheck,
    decide_requests,
    decide_tokens,
    give_back,
    reserve,
)
from queueref.admission.shared_stats import SharedAdmissionStats
from queueref.admission.tracker import RequestTracker, own_slot_count, own_slot_tokens

__all__ = ["MODES", "AdmissionController", "AdmissionMode", "TokenRuleName", "TokenScope"]

# Bound once: `Enum.MEMBER` costs about 100 ns on Python 3.11 (hot path).
_WRITE_THEN_CHECK: Final = protocol.Protocol.WRITE_THEN_CHECK

#: How `mode=` is spelled, and the protocol each spelling runs (ADM-CTL-1).
AdmissionMode = Literal["check-then-write", "write-then-check"]
MODES: Final[dict[str, protocol.Protocol]] = {
    p.value: p for p in (protocol.Protocol.CHECK_THEN_WRITE, _WRITE_THEN_CHECK)
}

#: Where the token check reads (ADM-TOK-2), and how `token_rule=` is spelled (ADM-TOK-3).
TokenScope = Literal["shared", "local"]
TokenRuleName = Literal["ge", "fits"]


def resolve_token_scope(
    token_scope: object, shared_stats: object, max_num_queued_tokens: object
) -> TokenScope:
    """The scope a controller's token check uses: `None` is `"shared"` with shared stats
    and a token limit, else `"local"`; `"shared"` needs shared stats."""
    if token_scope is None:
        shared = shared_stats is not None and max_num_queued_tokens is not None
        return "shared" if shared else "local"
    if token_scope == "shared" and shared_stats is None:
        raise ValueError("ADM-TOK-6: token_scope='shared' needs shared stats")
    if token_scope not in ("shared", "local"):
        raise ValueError(
            f"ADM-TOK-6: token_scope must be None, 'shared' or 'local', got {token_scope!r}"
        )
    return "shared" if token_scope == "shared" else "local"


class AdmissionController:
    """Per-server admission control: `check_admission(n)` admits or raises.

    check-then-write (vLLM 0.30.0's, the default) reads the count (the sum of the shared
    slots, or the local count) and admits iff `count + n <= max_num_queued_reqs`; the
    tracker registration then writes the own slot. write-then-check adds `n` to the own
    slot first and keeps it iff the sum read is `<= max_num_queued_reqs`.
    """

    def __init__(
        self,
        max_num_queued_reqs: int | None = None,
        max_num_queued_tokens: int | None = None,
        tracker: RequestTracker | None = None,
        shared_stats: SharedAdmissionStats | None = None,
        mode: AdmissionMode | protocol.Protocol = "check-then-write",
        token_rule: TokenRuleName | protocol.TokenRule = "ge",
        token_scope: TokenScope | None = None,
    ) -> None:
        if token_rule not in {rule.value for rule in protocol.TokenRule}:
            raise ValueError(f"ADM-TOK-3: token_rule must be 'ge' or 'fits', got {token_rule!r}")
        scope = resolve_token_scope(token_scope, shared_stats, max_num_queued_tokens)
        self._max_num_queued_reqs = max_num_queued_reqs
        self._max_num_queued_tokens = max_num_queued_tokens
        self._tracker = tracker if tracker is not None else RequestTracker(shared_stats)
        self._shared_stats = shared_stats
        self._protocol = MODES[mode]
        self._token_rule = protocol.TokenRule(token_rule)
        self._token_scope: TokenScope = scope
        if scope == "shared":
            # ADM-TOK-6: the shared check reads counter 1, so the own tracker must write it.
            self._tracker.share_tokens()
        # What every check writes and reads, fixed here (the hot path); the local token
        # scope keeps vLLM 0.30.0's per-process rule in every mode.
        write_first = self._protocol is _WRITE_THEN_CHECK
        self._reserves = write_first and max_num_queued_reqs is not None
        self._reserves_tokens = write_first and max_num_queued_tokens is not None
        self._reserves_tokens &= scope == "shared"
        slots = 1 if shared_stats is None else shared_stats.client_count
        self._num_request_reads = 0 if max_num_queued_reqs is None else slots
        token_slots = 1 if scope == "local" else slots
        self._num_token_reads = 0 if max_num_queued_tokens is None else token_slots
        # ADM-CTL-11: a whole pass at once; one C-level pass over a C-level buffer.
        self._read_requests: Callable[[], int] = partial(own_slot_count, self._tracker)
        self._read_tokens: Callable[[], int] = partial(own_slot_tokens, self._tracker)
        if shared_stats is not None:
            self._read_requests = shared_stats.pass_reader(shared_stats.REQUEST_COUNT)
            if scope == "shared":
                self._read_tokens = shared_stats.pass_reader(shared_stats.QUEUED_TOKENS)

    @property
    def max_num_queued_reqs(self) -> int | None:
        """The request cap (None: no cap)."""
        return self._max_num_queued_reqs

    @property
    def max_num_queued_tokens(self) -> int | None:
        """The per-server cap on queued prompt tokens (None: no cap)."""
        return self._max_num_queued_tokens

    @property
    def tracker(self) -> RequestTracker:
        """The server's request tracker (the local count, queued tokens, reservations)."""
        return self._tracker

    @property
    def shared_stats(self) -> SharedAdmissionStats | None:
        """The shared counters, or None: then the local count decides."""
        return self._shared_stats

    @property
    def mode(self) -> str:
        """`"check-then-write"` or `"write-then-check"`, whichever spelling built it."""
        return self._protocol.value

    @property
    def token_rule(self) -> protocol.TokenRule:
        """How check-then-write decides the token limit: `ge` (vLLM 0.30.0) or `fits`."""
        return self._token_rule

    @property
    def token_scope(self) -> TokenScope:
        """`"shared"`: the token check sums counter 1 of every slot; `"local"`: the own tokens."""
        return self._token_scope

    @property
    def reserves(self) -> bool:
        """Whether a check writes a reservation of `n` before reading (write-then-check)."""
        return self._reserves

    @property
    def reserves_tokens(self) -> bool:
        """Whether a check writes its tokens to counter 1 before reading (write-then-check,
        a token limit, the shared scope)."""
        return self._reserves_tokens

    @property  # last: below here `protocol` names this property, not the module
    def protocol(self) -> protocol.Protocol:
        """The protocol the request decision applies."""
        return self._protocol

    def read_request_slot(self, index: int) -> int:
        """Read `index` of the request pass: counter 0 of slot `index`, or the local count."""
        if self._shared_stats is None:
            return own_slot_count(self._tracker)
        return self._shared_stats.read_slot(index)

    def read_token_slot(self, index: int) -> int:
        """Read `index` of the token pass: counter 1 of slot `index`, or the own tokens."""
        if self._token_scope == "local" or self._shared_stats is None:
            # ADM-RISK-2: the local scope reads the own tokens, never counter 1.
            return own_slot_tokens(self._tracker)
        return self._shared_stats.read_tokens_slot(index)

    def read_queued_tokens(self) -> int:
        """The queued tokens the token check would read, in one pass (for gauges such as
        `/metrics`): counter 1 of every slot in the shared scope, else the own tokens."""
        return self._read_tokens()

    def start_check(self, n: int = 1, num_prompt_tokens: int = 1) -> AdmissionCheck:
        """Start a check of `n` samples of a `num_prompt_tokens` prompt, to read one slot at
        a time; it adds `n * num_prompt_tokens` tokens (vLLM 0.30.0: each child prefills)."""
        tokens = n * num_prompt_tokens
        reserve(self._tracker, n, tokens, self._reserves, self._reserves_tokens)
        return AdmissionCheck(
            self,
            n,
            self._num_request_reads,
            self._reserves,
            tokens,
            self._num_token_reads,
            self._reserves_tokens,
        )

    def check_admission(self, n: int = 1, num_prompt_tokens: int = 1) -> int | None:
        """Admit a request of `n` parallel samples (return the count read, None without a
        request limit) or raise `QueueOverflowError`, then `MaxQueuedTokensError`; a
        rejection changes no count. The steps of `start_check`, `read_next` until `done`
        and `decide`, each pass read at once. A write-then-check admission leaves its
        reservations in the own slot for the tracker registration (or `cancel_admission`)."""
        if type(n) is not int or type(num_prompt_tokens) is not int:
            return self._check_step_by_step(n, num_prompt_tokens)  # int subclasses, or refused
        if n < 1 or num_prompt_tokens < 0:
            return self._check_step_by_step(n, num_prompt_tokens)  # refused by its preconditions
        reserved, tokens_reserved = self._reserves, self._reserves_tokens
        tokens = n * num_prompt_tokens
        if reserved or tokens_reserved:
            reserve(self._tracker, n, tokens, reserved, tokens_reserved)
        try:
            view = limit = self._max_num_queued_reqs
            if limit is not None:
                view = self._read_requests()
                decide_requests(self._protocol, view, n, limit)
            limit = self._max_num_queued_tokens
            if limit is not None:
                decide_tokens(self._token_rule, self._read_tokens(), tokens, limit, tokens_reserved)
        except BaseException:
            give_back(self._tracker, n, tokens, reserved, tokens_reserved)
            raise
        return view

    def _check_step_by_step(self, n: int, num_prompt_tokens: int) -> int | None:
        """The check as `start_check`, `read_next` until `done`, `decide`."""  # ADM-CTL-7
        check = self.start_check(n, num_prompt_tokens)
        while not check.done:
            check.read_next()
        return check.decide()

    def cancel_admission(self, n: int = 1, num_prompt_tokens: int = 1) -> None:
        """Give back an admission that will not be registered: the reservations in
        write-then-check; in check-then-write an admission wrote nothing."""
        tokens = n * num_prompt_tokens
        give_back(self._tracker, n, tokens, self._reserves, self._reserves_tokens)
