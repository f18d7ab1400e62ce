"""The exhaustive search of vLLM's admission paths and the reservations at preflight.

One row per (path, N, M, W, K) of `queueref bound-table --path`: the worst global count
(`PathModel.total`) with a shortest witness, the bound of `paths.path_bound`, and the
two prices vLLM #58192 asks about, with no finishes and no render failures, so that every
refusal is caused by the other requests in flight:

* `wasted_renders`: in a burst -- each of the N * K requests makes one attempt, from the
  empty system -- the most requests refused after they were rendered;
* `spurious_rejection`: the largest free capacity M - A at a refusal of a request that
  fits (A + n <= M, A the admitted count), None when no such refusal exists (OB-WTC-3's
  measure, on the whole path: requests start again after they end).
"""

from __future__ import annotations

import time

from queueref.admission.paths import AdmissionPath, path_bound
from queueref.verify.admission_models import State
from queueref.verify.path_models import Broken, PathModel, PathStep
from queueref.verify.search import Exploration, Search, search


def steps_to(found: Search, target: State) -> tuple[PathStep, ...]:
    """A shortest sequence of steps from the initial state to `target`."""
    assert found.parents is not None, "search without parents: no witness"
    steps: list[PathStep] = []
    state = target
    while (link := found.parents[state]) is not None:
        state, raw = link
        steps.append(PathStep(*raw))
    steps.reverse()
    return tuple(steps)


def worst_spurious_rejection_path(
    path: AdmissionPath, servers: int, cap: int, weight: int, requests_per_server: int = 1,
    *, broken: Broken | None = None,
) -> tuple[int | None, tuple[PathStep, ...]]:  # fmt: skip
    """The largest M - A at a refusal of a request that fits, under contention alone (no
    finishes, no render failures: OB-WTC-3's setting), and a shortest trace ending in that
    refusal; `(None, ())` when there is none."""
    # ADM-PRE-7: the spurious rejections of each path.
    model = PathModel(
        path, servers, cap, weight, requests_per_server,
        finishes=False, failures=False, broken=broken,
    )  # fmt: skip
    found = search(model, model.spurious_rejection, parents=True)
    if found.best_score < 0:
        return None, ()
    best = found.best_state
    for label, _ in model.successors(best):
        if label[0] in ("reject", "rollback", "refuse"):
            local = model.requests(best, label[1])[label[3]]
            if model.spurious(best, label[1], local) == found.best_score:
                return found.best_score, steps_to(found, best) + (PathStep(*label),)
    raise AssertionError("the best state has no spurious rejection")  # pragma: no cover


def worst_wasted_renders(
    path: AdmissionPath, servers: int, cap: int, weight: int, requests_per_server: int = 1,
    *, broken: Broken | None = None,
) -> tuple[int, tuple[PathStep, ...]]:  # fmt: skip
    """The most requests refused after rendering in a burst, with a shortest trace."""
    # ADM-PRE-7: wasted renders.
    model = PathModel(path, servers, cap, weight, requests_per_server, burst=True, broken=broken)
    found = search(model, model.wasted, parents=True)
    return found.best_score, steps_to(found, found.best_state)


def explore_path(
    path: AdmissionPath | str,
    servers: int,
    cap: int,
    weight: int,
    requests_per_server: int = 1,
    *,
    witness: bool = False,
    prices: bool = True,
    max_states: int | None = None,
    broken: Broken | None = None,
) -> Exploration:
    """One row: the exact worst count of `path` at (N, M, W, K), by exhaustive search."""
    # ADM-PRE-7: the row; its bound is `path_bound` (ADM-PRE-1..6).
    path = AdmissionPath(path)
    began = time.perf_counter()
    model = PathModel(path, servers, cap, weight, requests_per_server, broken=broken)
    slot_total = lambda s: sum(s[:servers])  # noqa: E731
    found = search(model, parents=witness, also=[slot_total], max_states=max_states)
    extra: dict[str, object] = {"path": path.value, "requests_per_server": requests_per_server}
    if broken is not None:
        extra["broken"] = broken.value
    if path is AdmissionPath.RESERVE_WRITE_THEN_CHECK:
        extra["worst_slot_total"] = found.also[0]
    if prices:
        extra["wasted_renders"] = worst_wasted_renders(
            path, servers, cap, weight, requests_per_server, broken=broken
        )[0]
        extra["spurious_rejection"] = worst_spurious_rejection_path(
            path, servers, cap, weight, requests_per_server, broken=broken
        )[0]
    return Exploration(
        protocol=path.value,
        servers=servers,
        cap=cap,
        weight=weight,
        worst_total=found.best_score,
        bound=path_bound(path, servers, cap, weight, requests_per_server),
        states=found.states,
        seconds=time.perf_counter() - began,
        witness=steps_to(found, found.best_state) if witness else None,
        extra=extra,
    )
