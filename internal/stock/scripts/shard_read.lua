-- shard_read.lua: what one shard of a sale holds, in one step of its slot
-- (stock.Keeper.Left reads every shard this way, twice: a double collect).
--
-- KEYS[1] meta     fs:{act:<id>:<shard>}:meta
-- KEYS[2] stock    fs:{act:<id>:<shard>}:stock
-- KEYS[3] transit  fs:{act:<id>:<shard>}:transit
--
-- Returns {units left, units on their way out of it (transfers taken and
-- not finished), changes that add units (transfers in and out, returns):
-- 'moves' + 'returned', which only grow}.
local left = tonumber(redis.call('GET', KEYS[2]) or '0')
local out = 0
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do
  local _, _, units = string.find(v, '^%d+:(%d+):')
  out = out + tonumber(units or '0')
end
local m = redis.call('HMGET', KEYS[1], 'moves', 'returned')
return {left, out, tonumber(m[1] or '0') + tonumber(m[2] or '0')}
