"""vLLM's waiting-request queues (`vllm/v1/core/sched/request_queue.py`).

Read in this order:

1. `semantics` -- each operation stated on a plain list: what the queues mean.
2. `model` -- the list model the tests and vectors compare every queue with.
3. `fcfs` and `priority` -- the two queues, beside vLLM's deque and heap.
4. `base` -- the abstract `RequestQueue`, which puts the checks of `checks` around
   every subclass's operations (ours and other people's).
5. `factory` -- `SchedulingPolicy` and `create_request_queue`.
"""
