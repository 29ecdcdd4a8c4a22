-- release.lua: give an order's units back (cancelled, timed out, refunded).
-- Idempotent per order: the reservation is marked returned, and a second
-- release of it changes nothing. Stock never rises above the total.
--
-- KEYS[1] meta       fs:{act:<id>}:meta
-- KEYS[2] stock      fs:{act:<id>}:stock
-- KEYS[3] users      fs:{act:<id>}:users
-- KEYS[4] reserved   fs:{act:<id>}:reserved
-- ARGV[1] order no
-- ARGV[2] pub/sub channel told when units come back to a sold-out sale
--
-- Returns {code, units left}, code: 0 returned now, 1 returned before,
--   2 no such reservation.
local r = redis.call('HGET', KEYS[4], ARGV[1])
local left = tonumber(redis.call('GET', KEYS[2]) or '0')
if not r then
  return {2, left}
end
local user, qty, state = string.match(r, '^(.*)|(%d+)|(%a)$')
if state ~= 'r' then
  return {1, left}
end
qty = tonumber(qty)
redis.call('HSET', KEYS[4], ARGV[1], user .. '|' .. qty .. '|x')
local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
local back = math.min(qty, total - left)
if back > 0 then
  left = redis.call('INCRBY', KEYS[2], back)
end
local held = redis.call('HINCRBY', KEYS[3], user, -qty)
if held <= 0 then
  redis.call('HDEL', KEYS[3], user)
end
redis.call('HINCRBY', KEYS[1], 'returned', 1)
if left - back <= 0 and left > 0 then
  redis.call('PUBLISH', ARGV[2], '1')
end
return {0, left}
