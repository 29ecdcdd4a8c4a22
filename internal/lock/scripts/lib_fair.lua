-- lib_fair.lua: what every fair-lock script shares.
--
-- uses: lib_fence
--
-- Every fair-lock script gets the same keys, in this order:
--   KEYS[1] lock      fs:flock:{name}          hash: token, fence, meta
--   KEYS[2] fence     fs:flock:{name}:fence    fence counter
--   KEYS[3] queue     fs:flock:{name}:queue    zset: waiter token -> arrival number
--   KEYS[4] waiters   fs:flock:{name}:waiters  hash: waiter token -> "deadline_ms|ttl_ms|meta"
--   KEYS[5] arrivals  fs:flock:{name}:arrivals arrival counter
-- A waiter's deadline is Redis server time: a waiter that stops renewing its
-- place (it crashed) is skipped once its deadline has passed, whatever any
-- client's clock says.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function unqueue(token)
  redis.call('ZREM', KEYS[3], token)
  redis.call('HDEL', KEYS[4], token)
end

-- first_live returns the first waiter whose place is still renewed, as
-- token, ttl, meta; it drops the dead ones in front of it.
local function first_live(now)
  while true do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not head then
      return nil
    end
    local entry = redis.call('HGET', KEYS[4], head)
    if entry then
      local deadline, ttl, meta = string.match(entry, '^(%d+)|(%d+)|(.*)$')
      if tonumber(deadline) >= now then
        return head, ttl, meta
      end
    end
    unqueue(head)
  end
end

-- take makes token the holder for ttl ms with a new fence, and returns it.
local function take(token, ttl, meta, lifetime)
  local fence = mint_fence(KEYS[2], lifetime, 1)
  redis.call('HSET', KEYS[1], 'token', token, 'fence', string.format('%d', fence), 'meta', meta)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return fence
end

-- grant_next hands the free lock to the first live waiter and publishes its
-- token on channel, so that it alone wakes up. Returns the token or nil.
local function grant_next(now, channel, lifetime)
  local head, ttl, meta = first_live(now)
  if not head then
    return nil
  end
  unqueue(head)
  take(head, ttl, meta, lifetime)
  redis.call('PUBLISH', channel, head)
  return head
end

