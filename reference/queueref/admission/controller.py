"""Admission control of one API server: `AdmissionController`.

Models `AsyncLLM.check_admission` of `vllm/v1/engine/async_llm.py` (vLLM
PR #54746). The semantics are stated in `specs/admission.md`. The shared
counters are in `queueref.admission.shared_stats`, the step-wise check in
`queueref.admission.check`, the errors in `queueref.errors`, the argument
checks in `queueref.validators`; the contracts, with the postconditions of an
admission, in `queueref.admission.contracts.controller`.

Deliberate divergences from vLLM:

* A check reads the slots strictly one `__getitem__` per slot, in index order,
  through `queueref.admission.protocol.Check`, and is available step by step
  (`AdmissionController.start_check`) so that models and tests can interleave
  other servers between two reads. Over a C-level counter buffer
  `check_admission` makes the same reads in one C-level pass.
* write-then-check (`mode="write-then-check"`) is
  queueref's addition: a hard global cap at the price of spurious
  rejections. The default check-then-write is vLLM 0.30.0's.
* Limits are validated at construction (vLLM 0.30.0 validates them in
  `SchedulerConfig`): negative or non-integer limits are a `ValueError`.
* The token limit is shared when there are shared stats (`token_scope`,
  default `"shared"` then): a second pass reads counter 1 of every slot.
  vLLM 0.30.0 compares the process's own `get_num_queued_tokens()`; that is
  `token_scope="local"`. The rule is vLLM 0.30.0's `>=` unless
  `token_rule="fits"`, and write-then-check reserves the tokens too.
"""

from __future__ import annotations

from typing import Final, Literal

from queueref.admission import protocol
from queueref.admission.check import AdmissionCheck
from queueref.admission.shared_stats import SharedAdmissionStats, _checked_counts
from queueref.admission.tracker import RequestTracker, own_token_view
from queueref.errors import MaxQueuedTokensError, QueueOverflowError
from queueref.validators import is_int_at_least

__all__ = [
    "MODES",
    "TOKEN_SCOPES",
    "AdmissionController",
    "AdmissionMode",
    "TokenRuleName",
    "TokenScope",
    "is_token_backlog_full",
]

# Members bound once: `Enum.MEMBER` costs about 100 ns on Python 3.11 (hot path).
_WRITE_THEN_CHECK: Final = protocol.Protocol.WRITE_THEN_CHECK
_REQUESTS: Final = SharedAdmissionStats.REQUEST_COUNT
_TOKENS: Final = SharedAdmissionStats.QUEUED_TOKENS

#: How `mode=` is spelled: the names of the two protocols a controller runs.
AdmissionMode = Literal["check-then-write", "write-then-check"]

#: The protocols an `AdmissionController` runs (locked and local are built around it).
CONTROLLER_PROTOCOLS: Final = (
    protocol.Protocol.CHECK_THEN_WRITE,
    protocol.Protocol.WRITE_THEN_CHECK,
)

#: Where the token check reads (ADM-TOK-2): counter 1 of every slot, or the own count.
TokenScope = Literal["shared", "local"]
TOKEN_SCOPES: Final = ("shared", "local")

#: How `token_rule=` may be spelled (ADM-TOK-3).
TokenRuleName = Literal["ge", "fits"]

#: Every accepted `mode=` and the protocol it runs (ADM-CTL-1).
MODES: Final[dict[str, protocol.Protocol]] = {p.value: p for p in CONTROLLER_PROTOCOLS}


def is_token_backlog_full(queued_tokens: int, limit: int | None) -> bool:
    """The token rule: reject iff a limit is set and `queued_tokens >= limit`."""
    return limit is not None and queued_tokens >= limit


def resolve_token_scope(
    token_scope: object, shared_stats: object, max_num_queued_tokens: object
) -> TokenScope:
    """The scope a controller's token check uses.

    `None` (the default) is `"shared"` when there are shared stats and a token
    limit, else `"local"`; `"shared"` needs shared stats; anything else is a
    `ValueError`.

    >>> resolve_token_scope(None, None, 100), resolve_token_scope("local", object(), 100)
    ('local', 'local')
    >>> resolve_token_scope(None, object(), 100), resolve_token_scope(None, object(), None)
    ('shared', 'local')
    """
    if token_scope is None:
        shared = shared_stats is not None and max_num_queued_tokens is not None
        return "shared" if shared else "local"
    if token_scope == "local":
        return "local"
    if token_scope == "shared":
        if shared_stats is None:
            raise ValueError("ADM-TOK-6: token_scope='shared' needs shared stats")
        return "shared"
    raise ValueError(
        f"ADM-TOK-6: token_scope must be None, 'shared' or 'local', got {token_scope!r}"
    )


class AdmissionController:
    """Per-server admission control: `check_admission(n)` admits or raises.

    `mode="check-then-write"` (default) is vLLM 0.30.0's protocol: read the count
    (the global sum of the shared slots, or the local unfinished count), admit
    iff `count + n <= max_num_queued_reqs`; the caller's tracker registration
    then writes the own slot. `mode="write-then-check"`: add `n` to
    the own slot first, read, keep the reservation iff the sum read is
    `<= max_num_queued_reqs`, else write it back and reject.
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
        # ADM-CTL-11: what every `check_admission` needs, fixed at construction.
        self._one_pass = shared_stats is not None and shared_stats.reads_in_one_pass
        if shared_stats is not None and self._one_pass:
            self._read_requests = shared_stats.pass_reader(_REQUESTS)
            self._read_tokens = shared_stats.pass_reader(_TOKENS)
        self._write_first_reqs = self.reserves
        self._write_first_tokens = self.reserves_tokens

    @property
    def max_num_queued_reqs(self) -> int | None:
        """The request cap (None: no cap)."""
        return self._max_num_queued_reqs

    @property
    def max_num_queued_tokens(self) -> int | None:
        """The per-server cap on queued prompt tokens (None: no cap)."""
        return self._max_num_queued_tokens

    @property
    def token_rule(self) -> protocol.TokenRule:
        """How check-then-write decides the token limit: `ge` (vLLM 0.30.0) or `fits`."""
        return self._token_rule

    @property
    def token_scope(self) -> TokenScope:
        """`"shared"`: the token check sums counter 1 of every slot; `"local"`: the own tokens."""
        return self._token_scope

    @property
    def reserves_tokens(self) -> bool:
        """Whether a check writes its tokens to counter 1 before reading.

        Only write-then-check with a token limit in the shared scope: the local
        scope keeps vLLM 0.30.0's per-process token rule in every mode.
        """
        return (
            self._protocol is _WRITE_THEN_CHECK
            and self._max_num_queued_tokens is not None
            and self._token_scope == "shared"
        )

    def read_queued_tokens(self) -> int:
        """The queued tokens the token check would read: one pass, not a snapshot.

        The sum of counter 1 of every slot in the shared scope, else the own
        queued tokens plus token reservations. For gauges such as `/metrics`.
        """
        if self._token_scope == "shared" and self._shared_stats is not None:
            return self._shared_stats.get_num_queued_tokens()
        return self._tracker.get_num_queued_tokens() + self._tracker.num_reserved_tokens

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
    def protocol(self) -> protocol.Protocol:
        """The protocol `decide` applies."""
        return self._protocol

    @property
    def reserves(self) -> bool:
        """Whether a check writes a reservation before reading."""
        return self._protocol is _WRITE_THEN_CHECK and self._max_num_queued_reqs is not None

    def start_check(self, n: int = 1, num_prompt_tokens: int = 1) -> AdmissionCheck:
        """Start a check of `n` samples of a prompt of `num_prompt_tokens` tokens.

        The request adds `n * num_prompt_tokens` queued tokens (vLLM 0.30.0: each
        child is prefilling with the prompt's length). write-then-check reserves
        first: `n` in counter 0 and, with a token limit, the tokens in counter 1.
        Bad input raises `ValueError` and writes nothing.
        """
        if self._max_num_queued_reqs is None:
            num_slots = 0  # no request limit: nothing to read (vLLM 0.30.0 reads nothing)
        elif self._shared_stats is None:
            num_slots = 1  # the local count
        else:
            num_slots = self._shared_stats.client_count
        if self._max_num_queued_tokens is None:
            num_token_slots = 0  # no token limit: nothing to read
        elif self._token_scope == "local" or self._shared_stats is None:
            num_token_slots = 1  # the own queued tokens
        else:
            num_token_slots = self._shared_stats.client_count
        tokens = n * num_prompt_tokens
        reserved = self.reserves
        if reserved:
            # ADM-CTL-9: the reservation is in the own slot before the first read.
            self._tracker.reserve(n)
        tokens_reserved = self.reserves_tokens
        if tokens_reserved:
            # ADM-TOK-5: the token reservation is in counter 1 before the first read.
            self._tracker.reserve_tokens(tokens)
        return AdmissionCheck(
            self, n, num_slots, reserved, tokens, num_token_slots, tokens_reserved
        )

    def check_admission(self, n: int = 1, num_prompt_tokens: int = 1) -> int | None:
        """Admit a request of `n` parallel samples or raise `AdmissionRejected`.

        Returns the count the check read (None when there is no request
        limit). Raises `QueueOverflowError` when the request limit would be
        exceeded, then `MaxQueuedTokensError` when the queued prompt tokens
        fail the token rule (by default `queued >= limit`, the
        request's own `n * num_prompt_tokens` not counted, as vLLM 0.30.0);
        a rejection changes no count. The reads are per slot, in index order:
        counter 0 of every slot, then counter 1 of every slot (shared scope).

        The cap is approximate in check-then-write: check and write are not atomic
        across servers. In write-then-check an admission leaves its
        reservations in the own slot; register the request with the tracker
        (which takes them over) or call `cancel_admission(n, num_prompt_tokens)`.

        Over a C-level counter buffer each pass is one C-level read
        of every slot; over any other buffer (or without shared stats) this is
        `start_check`, `read_next` until `done`, `decide`.
        """
        stats = self._shared_stats
        if (
            not self._one_pass
            or type(n) is not int
            or type(num_prompt_tokens) is not int
            or n < 1
            or num_prompt_tokens < 0
        ):
            return self._check_step_by_step(n, num_prompt_tokens)
        # ADM-CTL-11: from here on the reads and decisions of `start_check`, `read_next`
        # until `done` and `decide`, each pass one C-level read of every slot, without
        # the objects of the stepwise API; the request limit is decided before the
        # first token read. Written out flat because it is the hot path of every request.
        assert stats is not None  # made one-pass only with shared stats
        tracker = self._tracker
        tokens = n * num_prompt_tokens
        limit = self._max_num_queued_reqs
        token_limit = self._max_num_queued_tokens
        reserved, tokens_reserved = self._write_first_reqs, self._write_first_tokens
        if reserved:
            tracker.reserve(n)  # ADM-CTL-9: in the own slot before the first read
        if tokens_reserved:
            tracker.reserve_tokens(tokens)  # ADM-TOK-5: likewise in counter 1
        try:
            view = None
            if limit is not None:
                values = self._read_requests()  # type: ignore[misc]
                if min(values) < 0:
                    _checked_counts(values, _REQUESTS)  # raises
                view = protocol._read_all(0, values)
                if not protocol.admits(self._protocol, view, n, limit):
                    raise QueueOverflowError(view=view, n=n, limit=limit)
            if token_limit is not None:
                if self._token_scope == "shared":
                    values = self._read_tokens()  # type: ignore[misc]
                    if min(values) < 0:
                        _checked_counts(values, _TOKENS)  # raises
                    queued = protocol._read_all(0, values)
                else:
                    # ADM-RISK-2: the local scope reads the own tokens, never counter 1.
                    queued = own_token_view(tracker)
                if tokens_reserved:
                    admitted = protocol.keeps_reservation(queued, token_limit)
                else:
                    admitted = protocol.admits_tokens(self._token_rule, queued, tokens, token_limit)
                if not admitted:
                    raise MaxQueuedTokensError(queued_tokens=queued, limit=token_limit)
        except BaseException:
            if reserved:
                tracker.release_reservation(n)
            if tokens_reserved:
                tracker.release_token_reservation(tokens)
            raise
        return view

    def _check_step_by_step(self, n: int, num_prompt_tokens: int) -> int | None:
        """The check as `start_check`, `read_next` until `done`, `decide`."""  # ADM-CTL-7
        if not is_int_at_least(n, 1):
            raise ValueError(f"ADM-CTL-2: n must be an int >= 1, got {n!r}")
        check = self.start_check(n, num_prompt_tokens)
        while not check.done:
            check.read_next()
        view = check.decide()
        return view

    def cancel_admission(self, n: int = 1, num_prompt_tokens: int = 1) -> None:
        """Give back an admission that will not be registered.

        In write-then-check this writes the reservations back; in check-then-write an
        admission wrote nothing, so there is nothing to give back.
        """
        if self.reserves and n > self._tracker.num_reserved:
            raise ValueError(
                f"ADM-CTL-9: cannot give back {n} of {self._tracker.num_reserved} reserved requests"
            )
        tokens = n * num_prompt_tokens
        if self.reserves_tokens and tokens > self._tracker.num_reserved_tokens:
            raise ValueError(
                f"ADM-TOK-5: cannot give back {tokens} of "
                f"{self._tracker.num_reserved_tokens} reserved tokens"
            )
        if self.reserves:
            self._tracker.release_reservation(n)
        if self.reserves_tokens:
            self._tracker.release_token_reservation(tokens)
