"""The natural potential of fine-grained check-then-write is NOT inductive (N = 3).

Potential: the global count plus the weights of the checks in progress whose prospective
view (what they read so far plus the current value of every slot still to read) still
fits, i.e. the checks that could still admit if nothing else moved. It is at most
M + (N-1)*min(M, W) in every reachable state, but one step can break it from a state that
satisfies it and is not reachable, so it cannot serve as the inductive invariant: CrossHair
must refute the obligation below. The research note's counterexample (N=3, M=3, W=1):
c = [2, 2, 1], readers 0 and 1 have read slots 0 and 1 with partial sums 2 each, server 2
finishes one request and both prospective views drop to 3: the potential goes from 5 to 6.
The invariant that works is `queueref.verify.inductive.fine.fine_invariant` (OB-FINE-1).
"""

from __future__ import annotations

from typing import Any

import icontract


def _potential(M: int, c: list[Any], readers: list[tuple[Any, Any, Any, Any]]) -> Any:
    total = c[0] + c[1] + c[2]
    extra = 0
    for busy, n, k, v in readers:
        rest = (c[0] if k <= 0 else 0) + (c[1] if k <= 1 else 0) + (c[2] if k <= 2 else 0)
        if busy == 1 and v + rest + n <= M:
            extra = extra + n
    return total + extra


def _holds(M: int, W: int, c: list[Any], readers: list[tuple[Any, Any, Any, Any]]) -> Any:
    ok = (M >= 0) & (W >= 1) & (c[0] >= 0) & (c[1] >= 0) & (c[2] >= 0)
    for busy, n, k, v in readers:
        ok = ok & ((busy == 0) | ((n >= 1) & (n <= W) & (k >= 0) & (k <= 3) & (v >= 0)))
        ok = ok & ((busy == 0) | (busy == 1))
    bound = M + 2 * M if M <= W else M + 2 * W
    return ok & (_potential(M, c, readers) <= bound)


@icontract.require(
    lambda M, W, c0, c1, c2, b0, n0, k0, v0, b1, n1, k1, v1, b2, n2, k2, v2: _holds(
        M, W, [c0, c1, c2], [(b0, n0, k0, v0), (b1, n1, k1, v1), (b2, n2, k2, v2)]
    ),
    "the natural potential is within the bound before the step",
)
@icontract.require(lambda b2, c2: (b2 == 0) & (c2 >= 1), "server 2 is idle and has a request")
@icontract.ensure(
    lambda M, W, result: _holds(M, W, list(result[:3]), [result[3:7], result[7:11], result[11:]]),
    "the natural potential is within the bound after the step",
)
def potential_n3_finish_2(
    M: int, W: int,
    c0: int, c1: int, c2: int,
    b0: int, n0: int, k0: int, v0: int,
    b1: int, n1: int, k1: int, v1: int,
    b2: int, n2: int, k2: int, v2: int,
) -> tuple[Any, ...]:  # fmt: skip
    """One of server 2's requests finishes: the potential can grow."""
    return (c0, c1, c2 - 1, b0, n0, k0, v0, b1, n1, k1, v1, b2, n2, k2, v2)
