"""The compact encoding of the token models: the same worst cases in far fewer states.

`queueref.verify.tokens` keeps each check's `t` (the tokens it adds) from its start and
every partial view; the search of its "plain" encoding keeps each as its own state. This
module explores the same protocols with the ideas of `CompactCheckThenWrite`:

* check-then-write chooses `t` at the decision, not at the start: nobody reads `t`
  before the decision, so a run choosing it at the start is a run choosing it at the
  end, and back. A check that has read every slot keeps only `room`, the largest `t`
  that passes (every smaller one passes too), and can `decline` one more than `room`.
* Starting a check and reading slot 0 are one step: with `t` not chosen yet, a started
  check that has read nothing is indistinguishable from an idle server.
* A check stops (rejects) at the first read after which not even `t = 1` passes: views
  only grow, and the reads it skips change nothing anyone else reads. The views kept are
  therefore below Mt (check-then-write) or at most Mt + 1 (write-then-check, saturated:
  every view above Mt gives the reservation back alike).
* write-then-check chooses `t` at the start (the reservation is read by the others); a
  check whose view passed Mt skips its remaining reads (they change nothing) but keeps
  its reservation until its own give-back step, because the others can still read it.
* A check that can never admit (Mt = 0 under check-then-write) is never started.

Each state keeps, per server, the sorted tokens of its prefilling requests exactly (as the
plain encoding does): a prefill_done removes one request's tokens, never part of them.
No server symmetry is used: a check reads the slots in index order, so swapping two
servers changes what a check in progress (or a later one) reads before what.

`tests/verify/test_token_model.py` compares the worst cases with the plain encoding on every
instance it finishes quickly, and shows an unsound reduction caught.
"""

from __future__ import annotations

import functools

from queueref.admission import protocol

# Per server: (sorted tokens of its prefilling requests, check). A check-then-write
# check: (k, view) reading slot k < N, or (N, room) once every slot is read. A
# write-then-check check: (t, k, view): reserved t, reading slot k (k = N: decided).
_Ctw = tuple[int, int] | None
_Wtc = tuple[int, int, int] | None
CtwServer = tuple[tuple[int, ...], _Ctw]
WtcServer = tuple[tuple[int, ...], _Wtc]


def room(rule: protocol.TokenRule, view: int, limit: int, prompt: int) -> int:
    """The largest t <= P the rule admits at `view` (0: none); every smaller t passes too."""
    return max((t for t in range(1, prompt + 1) if protocol.admits_tokens(rule, view, t, limit)),
               default=0)  # fmt: skip


@functools.cache  # few distinct tuples, asked for every state
def _drop_one(prefilling: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The prefilling tuples after one request's prefill is done (one per distinct size)."""
    distinct = [i for i, t in enumerate(prefilling) if i == 0 or prefilling[i - 1] != t]
    return tuple(prefilling[:i] + prefilling[i + 1 :] for i in distinct)


def ctw_successors(
    state: tuple[CtwServer, ...], limit: int, prompt: int, rule: protocol.TokenRule
) -> list[tuple[CtwServer, ...]]:
    """The compact check-then-write moves."""
    # OB-TOK-5: t chosen at the decision, start merged with the first read, early reject.
    num = len(state)
    out = []
    can_start = room(rule, 0, limit, prompt) > 0

    def put(p: int, server: CtwServer) -> None:
        out.append(state[:p] + (server,) + state[p + 1 :])

    for p, (prefilling, check) in enumerate(state):
        for rest in _drop_one(prefilling):
            put(p, (rest, check))
        if check is None and not can_start:
            continue
        slot, view = (0, 0) if check is None else check
        if slot < num:  # read slot `slot` (an idle server starts and reads slot 0)
            view = protocol.accumulate(view, sum(state[slot][0]))
            fits = room(rule, view, limit, prompt)
            if not fits:
                put(p, (prefilling, None))  # rejected: views only grow
            else:
                put(p, (prefilling, (slot + 1, view) if slot + 1 < num else (num, fits)))
            continue
        for tokens in range(1, view + 1):  # `view` is the room here: admit t <= room
            put(p, (tuple(sorted(prefilling + (tokens,))), None))
        if view < prompt:  # t = room + 1 does not pass
            put(p, (prefilling, None))
    return out


def wtc_successors(
    state: tuple[WtcServer, ...], limit: int, prompt: int
) -> list[tuple[WtcServer, ...]]:
    """The compact write-then-check moves."""
    # OB-TOK-5: t chosen at the start (it is read), views saturated at Mt + 1.
    num = len(state)
    out = []

    def put(p: int, server: WtcServer) -> None:
        out.append(state[:p] + (server,) + state[p + 1 :])

    for p, (prefilling, check) in enumerate(state):
        for rest in _drop_one(prefilling):
            put(p, (rest, check))
        if check is None:
            for tokens in range(1, prompt + 1):  # reserve t in the own counter first
                put(p, (prefilling, (tokens, 0, 0)))
            continue
        tokens, slot, view = check
        if slot < num:
            other = state[slot]
            value = sum(other[0]) + (other[1][0] if other[1] is not None else 0)
            view = min(protocol.accumulate(view, value), limit + 1)  # saturated above Mt
            done = slot + 1 == num or not protocol.keeps_reservation(view, limit)
            put(p, (prefilling, (tokens, num if done else slot + 1, view)))
        elif protocol.keeps_reservation(view, limit):
            put(p, (tuple(sorted(prefilling + (tokens,))), None))
        else:
            put(p, (prefilling, None))  # give the reservation back
    return out


# Both limits: per server (decoding units, sorted prefilling unit tokens, check). A check:
# (k, request view, 0) reading counter 0 of slot k < N; (N + k, room, token view) reading
# counter 1 of slot k, `room` the largest n the request pass admits; (2N, room, 0) decided.
_Joint = tuple[int, int, int] | None
JointServer = tuple[int, tuple[int, ...], _Joint]


def joint_successors(
    state: tuple[JointServer, ...], cap: int, weight: int, limit: int, prompt: int
) -> list[tuple[JointServer, ...]]:
    """The compact moves with both limits: n and the prompt chosen at the end."""
    # OB-TOK-5 (for OB-TOK-4): room of the request pass kept, early reject in each pass.
    num = len(state)
    out = []
    ge = protocol.TokenRule.GE
    can_start = protocol.admits_check_then_write(0, 1, cap) and protocol.admits_tokens(
        ge, 0, 1, limit
    )

    def put(p: int, server: JointServer) -> None:
        out.append(state[:p] + (server,) + state[p + 1 :])

    for p, (decoding, prefilling, check) in enumerate(state):
        for rest in _drop_one(prefilling):  # prefill of one child done
            put(p, (decoding + 1, rest, check))
        if decoding > 0:  # one decoding child finishes
            put(p, (decoding - 1, prefilling, check))
        if check is None and not can_start:
            continue
        read, room_r, view = (0, 0, 0) if check is None else check
        if read < num:  # counter 0 of slot `read` (an idle server starts here)
            other = state[read]
            view = protocol.accumulate(view, other[0] + len(other[1]))
            if not protocol.admits_check_then_write(view, 1, cap):
                put(p, (decoding, prefilling, None))  # no n fits any more
            elif read + 1 < num:
                put(p, (decoding, prefilling, (read + 1, 0, view)))
            else:
                fits = max(n for n in range(1, weight + 1)
                           if protocol.admits_check_then_write(view, n, cap))  # fmt: skip
                put(p, (decoding, prefilling, (num, fits, 0)))
                if fits < weight:  # n = room + 1: the request limit rejects
                    put(p, (decoding, prefilling, None))
        elif read < 2 * num:  # counter 1 of slot `read - N`
            view = protocol.accumulate(view, sum(state[read - num][1]))
            if not protocol.admits_tokens(ge, view, 1, limit):
                put(p, (decoding, prefilling, None))  # ge: views only grow
            else:
                put(
                    p,
                    (decoding, prefilling, (read + 1, room_r, 0 if read + 1 == 2 * num else view)),
                )
        else:
            for n in range(1, room_r + 1):
                for tokens in range(1, prompt + 1):
                    put(p, (decoding, tuple(sorted(prefilling + (tokens,) * n)), None))
    return out
