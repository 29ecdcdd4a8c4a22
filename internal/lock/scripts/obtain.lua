-- obtain.lua: take the mutex if it is free and mint its fencing token.
--
-- KEYS[1] lock hash        fs:lock:{name}
-- KEYS[2] fence counter    fs:lock:{name}:fence
-- ARGV[1] owner token (32 hex characters, 128 random bits)
-- ARGV[2] ttl in milliseconds
-- ARGV[3] how long the fence counter outlives its last use, in milliseconds
-- ARGV[4] holder host
-- ARGV[5] holder pid
-- ARGV[6] caller label (may be empty)
--
-- Returns {1, fence} when obtained;
--         {0, pttl}  when someone else holds it (pttl = remaining ms, -1 = no expiry).
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then
  return {0, pttl}
end

local t = redis.call('TIME')
local fence = redis.call('INCR', KEYS[2])
if fence == 1 then
  -- The counter is new or has expired. Restart it from the server clock in
  -- microseconds so it stays above every token minted before it expired
  -- (see "Fencing tokens" in doc.go). Strings, not Lua numbers: Lua 5.1
  -- prints large numbers in exponent form.
  local seeded = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', KEYS[2], seeded)
  fence = tonumber(seeded)
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])

local now_ms = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1],
  'token', ARGV[1],
  'fence', string.format('%d', fence),
  'host', ARGV[4],
  'pid', ARGV[5],
  'label', ARGV[6],
  'at', now_ms)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fence}
