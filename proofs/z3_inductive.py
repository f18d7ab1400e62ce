"""Extra evidence for larger N: the same invariants and steps, checked with z3 directly.

CrossHair confirms the obligations of `proofs/fine_n*.py` and `proofs/wtc_n*.py` for
N = 2..4. This script runs the very same Python functions of `queueref.verify.inductive`
(the invariant, the step functions, which use `queueref.admission.protocol`) on z3 integer
variables instead of CrossHair's symbolic ones, for larger N:

* every `if` on a symbolic condition is split into its two cases (a small depth-first path
  enumeration, pruned by z3 when a case is infeasible), so each step is checked on every
  path, as CrossHair does;
* on each path z3 must show that `invariant(before) and guard and path condition and
  not invariant(after)` is unsatisfiable (OB-FINE-1, OB-WTC-1), for every M >= 0, W >= 1
  and unbounded integers; and that the invariant implies the bound (OB-BOUND-1,
  OB-WTC-1).

As with CrossHair, a check that cannot fail proves nothing: `--teeth` also checks, at
the smallest N, that dropping each conjunct gives a counterexample (a satisfiable query).

Usage: `PYTHONPATH=reference python proofs/z3_inductive.py [--model fine|reserve]
[--servers 5-6] [--teeth] [--json FILE]`; exit status 1 if any check fails.
`tools/run_proofs.py` runs it for N = 5..6 (`--z3`) next to the CrossHair obligations.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reference"))

import z3  # noqa: E402

from queueref.verify.inductive import fine  # noqa: E402
from queueref.verify.inductive import write_then_check as wtc  # noqa: E402


class _Explorer:
    """Depth-first enumeration of the paths through a function of symbolic values."""

    def __init__(self, solver: z3.Solver) -> None:
        self.solver = solver
        # One entry per branch point of the current path: (choice, other side unexplored).
        self.stack: list[tuple[bool, bool]] = []
        self.position = 0
        self.path: list[Any] = []

    def decide(self, condition: Any) -> bool:
        """The truth value of `condition` on the current path (a branch point)."""
        simplified = z3.simplify(condition)
        if z3.is_true(simplified):
            return True
        if z3.is_false(simplified):
            return False
        i = self.position
        self.position += 1
        if i < len(self.stack):
            choice = self.stack[i][0]  # replaying the path prefix
        else:
            feasible = [
                value
                for value in (True, False)
                if self.solver.check(*self.path, condition if value else z3.Not(condition))
                != z3.unsat
            ]
            choice = feasible[0] if feasible else True
            self.stack.append((choice, len(feasible) == 2))
        self.path.append(condition if choice else z3.Not(condition))
        return choice

    def runs(self) -> Iterator[None]:
        """Yield once per path; `decide` answers consistently within each run."""
        while True:
            self.position, self.path = 0, []
            yield
            # Backtrack: flip the deepest choice whose other side is still unexplored.
            while self.stack and not self.stack[-1][1]:
                self.stack.pop()
            if not self.stack:
                return
            choice, _ = self.stack.pop()
            self.stack.append((not choice, False))


@contextmanager
def _symbolic_booleans(explorer: _Explorer) -> Iterator[None]:
    """Let `&`, `|` and `if` work on z3 booleans for the duration."""
    saved = {
        name: getattr(z3.BoolRef, name, None)
        for name in ("__and__", "__rand__", "__or__", "__ror__")
    }
    saved_bool = z3.AstRef.__bool__
    z3.BoolRef.__and__ = lambda a, b: z3.And(a, b)  # type: ignore[attr-defined]
    z3.BoolRef.__rand__ = lambda a, b: z3.And(b, a)  # type: ignore[attr-defined]
    z3.BoolRef.__or__ = lambda a, b: z3.Or(a, b)  # type: ignore[attr-defined]
    z3.BoolRef.__ror__ = lambda a, b: z3.Or(b, a)  # type: ignore[attr-defined]
    z3.AstRef.__bool__ = lambda self: explorer.decide(self)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(z3.BoolRef, name)
            else:
                setattr(z3.BoolRef, name, value)
        z3.AstRef.__bool__ = saved_bool  # type: ignore[method-assign]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "proved" | "counterexample" | "unknown"
    seconds: float
    paths: int


def _as_bool(value: Any) -> Any:
    return z3.BoolVal(value) if isinstance(value, bool) else value


def check_step(
    name: str,
    names: Sequence[str],
    invariant: Callable[..., Any],
    guard: Callable[[dict[str, Any]], Any],
    step: Callable[[dict[str, Any], tuple[Any, ...]], tuple[Any, ...]],
    servers: int,
    conclusion: Callable[[Any, Any, tuple[Any, ...]], Any] | None = None,
) -> Check:
    """invariant(before) & guard & path -> conclusion(after) (default: the invariant)."""
    began = time.perf_counter()
    env: dict[str, Any] = {v: z3.Int(v) for v in ["M", "W", "n", *names]}
    before = tuple(env[v] for v in names)
    solver = z3.Solver()
    explorer = _Explorer(solver)
    paths = 0
    status = "proved"
    with _symbolic_booleans(explorer):
        pre = _as_bool(invariant(servers, env["M"], env["W"], before))
        solver.add(pre, _as_bool(guard(env)))
        for _ in explorer.runs():
            after = step(env, before)
            post = (
                invariant(servers, env["M"], env["W"], after)
                if conclusion is None
                else conclusion(env["M"], env["W"], after)
            )
            paths += 1
            result = solver.check(*explorer.path, z3.Not(_as_bool(post)))
            if result == z3.sat:
                status = "counterexample"
                break
            if result != z3.unsat:
                status = "unknown"
    return Check(name, status, time.perf_counter() - began, paths)


def fine_checks(servers: int, invariant: Callable[..., Any] = fine.fine_invariant) -> list[Any]:
    """(name, guard, step, conclusion) of every fine obligation at `servers`."""
    N = servers
    out: list[Any] = []
    for p in range(N):
        out.append(
            (
                f"fine_n{N}_start_{p}",
                lambda e, p=p: z3.And(e[f"b{p}"] == 0, e["n"] >= 1, e["n"] <= e["W"]),
                lambda e, s, p=p: fine.fine_start(N, e["M"], s, p, e["n"]),
                None,
            )
        )
        for j in range(N):
            out.append(
                (
                    f"fine_n{N}_read_{p}_{j}",
                    lambda e, p=p, j=j: z3.And(e[f"b{p}"] == 1, e[f"k{p}"] == j),
                    lambda e, s, p=p, j=j: fine.fine_read(N, s, p, j),
                    None,
                )
            )
        out.append(
            (
                f"fine_n{N}_decide_{p}",
                lambda e, p=p: z3.And(e[f"b{p}"] == 1, e[f"k{p}"] == N),
                lambda e, s, p=p: fine.fine_decide(N, e["M"], s, p),
                None,
            )
        )
        out.append(
            (
                f"fine_n{N}_finish_{p}",
                lambda e, p=p: e[f"c{p}"] >= 1,
                lambda e, s, p=p: fine.fine_finish(N, s, p),
                None,
            )
        )
    out.append(
        (
            f"fine_n{N}_bound",
            lambda e: z3.BoolVal(True),
            lambda e, s: s,
            lambda M, W, s: fine.fine_bound(N, M, W, s),
        )
    )
    return out


def reserve_checks(servers: int) -> list[Any]:
    N = servers
    out: list[Any] = []
    for p in range(N):
        out.append(
            (
                f"wtc_n{N}_start_{p}",
                lambda e, p=p: z3.And(e[f"b{p}"] == 0, e["n"] >= 1, e["n"] <= e["W"]),
                lambda e, s, p=p: wtc.reserve_start(N, s, p, e["n"]),
                None,
            )
        )
        for j in range(N):
            out.append(
                (
                    f"wtc_n{N}_read_{p}_{j}",
                    lambda e, p=p, j=j: z3.And(e[f"b{p}"] == 1, e[f"k{p}"] == j),
                    lambda e, s, p=p, j=j: wtc.reserve_read(N, s, p, j),
                    None,
                )
            )
        out.append(
            (
                f"wtc_n{N}_decide_{p}",
                lambda e, p=p: z3.And(e[f"b{p}"] == 1, e[f"k{p}"] == N),
                lambda e, s, p=p: wtc.reserve_decide(N, e["M"], s, p),
                None,
            )
        )
        out.append(
            (
                f"wtc_n{N}_finish_{p}",
                lambda e, p=p: e[f"c{p}"] - e[f"n{p}"] >= 1,
                lambda e, s, p=p: wtc.reserve_finish(N, s, p),
                None,
            )
        )
    out.append(
        (
            f"wtc_n{N}_bound",
            lambda e: z3.BoolVal(True),
            lambda e, s: s,
            lambda M, W, s: wtc.reserve_hard_cap(N, M, s),
        )
    )
    return out


def run_model(model: str, servers: int, invariant: Callable[..., Any] | None = None) -> list[Check]:
    if model == "fine":
        names, checks = fine.fine_names(servers), fine_checks(servers)
        inv = invariant or fine.fine_invariant
    else:
        names, checks = wtc.reserve_names(servers), reserve_checks(servers)
        inv = invariant or wtc.reserve_invariant
    return [
        check_step(name, names, inv, guard, step, servers, conclusion)
        for name, guard, step, conclusion in checks
    ]


def _range(text: str) -> range:
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["fine", "reserve", "both"], default="both")
    parser.add_argument("--servers", default="5-6")
    parser.add_argument("--teeth", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    results: list[dict[str, object]] = []
    models = ["fine", "reserve"] if args.model == "both" else [args.model]
    failures = 0
    began = time.perf_counter()
    for model in models:
        for n in _range(args.servers):
            checks = run_model(model, n)
            bad = [c for c in checks if c.status != "proved"]
            failures += len(bad)
            seconds = sum(c.seconds for c in checks)
            slowest = max(checks, key=lambda c: c.seconds)
            print(
                f"{model:<8} N={n}: {len(checks) - len(bad)}/{len(checks)} proved "
                f"({sum(c.paths for c in checks)} paths, {seconds:.1f} s; slowest "
                f"{slowest.name} {slowest.seconds:.1f} s)",
                flush=True,
            )
            for c in bad:
                print(f"    {c.name}: {c.status}")
            results += [
                {
                    "name": c.name,
                    "model": model,
                    "servers": n,
                    "status": c.status,
                    "seconds": round(c.seconds, 3),
                    "paths": c.paths,
                }
                for c in checks
            ]
        if args.teeth:
            conjuncts = fine.FINE_CONJUNCTS if model == "fine" else wtc.RESERVE_CONJUNCTS
            base = fine.fine_invariant if model == "fine" else wtc.reserve_invariant
            for conjunct in conjuncts:
                weak = partial(base, drop=(conjunct,))
                checks = run_model(model, 2, weak)
                refuted = [c.name for c in checks if c.status == "counterexample"]
                ok = bool(refuted)
                failures += not ok
                print(
                    f"{model:<8} N=2 without {conjunct!r}: "
                    + (f"counterexample in {refuted[0]}" if ok else "NO COUNTEREXAMPLE (no teeth)")
                )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    verdict = "all proved" if not failures else f"{failures} FAILED"
    print(f"{verdict} in {time.perf_counter() - began:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
