"""vLLM's whole admission path as a transition system: preflight, rendering, registration.

The models of `queueref.verify.admission_models` have one check per request. vLLM
0.30.0-0.33.0 admit a request in more steps (ADM-PRE-1..4 in `specs/admission.md`), and
vLLM #58192 proposes a reservation at preflight (ADM-PRE-5, ADM-PRE-6). `PathModel`
models each `AdmissionPath` of `queueref.admission.paths`: N servers, one slot each, and
K requests per server in flight at once (each waits at its own `await`).

A request goes through these phases (the step names in brackets):

* preflight: a check that reads every slot, one `__getitem__` at a time (`start`,
  `read`; `reject` when the view already refuses it). The two-check paths write nothing
  here; `reserve-check-then-write` writes n after the reads (`reserve`);
  `reserve-write-then-check` writes n before them (`start`) and keeps it (`keep`) or
  gives it back (`rollback`).
* rendering: an `await` of any length (`render` ends it; `fail` is a render error or a
  client disconnect, which releases a reservation).
* the two-check paths only: the second check (`recheck`; `refuse` -- a wasted render);
  then the n children registered one `register` step each, the slot +1 per child.
  The reservations register by turning the reservation into the count (`register`,
  no slot changes).
* `finish` lowers a slot by one registered request, at any time.

A server's event loop runs one request at a time between `await`s: a check, with the
writes that follow it without an `await`, holds the server (no other request of that
server steps; other servers do: the slots are shared memory). Only `render` and, in the
await-gap path (vLLM 0.30.0, n >= 2), the registration of each child are `await`s.

Every decision is a step function of `queueref.admission.protocol` (`accumulate`,
`passes_preflight`, `admits_check_then_write`, `keeps_reservation`): the same
transition system as the controller and the other models (OB-ONE-1).

Sound reductions, as in `admission_models`: a check whose view already refuses stops
reading (views only grow); the K requests of one server are interchangeable, so they are
kept sorted. Finishes of a server are allowed while one of its checks holds it (vLLM's
output handler waits for the loop): more runs, and a finish never raises a count.

Broken variants (`Broken`), each refuted by the search: the second check skipped, the
children of 0.31.0's path registered with an `await` between them, the reservation of
check-then-write written after an `await`, vLLM's second check kept after a
write-then-check reservation (the own reservation counted twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from queueref.admission.paths import AdmissionPath, passes_preflight
from queueref.admission.protocol import accumulate, admits_check_then_write, keeps_reservation
from queueref.verify.admission_models import Model, RawStep, State, Step

# Phases of one request; its local state is (phase, n, k, v) -- the weight n, the next
# slot k to read (children written, in REGISTER) and the view v read so far.
IDLE, PRE, ROLLBACK, RESERVE, RENDER, RECHECK, REGISTER, DONE = range(8)
# How a request ended, in a burst (`burst=True`): the `n` field of a DONE state.
ENDED_ADMITTED, ENDED_REFUSED, ENDED_WASTED = 0, 1, 2

_TWO_CHECK = (AdmissionPath.TWO_CHECK, AdmissionPath.TWO_CHECK_AWAIT_GAP)
_RESERVES = (AdmissionPath.RESERVE_WRITE_THEN_CHECK, AdmissionPath.RESERVE_CHECK_THEN_WRITE)

Local = tuple[int, int, int, int]


class Broken(Enum):
    """Deliberately broken variants: each must be refuted by the search (test with teeth)."""

    #: two-check: the request registers after rendering with no second check.
    NO_SECOND_CHECK = "no-second-check"
    #: two-check: the children are registered with an `await` before each (0.30.0's gap).
    AWAIT_BEFORE_CHILDREN = "await-before-children"
    #: reserve-check-then-write: an `await` between the check and the reservation write.
    AWAIT_BEFORE_RESERVE = "await-before-reserve"
    #: reserve-write-then-check: vLLM's second check kept after rendering; it reads the
    #: own reservation and adds n again.
    SECOND_CHECK_AFTER_RESERVE = "second-check-after-reserve"


@dataclass(frozen=True)
class PathStep(Step):
    """A step of `PathModel`; `check` is the request's place among its server's K."""

    def describe(self) -> str:
        who = f"server {self.server}" + (f" (request {self.check})" if self.check else "")
        text = {
            "start": f"starts a request of n={self.arg} at preflight",
            "read": f"reads slot {self.arg} at preflight",
            "reject": f"reads slot {self.arg} at preflight: refused (nothing rendered)",
            "keep": f"reads slot {self.arg}: the view fits, keeps its reservation",
            "rollback": "gives its reservation back (refused, nothing rendered)",
            "reserve": "writes its reservation into its slot",
            "render": "finishes rendering",
            "fail": "fails to render (or the client disconnects)",
            "recheck": f"reads slot {self.arg} at the second check",
            "refuse": f"reads slot {self.arg} at the second check: refused after rendering",
            "register": "registers one child into its slot",
            "finish": "finishes one request",
        }[self.action]
        return f"{who} {text}"

    def to_json(self) -> dict[str, int | str]:
        out: dict[str, int | str] = {"action": self.action, "server": self.server}
        if self.action == "start":
            out["n"] = self.arg
        elif self.action in ("read", "reject", "keep", "recheck", "refuse"):
            out["slot"] = self.arg
        if self.check:
            out["check"] = self.check
        return out


class PathModel(Model):
    """ADM-PRE-7: one `AdmissionPath` over N servers, cap M, weights 1..W, K requests each.

    State: the N slots, then per server its K request codes, sorted. `burst=True`: no
    finishes, no render failures and each request makes one attempt (DONE records how it
    ended), the setting of `worst_wasted_renders` and `worst_spurious_rejection`.
    """

    def __init__(
        self,
        path: AdmissionPath,
        servers: int,
        cap: int,
        weight: int,
        requests_per_server: int = 1,
        *,
        finishes: bool = True,
        failures: bool = True,
        burst: bool = False,
        broken: Broken | None = None,
    ) -> None:
        if servers < 1 or cap < 0 or weight < 1 or requests_per_server < 1:
            raise ValueError("need servers >= 1, cap >= 0, weight >= 1, requests_per_server >= 1")
        self.path, self.broken = AdmissionPath(path), broken
        self.servers, self.cap, self.weight, self.K = servers, cap, weight, requests_per_server
        self.finishes, self.failures = finishes and not burst, failures and not burst
        self.burst = burst
        # Only the write-then-check reservation writes before it knows: a heavier request
        # than M never passes any other check, so it is not started (OB-TABLE-1).
        top = weight if self.path is AdmissionPath.RESERVE_WRITE_THEN_CHECK else min(weight, cap)
        self.weights = range(1, top + 1)
        # Codes are a fixed function of the local state (not numbered as found), so that
        # every instance of a model -- the search and a replay -- sorts a block alike.
        self.radix_n, self.radix_k = weight + 3, servers + 2
        self._locals: dict[int, Local] = {}  # decoded codes: the search decodes them often

    # -- encoding ------------------------------------------------------------------
    def code(self, local: Local) -> int:
        phase, n, k, v = local
        return ((v * self.radix_k + k) * self.radix_n + n) * 8 + phase

    def local(self, code: int) -> Local:
        found = self._locals.get(code)
        if found is None:
            rest, phase = divmod(code, 8)
            rest, n = divmod(rest, self.radix_n)
            v, k = divmod(rest, self.radix_k)
            found = self._locals[code] = (phase, n, k, v)
        return found

    def initial(self) -> State:
        return (0,) * (self.servers + self.servers * self.K)

    def requests(self, state: State, p: int) -> list[Local]:
        base = self.servers + p * self.K
        return [self.local(c) for c in state[base : base + self.K]]

    # -- what a state holds ----------------------------------------------------------
    def held(self, local: Local) -> bool:
        """The request holds its server: it is inside a block with no `await`."""
        # ADM-PRE-1, ADM-PRE-4: the second check and the n children with no `await`;
        # ADM-PRE-3: vLLM 0.30.0 awaits before each child of n >= 2.
        phase, n = local[0], local[1]
        if phase in (PRE, ROLLBACK, RESERVE, RECHECK):
            return True
        if phase == REGISTER:
            gap = self.path is AdmissionPath.TWO_CHECK_AWAIT_GAP and n >= 2
            return not (gap or self.broken is Broken.AWAIT_BEFORE_CHILDREN)
        return False

    def reserved(self, local: Local) -> int:
        """What the request has written into its slot that is not a registered request."""
        phase, n = local[0], local[1]
        if self.path is AdmissionPath.RESERVE_WRITE_THEN_CHECK and phase in (PRE, ROLLBACK):
            return n
        if self.path in _RESERVES and phase == RENDER:
            return 0 if local[3] else n  # v = 1: the broken late write, not made yet
        if self.path in _RESERVES and phase == RECHECK:
            return n
        return 0

    def undecided(self, local: Local) -> int:
        """A write-then-check reservation whose check is still in progress (OB-WTC-1)."""
        if self.path is AdmissionPath.RESERVE_WRITE_THEN_CHECK and local[0] in (PRE, ROLLBACK):
            return local[1]
        return 0

    def total(self, state: State) -> int:
        """The global count the bound is about: every slot, minus the reservations of
        write-then-check checks still in progress (they are not admitted yet)."""
        N = self.servers
        if self.path is not AdmissionPath.RESERVE_WRITE_THEN_CHECK:
            return sum(state[:N])  # nothing is written before it is decided
        return sum(state[:N]) - sum(self.undecided(self.local(c)) for c in state[N:])

    def wasted(self, state: State) -> int:
        """Requests refused after rendering, in a burst."""
        return sum(1 for c in state[self.servers :] if self.local(c) == (DONE, ENDED_WASTED, 0, 0))

    # -- the steps -----------------------------------------------------------------
    def successors(self, state: State) -> list[tuple[RawStep, State]]:
        N, K = self.servers, self.K
        out: list[tuple[RawStep, State]] = []
        for p in range(N):
            block = self.requests(state, p)
            holder = [i for i, local in enumerate(block) if self.held(local)]
            for i, local in enumerate(block):
                if holder and i != holder[0]:
                    continue  # the server's loop is inside another request's block
                if i > 0 and block[i - 1] == local:
                    continue  # the same as the previous, interchangeable request
                for action, arg, slot_delta, new in self.moves(state, p, local):
                    nxt = list(state)
                    nxt[p] += slot_delta
                    base = N + p * K
                    codes = nxt[base : base + K]
                    codes[i] = self.code(new)
                    codes.sort()
                    nxt[base : base + K] = codes
                    out.append(((action, p, arg, i), tuple(nxt)))
            if self.finishes and state[p] - sum(self.reserved(r) for r in block) > 0:
                out.append((("finish", p, 0, 0), state[:p] + (state[p] - 1,) + state[p + 1 :]))
        return out

    def moves(self, state: State, p: int, local: Local) -> list[tuple[str, int, int, Local]]:
        """(action, arg, change of the own slot, new local state) of one request."""
        phase, n, k, v = local
        N, M, path = self.servers, self.cap, self.path
        idle: Local = (IDLE, 0, 0, 0)
        if phase == IDLE:
            write = path is AdmissionPath.RESERVE_WRITE_THEN_CHECK
            return [("start", m, m if write else 0, (PRE, m, 0, 0)) for m in self.weights]
        if phase == DONE:
            return []
        if phase == PRE:
            # ADM-PRE-2: preflight reads, writes nothing (ADM-PRE-5: after the reservation).
            view = accumulate(v, state[k])
            if path is AdmissionPath.RESERVE_WRITE_THEN_CHECK:
                if not keeps_reservation(view, M):
                    return [("read", k, 0, (ROLLBACK, n, 0, 0))]
                if k + 1 < N:
                    return [("read", k, 0, (PRE, n, k + 1, view))]
                return [("keep", k, 0, (RENDER, n, 0, 0))]
            if not passes_preflight(view, n, M):
                return [("reject", k, 0, self.ended(ENDED_REFUSED))]
            if k + 1 < N:
                return [("read", k, 0, (PRE, n, k + 1, view))]
            if path is AdmissionPath.RESERVE_CHECK_THEN_WRITE:
                if self.broken is Broken.AWAIT_BEFORE_RESERVE:
                    return [("read", k, 0, (RENDER, n, 0, 1))]  # v = 1: not written yet
                return [("read", k, 0, (RESERVE, n, 0, 0))]
            return [("read", k, 0, (RENDER, n, 0, 0))]
        if phase == ROLLBACK:
            return [("rollback", 0, -n, self.ended(ENDED_REFUSED))]
        if phase == RESERVE:  # ADM-PRE-6: written with no `await` after the check
            return [("reserve", 0, n, (RENDER, n, 0, 0))]
        if phase == RENDER:
            return self.render_moves(n, v, idle)
        if phase == RECHECK:
            view = accumulate(v, state[k])
            if not admits_check_then_write(view, n, M):
                release = n if path in _RESERVES else 0  # the broken variant's reservation
                return [("refuse", k, -release, self.ended(ENDED_WASTED))]
            if k + 1 < N:
                return [("recheck", k, 0, (RECHECK, n, k + 1, view))]
            if path in _TWO_CHECK:
                return [("recheck", k, 0, (REGISTER, n, 0, 0))]
            return [("recheck", k, 0, self.ended(ENDED_ADMITTED))]
        # REGISTER: one child of the n, the slot +1; the last one ends the request.
        done = self.ended(ENDED_ADMITTED) if k + 1 == n else (REGISTER, n, k + 1, 0)
        return [("register", 0, 1, done)]

    def render_moves(
        self, n: int, unwritten: int, idle: Local
    ) -> list[tuple[str, int, int, Local]]:
        """The end of rendering: the second check (two-check), or registration."""
        path, broken = self.path, self.broken
        out: list[tuple[str, int, int, Local]] = []
        if path in _TWO_CHECK:
            if broken is Broken.NO_SECOND_CHECK:
                out.append(("render", 0, 0, (REGISTER, n, 0, 0)))
            else:
                out.append(("render", 0, 0, (RECHECK, n, 0, 0)))
        elif path is AdmissionPath.RESERVE_CHECK_THEN_WRITE and unwritten:
            out.append(("render", 0, 0, (RESERVE, n, 0, 0)))  # the late write (broken)
        elif broken is Broken.SECOND_CHECK_AFTER_RESERVE:
            out.append(("render", 0, 0, (RECHECK, n, 0, 0)))
        else:
            out.append(("register", 0, 0, self.ended(ENDED_ADMITTED)))
        if self.failures:  # ADM-PRE-5, ADM-PRE-6: a failure gives the reservation back
            written = n if path in _RESERVES and not unwritten else 0
            out.append(("fail", 0, -written, idle))
        return out

    def ended(self, how: int) -> Local:
        """An ended request: idle again, or in a burst DONE with how it ended."""
        return (DONE, how, 0, 0) if self.burst else (IDLE, 0, 0, 0)

    def spurious(self, state: State, p: int, local: Local) -> int:
        """M - A if the request's next step refuses it although it fits (A + n <= M, A the
        admitted count of the others), else -1."""
        if not any(m[0] in ("reject", "rollback", "refuse") for m in self.moves(state, p, local)):
            return -1
        own = self.reserved(local) - self.undecided(local)  # counted in `total` already
        others = self.total(state) - own
        return self.cap - others if others + local[1] <= self.cap else -1

    def spurious_rejection(self, state: State) -> int:
        """The largest free capacity M - A at a refusal enabled in `state` of a request
        that fits, or -1 when there is none (OB-WTC-3's measure)."""
        return max(
            (
                self.spurious(state, p, r)
                for p in range(self.servers)
                for r in self.requests(state, p)
            ),
            default=-1,
        )

    def step(self, state: State, step: Step) -> State:
        raw = step.raw()
        for label, nxt in self.successors(state):
            if label == raw:
                return nxt
        raise ValueError(f"step {step} is not enabled in state {state}")
