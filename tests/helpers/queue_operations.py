"""Seeded random queue operations that name requests by id, for differential tests.

`operations(rng, count)` makes a program of add, prepend, pop, remove,
`remove_requests` and `prepend_requests`, each naming requests by id (ids starting
with `r` are added one at a time, `p` ones arrive in a batch), so the same program
can run on two queues holding different objects: a copy (`test_queue_copies`) or
requests of another type (`test_queue_adversarial_requests`).
"""

from __future__ import annotations

import random
from typing import Any

from queueref import RequestQueue


def operations(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    made: list[str] = []
    ops: list[tuple[Any, ...]] = []
    for number in range(count):
        kind = rng.choice(
            ["add_request"] * 3
            + ["prepend_request", "pop_request", "remove_request", "remove_requests"] * 1
            + ["prepend_requests"]
        )
        if kind in ("add_request", "prepend_request") or not made:
            kind = kind if made and kind == "prepend_request" else "add_request"
            made.append(f"r{number}")
            ops.append((kind, made[-1]))
        elif kind == "prepend_requests":
            new = [f"p{number}.{i}" for i in range(rng.randint(0, 3))]
            made.extend(new)
            ops.append((kind, *new))
        elif kind == "remove_requests":
            ops.append((kind, *rng.sample(made, min(len(made), rng.randint(0, 3)))))
        else:
            ops.append((kind, rng.choice(made)))
    return ops


def ids(queue: RequestQueue) -> list[Any]:
    """The ids in order; anything handed out that is no request, as itself."""
    return [getattr(r, "request_id", r) for r in queue]
