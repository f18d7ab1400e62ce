"""vLLM's waiting-request queues (`vllm/v1/core/sched/request_queue.py`).

Read in this order:

1. `semantics` -- each operation stated on a plain list: what the queues mean.
2. `model` -- the list model the tests and vectors compare every queue with.
3. `fcfs` and `priority` -- the two queues, beside vLLM's deque and heap.
4. `base` -- the abstract `RequestQueue` and the id index both queues share.
5. `factory` -- `SchedulingPolicy` and `create_request_queue`.

Their contracts live beside them: `checks` (what every `RequestQueue` promises,
and the snapshot its clauses compare with), `clauses` (what our two queues add)
and `contracts` (the lean checker that puts them around every subclass's
operations, ours and other people's).
"""

# Any import of a module of this package runs this first, so the contracts bind every
# `RequestQueue` subclass, whichever module is imported (see `contracts`).
from queueref.queues import contracts as contracts
