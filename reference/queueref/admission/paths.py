"""vLLM's whole admission path and its bounds: preflight, rendering, registration.

`specs/admission.md`, "The whole admission path", states it; the design note on the
reservations at preflight proposed for vLLM #58192 is `specs/preflight-reservations.md`.
The explorer's models of each path are in `queueref.verify.path_models`; `serve
--render-ms` runs them on real processes. Read after `queueref.admission.protocol`,
whose rules each path applies.
"""

from __future__ import annotations

from enum import StrEnum

from queueref.admission.protocol import admits_check_then_write, overshoot_bound

__all__ = ["AdmissionPath", "passes_preflight", "path_bound"]


class AdmissionPath(StrEnum):
    """vLLM's whole admission path (preflight, rendering, registration) and the two
    reservations at preflight proposed for vLLM #58192 (`specs/admission.md`, "The whole
    admission path"; the design note is `specs/preflight-reservations.md`).

    Each request: a check at preflight, then rendering (an `await`: any other request of
    any server acts meanwhile), then registration of its n children into the own slot.
    """

    # ADM-PRE-1, ADM-PRE-2, ADM-PRE-4.
    #: vLLM 0.31.0-0.33.0 (and 0.30.0 for n = 1): preflight check-then-write check that
    #: writes nothing, rendering, a second check and the n children registered with no
    #: `await` between them.
    TWO_CHECK = "two-check"
    #: vLLM 0.30.0 for n >= 2: the second check, then an `await` before each child is
    #: registered, so the server's other requests check in between.
    TWO_CHECK_AWAIT_GAP = "two-check-await-gap"
    #: Reservation at preflight, write-then-check: n is written into the own slot, then
    #: every slot read (own reservation included), kept iff view <= M; held through
    #: rendering, released on a refusal, a render failure or a disconnect.
    RESERVE_WRITE_THEN_CHECK = "reserve-write-then-check"
    #: Reservation at preflight, check-then-write: checked as vLLM checks, then n written
    #: into the own slot with no `await` between, held through rendering.
    RESERVE_CHECK_THEN_WRITE = "reserve-check-then-write"


def passes_preflight(view: int, n: int, cap: int) -> bool:
    """vLLM's `_preflight(n)`: the same rule as check-then-write, but nothing is written."""
    return admits_check_then_write(view, n, cap)


def path_bound(
    path: AdmissionPath, num_servers: int, cap: int, max_n: int, requests_per_server: int = 1
) -> int:
    """The worst global count of an admission path: the one definition.

    K = `requests_per_server` requests of one server can be in flight at once (each
    waiting at its own `await`). Every path whose check and write have no `await`
    between them keeps check-then-write's `M + (N - 1) * min(M, W)`, whatever K; the
    write-then-check reservation keeps the admitted count at M. vLLM 0.30.0's await gap
    lets the K requests of one server check before each other's children are written:
    each acts as a server of its own when n >= 2 can pass (min(M, W) >= 2), hence
    `M + (N * K - 1) * min(M, W)` (a request of n = 1 registers with no `await`).

    >>> [path_bound(p, 3, 4, 2, 2) for p in AdmissionPath]
    [8, 14, 4, 8]
    """
    # ADM-PRE-1, ADM-PRE-3, ADM-PRE-5, ADM-PRE-6: the bounds the explorer reaches.
    w = min(cap, max_n)
    if path is AdmissionPath.RESERVE_WRITE_THEN_CHECK:
        return cap
    if path is AdmissionPath.TWO_CHECK_AWAIT_GAP and w >= 2:
        return cap + (num_servers * requests_per_server - 1) * w
    return overshoot_bound(num_servers, cap, max_n)
