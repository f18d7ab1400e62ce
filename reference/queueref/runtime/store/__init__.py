"""One cap across nodes: the admission counters in a real Redis.

Read `redis_store` (the key layout, the scripts and the client), then
`redis_server` (starting a throwaway redis-server for tests and experiments).
"""
