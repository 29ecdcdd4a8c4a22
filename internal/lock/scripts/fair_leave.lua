-- fair_leave.lua: a waiter gives up. It leaves the queue; if it had been
-- granted the lock meanwhile, the grant passes to the next live waiter.
-- KEYS as listed in lib_fair.lua.
--
-- uses: lib_fence, lib_fair
--
-- ARGV[1] waiter token
-- ARGV[2] pub/sub channel grants are published on
-- ARGV[3] lifetime of a new fence counter, in milliseconds
--
-- Returns 1 when the token was queued or holding, 0 otherwise.
local was = redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  grant_next(now_ms(), ARGV[2], ARGV[3])
  return 1
end
return was
