"""`queueref serve`: OpenAI-style HTTP API servers in front of the admission check.

Read `wire` (request and error bodies), `app` (the ASGI app of one server), `store`
(the admission store a server uses: shared memory or Redis), `worker` (one child
process and its socket), then `group` (the port, the trace folder, the supervised group).
"""
