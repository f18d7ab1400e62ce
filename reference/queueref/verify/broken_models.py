"""Broken variants of check-then-write, for the exhaustive search to refute.

Each is vLLM 0.30.0's protocol (`queueref.verify.admission_models.CheckThenWrite`) with
one mistake a real implementation could make: `AsyncGap` (a second check of a server
starts before its first admission is recorded: an `await` between check and
registration), `LazyRefresh` (the slot is written every k admissions, not after each)
and `Crash` (a dead server's slot is never cleared, and the fix). The same search
(`queueref.verify.search`) finds the larger worst count each of them reaches
(`specs/overshoot-bound.md`, the broken variants).
"""

from __future__ import annotations

from queueref.admission.protocol import accumulate
from queueref.verify.admission_models import (
    CheckThenWrite,
    Model,
    RawStep,
    State,
    set_slot,
    sorted_block,
)


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
                        nxt = sorted_block(state, base, K, i, inner.enc[(n, 0, 0)])
                        out.append((("start", p, n, i), nxt))
                    continue
                n, k, v = inner.dec[code]
                if k < N:
                    new = inner.after_read(n, k, accumulate(v, state[k]))
                    action = "read" if new else "reject"
                    out.append(((action, p, k, i), sorted_block(state, base, K, i, new)))
                else:
                    nxt = sorted_block(state, base, K, i, 0)
                    out.append((("admit", p, 0, i), set_slot(nxt, p, state[p] + n)))
            if state[p] > 0:
                out.append((("finish", p, 0, 0), set_slot(state, p, state[p] - 1)))
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
                    out.append(
                        (("start", p, n, 0), set_slot(state, 3 * N + p, inner.enc[(n, 0, 0)]))
                    )
            else:
                n, k, v = inner.dec[code]
                if k < N:
                    new = inner.after_read(n, k, accumulate(v, state[k]))
                    action = "read" if new else "reject"
                    out.append(((action, p, k, 0), set_slot(state, 3 * N + p, new)))
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
                    out.append((("reap", p, 0, 0), set_slot(state, p, 0)))
                continue
            for label, nxt in self.inner.successors(state[:-1]):
                if label[1] == p:
                    out.append((label, nxt + (dead,)))
            # The check in progress dies with the server; the slot stays as it was.
            out.append((("crash", p, 0, 0), set_slot(state, N + p, 0)[:-1] + (dead | 1 << p,)))
        return out

    def admits(self, state: State) -> bool:
        """An admission is enabled in `state`."""
        return any(label[0] == "admit" for label, _ in self.successors(state))
