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
* With both limits, a check reads its own slot in the same step as what follows that
  read (the next read, or the decision): the own slot can only go down in between
  (`joint_successors` says why that keeps the worst counts; OB-TOK-6).

Each state keeps, per server, the sorted tokens of its prefilling requests exactly (as the
plain encoding does): a prefill_done removes one request's tokens, never part of them.
No server symmetry is used: a check reads the slots in index order, so swapping two
servers changes what a check in progress (or a later one) reads before what.

`tests/verify/test_token_model.py` compares the worst cases with the plain encoding on every
instance it finishes quickly, and shows an unsound reduction caught.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

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


def joint_can_start(cap: int, limit: int) -> bool:
    """Whether a check can admit anything at all (else it is never started)."""
    ge = protocol.TokenRule.GE
    return protocol.admits_check_then_write(0, 1, cap) and protocol.admits_tokens(ge, 0, 1, limit)


def joint_reads(
    server: JointServer, own: int, num: int, can_start: bool
) -> tuple[tuple[tuple[int, int], ...], bool]:
    """The (slot, counter) pairs server `own`'s check reads in its next step, in order, and
    whether it decides in the same step.

    Its own slot is read in the same step as what comes after it: the next read, or after
    the last read of the token pass the decision (`joint_successors` says why).
    """
    check = server[2]
    if check is None and not can_start:
        return (), False
    read = 0 if check is None else check[0]  # an idle server starts and reads slot 0
    out: list[tuple[int, int]] = []
    while read < 2 * num:
        out.append((read % num, read // num))
        if read % num != own:
            break
        read += 1
    return tuple(out), read == 2 * num


def joint_counter(server: JointServer, counter: int) -> int:
    """What the server's slot holds: counter 0 its unfinished requests, 1 its queued tokens."""
    decoding, prefilling, _ = server
    return decoding + len(prefilling) if counter == 0 else sum(prefilling)


def _admissions(server: JointServer, prompt: int) -> list[JointServer]:
    """A decided check (2N, room, 0): admit n <= room of any prompt."""
    decoding, prefilling, check = server
    assert check is not None
    return [(decoding, tuple(sorted(prefilling + (tokens,) * n)), None)
            for n in range(1, check[1] + 1) for tokens in range(1, prompt + 1)]  # fmt: skip


def joint_own_moves(server: JointServer, num: int, prompt: int) -> list[JointServer]:
    """The moves that read no slot: a prefill or a finish done, a decided check's admissions."""
    decoding, prefilling, check = server
    out = [(decoding + 1, rest, check) for rest in _drop_one(prefilling)]  # prefill done
    if decoding > 0:  # one decoding child finishes
        out.append((decoding - 1, prefilling, check))
    if check is not None and check[0] == 2 * num:  # decided
        out += _admissions(server, prompt)
    return out


def _read_one(
    server: JointServer, value: int, num: int, cap: int, weight: int, limit: int
) -> list[JointServer]:
    """One read of `value` by the server's check (an idle server starts with it)."""
    decoding, prefilling, check = server
    read, room_r, view = (0, 0, 0) if check is None else check
    view = protocol.accumulate(view, value)
    if read < num:  # counter 0 of slot `read`
        if not protocol.admits_check_then_write(view, 1, cap):
            return [(decoding, prefilling, None)]  # no n fits any more
        if read + 1 < num:
            return [(decoding, prefilling, (read + 1, 0, view))]
        fits = max(n for n in range(1, weight + 1)
                   if protocol.admits_check_then_write(view, n, cap))  # fmt: skip
        out: list[JointServer] = [(decoding, prefilling, (num, fits, 0))]
        if fits < weight:  # n = room + 1: the request limit rejects
            out.append((decoding, prefilling, None))
        return out
    # counter 1 of slot `read - N`
    if not protocol.admits_tokens(protocol.TokenRule.GE, view, 1, limit):
        return [(decoding, prefilling, None)]  # ge: views only grow
    return [(decoding, prefilling, (read + 1, room_r, 0 if read + 1 == 2 * num else view))]


def joint_read_moves(
    server: JointServer, values: Sequence[int], decide: bool, num: int, cap: int, weight: int,
    limit: int, prompt: int,
) -> list[JointServer]:  # fmt: skip
    """The check's next step: read `values` (the counters `joint_reads` names) in order,
    then, with `decide` (the last of them was its own slot), admit in the same step."""
    found = _read_one(server, values[0], num, cap, weight, limit)
    for value in values[1:]:  # a check stopped by a read reads no more
        found = [after for before in found for after in
                 (_read_one(before, value, num, cap, weight, limit)
                  if before[2] is not None else [before])]  # fmt: skip
    if not decide:
        return found
    out: list[JointServer] = []
    for after in found:
        out += _admissions(after, prompt) if after[2] is not None else [after]
    return out


def joint_successors(
    state: tuple[JointServer, ...], cap: int, weight: int, limit: int, prompt: int
) -> list[tuple[JointServer, ...]]:
    """The compact moves with both limits: n and the prompt chosen at the end."""
    # OB-TOK-5 (for OB-TOK-4): room of the request pass kept, early reject in each pass.
    # OB-TOK-6: a check reads its own slot in the same step as what comes after it. Only
    # the server itself adds to its slot, and it does not while its own check runs: in
    # between, the slot can only go down (a finish, a prefill done). Reading it later
    # reads no more, so the views are no larger and every admission the check could make
    # it still can, with every counter the same at every step; a check that ends without
    # admitting changes nothing anyone reads (the run without it reaches the same counts).
    # The step pairs are runs of the plain moves, so the worst counts are the same.
    # Each server's moves are its own (`joint_own_moves`) and its reads
    # (`joint_read_moves`): `queueref.verify.packed` searches the same moves packed.
    num = len(state)
    can_start = joint_can_start(cap, limit)
    out = []
    for p, server in enumerate(state):
        moves = joint_own_moves(server, num, prompt)
        where, decide = joint_reads(server, p, num, can_start)
        if where:
            values = [joint_counter(state[slot], counter) for slot, counter in where]
            moves += joint_read_moves(server, values, decide, num, cap, weight, limit, prompt)
        out += [state[:p] + (new,) + state[p + 1 :] for new in moves]
    return out
