"""The interleaving that reaches the overshoot bound, built for any (N, M, W), and its replay.

The exhaustive search (`queueref.verify.search`) finds a shortest witness on small
instances only. For a real deployment (16 servers, a cap of 1000) the witness is the
construction of the tightness proof (`specs/overshoot-bound.md`, "The construction that
reaches it"; `proofs/coq/Tightness.v`, `tight_schedule`), with w = min(M, W):

1. *alone*, M - w times: server 0 starts a check of weight 1, reads every slot and admits;
2. *together*: every server starts a check of weight w, every server reads every slot
   (each sees M - w) before any decides, then every server admits.

The global count is then M - w + N * w = M + (N - 1) * w. The schedule is kept as phases
with a repeat count, so it stays small when M is large.

`token_schedule` and `replay_tokens` are the same for the shared token limit
(`queueref.verify.tokens`: counts of queued prompt tokens, vLLM 0.30.0's `ge` rule or the
`fits` opt-in).

`replay_check_then_write` runs any check-then-write schedule -- the constructed one or a
witness of the search -- through the step functions of `queueref.admission.protocol`
(`Check`, `admits_check_then_write`), with the steps and labels of the explorer's
`CheckThenWrite` model, one step at a time in O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from queueref.admission.protocol import Check, TokenRule, admits_check_then_write, admits_tokens
from queueref.verify.admission_models import Step


@dataclass(frozen=True)
class Phase:
    """Steps run `repeat` times in a row."""

    repeat: int
    steps: tuple[Step, ...]
    title: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "title": self.title,
            "repeat": self.repeat,
            "steps": [step.to_json() for step in self.steps],
        }

    @staticmethod
    def from_json(data: dict[str, object]) -> Phase:
        steps = data["steps"]
        repeat = data["repeat"]
        assert isinstance(steps, list) and isinstance(repeat, int)
        return Phase(repeat, tuple(Step.from_json(s) for s in steps), str(data.get("title", "")))


def tight_schedule(servers: int, cap: int, weight: int) -> tuple[Phase, ...]:
    """The construction of the tightness proof for (N, M, W), as phases (none when M = 0)."""
    # OB-BOUND-2: the schedule of Tightness.v:tight_schedule, phase for phase.
    if servers < 1 or cap < 0 or weight < 1:
        raise ValueError("need servers >= 1, cap >= 0, weight >= 1")
    w = min(cap, weight)
    phases: list[Phase] = []
    reads = range(servers)
    if cap - w > 0:
        alone = (Step("start", 0, 1), *(Step("read", 0, k) for k in reads), Step("admit", 0))
        phases.append(
            Phase(cap - w, alone, f"server 0 admits alone until its slot is M - w = {cap - w}")
        )
    if w > 0:
        together = (
            *(Step("start", p, w) for p in range(servers)),
            *(Step("read", p, k) for p in range(servers) for k in reads),
            *(Step("admit", p) for p in range(servers)),
        )
        phases.append(
            Phase(1, together, f"every server checks n = w = {w}; all read before any writes")
        )
    return tuple(phases)


def expand(phases: Iterable[Phase]) -> Iterator[Step]:
    """The steps of `phases`, each phase's steps `repeat` times."""
    for phase in phases:
        for _ in range(phase.repeat):
            yield from phase.steps


def schedule_length(phases: Iterable[Phase]) -> int:
    """How many steps `expand(phases)` yields."""
    return sum(phase.repeat * len(phase.steps) for phase in phases)


@dataclass(frozen=True)
class Replayed:
    """Where a replayed schedule ends."""

    slots: tuple[int, ...]
    steps: int

    @property
    def total(self) -> int:
        """The global count: the sum of the slots."""
        return sum(self.slots)


def replay_check_then_write(servers: int, cap: int, weight: int, steps: Iterable[Step]) -> Replayed:
    """Run `steps` from all slots 0; `ValueError` naming the first step that is not enabled.

    The steps are the explorer's (`CheckThenWrite`): `start` n (1 <= n <= min(W, M), no
    check in progress), `read` the next slot (the view still admits n) or `reject` (it no
    longer does: the check ends), `admit` once every slot is read (the own slot += n),
    `finish` one request (slot > 0).
    """
    # OB-ONE-1: every decision is the protocol's own step function.
    slots = [0] * servers
    checks: list[Check | None] = [None] * servers
    count = 0
    for count, step in enumerate(steps, 1):
        p = step.server
        if not 0 <= p < servers:
            raise ValueError(f"step {count} ({step}): no server {p}")
        check = checks[p]
        if step.action == "start" and check is None and 1 <= step.arg <= min(weight, cap):
            checks[p] = Check(step.arg)
        elif step.action in ("read", "reject") and check is not None:
            if check.done(servers) or step.arg != check.next_slot:
                raise ValueError(
                    f"step {count} ({step}): server {p} reads slot {check.next_slot} next"
                )
            after = check.read(slots[step.arg])
            fits = admits_check_then_write(after.view, check.n, cap)
            if fits != (step.action == "read"):
                raise ValueError(f"step {count} ({step}): the view {after.view} decides otherwise")
            checks[p] = after if fits else None
        elif step.action == "admit" and check is not None and check.done(servers):
            if not admits_check_then_write(check.view, check.n, cap):  # pragma: no cover
                raise ValueError(f"step {count} ({step}): the view does not admit")
            slots[p] += check.n
            checks[p] = None
        elif step.action == "finish" and slots[p] > 0:
            slots[p] -= 1
        else:
            raise ValueError(f"step {count} ({step}) is not enabled")
    return Replayed(tuple(slots), count)


def describe(steps: Sequence[Step]) -> list[str]:
    """One line per step, with a server's reads of every slot in a row folded into one
    line and the same action of consecutive servers (starts, admits) into one."""
    lines: list[str] = []
    i = 0
    while i < len(steps):
        step = steps[i]
        if step.action == "read" and step.arg == 0:
            j = i
            while j + 1 < len(steps) and steps[j + 1] == Step(
                "read", step.server, steps[j].arg + 1
            ):
                j += 1
            if j > i:
                lines.append(f"server {step.server} reads slots 0..{steps[j].arg}")
                i = j + 1
                continue
        if step.action in ("start", "admit"):
            j = i
            while (
                j + 1 < len(steps)
                and steps[j + 1].action == step.action
                and steps[j + 1].arg == step.arg
                and steps[j + 1].server == steps[j].server + 1
            ):
                j += 1
            if j > i:
                who = f"servers {step.server}..{steps[j].server} each"
                what = (
                    f"start a check of n={step.arg}"
                    if step.action == "start"
                    else "admit and write their slot"
                )
                lines.append(f"{who} {what}")
                i = j + 1
                continue
        lines.append(step.describe())
        i += 1
    return lines


def token_schedule(servers: int, limit: int, prompt: int, rule: TokenRule) -> tuple[Phase, ...]:
    """The check-then-write schedule that reaches the worst queued tokens of `rule`.

    Like the request construction, with tokens for slots: server 0 admits alone, in
    requests of at most P tokens, until its count is Mt - 1 (rule ge: a check that reads
    Mt - 1 still admits a whole prompt) or Mt - min(Mt, P) (rule fits); then every server
    checks a request of P (ge) or min(Mt, P) (fits) tokens, all read before any decides.
    Nothing is admitted when Mt = 0 (no phases).
    """
    # OB-TOK-1, OB-TOK-2: the schedules that reach token_bound.
    if servers < 1 or limit < 0 or prompt < 1:
        raise ValueError("need servers >= 1, limit >= 0, prompt >= 1")
    if limit == 0:
        return ()
    ge = TokenRule(rule) is TokenRule.GE
    last = prompt if ge else min(limit, prompt)
    alone = limit - 1 if ge else limit - last
    reads = range(servers)

    def one(tokens: int) -> tuple[Step, ...]:
        return (Step("start", 0, tokens), *(Step("read", 0, k) for k in reads), Step("admit", 0))

    phases: list[Phase] = []
    if alone // prompt:
        phases.append(Phase(alone // prompt, one(prompt), f"server 0 admits {prompt} tokens alone"))
    if alone % prompt:
        phases.append(Phase(1, one(alone % prompt), f"server 0 admits {alone % prompt} more"))
    together = (
        *(Step("start", p, last) for p in range(servers)),
        *(Step("read", p, k) for p in range(servers) for k in reads),
        *(Step("admit", p) for p in range(servers)),
    )
    phases.append(Phase(1, together, f"every server checks {last} tokens; all read first"))
    return tuple(phases)


def replay_tokens(
    servers: int, limit: int, prompt: int, rule: TokenRule, steps: Iterable[Step]
) -> Replayed:
    """Run a check-then-write token schedule from all counts 0 (`ValueError` naming the
    first step not enabled): `start` t (1 <= t <= P), `read` the next server's queued
    tokens, `admit` once every count is read and `admits_tokens` agrees."""
    # OB-ONE-1: the token decision is the protocol's own step function.
    queued = [0] * servers
    checks: list[Check | None] = [None] * servers
    count = 0
    for count, step in enumerate(steps, 1):
        p = step.server
        check = checks[p] if 0 <= p < servers else None
        if (
            step.action == "start"
            and 0 <= p < servers
            and check is None
            and 1 <= step.arg <= prompt
        ):
            checks[p] = Check(step.arg)
        elif step.action == "read" and check is not None and step.arg == check.next_slot < servers:
            checks[p] = check.read(queued[step.arg])
        elif (
            step.action == "admit"
            and check is not None
            and check.done(servers)
            and admits_tokens(rule, check.view, check.n, limit)
        ):
            queued[p] += check.n
            checks[p] = None
        else:
            raise ValueError(f"step {count} ({step}) is not enabled")
    return Replayed(tuple(queued), count)
