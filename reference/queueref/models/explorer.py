"""Exhaustive explicit-state exploration of the cross-process admission protocols.

Models N API servers sharing `max_num_queued_reqs` (M) through one counter slot each, as
vLLM PR #54746 does (`SharedAdmissionStats`: each server writes only its own slot; a check
sums all slots one `__getitem__` at a time). Every interleaving of the servers' steps is
enumerated, breadth first, from the state where every slot is 0; the largest global count
reached, the number of states and a shortest interleaving that reaches it are reported.

Steps (all written with the step functions of `queueref.models.protocol`, the ones
`AdmissionController` uses):

* check-then-write (vLLM): `start` a check of weight n (1 <= n <= W); `read` the next slot
  (`accumulate`); once every slot is read, `admit` (write the own slot) -- the decision is
  `admits_check_then_write(view, n, M)`; a `finish` lowers a slot by one, at any time.
* write-then-check (queueref's reserve mode): `start` writes the reservation n into the own
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

The broken variants of OB-BROKEN-1..3 are here too, so the same search refutes them:
`AsyncGap` (a second check before the first is recorded), `LazyRefresh` (the slot is
written every k admissions), `Crash` (a dead server's slot is never cleared, and the fix).

Deliberate divergence from vLLM: the explorer's check stops reading at the first read that
already rejects; the real check reads every slot first. The decision is the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from queueref.models.protocol import (
    Protocol,
    accumulate,
    admits_check_then_write,
    keeps_reservation,
)
from queueref.models.protocol import bound as protocol_bound

# Re-exported: callers of the explorer name the bound it is measured against.
from queueref.models.protocol import overshoot_bound as overshoot_bound

#: A state: a tuple of small ints (the slots first, then per-model fields).
State = tuple[int, ...]
#: A step as stored during the search: (action, server, arg, check index).
RawStep = tuple[str, int, int, int]

CHECK_THEN_WRITE = Protocol.CHECK_THEN_WRITE.value
WRITE_THEN_CHECK = Protocol.WRITE_THEN_CHECK.value
PROTOCOLS: tuple[str, ...] = (CHECK_THEN_WRITE, WRITE_THEN_CHECK)


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
                    out.append((("start", p, n, 0), _set(state, N + p, self.enc[(n, 0, 0)])))
            else:
                n, k, v = self.dec[code]
                if k < N:
                    new = self.after_read(n, k, accumulate(v, state[k]))
                    out.append(((("read" if new else "reject"), p, k, 0), _set(state, N + p, new)))
                else:
                    # Every slot read and the view fits: admit, write the own slot.
                    out.append((("admit", p, 0, 0), _set2(state, p, state[p] + n, N + p, 0)))
            if self.finishes and state[p] > 0:
                out.append((("finish", p, 0, 0), _set(state, p, state[p] - 1)))
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
    the same up to renaming, state for state. `tests/test_ob_explorer.py` checks all of
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
                    out.append((("start", p, 0, 0), _set(state, N + p, 1)))
            elif code < self.done_base:
                k = self.slot_of[code]
                new = self.after_read[code][min(state[k], self.max_slot)]
                out.append(((("read" if new else "reject"), p, k, 0), _set(state, N + p, new)))
            else:
                room = self.room(code)
                for n in range(1, room + 1):
                    out.append((("admit", p, n, 0), _set2(state, p, state[p] + n, N + p, 0)))
                if room < self.most:
                    out.append((("decline", p, room + 1, 0), _set(state, N + p, 0)))
            if state[p] > 0:
                out.append((("finish", p, 0, 0), _set(state, p, state[p] - 1)))
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
    """OB-MODEL-1, OB-ONE-1: queueref's reserve mode: state = slots (reservations included)
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
                out.append((("read", p, k, 0), _set(state, N + p, new)))
            elif v == 0:
                out.append((("keep", p, 0, 0), _set(state, N + p, 0)))
            else:
                out.append((("rollback", p, 0, 0), _set2(state, p, state[p] - n, N + p, 0)))
            if self.finishes and state[p] - n > 0:  # n: the reservation in progress, or 0
                out.append((("finish", p, 0, 0), _set(state, p, state[p] - 1)))
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


class AsyncGap(Model):
    """OB-BROKEN-1: a server that can start another check before recording the first.

    vLLM 0.30.0 awaits between `check_admission()` and the `add_request()` that writes the
    slot; meanwhile the same server can accept and check another request. Each server
    runs up to `checks_per_server` overlapping check-then-write checks that share its slot.
    State: slots + per server its checks' reader codes, sorted (they are interchangeable).
    """

    def __init__(self, servers: int, cap: int, weight: int, checks_per_server: int = 2) -> None:
        self.servers, self.cap, self.weight = servers, cap, weight
        self.K = checks_per_server
        self.inner = CheckThenWrite(servers, cap, weight)

    def initial(self) -> State:
        return (0,) * (self.servers + self.servers * self.K)

    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        N, K, inner = self.servers, self.K, self.inner
        out: list[tuple[RawStep, State]] = []
        for p in range(N):
            base = N + p * K
            block = state[base : base + K]
            for i, code in enumerate(block):
                if i > 0 and block[i - 1] == code:
                    continue  # the same as the previous, interchangeable check
                if code == 0:
                    for n in inner.weights:
                        nxt = _sorted_block(state, base, K, i, inner.enc[(n, 0, 0)])
                        out.append((("start", p, n, i), nxt))
                    continue
                n, k, v = inner.dec[code]
                if k < N:
                    new = inner.after_read(n, k, accumulate(v, state[k]))
                    action = "read" if new else "reject"
                    out.append(((action, p, k, i), _sorted_block(state, base, K, i, new)))
                else:
                    nxt = _sorted_block(state, base, K, i, 0)
                    out.append((("admit", p, 0, i), _set(nxt, p, state[p] + n)))
            if state[p] > 0:
                out.append((("finish", p, 0, 0), _set(state, p, state[p] - 1)))
        return out


class LazyRefresh(Model):
    """OB-BROKEN-2: a server that writes its slot only every `every` admissions.

    The slot is refreshed at every finish (as vLLM 0.30.0 does on finish and abort) and at
    every `every`-th admission, instead of at every add. A check reads the published
    slots, its own included. State: published slots c, true counts u, admissions since the
    last refresh, reader codes. The count that matters is the true one, sum(u).
    """

    def __init__(self, servers: int, cap: int, weight: int, every: int = 2) -> None:
        self.servers, self.cap, self.weight = servers, cap, weight
        self.every = every
        self.inner = CheckThenWrite(servers, cap, weight)

    def initial(self) -> State:
        return (0,) * (4 * self.servers)

    def total(self, state: State) -> int:
        N = self.servers
        return sum(state[N : 2 * N])

    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        N, inner = self.servers, self.inner
        out: list[tuple[RawStep, State]] = []
        for p in range(N):
            code = state[3 * N + p]
            if code == 0:
                for n in inner.weights:
                    out.append((("start", p, n, 0), _set(state, 3 * N + p, inner.enc[(n, 0, 0)])))
            else:
                n, k, v = inner.dec[code]
                if k < N:
                    new = inner.after_read(n, k, accumulate(v, state[k]))
                    action = "read" if new else "reject"
                    out.append(((action, p, k, 0), _set(state, 3 * N + p, new)))
                else:
                    values = list(state)
                    values[N + p] += n
                    values[2 * N + p] += 1
                    if values[2 * N + p] == self.every:
                        values[p] = values[N + p]  # the lazy refresh
                        values[2 * N + p] = 0
                    values[3 * N + p] = 0
                    out.append((("admit", p, 0, 0), tuple(values)))
            if state[N + p] > 0:
                values = list(state)
                values[N + p] -= 1
                values[p] = values[N + p]
                values[2 * N + p] = 0
                out.append((("finish", p, 0, 0), tuple(values)))
        return out


class Crash(Model):
    """OB-BROKEN-3: servers may crash; a dead server's slot keeps its last value.

    Its requests die with it (they are no longer running), but every other server still
    reads its slot: the cap shrinks by that value, forever. With `reap=True` the fix is
    modelled: whoever detects the death resets the dead server's slot to 0 (`reap`,
    OB-BROKEN-4).
    State: slots + reader codes + a bit mask of dead servers. The count that matters is
    the running one: the slots of live servers.
    """

    def __init__(self, servers: int, cap: int, weight: int, *, reap: bool = False) -> None:
        self.servers, self.cap, self.weight = servers, cap, weight
        self.reap = reap
        self.inner = CheckThenWrite(servers, cap, weight)

    def initial(self) -> State:
        return (0,) * (2 * self.servers + 1)

    def total(self, state: State) -> int:
        dead = state[-1]
        return sum(c for q, c in enumerate(state[: self.servers]) if not dead >> q & 1)

    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        N = self.servers
        dead = state[-1]
        out: list[tuple[RawStep, State]] = []
        for p in range(N):
            if dead >> p & 1:
                if self.reap and state[p] > 0:
                    out.append((("reap", p, 0, 0), _set(state, p, 0)))
                continue
            for label, nxt in self.inner.successors(state[:-1]):
                if label[1] == p:
                    out.append((label, nxt + (dead,)))
            # The check in progress dies with the server; the slot stays as it was.
            out.append((("crash", p, 0, 0), _set(state, N + p, 0)[:-1] + (dead | 1 << p,)))
        return out

    def admits(self, state: State) -> bool:
        """An admission is enabled in `state`."""
        return any(label[0] == "admit" for label, _ in self.successors(state))


def _set(state: State, i: int, value: int) -> State:
    return state[:i] + (value,) + state[i + 1 :]


def _set2(state: State, i: int, a: int, j: int, b: int) -> State:
    values = list(state)
    values[i] = a
    values[j] = b
    return tuple(values)


def _sorted_block(state: State, base: int, size: int, i: int, code: int) -> State:
    block = list(state[base : base + size])
    block[i] = code
    block.sort()
    return state[:base] + tuple(block) + state[base + size :]


# --------------------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exploration:
    """The result of one exhaustive search (OB-TABLE-1)."""

    protocol: str
    servers: int
    cap: int
    weight: int
    worst_total: int
    bound: int
    states: int
    seconds: float
    witness: tuple[Step, ...] | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def row(self) -> dict[str, object]:
        """The JSON row of `queueref bound-table` and `build/bound-table.json`."""
        row: dict[str, object] = {
            "protocol": self.protocol,
            "servers": self.servers,
            "cap": self.cap,
            "weight": self.weight,
            "worst_total": self.worst_total,
            "bound": self.bound,
            "states": self.states,
            "seconds": round(self.seconds, 3),
        }
        row.update(self.extra)
        if self.witness is not None:
            row["witness"] = [s.to_json() for s in self.witness]
        return row


class StateLimitExceeded(RuntimeError):
    """A search reached its `max_states` limit."""


@dataclass
class Search:
    """Every reachable state of a model, with the best one for a score."""

    states: int
    best_score: int
    best_state: State
    parents: dict[State, tuple[State, RawStep] | None] | None
    #: The best value of each of the `also` scores of `search`.
    also: tuple[int, ...] = ()

    def path(self, target: State | None = None) -> tuple[Step, ...]:
        """A shortest sequence of steps from the initial state to `target` (the best)."""
        assert self.parents is not None, "search without parents: no witness"
        state = self.best_state if target is None else target
        steps: list[Step] = []
        while True:
            link = self.parents[state]
            if link is None:
                break
            state, raw = link
            steps.append(Step(*raw))
        steps.reverse()
        return tuple(steps)


def search(
    model: Model,
    score: Callable[[State], int] | None = None,
    *,
    parents: bool = False,
    also: Sequence[Callable[[State], int]] = (),
    max_states: int | None = None,
) -> Search:
    """Breadth-first search of every state reachable from `model.initial()`.

    `score` defaults to `model.total`; the first state found with the highest score is
    kept, so its path (with `parents=True`) is a shortest witness. The best values of the
    `also` scores are computed in the same pass. Past `max_states` states it raises
    `StateLimitExceeded` instead of filling the memory.
    """
    score_of = model.total if score is None else score
    start = model.initial()
    parent_map: dict[State, tuple[State, RawStep] | None] = {start: None}
    seen: set[State] | dict[State, tuple[State, RawStep] | None] = (
        parent_map if parents else {start}
    )
    best_state, best_score = start, score_of(start)
    best_also = [f(start) for f in also]
    frontier = [start]
    successors = model.successors
    while frontier:
        nxt: list[State] = []
        for state in frontier:
            for label, new in successors(state):
                if new in seen:
                    continue
                if parents:
                    parent_map[new] = (state, label)
                else:
                    assert isinstance(seen, set)
                    seen.add(new)
                nxt.append(new)
                value = score_of(new)
                if value > best_score:
                    best_state, best_score = new, value
                for i, f in enumerate(also):
                    value = f(new)
                    if value > best_also[i]:
                        best_also[i] = value
        if max_states is not None and len(seen) > max_states:
            raise StateLimitExceeded(f"more than {max_states} states")
        frontier = nxt
    return Search(
        len(seen), best_score, best_state, parent_map if parents else None, tuple(best_also)
    )


def replay(model: Model, steps: Sequence[Step]) -> list[State]:
    """The states visited by `steps` from the initial state (`ValueError` on a step that
    is not enabled): how a kept counterexample trace is re-checked."""
    states = [model.initial()]
    for step in steps:
        states.append(model.step(states[-1], step))
    return states


#: The encodings of check-then-write: the reference (weight chosen at `start`) and the
#: compact one (weight chosen at the decision, saturated views, packed search).
ENCODINGS: tuple[str, ...] = ("reference", "compact")


def make_model(
    protocol: str, servers: int, cap: int, weight: int, *, encoding: str = "reference"
) -> Model:
    """The model of `protocol` ("check-then-write" or "write-then-check")."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")
    if protocol == CHECK_THEN_WRITE:
        if encoding == "compact":
            return CompactCheckThenWrite(servers, cap, weight)
        return CheckThenWrite(servers, cap, weight)
    if encoding == "compact":
        raise ValueError("the compact encoding is of check-then-write only")
    if protocol == WRITE_THEN_CHECK:
        return WriteThenCheck(servers, cap, weight)
    raise ValueError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")


def explore(
    protocol: str,
    servers: int,
    cap: int,
    weight: int,
    *,
    witness: bool = False,
    spurious: bool = True,
    max_states: int | None = None,
    encoding: str = "reference",
) -> Exploration:
    """OB-TABLE-1: the exact worst case of `protocol` at (N, M, W), by exhaustive search,
    and (with `witness=True`) a shortest interleaving that reaches it (OB-BOUND-2).

    check-then-write: `worst_total` is the largest global count, `bound` is
    M + (N-1)*min(M, W) (OB-BOUND-1). write-then-check: `worst_total` is the largest
    admitted count, `bound` is M (OB-WTC-1, reached: OB-WTC-2); `extra` adds
    `worst_slot_total` (reservations included) and, unless `spurious=False`,
    `spurious_rejection` (OB-WTC-3).

    `encoding="compact"` (check-then-write only) explores `CompactCheckThenWrite`: the
    same worst total in far fewer states, packed into integers when no witness is asked.
    """
    if servers < 1 or cap < 0 or weight < 1:
        raise ValueError("need servers >= 1, cap >= 0, weight >= 1")
    began = time.perf_counter()
    model = make_model(protocol, servers, cap, weight, encoding=encoding)
    extra: dict[str, object] = {}
    if isinstance(model, CompactCheckThenWrite) and not witness:
        states, worst, _ = model.search_packed(max_states)
        return Exploration(
            protocol=protocol,
            servers=servers,
            cap=cap,
            weight=weight,
            worst_total=worst,
            bound=overshoot_bound(servers, cap, weight),
            states=states,
            seconds=time.perf_counter() - began,
            extra={"encoding": encoding},
        )
    if encoding != "reference":
        extra["encoding"] = encoding
    if protocol == WRITE_THEN_CHECK:
        slot_total: Callable[[State], int] = lambda s: sum(s[:servers])
        found = search(model, parents=witness, also=[slot_total], max_states=max_states)
        extra["worst_slot_total"] = found.also[0]
    else:
        found = search(model, parents=witness, max_states=max_states)
    bound = protocol_bound(Protocol(protocol), servers, cap, weight)
    if spurious and protocol == WRITE_THEN_CHECK:
        extra["spurious_rejection"] = worst_spurious_rejection(protocol, servers, cap, weight)[0]
    return Exploration(
        protocol=protocol,
        servers=servers,
        cap=cap,
        weight=weight,
        worst_total=found.best_score,
        bound=bound,
        states=found.states,
        seconds=time.perf_counter() - began,
        witness=found.path() if witness else None,
        extra=extra,
    )


def worst_spurious_rejection(
    protocol: str, servers: int, cap: int, weight: int
) -> tuple[int | None, tuple[Step, ...]]:
    """OB-WTC-3: the price of the hard cap, under contention alone.

    Explores the protocol *without finishes* (so a check never reads a count that has
    gone away since: rejections come from the other checks in progress only) and returns
    the largest free capacity M - A at a rejection of a request of weight n that fits
    (A + n <= M, A the admitted count at the rejection), with a shortest trace ending in
    that rejection; `(None, ())` when no such rejection exists.
    """
    model: CheckThenWrite | WriteThenCheck
    if protocol == CHECK_THEN_WRITE:
        model = CheckThenWrite(servers, cap, weight, finishes=False)
    else:
        model = WriteThenCheck(servers, cap, weight, finishes=False)
    found = search(model, model.spurious_rejection, parents=True)
    if found.best_score < 0:
        return None, ()
    # End the trace with the rejection itself: a reject/rollback of a request that fits.
    admitted = model.total(found.best_state)
    for label, _ in model.successors(found.best_state):
        if label[0] in ("reject", "rollback"):
            n = model.dec[found.best_state[servers + label[1]]][0]
            if admitted + n <= cap:
                return found.best_score, found.path() + (Step(*label),)
    raise AssertionError("the best state has no spurious rejection")  # pragma: no cover


@dataclass(frozen=True)
class Leak:
    """OB-BROKEN-3: a reachable state where nothing runs and nothing can ever be admitted."""

    state: State
    witness: tuple[Step, ...]
    states: int


def capacity_leak(servers: int, cap: int, weight: int, *, reap: bool) -> Leak | None:
    """OB-BROKEN-3, OB-BROKEN-4: a reachable state of the crash model where no live server
    has a request, some server is alive, and no admission is reachable any more; None if
    there is none (as with `reap=True`, the fix).

    Computed backwards: the states from which an admission is reachable are the
    closure of those where one is enabled under the reversed transitions.
    """
    model = Crash(servers, cap, weight, reap=reap)
    found = search(model, lambda s: 0, parents=True)
    assert found.parents is not None
    reverse: dict[State, list[State]] = {}
    live: set[State] = set()
    for state in found.parents:
        for label, nxt in model.successors(state):
            reverse.setdefault(nxt, []).append(state)
            if label[0] == "admit":
                live.add(state)
    todo = list(live)
    while todo:
        state = todo.pop()
        for prev in reverse.get(state, ()):
            if prev not in live:
                live.add(prev)
                todo.append(prev)
    everyone = (1 << servers) - 1
    stuck = [
        s
        for s in found.parents
        if s not in live and model.total(s) == 0 and s[-1] != everyone and cap >= 1
    ]
    if not stuck:
        return None
    # The first one in BFS order has a shortest witness.
    order = {s: i for i, s in enumerate(found.parents)}
    target = min(stuck, key=order.__getitem__)
    return Leak(target, found.path(target), found.states)
