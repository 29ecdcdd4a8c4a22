-- obtain.lua: take the mutex if it is free and mint its fencing token.
--
-- KEYS[1] lock             fs:lock:{name}   string: the owner's value
-- KEYS[2] fence counter    fs:lock:{name}:fence
-- ARGV[1] owner value: token (32 hex characters, 128 random bits), then holder
--         metadata, \31 between: token, pid, acquired-at ms, host, label
-- ARGV[2] ttl in milliseconds
-- ARGV[3] lifetime of a new fence counter, in milliseconds
--
-- Returns {1, fence} when obtained;
--         {0, pttl}  when someone else holds it (pttl = remaining ms, -1 = no expiry);
--                    nothing is changed then.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('PTTL', KEYS[1])}
end

local fence = redis.call('INCR', KEYS[2])
if fence == 1 then
  -- The counter is new or has expired. Restart it from the server clock in
  -- microseconds: that is above every fence the old counter handed out unless
  -- it handed out more than one per microsecond of its life (docs/locking.md,
  -- "Fencing tokens"). Built as a string: Lua 5.1 prints large numbers in
  -- exponent form.
  local t = redis.call('TIME')
  local seeded = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', KEYS[2], seeded, 'PX', ARGV[3])
  fence = tonumber(seeded)
end
return {1, fence}
