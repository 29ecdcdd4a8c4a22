-- release.lua: give a reservation's units back (cancelled, timed out).
-- Idempotent per order: the reservation is marked returned, and a second
-- release of it changes nothing. (lib_sale.lua is prepended.)
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
if not r then
  return {2, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
local user, qty, state = string.match(r, '^(.*)|(%d+)|(%a)$')
if state ~= 'r' then
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
redis.call('HSET', KEYS[4], ARGV[1], user .. '|' .. qty .. '|x')
return {0, sale_return(KEYS[1], KEYS[2], KEYS[3], user, tonumber(qty), ARGV[2])}
