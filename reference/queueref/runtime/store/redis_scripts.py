"""What the multi-node store holds in Redis: the key layout, its validation, the Lua scripts.

Apart from the client (`queueref.runtime.store.redis_store`), so the layout and the
scripts are read in one place (`specs/multi-node.md`, ADM-STORE-6,
ADM-STORE-7). Keys of a deployment `D` (the `{D}` hash tag keeps them in one
Redis Cluster slot):

* `queueref:{D}:count:<i>`: server i's unfinished count, a decimal integer;
* `queueref:{D}:hb:<i>`: its heartbeat, `1` with a lease (PX);
* `queueref:{D}:tokens:<i>`: its queued prompt tokens, with a token limit (ADM-STORE-10);
* `queueref:{D}:servers`: the deployment's server count N;
* `queueref:{D}:nodes`, `queueref:{D}:next_base`: the nodes' slot ranges.

Models no vLLM file (vLLM 0.30.0 and 0.33.0 share counters within one node only).
"""

from __future__ import annotations

import re
from typing import Final

#: Counts above this are corrupt: no deployment holds 2**40 requests.
MAX_COUNT: Final = 2**40

_COUNT: Final = re.compile(rb"\d{1,15}")


class StoreError(Exception):
    """The store answered nothing usable (unreachable, or a corrupt count)."""


class StoreCorruptError(StoreError):
    """A key holds what no server writes: not a decimal int in [0, MAX_COUNT]."""


def parse_count(raw: bytes | None) -> int:
    """A count read from the store; a missing key is 0.

    :raises StoreCorruptError: anything but a decimal int in [0, MAX_COUNT]
    """
    if raw is None:
        return 0
    if not _COUNT.fullmatch(raw) or int(raw) > MAX_COUNT:
        raise StoreCorruptError(
            f"ADM-STORE-6: a count key holds {raw[:32]!r}, not an int in [0, {MAX_COUNT}]"
        )
    return int(raw)


def heartbeat_live(raw: bytes | None) -> bool:
    """Whether a heartbeat read from the store is live; a missing key is an expired lease.

    :raises StoreCorruptError: a heartbeat that no server writes (negative, not an int)
    """
    if raw is None:
        return False
    if not _COUNT.fullmatch(raw):
        raise StoreCorruptError(
            f"ADM-STORE-6: a heartbeat key holds {raw[:32]!r}, not a non-negative int"
        )
    return True


def key_prefix(deployment: str) -> str:
    # The {hash tag} keeps every key of a deployment in one Redis Cluster slot.
    return f"queueref:{{{deployment}}}"


def count_key(deployment: str, index: int) -> str:
    return f"{key_prefix(deployment)}:count:{index}"


def heartbeat_key(deployment: str, index: int) -> str:
    return f"{key_prefix(deployment)}:hb:{index}"


def tokens_key(deployment: str, index: int) -> str:
    return f"{key_prefix(deployment)}:tokens:{index}"


# Sums the live servers' counts (and queued tokens), compares and writes in one
# atomic step. KEYS: count:0..N-1, hb:0..N-1, then tokens:0..N-1 with a token limit.
# ARGV: N, own index, n, cap, own count, lease ms, MAX_COUNT, token limit (-1: none),
# the request's tokens, own tokens, token rule (ge, fits). The decisions are
# protocol.admits_check_then_write and protocol.admits_tokens, the request limit
# first. Returns {1 admitted | 0 rejected by requests | 2 by tokens, view, token view}.
# A count or a heartbeat that no server writes is an error (ADM-STORE-6), never a count.
ADMIT_SCRIPT: Final = """
local num = tonumber(ARGV[1])
local own = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local own_count = tonumber(ARGV[5])
local max_count = tonumber(ARGV[7])
local limit = tonumber(ARGV[8])
local add = tonumber(ARGV[9])
local own_tokens = tonumber(ARGV[10])
local function valid(raw, what)
  if not string.match(raw, '^%d+$') or string.len(raw) > 15 or tonumber(raw) > max_count then
    return redis.error_reply('QUEUEREF_CORRUPT a ' .. what .. ' key is not an int')
  end
  return nil
end
local view = own_count
local token_view = own_tokens
for i = 1, num do
  if i - 1 ~= own then
    local beat = redis.call('GET', KEYS[num + i])
    if beat then
      local bad = valid(beat, 'heartbeat')
      if bad then return bad end
      local raw = redis.call('GET', KEYS[i])
      if raw then
        bad = valid(raw, 'count')
        if bad then return bad end
        view = view + tonumber(raw)
      end
      if limit >= 0 then
        local queued = redis.call('GET', KEYS[2 * num + i])
        if queued then
          bad = valid(queued, 'tokens')
          if bad then return bad end
          token_view = token_view + tonumber(queued)
        end
      end
    else
      redis.call('DEL', KEYS[i])
      if limit >= 0 then redis.call('DEL', KEYS[2 * num + i]) end
    end
  end
end
local admitted = 0
if view + n <= cap then
  admitted = 1
  if limit >= 0 then
    local fits = token_view < limit
    if ARGV[11] == 'fits' then fits = token_view + add <= limit end
    if not fits then admitted = 2 end
  end
end
if admitted == 1 then
  own_count = own_count + n
  own_tokens = own_tokens + add
end
redis.call('SET', KEYS[own + 1], own_count)
if limit >= 0 then redis.call('SET', KEYS[2 * num + own + 1], own_tokens) end
redis.call('SET', KEYS[num + own + 1], '1', 'PX', ARGV[6])
return {admitted, view, token_view}
"""

# Gives a node its base index once, by name: the same name gets the same base
# again (a restarted node keeps its slots). KEYS: nodes hash, next-base counter.
# ARGV: node name, its server count K, the deployment's total N.
ALLOCATE_SCRIPT: Final = """
local base = redis.call('HGET', KEYS[1], ARGV[1])
if base then
  return {tonumber(base), 0}
end
local k = tonumber(ARGV[2])
local next_base = tonumber(redis.call('GET', KEYS[2]) or '0')
if next_base + k > tonumber(ARGV[3]) then
  return {-1, next_base}
end
redis.call('SET', KEYS[2], next_base + k)
redis.call('HSET', KEYS[1], ARGV[1], next_base)
return {next_base, 1}
"""

# A server's absolute write of its count and heartbeat, atomic like MULTI, for a
# pipeline that ends with WAIT on the same connection (ADM-FAULT-3).
# KEYS: count:i, hb:i[, tokens:i]. ARGV: the count, the lease in ms[, the tokens].
WRITE_SCRIPT: Final = """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
if KEYS[3] then redis.call('SET', KEYS[3], ARGV[3]) end
return 1
"""
