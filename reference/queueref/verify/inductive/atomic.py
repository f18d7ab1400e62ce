"""The atomic-snapshot model: a check reads the whole sum in one step.

State: c[0..N-1] (slots), p[0..N-1] (weight of a check that passed and is not yet
written, 0 when none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from queueref.admission.protocol import admits_check_then_write
from queueref.verify.inductive.common import Flag, all_of, within_bound

ATOMIC_CHECK, ATOMIC_WRITE, ATOMIC_FINISH = 0, 1, 2


def atomic_names(servers: int) -> list[str]:
    """Parameter names of the atomic state, in tuple order."""
    return [f"c{q}" for q in range(servers)] + [f"p{q}" for q in range(servers)]


def atomic_initial(servers: int) -> tuple[int, ...]:
    """Every slot 0, nothing pending."""
    return (0,) * (2 * servers)


def atomic_invariant(servers: int, cap: int, weight: int, values: Sequence[Any]) -> Flag:
    """OB-ATOMIC-1: slots >= 0, each pending weight <= min(W, M), and
    total + pending weights <= M + (N-1)*min(M, W)."""
    c = values[:servers]
    pend = values[servers : 2 * servers]
    flags: list[Flag] = []
    for q in range(servers):
        flags.append((c[q] >= 0) & (pend[q] >= 0) & (pend[q] <= weight) & (pend[q] <= cap))
    flags.append(within_bound(servers, cap, weight, sum(c) + sum(pend)))
    return all_of(flags)


def atomic_bound(servers: int, cap: int, weight: int, values: Sequence[Any]) -> Flag:
    """OB-BOUND-1 in the atomic model: the global count is within the bound."""
    return within_bound(servers, cap, weight, sum(values[:servers]))


def atomic_step(
    servers: int,
    cap: int,
    weight: int,
    values: Sequence[Any],
    action: Any,
    server: Any,
    n: Any,
) -> tuple[Any, ...]:
    """One step of `server`: a snapshot check of weight n, the write of its passed check,
    or the finish of n of its requests. A step that is not enabled changes nothing."""
    c = list(values[:servers])
    pend = list(values[servers : 2 * servers])
    for q in range(servers):
        if server == q:
            if action == ATOMIC_CHECK:
                # One check at a time per server: a second check waits for the write.
                if pend[q] == 0 and 1 <= n <= weight:
                    if admits_check_then_write(sum(c), n, cap):
                        pend[q] = n
            elif action == ATOMIC_WRITE:
                c[q] = c[q] + pend[q]
                pend[q] = 0
            elif action == ATOMIC_FINISH:
                if 1 <= n <= c[q]:
                    c[q] = c[q] - n
    return tuple(c + pend)
