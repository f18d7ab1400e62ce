"""`make faults`: one cap across nodes under real faults.

Read `parts` (the real parts: Redis in the run's own network namespace, a Sentinel
with a replica, serve nodes in their own process groups), then `runs` (one fault
under load, the merged trace judged) and `checks` (what a run measures and how it
is judged). The expected overshoot of each fault is `queueref.verify.store_faults`.
"""
