"""The bounds a recorded admission trace must respect, and what they assume.

`trace_bound` is the bound of each mode's in-flight measure and
`trace_token_bound` the bound of the queued tokens, both taken from the
protocol models (`queueref.models.protocol`, `queueref.models.tokens`) that
the proofs establish.
"""

from __future__ import annotations

from typing import Final

from queueref.models.protocol import Protocol, TokenRule, parse_protocol
from queueref.models.protocol import bound as protocol_bound
from queueref.models.tokens import token_bound

#: The modes `check_admission_trace` knows (ORC-TR-10).
MODES: Final = tuple(protocol.value for protocol in Protocol)

#: The token rules `check_admission_trace` knows (ORC-TR-14).
TOKEN_RULES: Final = ("ge", "fits")


def trace_bound(
    mode: Protocol | str, num_servers: int, max_num_queued_reqs: int, max_n: int
) -> int:
    """ORC-TR-10: the bound of the mode's in-flight measure (ADM-BOUND-1, ADM-BOUND-2)."""
    return protocol_bound(parse_protocol(mode), num_servers, max_num_queued_reqs, max_n)


def trace_token_bound(
    mode: Protocol | str,
    rule: str,
    num_servers: int,
    max_num_queued_tokens: int,
    max_request_tokens: int,
) -> int:
    """ORC-TR-14: the bound of the queued tokens (OB-TOK-1, OB-TOK-2, OB-TOK-3).

    check-then-write: the N-server bound of the rule; write-then-check:
    Mt; `locked`: one server's bound (the checks are serialised); `local`: N
    times one server's bound (each checks its own tokens).
    """
    token_rule = TokenRule(rule)
    chosen = parse_protocol(mode)
    if chosen is Protocol.WRITE_THEN_CHECK:
        return token_bound(token_rule, True, num_servers, max_num_queued_tokens, max_request_tokens)
    one = token_bound(token_rule, False, 1, max_num_queued_tokens, max_request_tokens)
    if chosen is Protocol.LOCKED:
        return one
    if chosen is Protocol.LOCAL:
        return num_servers * one
    return token_bound(token_rule, False, num_servers, max_num_queued_tokens, max_request_tokens)
