"""Streaming input sessions and the token limit: queued tokens that grow with no check.

vLLM 0.30.0-0.33.0: the first chunk of a streaming input session is a new request and is
checked (`check_admission`: the token rule on the server's queued prompt tokens); every
later chunk is an `add_request` of the same id, which `_add_request` does not check, and
`OutputProcessor` applies it (`apply_streaming_update`): the prompt grows by the chunk,
`prompt_len` becomes the whole new length and the request is prefilling again. The queued
tokens (the `prompt_len` of every prefilling request) grow by the chunk while the session
was still prefilling, and by the whole prompt when its prefill had finished.

`StreamingTokens` models one server's sessions in the local scope (vLLM's): each session
is (prompt length, prefilling). Steps: `open` a session with a first chunk of
1 <= p <= P tokens (checked: `admits_tokens(rule, queued, p, Mt)`), `update` it with a
chunk of p tokens (vLLM: no check; the proposed check: the same token rule on the tokens
the update adds), `prefill` (its prefill ends), `close`. Prompt lengths are cut at
`limit`, so that the search ends: a worst count equal to the limit means "grows past any
bound this search can show".
"""

from __future__ import annotations

from dataclasses import dataclass

from queueref.admission.protocol import TokenRule, admits_tokens
from queueref.verify.search import reachable

#: One session: (prompt length, 1 while prefilling); (0, 0) is no session.
Session = tuple[int, int]
State = tuple[Session, ...]


@dataclass(frozen=True)
class StreamingWorst:
    """The worst queued tokens of one search, and the number of states."""

    worst_tokens: int
    states: int


def queued(state: State) -> int:
    """The server's queued prompt tokens: the prompt length of every prefilling session."""
    return sum(length for length, prefilling in state if prefilling)


def added_by_update(session: Session, chunk: int) -> int:
    """What a streaming update adds to the queued tokens: the chunk while the session
    is prefilling, else its whole new prompt (it is prefilling again)."""
    length, prefilling = session
    return chunk if prefilling else length + chunk


def successors(
    state: State, cap: int, prompt: int, rule: TokenRule, update_rule: TokenRule | None, limit: int
) -> list[State]:
    """Every state one step away (`update_rule=None`: vLLM's unchecked update)."""
    # ADM-TOK-7: vLLM's update with no check; ADM-TOK-8: the proposed check.
    out: list[State] = []
    now = queued(state)
    for i, (length, prefilling) in enumerate(state):

        def put(session: Session, i: int = i) -> None:
            out.append(state[:i] + (session,) + state[i + 1 :])

        if length == 0:
            for p in range(1, prompt + 1):
                if admits_tokens(rule, now, p, cap):
                    put((p, 1))
            continue
        for p in range(1, prompt + 1):
            grown = min(length + p, limit)
            adds = added_by_update((length, prefilling), p)
            if update_rule is None or admits_tokens(update_rule, now, adds, cap):
                put((grown, 1))
        if prefilling:
            put((length, 0))
        put((0, 0))
    return out


def worst_streaming_tokens(
    cap: int,
    prompt: int,
    *,
    sessions: int = 1,
    rule: TokenRule = TokenRule.GE,
    update_rule: TokenRule | None = None,
    limit: int = 20,
) -> StreamingWorst:
    """The most queued tokens one server reaches, prompt lengths cut at `limit`."""
    # ADM-TOK-7, ADM-TOK-8: the exhaustive search.
    if cap < 0 or prompt < 1 or sessions < 1 or limit < 1:
        raise ValueError("need cap >= 0, prompt >= 1, sessions >= 1, limit >= 1")
    start: State = ((0, 0),) * sessions
    worst, states = 0, 0
    for state in reachable(start, lambda s: successors(s, cap, prompt, rule, update_rule, limit)):
        states += 1
        worst = max(worst, queued(state))
    return StreamingWorst(worst, states)
