-- fair_obtain.lua: take the fair lock in arrival order, or join or renew a
-- place in its queue. KEYS as listed in lib_fair.lua.
--
-- uses: lib_fence, lib_fair
--
-- ARGV[1] token (32 hex characters)
-- ARGV[2] ttl in milliseconds
-- ARGV[3] lifetime of a new fence counter, in milliseconds
-- ARGV[4] holder metadata (pid \31 acquired-at ms \31 host \31 label)
-- ARGV[5] waiter lease in milliseconds: how long the place lasts unrenewed;
--         0 = only try, never queue
-- ARGV[6] pub/sub channel grants are published on
--
-- Returns {1, fence}           held by token: taken now, or granted to it
--                              earlier (its ttl is then restarted now);
--         {0, pttl, position}  not held; position in the queue (0 = next),
--                              -1 when not queued.
local token, ttl, lease = ARGV[1], ARGV[2], tonumber(ARGV[5])
local holder = redis.call('HGET', KEYS[1], 'token')
if holder == token then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
end

local now = now_ms()
if not holder then
  local head = first_live(now)
  if not head or head == token then
    unqueue(token)
    return {1, take(token, ttl, ARGV[4], ARGV[3])}
  end
  -- Free, but someone is ahead of us: it is theirs (an expired holder was
  -- not followed by a release, so nobody granted it yet).
  grant_next(now, ARGV[6], ARGV[3])
end

if lease == 0 then
  return {0, redis.call('PTTL', KEYS[1]), -1}
end
if not redis.call('ZSCORE', KEYS[3], token) then
  redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[5]), token)
end
redis.call('HSET', KEYS[4], token, string.format('%d', now + lease) .. '|' .. ttl .. '|' .. ARGV[4])
for i = 3, 5 do
  redis.call('PEXPIRE', KEYS[i], 2 * lease)  -- a queue of dead waiters vanishes
end
return {0, redis.call('PTTL', KEYS[1]), redis.call('ZRANK', KEYS[3], token)}
