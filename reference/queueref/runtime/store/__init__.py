"""One cap across nodes: the admission counters in a real Redis.

Read `redis_scripts` (the key layout, its validation and the Lua scripts), then
`redis_config` (a deployment's configuration), `redis_connect` (one primary, or the
one a Sentinel names), `redis_store` (the client every server runs) and
`redis_server` (a throwaway redis-server for tests, experiments and faults).
"""
