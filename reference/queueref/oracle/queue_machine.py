"""One state machine for every request-queue check: the model tests and the oracle.

`QueueMachine` drives a queue under test (the *subject*, built by a factory)
through every operation of `RequestQueue`, side by side with an *expected*
queue (built by a second factory), and after every step compares the whole
contents. It ships inside the package, zarr-python style: the constructor
takes the thing under test, so any queue runs it in one line.

* queueref's own tests run it with the reference queues as the subject and
  the plain list model (`queueref.queues.model.ListQueueModel`) as the
  expected side;
* `check_request_queue` runs it with somebody else's queue as the subject and
  queueref's reference queue as the expected side (ORC-MACH-1);
* `check_queue_laws` runs it with no expected side at all: then only the
  policy-independent laws are checked (ORC-LAW-1 to ORC-LAW-6), against a
  ledger of what must be in the queue.

Read it in this order, one job a module:

1. `queueref.oracle.handles` -- a request as both sides see it, and what a call did;
2. `queueref.oracle.ties` -- comparing up to ties, and the tie hint (ORC-TIES-1..3);
3. `queueref.oracle.program_text` -- writing the replayable program (ORC-CRQ-2);
4. `queueref.oracle.machine_core` -- one call on both sides, compared and recorded;
5. `queueref.oracle.rules` -- the rules: which calls a program makes (`QueueMachine`);
6. `queueref.oracle.variants` -- the strict machine (ORC-CRQ-6) and the long
   ones that start with a batch (ORC-SIZE-2).

Calls that break a precondition of the spec (a request queued twice, a taken
request id, a non-request, a queue prepended to itself or sharing a request)
are only made when `strict=True`: vLLM leaves them undefined, queueref rejects
them with `ValueError` / `TypeError` (RQ-ALL-2, RQ-ALL-3, RQ-ALL-8, RQ-REQ-3).

Models no vLLM file; it exercises the interface of
`vllm/v1/core/sched/request_queue.py`.
"""

from __future__ import annotations

from collections.abc import Iterable

from queueref.oracle.errors import FailureKey
from queueref.oracle.machine_core import QueueFactory, RequestFactory, Ties
from queueref.oracle.rules import QueueMachine
from queueref.oracle.search_budget import WorkMeter
from queueref.oracle.variants import LongQueueMachine, StrictLongQueueMachine, StrictQueueMachine

__all__ = ["queue_machine"]


def queue_machine(
    subject_factory: QueueFactory,
    expected_factory: QueueFactory | None = None,
    *,
    request_factory: RequestFactory | None = None,
    strict: bool = False,
    policy: str | None = None,
    ties: Ties = "exact",
    known: Iterable[FailureKey] = (),
    initial_requests: tuple[int, int] = (0, 0),
    meter: WorkMeter | None = None,
) -> QueueMachine:
    """ORC-MACH-1: the machine for a subject and an expected side (strict or not, long or not)."""
    long = initial_requests[1] > 0
    if strict:
        cls: type[QueueMachine] = StrictLongQueueMachine if long else StrictQueueMachine
    else:
        cls = LongQueueMachine if long else QueueMachine
    return cls(
        subject_factory,
        expected_factory,
        request_factory=request_factory,
        policy=policy,
        ties=ties,
        known=known,
        initial_requests=initial_requests,
        meter=meter,
    )
