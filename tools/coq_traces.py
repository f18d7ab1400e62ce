"""The Coq model and the Python step functions are one transition system (OB-MODEL-1, OB-ONE-1).

Generates random valid traces of the fine-grained model two ways -- with the step
functions of `queueref.admission.protocol` (`Check.read`, `accumulate`,
`admits_check_then_write`) and with the explorer's `CheckThenWrite.successors` -- and
writes them, each with the final state Python computed, as `Example`s of a Coq file
checked by computation (`vm_compute; reflexivity` on `Model.run`, the executable step
function proved equal to the step relation by `Model.step_exec`). coqc must accept it.

Then, per kind of action (start, read, decide, finish), two invalid traces that Coq must
reject, each in a file of its own: one whose last action Python refuses (not enabled),
claimed to leave the state as it was, and one valid trace claimed to end in a wrong final
state (the state a broken step would give: a start of the wrong weight, a read that does
not add the slot, a decision that does not write, a finish that does not decrement).

The first example, `finish_lowers_slot`, is fixed: it is where the mutant
"finish-keeps-the-slot" of `proofs/coq/theorems.json` must fail.
"""

from __future__ import annotations

import random
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from queueref.admission.protocol import Check, admits_check_then_write
from queueref.verify.admission_models import CheckThenWrite

LOGICAL = "Queueref"
# An action: (kind, server, weight); weight only for start.
Action = tuple[str, int, int]


@dataclass(frozen=True)
class FineState:
    """OB-MODEL-1's state: the slots and each server's check in progress."""

    slots: tuple[int, ...]
    checks: tuple[Check | None, ...]


def initial(servers: int) -> FineState:
    return FineState((0,) * servers, (None,) * servers)


def enabled(state: FineState, cap: int, weight: int) -> list[Action]:
    """Every action the fine model allows in `state`."""
    servers = len(state.slots)
    out: list[Action] = []
    for p, check in enumerate(state.checks):
        if check is None:
            out.extend(("start", p, n) for n in range(1, weight + 1))
        elif not check.done(servers):
            out.append(("read", p, 0))
        else:
            out.append(("decide", p, 0))
        if state.slots[p] > 0:
            out.append(("finish", p, 0))
    return out


def apply(state: FineState, action: Action, cap: int, weight: int) -> FineState:
    """One step with the protocol's step functions; ValueError if it is not enabled."""
    if action not in enabled(state, cap, weight):
        raise ValueError(f"{action} is not enabled")
    kind, p, n = action
    slots, checks = list(state.slots), list(state.checks)
    check = checks[p]
    if kind == "start":
        checks[p] = Check(n)
    elif kind == "read":
        assert check is not None
        checks[p] = check.read(slots[check.next_slot])
    elif kind == "decide":
        assert check is not None
        if admits_check_then_write(check.view, check.n, cap):
            slots[p] += check.n
        checks[p] = None
    else:
        slots[p] -= 1
    return FineState(tuple(slots), tuple(checks))


def random_walk(
    rng: random.Random, servers: int, cap: int, weight: int, length: int
) -> tuple[list[Action], FineState]:
    state = initial(servers)
    actions: list[Action] = []
    for _ in range(length):
        action = rng.choice(enabled(state, cap, weight))
        state = apply(state, action, cap, weight)
        actions.append(action)
    return actions, state


def explorer_walk(
    rng: random.Random, servers: int, cap: int, weight: int, length: int
) -> tuple[list[Action], tuple[tuple[int, ...], tuple[tuple[int, int] | None, ...]]]:
    """A random walk of the explorer's model, as fine actions, with the explorer's final
    slots and (weight, next slot) per server. The explorer's `reject` at slot k (the view
    already too big) is the fine model's reads of slots k..N-1 and a rejecting decision."""
    model = CheckThenWrite(servers, cap, weight)
    state = model.initial()
    actions: list[Action] = []
    for _ in range(length):
        successors = model.successors(state)
        if not successors:  # M = 0: the explorer starts nothing (weights above M never pass)
            break
        (kind, p, arg, _), state = rng.choice(successors)
        if kind == "start":
            actions.append(("start", p, arg))
        elif kind == "read":
            actions.append(("read", p, 0))
        elif kind == "reject":
            actions.extend([("read", p, 0)] * (servers - arg) + [("decide", p, 0)])
        elif kind == "admit":
            actions.append(("decide", p, 0))
        else:
            actions.append(("finish", p, 0))
    checks: list[tuple[int, int] | None] = []
    for code in state[servers:]:
        n, k, _ = model.dec[code]
        checks.append(None if code == 0 else (n, k))
    return actions, (tuple(state[:servers]), tuple(checks))


# ------------------------------------------------------------------ Coq text


def coq_action(action: Action) -> str:
    kind, p, n = action
    return {
        "start": f"Start {p} {n}",
        "read": f"Read {p}",
        "decide": f"Decide {p}",
        "finish": f"Finish {p}",
    }[kind]


def coq_list(items: list[str]) -> str:
    return "[" + "; ".join(items) + "]"


def coq_observation(state: FineState) -> str:
    checks = [
        "None" if c is None else f"Some ({c.n}, {c.next_slot}, {c.view})" for c in state.checks
    ]
    return f"({coq_list([str(v) for v in state.slots])}, {coq_list(checks)})"


def coq_example(
    name: str,
    servers: int,
    cap: int,
    weight: int,
    actions: list[Action],
    claim: str,
    view: str = "observe",
) -> str:
    trace = coq_list([coq_action(a) for a in actions])
    return (
        f"Example {name} :\n  option_map ({view} {servers})\n"
        f"    (run {servers} {cap} {weight} init {trace})\n  = Some {claim}.\n"
        "Proof. vm_compute. reflexivity. Qed.\n"
    )


PRELUDE = f"""(* Generated by tools/coq_traces.py: do not edit. *)
From Coq Require Import List.
Import ListNotations.
From {LOGICAL} Require Import Model.

(* What the explorer keeps of a state: the slots, and each check's weight and next slot. *)
Definition explorer_view (N : nat) (s : state) :=
  (map (slots s) (seq 0 N),
   map (fun p => option_map (fun c => (ck_n c, ck_next c)) (checks s p)) (seq 0 N)).

"""


@dataclass(frozen=True)
class Case:
    name: str
    servers: int
    cap: int
    weight: int
    actions: list[Action]
    claim: str
    view: str = "observe"

    def text(self) -> str:
        return coq_example(
            self.name, self.servers, self.cap, self.weight, self.actions, self.claim, self.view
        )


def fixed_finish_case() -> Case:
    actions: list[Action] = [("start", 0, 1), ("read", 0, 0), ("decide", 0, 0), ("finish", 0, 0)]
    state = initial(1)
    for action in actions:
        state = apply(state, action, 1, 1)
    return Case("finish_lowers_slot", 1, 1, 1, actions, coq_observation(state))


def valid_cases(count: int, seed: int) -> list[Case]:
    """`count` random valid traces (half protocol walks, half explorer walks)."""
    rng = random.Random(seed)
    cases = [fixed_finish_case()]
    for i in range(count):
        servers, cap, weight = rng.randint(1, 4), rng.randint(0, 4), rng.randint(1, 3)
        length = rng.randint(0, 40)
        if i % 2 == 0:
            actions, state = random_walk(rng, servers, cap, weight, length)
            cases.append(Case(f"walk_{i}", servers, cap, weight, actions, coq_observation(state)))
        else:
            actions, (slots, checks) = explorer_walk(rng, servers, cap, max(weight, 1), length)
            shown = ["None" if c is None else f"Some ({c[0]}, {c[1]})" for c in checks]
            claim = f"({coq_list([str(v) for v in slots])}, {coq_list(shown)})"
            cases.append(
                Case(f"explorer_{i}", servers, cap, weight, actions, claim, "explorer_view")
            )
    return cases


def _walk_until(
    rng: random.Random, kind: str, servers: int, cap: int, weight: int, tries: int = 1000
) -> tuple[list[Action], FineState]:
    """A random valid trace whose last action is of `kind`."""
    for _ in range(tries):
        actions, state = random_walk(rng, servers, cap, weight, rng.randint(1, 25))
        if actions and actions[-1][0] == kind:
            return actions, state
    raise RuntimeError(f"no trace ending in {kind}")  # pragma: no cover


def invalid_cases(seed: int) -> list[Case]:
    """Per kind of action: an action Python refuses, and a wrong final state."""
    rng = random.Random(seed)
    servers, cap, weight = 3, 2, 2
    cases: list[Case] = []
    # Actions Python refuses, each after a prefix that makes it impossible.
    refused: dict[str, tuple[list[Action], Action]] = {
        "start": ([("start", 1, 1)], ("start", 1, 2)),  # a second check of server 1
        "read": ([("start", 0, 1)] + [("read", 0, 0)] * 3, ("read", 0, 0)),  # all read
        "decide": ([("start", 2, 1), ("read", 2, 0)], ("decide", 2, 0)),  # not all read
        "finish": ([("start", 0, 1)], ("finish", 1, 0)),  # an empty slot
    }
    for kind, (prefix, bad) in refused.items():
        state = initial(servers)
        for action in prefix:
            state = apply(state, action, cap, weight)
        try:
            apply(state, bad, cap, weight)
        except ValueError:
            pass
        else:  # pragma: no cover - the table above is wrong
            raise AssertionError(f"Python allows {bad}")
        cases.append(
            Case(f"refused_{kind}", servers, cap, weight, prefix + [bad], coq_observation(state))
        )
    # Valid traces, claimed to end where a broken step of that kind would leave them.
    for kind in ("start", "read", "decide", "finish"):
        actions, state = _walk_until(rng, kind, servers, cap, weight)
        _, p, _ = actions[-1]
        slots, checks = list(state.slots), list(state.checks)
        check = checks[p]
        if kind == "start":
            assert check is not None
            checks[p] = replace(check, n=check.n + 1)
        elif kind == "read":
            assert check is not None
            checks[p] = replace(check, view=check.view + 1)
        elif kind == "decide":
            slots[p] += 1  # a rejection that writes, or an admission that writes one more
        else:
            slots[p] += 1  # the finish did not decrement
        wrong = FineState(tuple(slots), tuple(checks))
        cases.append(Case(f"wrong_{kind}", servers, cap, weight, actions, coq_observation(wrong)))
    return cases


# ------------------------------------------------------------------ checking


def _coqc(directory: Path, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["coqc", "-q", "-Q", ".", LOGICAL, name],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def source(count: int, seed: int) -> str:
    """The text of `Traces.v`: the fixed example and `count` random valid traces."""
    return PRELUDE + "\n".join(case.text() for case in valid_cases(count, seed))


def check(compiled: Path, count: int, seed: int) -> dict[str, Any]:
    """Write `Traces.v` and one file per invalid trace into `compiled` (where Model.vo is),
    compile them, and say what Coq made of each."""
    import run_coq  # the error parser and lemma locator of the runner

    started = time.monotonic()
    (compiled / "Traces.v").write_text(source(count, seed))
    done = _coqc(compiled, "Traces.v")
    result: dict[str, Any] = {
        "valid": count + 1,
        "accepted": done.returncode == 0,
        "detail": " ".join((done.stdout + done.stderr).split())[:400],
        "invalid": [],
    }
    for case in invalid_cases(seed):
        name = f"Invalid_{case.name}.v"
        text = PRELUDE + case.text()
        (compiled / name).write_text(text)
        bad = _coqc(compiled, name)
        error = run_coq.parse_error(bad.stdout + bad.stderr)
        located, in_proof = (None, False)
        if error is not None:
            located, in_proof = run_coq.enclosing(text, error.line)
        rejected = (
            bad.returncode != 0
            and error is not None
            and located == case.name
            and in_proof
            and not run_coq.NOT_A_PROOF_STEP.search(error.message)
        )
        result["invalid"].append(
            {
                "name": case.name,
                "status": "rejected" if rejected else "accepted",
                "detail": ""
                if error is None
                else f"{error.file}:{error.line}: {error.message[:200]}",
            }
        )
    result["all_invalid_rejected"] = all(r["status"] == "rejected" for r in result["invalid"])
    result["seconds"] = round(time.monotonic() - started, 1)
    return result
