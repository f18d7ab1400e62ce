"""vLLM's scheduler waiting lifecycle (`vllm/v1/core/sched/scheduler.py`), one layout per release.

Read in this order:

1. `model` -- the lifecycle stated on plain lists: the places a request can be.
2. `places` -- the layouts (which waiting queues a release has) and their names.
3. `state` -- the queues and the running list of one `WaitingQueues`.
4. `lifecycle` -- `WaitingQueues`: enqueue and the public operations.
5. `step` -- one scheduling step: select a queue, peek, run, skip or stop.
6. `stream` and `leave` -- streaming sessions; preemption, finish and abort.
7. `checks` -- the conditions every operation keeps (conservation, statuses).
"""
