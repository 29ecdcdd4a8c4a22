-- reserve.lua: take qty units for a user's order, all or nothing.
--
-- KEYS[1] meta       fs:{act:<id>}:meta
-- KEYS[2] stock      fs:{act:<id>}:stock
-- KEYS[3] users      fs:{act:<id>}:users
-- KEYS[4] reserved   fs:{act:<id>}:reserved
-- ARGV[1] user id
-- ARGV[2] qty (positive)
-- ARGV[3] order no (the reservation's identity: a retry with it is a no-op)
--
-- Returns {code, units left, units this user now holds}, code:
--   0 reserved   1 not on sale (unknown or draft)   2 not started   3 ended (or closed)
--   4 over the user's limit   5 sold out (not enough units)   6 this order was reserved before
-- The sale window is checked against Redis server time, the same clock for
-- every API instance.
local meta = redis.call('HMGET', KEYS[1], 'status', 'starts_ms', 'ends_ms', 'limit')
local status = meta[1]
if not status then
  return {1, 0, 0}
end
local left = tonumber(redis.call('GET', KEYS[2]) or '0')
local held = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 1 then
  return {6, left, held}
end
if status == 'closed' then
  return {3, left, held}
end
if status ~= 'published' then
  return {1, left, held}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(meta[2]) then
  return {2, left, held}
end
if now >= tonumber(meta[3]) then
  return {3, left, held}
end
local qty = tonumber(ARGV[2])
if held + qty > tonumber(meta[4]) then
  return {4, left, held}
end
if left < qty then
  return {5, left, held}
end
left = redis.call('DECRBY', KEYS[2], qty)
held = redis.call('HINCRBY', KEYS[3], ARGV[1], qty)
redis.call('HSET', KEYS[4], ARGV[3], ARGV[1] .. '|' .. ARGV[2] .. '|r')
redis.call('HINCRBY', KEYS[1], 'accepted', 1)
return {0, left, held}
