"""Real processes: the admission protocol run by real API servers.

Read in this order:

1. `servers` -- a process group sharing one counter array, and `stress` on it.
2. `http/` -- `queueref serve`: the wire format, the ASGI app, one worker, the group.
3. `loadgen` -- `queueref load`: a bounded client load on loopback.
4. `experiment` -- the pull request's experiment: serve, load, check the trace, plot.
5. `store/` and `experiment_nodes` -- one cap across nodes through a real Redis.
"""
