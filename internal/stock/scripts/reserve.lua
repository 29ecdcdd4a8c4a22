-- reserve.lua: take qty units for a user's order, all or nothing.
-- (lib_sale.lua is prepended.)
--
-- KEYS[1] meta       fs:{act:<id>}:meta
-- KEYS[2] stock      fs:{act:<id>}:stock
-- KEYS[3] users      fs:{act:<id>}:users
-- KEYS[4] reserved   fs:{act:<id>}:reserved
-- ARGV[1] user id
-- ARGV[2] qty (positive)
-- ARGV[3] order no (the reservation's identity: a retry with it is a no-op)
--
-- Returns {code, units left, units this user now holds}, code as sale_check's,
-- or 6 when this order was reserved before.
if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 1 then
  return {6, tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')}
end
local qty = tonumber(ARGV[2])
local code, left, held = sale_check(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
if code ~= 0 then
  return {code, left, held}
end
left, held = sale_take(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
redis.call('HSET', KEYS[4], ARGV[3], ARGV[1] .. '|' .. ARGV[2] .. '|r')
return {0, left, held}
