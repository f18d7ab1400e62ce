"""The token limit shared across API servers: exhaustive search of its bounds.

vLLM 0.30.0's `AsyncLLM.check_admission` rejects with `MaxQueuedTokensError`
when the server's own queued prompt tokens (the prompt lengths of its
requests still in prefill) are `>= max_num_queued_tokens`; the new request's
own tokens are not counted. queueref shares the count like the request
count: counter 1 of each server's slot holds its queued tokens, and a check
reads counter 1 of every slot, one read at a time, in index order.

Moves, per server (its check, registration and prefill events are its own):

* `start` a check of a request with `t` tokens (1 <= t <= P; `t` is what the
  admission adds to counter 1: n samples of a prompt of p tokens add n*p);
* `read` counter 1 of the next slot (`protocol.accumulate`);
* once every slot is read, decide by the rule and, if admitted, add `t` to
  the own counter 1 in the same step (check-then-write), or
* write-then-check: reserve `t` in the own counter first, read every slot
  (own reservation included), keep iff the view is `<= Mt`, else give it back;
* `prefill_done` of one admitted request of any server, at any time: its
  tokens leave the count (the request itself stays unfinished).

Rules (`Rule`):

* `ge` (upstream's): admit iff `view < Mt`.
* `fits` (queueref's opt-in): admit iff `view + t <= Mt`.

Bounds (each checked here for the stated bounds, OB-TOK-1..3):

* `ge`, check-then-write: `Mt - 1 + N*P` for `Mt >= 1` (0 for `Mt = 0`): a
  check that saw `Mt - 1` still admits a full prompt, and each other server
  can straddle one admission.
* `fits`, check-then-write: `Mt + (N-1)*min(Mt, P)` -- OB-BOUND-1 with the
  token count for the request count.
* write-then-check (with `fits`): the admitted tokens never exceed `Mt`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queueref.admission import protocol
from queueref.validators import is_int_at_least
from queueref.verify import packed, token_compact
from queueref.verify.search import reachable

#: The one token decision lives in `protocol` (the controller decides with it too).
Rule = protocol.TokenRule
admits_tokens = protocol.admits_tokens

#: The encodings searched: `compact` (`queueref.verify.token_compact`, the default) and
#: `plain`, the moves below, one state per choice of `t` and per partial view: the
#: reference the compact one is compared with.
ENCODINGS: tuple[str, ...] = ("compact", "plain")


def _check_encoding(encoding: str, requirement: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(
            f"{requirement}: unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}"
        )


def token_bound(rule: Rule, write_then_check: bool, servers: int, limit: int, prompt: int) -> int:
    """The exact worst global queued-token count (OB-TOK-1, OB-TOK-2; OB-TOK-3: admitted)."""
    if write_then_check:
        return limit
    if rule is Rule.GE:
        return 0 if limit == 0 else limit - 1 + servers * prompt
    return protocol.overshoot_bound(servers, limit, prompt)  # OB-BOUND-1 for tokens


# Per server: (sorted tokens of its admitted requests still prefilling, check or None).
# A check: (t, next slot, view, reserved?).
_Check = tuple[int, int, int, bool] | None
_Server = tuple[tuple[int, ...], _Check]


@dataclass(frozen=True)
class TokenRow:
    """One exhaustive search of the token protocol."""

    servers: int
    limit: int
    prompt: int
    rule: str
    protocol: str
    worst_tokens: int  # max over reachable states of the admitted queued tokens
    bound: int
    states: int

    @property
    def holds(self) -> bool:
        return self.worst_tokens <= self.bound


def _queued(server: _Server) -> int:
    """What the server's counter 1 holds: its prefilling tokens plus a held reservation."""
    prefilling, check = server
    return sum(prefilling) + (check[0] if check is not None and check[3] else 0)


def _successors(
    state: tuple[_Server, ...], limit: int, prompt: int, rule: Rule, wtc: bool
) -> list[tuple[_Server, ...]]:
    num = len(state)
    out = []

    def put(p: int, server: _Server) -> None:
        out.append(state[:p] + (server,) + state[p + 1 :])

    for p, (prefilling, check) in enumerate(state):
        for i, tokens in enumerate(prefilling):  # prefill of one request is done
            if i == 0 or prefilling[i - 1] != tokens:
                put(p, (prefilling[:i] + prefilling[i + 1 :], check))
        if check is None:
            for tokens in range(1, prompt + 1):
                put(p, (prefilling, (tokens, 0, 0, wtc)))  # wtc reserves at the start
            continue
        tokens, slot, view, reserved = check
        if slot < num:
            value = _queued(state[slot])
            put(p, (prefilling, (tokens, slot + 1, protocol.accumulate(view, value), reserved)))
        elif wtc:
            keep = protocol.keeps_reservation(view, limit)
            put(p, (tuple(sorted(prefilling + (tokens,))) if keep else prefilling, None))
        elif admits_tokens(rule, view, tokens, limit):
            put(p, (tuple(sorted(prefilling + (tokens,))), None))
        else:
            put(p, (prefilling, None))
    return out


def explore_tokens(
    servers: int,
    limit: int,
    prompt: int,
    rule: Rule | str = Rule.GE,
    protocol_name: str = protocol.Protocol.CHECK_THEN_WRITE.value,
    max_states: int = 5_000_000,
    encoding: str = "compact",
) -> TokenRow:
    """Every reachable state of N servers sharing a token limit `Mt`; the worst queued tokens.

    `states` counts the states of the chosen encoding (`ENCODINGS`); the worst is the same.

    :raises ValueError: a bound out of range, an unknown rule, protocol or encoding, or
        more than `max_states` states
    """
    for name, value, low in (("servers", servers, 1), ("limit", limit, 0), ("prompt", prompt, 1)):
        if not is_int_at_least(value, low):
            raise ValueError(f"OB-TOK-1: {name} must be an int >= {low}, got {value!r}")
    _check_encoding(encoding, "OB-TOK-1")  # OB-TOK-5: either encoding, the same worst
    rule = Rule(rule)
    wtc = protocol.Protocol(protocol_name) is protocol.Protocol.WRITE_THEN_CHECK
    empty: _Server = ((), None)
    start: tuple[Any, ...] = (empty,) * servers  # the shape of the encoding's states
    worst = states = 0
    too_many = (
        f"OB-TOK-1: more than {max_states} states ({encoding} encoding, N={servers}, "
        f"Mt={limit}, P={prompt}); lower the bounds or raise the state limit"
    )
    moves: Callable[[Any], list[Any]]
    if encoding == "plain":
        moves = functools.partial(_successors, limit=limit, prompt=prompt, rule=rule, wtc=wtc)
    elif wtc:
        moves = functools.partial(token_compact.wtc_successors, limit=limit, prompt=prompt)
    else:
        moves = functools.partial(
            token_compact.ctw_successors, limit=limit, prompt=prompt, rule=rule
        )
    for state in reachable(start, moves, max_states=max_states, too_many=too_many):
        states += 1
        worst = max(worst, sum(sum(prefilling) for prefilling, _ in state))
    bound = token_bound(rule, wtc, servers, limit, prompt)
    name = protocol.Protocol(protocol_name).value
    return TokenRow(servers, limit, prompt, rule.value, name, worst, bound, states)


# Joint limits: per server (decoding units, sorted prefilling unit tokens, check or None);
# a check: (n, p, next read, request view, token view); reads 0..N-1 are counter 0 of
# each slot, N..2N-1 counter 1.
_JointCheck = tuple[int, int, int, int, int] | None
_JointServer = tuple[int, tuple[int, ...], _JointCheck]


@dataclass(frozen=True)
class JointRow:
    """One exhaustive search with both limits set: the worst of each count."""

    servers: int
    cap: int
    weight: int
    limit: int
    prompt: int
    worst_requests: int
    worst_tokens: int
    request_bound: int  # OB-BOUND-1: M + (N-1)*min(M, W)
    token_bound: int  # OB-TOK-1 with P' = W*P, the most tokens one admission adds
    states: int

    @property
    def holds(self) -> bool:
        return self.worst_requests <= self.request_bound and self.worst_tokens <= self.token_bound


def _joint_successors(
    state: tuple[_JointServer, ...], cap: int, weight: int, limit: int, prompt: int
) -> list[tuple[_JointServer, ...]]:
    num = len(state)
    out = []

    def put(p: int, server: _JointServer) -> None:
        out.append(state[:p] + (server,) + state[p + 1 :])

    for p, (decoding, prefilling, check) in enumerate(state):
        for i, tokens in enumerate(prefilling):  # prefill of one child done
            if i == 0 or prefilling[i - 1] != tokens:
                put(p, (decoding + 1, prefilling[:i] + prefilling[i + 1 :], check))
        if decoding > 0:  # one decoding child finishes
            put(p, (decoding - 1, prefilling, check))
        if check is None:
            for n in range(1, weight + 1):
                for tokens in range(1, prompt + 1):
                    put(p, (decoding, prefilling, (n, tokens, 0, 0, 0)))
            continue
        n, tokens, read, view_r, view_t = check
        if read < num:  # counter 0 of slot `read`: its unfinished requests
            other = state[read]
            value = other[0] + len(other[1])
            view_r = protocol.accumulate(view_r, value)
            if read == num - 1 and not protocol.admits_check_then_write(view_r, n, cap):
                put(p, (decoding, prefilling, None))  # the request limit rejects first
                continue
            put(p, (decoding, prefilling, (n, tokens, read + 1, view_r, view_t)))
        elif read < 2 * num:  # counter 1 of slot `read - N`: its queued tokens
            view_t = protocol.accumulate(view_t, sum(state[read - num][1]))
            put(p, (decoding, prefilling, (n, tokens, read + 1, view_r, view_t)))
        elif admits_tokens(Rule.GE, view_t, n * tokens, limit):
            put(p, (decoding, tuple(sorted(prefilling + (tokens,) * n)), None))
        else:
            put(p, (decoding, prefilling, None))
    return out


def joint_server_model(
    servers: int, cap: int, weight: int, limit: int, prompt: int
) -> packed.ServerModel[token_compact.JointServer]:
    """The compact moves with both limits, per server: what `packed.search_packed` searches."""
    can_start = token_compact.joint_can_start(cap, limit)
    return packed.ServerModel(
        servers=servers,
        start=(0, (), None),
        own_moves=lambda own, server: token_compact.joint_own_moves(server, servers, prompt),
        reads=lambda own, server: token_compact.joint_reads(server, own, servers, can_start)[0],
        counter=token_compact.joint_counter,
        read_moves=lambda own, server, values: token_compact.joint_read_moves(
            server,
            values,
            token_compact.joint_reads(server, own, servers, can_start)[1],
            servers,
            cap,
            weight,
            limit,
            prompt,
        ),  # fmt: skip
        scores=(lambda server: server[0] + len(server[1]), lambda server: sum(server[1])),
    )


def explore_joint(
    servers: int,
    cap: int,
    weight: int,
    limit: int,
    prompt: int,
    max_states: int = 5_000_000,
    encoding: str = "compact",
) -> JointRow:
    """Both limits set (upstream's order and `ge` rule): the worst request and token counts.

    The check reads counter 0 of every slot, decides the request limit, then reads
    counter 1 of every slot and decides the token limit: two passes at different moments.

    :raises ValueError: a bound out of range, an unknown encoding, or more than
        `max_states` states
    """
    for name, value, low in (
        ("servers", servers, 1),
        ("cap", cap, 0),
        ("weight", weight, 1),
        ("limit", limit, 0),
        ("prompt", prompt, 1),
    ):
        if not is_int_at_least(value, low):
            raise ValueError(f"OB-TOK-4: {name} must be an int >= {low}, got {value!r}")
    _check_encoding(encoding, "OB-TOK-4")  # OB-TOK-5: either encoding, the same worst
    empty: _JointServer = (0, (), None)
    start: tuple[Any, ...] = (empty,) * servers  # the shape of the encoding's states
    worst_requests = worst_tokens = states = 0
    too_many = (
        f"OB-TOK-4: more than {max_states} states ({encoding} encoding, N={servers}, M={cap}, "
        f"W={weight}, Mt={limit}, P={prompt}); lower the bounds or raise the state limit"
    )
    if encoding == "compact":  # the compact moves, searched packed (`queueref.verify.packed`)
        states, (worst_requests, worst_tokens) = packed.search_packed(
            joint_server_model(servers, cap, weight, limit, prompt),
            max_states=max_states,
            too_many=too_many,
        )
    else:
        moves = functools.partial(
            _joint_successors, cap=cap, weight=weight, limit=limit, prompt=prompt
        )
        for state in reachable(start, moves, max_states=max_states, too_many=too_many):
            states += 1
            worst_requests = max(worst_requests, sum(d + len(pre) for d, pre, _ in state))
            worst_tokens = max(worst_tokens, sum(sum(pre) for _, pre, _ in state))
    request_bound = protocol.overshoot_bound(servers, cap, weight)
    token_bound_ = token_bound(Rule.GE, False, servers, limit, weight * prompt)
    return JointRow(
        servers, cap, weight, limit, prompt, worst_requests, worst_tokens,
        request_bound, token_bound_, states,
    )  # fmt: skip
