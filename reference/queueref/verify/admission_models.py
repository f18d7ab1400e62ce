"""The cross-process admission protocols as transition systems, for the exhaustive search.

Models N API servers sharing `max_num_queued_reqs` (M) through one counter slot each, as
vLLM PR #54746 does (`SharedAdmissionStats`: each server writes only its own slot; a check
sums all slots one `__getitem__` at a time). The search (`queueref.verify.search`)
enumerates every interleaving of the servers' steps, breadth first, from the state where
every slot is 0, and reports the largest global count reached, the number of states and a
shortest interleaving that reaches it.

Steps (all written with the step functions of `queueref.admission.protocol`, the ones
`AdmissionController` uses):

* check-then-write (vLLM): `start` a check of weight n (1 <= n <= W); `read` the next slot
  (`accumulate`); once every slot is read, `admit` (write the own slot) -- the decision is
  `admits_check_then_write(view, n, M)`; a `finish` lowers a slot by one, at any time.
* write-then-check (queueref's addition): `start` writes the reservation n into the own
  slot first; `read` as above; then `keep` or `rollback` (`keeps_reservation(view, M)`);
  a `finish` ends one admitted request (never a reservation).

Sound reductions (each keeps exactly the set of reachable slot vectors):

* A check whose view already exceeds what can pass is rejected at that read
  (`reject`): views only grow, so the decision is known, and reading the remaining slots
  at once is one of the interleavings. In write-then-check the reservation stays until
  the separate `rollback` step, because others can still read it.
* A check that has read every slot forgets its view once the decision is known.
* A request of weight n > M is never admitted by check-then-write (the view is >= 0), so
  such checks are not started: they change nothing.
* Finishes are of one request at a time: finishing k at once is k finishes in a row.
* In the async-gap variant the concurrent checks of one server are interchangeable, so
  they are kept sorted (symmetry reduction).

The broken variants, which the same search refutes, are in
`queueref.verify.broken_models`.

`queueref.verify.search` names the models and the search both.

Deliberate divergence from vLLM: the explorer's check stops reading at the first read that
already rejects; the real check reads every slot first. The decision is the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from queueref.admission.protocol import (
    Protocol,
    accumulate,
    admits_check_then_write,
    keeps_reservation,
    overshoot_bound,
)

#: A state: a tuple of small ints (the slots first, then per-model fields).
State = tuple[int, ...]
#: A step as stored during the search: (action, server, arg, check index).
RawStep = tuple[str, int, int, int]

CHECK_THEN_WRITE = Protocol.CHECK_THEN_WRITE.value
WRITE_THEN_CHECK = Protocol.WRITE_THEN_CHECK.value
PROTOCOLS: tuple[str, ...] = (CHECK_THEN_WRITE, WRITE_THEN_CHECK)


# Here, not in `queueref.verify.search`: `CompactCheckThenWrite.search_packed` raises it too.
class StateLimitExceeded(RuntimeError):
    """A search reached its `max_states` limit."""


@dataclass(frozen=True)
class Step:
    """One step of one server, in a form a person (and `replay`) can read.

    `action` is one of start, read, reject, admit, decline, keep, rollback, finish, crash,
    reap. `arg` is the weight n for start (and, in the compact encoding, where the weight
    is chosen at the decision, for admit and decline), the slot read for read and reject,
    else 0.
    `check` tells apart the overlapping checks of one server (async-gap variant only): its
    position among that server's checks, which the search keeps sorted.
    """

    action: str
    server: int
    arg: int = 0
    check: int = 0

    def raw(self) -> RawStep:
        return (self.action, self.server, self.arg, self.check)

    def to_json(self) -> dict[str, int | str]:
        out: dict[str, int | str] = {"action": self.action, "server": self.server}
        if self.action == "start" or (self.action in ("admit", "decline") and self.arg):
            out["n"] = self.arg
        elif self.action in ("read", "reject"):
            out["slot"] = self.arg
        if self.check:
            out["check"] = self.check
        return out

    @staticmethod
    def from_json(data: dict[str, int | str]) -> Step:
        action = str(data["action"])
        arg = int(data.get("n", data.get("slot", 0)))
        return Step(action, int(data["server"]), arg, int(data.get("check", 0)))

    def describe(self) -> str:
        who = f"server {self.server}" + (f" (check {self.check})" if self.check else "")
        text = {
            "start": f"starts a check of n={self.arg}",
            "read": f"reads slot {self.arg}",
            "reject": f"reads slot {self.arg}: the view no longer fits, rejected",
            "admit": "admits and writes its slot"
            + (f" (the request's weight n={self.arg} is chosen here)" if self.arg else ""),
            "decline": f"rejects: a request of weight n={self.arg} does not fit the view",
            "keep": "keeps its reservation (admitted)",
            "rollback": "writes its reservation back (rejected)",
            "finish": "finishes one request",
            "crash": "crashes",
            "reap": "'s slot is reset by the server that detected the crash",
        }[self.action]
        return f"{who} {text}" if not text.startswith("'") else f"{who}{text}"


class Model:
    """A transition system over tuple states: what the search explores."""

    servers: int
    cap: int
    weight: int

    def initial(self) -> State:
        raise NotImplementedError

    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        raise NotImplementedError

    def total(self, state: State) -> int:
        """The count whose worst case is sought (the global unfinished count)."""
        return sum(state[: self.servers])

    def slots(self, state: State) -> tuple[int, ...]:
        """The values a reader would see in the slots."""
        return state[: self.servers]

    def step(self, state: State, step: Step) -> State:
        """Apply one step; `ValueError` if it is not enabled in `state`."""
        raw = step.raw()
        for label, nxt in self.successors(state):
            if label == raw:
                return nxt
        raise ValueError(f"step {step} is not enabled in state {state}")


def _reader_codes(
    servers: int, weights: Iterable[int], views: int
) -> tuple[dict[tuple[int, int, int], int], list[tuple[int, int, int]]]:
    """Number the reader states (n, k, v) from 1; 0 is an idle server."""
    enc: dict[tuple[int, int, int], int] = {}
    dec: list[tuple[int, int, int]] = [(0, 0, 0)]
    for n in weights:
        for k in range(servers + 1):
            for v in range(views):
                enc[(n, k, v)] = len(dec)
                dec.append((n, k, v))
    return enc, dec


class CheckThenWrite(Model):
    """OB-MODEL-1: vLLM 0.30.0's protocol, fine-grained: state = slots + one reader code per server.

    Reads use `protocol.accumulate`, decisions `protocol.admits_check_then_write`, like
    `AdmissionController` and the proof kernels (OB-ONE-1).
    """

    def __init__(self, servers: int, cap: int, weight: int, *, finishes: bool = True) -> None:
        self.servers, self.cap, self.weight = servers, cap, weight
        self.finishes = finishes
        # OB-TABLE-1: weights above M never pass (view >= 0), so only 1..min(W, M) start.
        self.weights = range(1, min(weight, cap) + 1)
        self.enc, self.dec = _reader_codes(servers, self.weights, cap + 1)

    def initial(self) -> State:
        return (0,) * (2 * self.servers)

    def after_read(self, n: int, k: int, view: int) -> int:
        """The reader code after a read that made the view `view` (0: rejected)."""
        if not admits_check_then_write(view, n, self.cap):
            return 0
        return self.enc[(n, k + 1, view if k + 1 < self.servers else 0)]

    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        N = self.servers
        out: list[tuple[RawStep, State]] = []
        for p in range(N):
            code = state[N + p]
            if code == 0:
                for n in self.weights:
                    out.append((("start", p, n, 0), set_slot(state, N + p, self.enc[(n, 0, 0)])))
            else:
                n, k, v = self.dec[code]
                if k < N:
                    new = self.after_read(n, k, accumulate(v, state[k]))
                    out.append(
                        ((("read" if new else "reject"), p, k, 0), set_slot(state, N + p, new))
                    )
                else:
                    # Every slot read and the view fits: admit, write the own slot.
                    out.append((("admit", p, 0, 0), _set2(state, p, state[p] + n, N + p, 0)))
            if self.finishes and state[p] > 0:
                out.append((("finish", p, 0, 0), set_slot(state, p, state[p] - 1)))
        return out

    def spurious_rejection(self, state: State) -> int:
        """The largest free capacity M - A at a rejection in `state` of a request that
        fits (A + n <= M, A the admitted total), or -1 when there is none."""
        N = self.servers
        admitted = sum(state[:N])
        best = -1
        for p in range(N):
            code = state[N + p]
            if code:
                n, k, v = self.dec[code]
                if k < N and not self.after_read(n, k, accumulate(v, state[k])):
                    if admitted + n <= self.cap:
                        best = max(best, self.cap - admitted)
        return best


class CompactCheckThenWrite(Model):
    """OB-MODEL-1: check-then-write in a smaller encoding with the same reachable slots.

    A request's weight only matters at the decision, so it is chosen there, not at
    `start`: a check in progress is (k, v) -- the next slot and the view so far -- and a
    check that has read every slot keeps only `room`, the largest weight that still fits
    (views saturate: every view that admits the same weights is one state). The steps:

    * `start` a check (when some weight can pass at all, i.e. min(W, M) >= 1);
    * `read` slot k: `accumulate`; the check stops at once (`reject`) when not even a
      request of weight 1 fits -- `admits_check_then_write(view, 1, M)` -- as views only
      grow (the reference encoding stops at the first read over its own n);
    * once every slot is read: `admit` a request of any weight n <= room (write the own
      slot), or `decline` one that does not fit (n = room + 1 <= min(W, M));
    * `finish` one request, as in `CheckThenWrite`.

    Every run of `CheckThenWrite` is a run here with the same slot values at every step
    (choose at the decision the n chosen at start; an early reject of the reference is a
    few more reads then a decline), and the other way round, so the reachable slot
    vectors and the worst total are the same; at W = 1 the two transition systems are
    the same up to renaming, state for state. `tests/verify/test_ob_explorer.py` checks all of
    it on every small instance.

    The moves are tables computed once from the protocol's step functions
    (`accumulate`, `admits_check_then_write`) for every (reader code, slot value), so the
    search never decides anything the step functions did not. `search_packed` explores
    with each state packed into one integer.
    """

    def __init__(self, servers: int, cap: int, weight: int) -> None:
        self.servers, self.cap, self.weight = servers, cap, weight
        self.most = min(weight, cap)  # OB-TABLE-1: heavier requests never pass
        # A slot never holds more than the worst total (OB-BOUND-1); `search_packed`
        # raises if one would, so the packing cannot wrap silently.
        self.max_slot = overshoot_bound(servers, cap, weight)
        N, M = servers, cap
        # Reader codes: 0 idle; 1 + k*M + v reading slot k with view v < M; then
        # `done_base + room - 1` for a check that has read every slot.
        self.done_base = 1 + N * M
        self.codes = self.done_base + self.most
        self.slot_of = [0] * self.codes  # the slot a reading code reads next
        self.after_read: list[list[int]] = [[] for _ in range(self.codes)]
        for k in range(N):
            for v in range(M):
                code = 1 + k * M + v
                self.slot_of[code] = k
                self.after_read[code] = [
                    self._next_code(k, accumulate(v, x)) for x in range(self.max_slot + 1)
                ]

    def _next_code(self, k: int, view: int) -> int:
        if not admits_check_then_write(view, 1, self.cap):
            return 0  # rejected: no weight fits any more
        if k + 1 < self.servers:
            return 1 + (k + 1) * self.cap + view
        room = max(n for n in range(1, self.most + 1) if admits_check_then_write(view, n, self.cap))
        return self.done_base + room - 1

    def room(self, code: int) -> int:
        return code - self.done_base + 1

    def initial(self) -> State:
        return (0,) * (2 * self.servers)

    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        N = self.servers
        out: list[tuple[RawStep, State]] = []
        for p in range(N):
            code = state[N + p]
            if code == 0:
                if self.most:
                    out.append((("start", p, 0, 0), set_slot(state, N + p, 1)))
            elif code < self.done_base:
                k = self.slot_of[code]
                new = self.after_read[code][min(state[k], self.max_slot)]
                out.append(((("read" if new else "reject"), p, k, 0), set_slot(state, N + p, new)))
            else:
                room = self.room(code)
                for n in range(1, room + 1):
                    out.append((("admit", p, n, 0), _set2(state, p, state[p] + n, N + p, 0)))
                if room < self.most:
                    out.append((("decline", p, room + 1, 0), set_slot(state, N + p, 0)))
            if state[p] > 0:
                out.append((("finish", p, 0, 0), set_slot(state, p, state[p] - 1)))
        return out

    def search_packed(self, max_states: int | None = None) -> tuple[int, int, State]:
        """Breadth-first search over packed states: (states, worst total, a worst state).

        A state is one int: slot p in bits [p*B, (p+1)*B), reader code p above them in
        C bits each. The moves are the same tables `successors` uses.
        """
        N, most, done_base = self.servers, self.most, self.done_base
        B = max(1, self.max_slot.bit_length())
        C = max(1, (self.codes - 1).bit_length())
        slot_shift = [p * B for p in range(N)]
        code_shift = [N * B + p * C for p in range(N)]
        slot_mask, code_mask = (1 << B) - 1, (1 << C) - 1
        after_read, slot_of = self.after_read, self.slot_of
        servers = range(N)
        seen = {0}
        frontier = [0]
        best_total, best_state = 0, 0
        while frontier:
            nxt: list[int] = []
            push = nxt.append
            for s in frontier:
                total = -1
                for p in servers:
                    cs = code_shift[p]
                    code = (s >> cs) & code_mask
                    ss = slot_shift[p]
                    own = (s >> ss) & slot_mask
                    if code == 0:
                        if most:
                            t = s | (1 << cs)
                            if t not in seen:
                                seen.add(t)
                                push(t)
                    elif code < done_base:
                        new = after_read[code][(s >> slot_shift[slot_of[code]]) & slot_mask]
                        t = s + ((new - code) << cs)
                        if t not in seen:
                            seen.add(t)
                            push(t)
                    else:
                        room = code - done_base + 1
                        if own + room > self.max_slot:
                            raise AssertionError("a slot would exceed the overshoot bound")
                        idle = s - (code << cs)
                        if total < 0:
                            total = sum((s >> q) & slot_mask for q in slot_shift)
                        for n in range(1, room + 1):
                            t = idle + (n << ss)
                            if t not in seen:
                                seen.add(t)
                                push(t)
                                if total + n > best_total:
                                    best_total, best_state = total + n, t
                        if room < most and idle not in seen:
                            seen.add(idle)
                            push(idle)
                    if own:
                        t = s - (1 << ss)
                        if t not in seen:
                            seen.add(t)
                            push(t)
            if max_states is not None and len(seen) > max_states:
                raise StateLimitExceeded(f"more than {max_states} states")
            frontier = nxt
        unpacked = tuple((best_state >> shift) & slot_mask for shift in slot_shift) + tuple(
            (best_state >> shift) & code_mask for shift in code_shift
        )
        return len(seen), best_total, unpacked


class WriteThenCheck(Model):
    """OB-MODEL-1, OB-ONE-1: queueref's write-then-check: state = slots (reservations included)
    + reader codes, deciding with `protocol.keeps_reservation`.

    A reader code is (n, k, v); once the decision is known (every slot read, or the view
    already over the cap) k = N and v is 0 for keep, M + 1 for rollback.
    """

    def __init__(self, servers: int, cap: int, weight: int, *, finishes: bool = True) -> None:
        self.servers, self.cap, self.weight = servers, cap, weight
        self.finishes = finishes
        self.weights = range(1, weight + 1)
        self.enc, self.dec = _reader_codes(servers, self.weights, cap + 2)

    def initial(self) -> State:
        return (0,) * (2 * self.servers)

    def admitted(self, state: State) -> int:
        """OB-WTC-1: the admitted global count, slots minus reservations in progress."""
        N = self.servers
        return sum(state[:N]) - sum(self.dec[code][0] for code in state[N:])

    def total(self, state: State) -> int:
        return self.admitted(state)

    def after_read(self, n: int, k: int, view: int) -> int:
        N = self.servers
        if not keeps_reservation(view, self.cap):
            return self.enc[(n, N, self.cap + 1)]
        return self.enc[(n, k + 1, view if k + 1 < N else 0)]

    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        N = self.servers
        out: list[tuple[RawStep, State]] = []
        for p in range(N):
            code = state[N + p]
            n, k, v = self.dec[code]
            if code == 0:
                for weight in self.weights:
                    # The reservation goes into the own slot before the first read.
                    nxt = _set2(state, p, state[p] + weight, N + p, self.enc[(weight, 0, 0)])
                    out.append((("start", p, weight, 0), nxt))
            elif k < N:
                new = self.after_read(n, k, accumulate(v, state[k]))
                out.append((("read", p, k, 0), set_slot(state, N + p, new)))
            elif v == 0:
                out.append((("keep", p, 0, 0), set_slot(state, N + p, 0)))
            else:
                out.append((("rollback", p, 0, 0), _set2(state, p, state[p] - n, N + p, 0)))
            if self.finishes and state[p] - n > 0:  # n: the reservation in progress, or 0
                out.append((("finish", p, 0, 0), set_slot(state, p, state[p] - 1)))
        return out

    def spurious_rejection(self, state: State) -> int:
        """The largest free capacity M - A at a rollback enabled in `state` of a request
        that fits (A + n <= M), or -1 when there is none."""
        N = self.servers
        admitted = self.admitted(state)
        best = -1
        for p in range(N):
            n, k, v = self.dec[state[N + p]]
            if n and k == N and v != 0 and admitted + n <= self.cap:
                best = max(best, self.cap - admitted)
        return best


def set_slot(state: State, i: int, value: int) -> State:
    """`state` with position i replaced (the models' one way to write a field)."""
    return state[:i] + (value,) + state[i + 1 :]


def _set2(state: State, i: int, a: int, j: int, b: int) -> State:
    values = list(state)
    values[i] = a
    values[j] = b
    return tuple(values)


def sorted_block(state: State, base: int, size: int, i: int, code: int) -> State:
    """`state` with one entry of a block replaced and the block sorted (symmetry)."""
    block = list(state[base : base + size])
    block[i] = code
    block.sort()
    return state[:base] + tuple(block) + state[base + size :]
