-- stock_take.lua: take unsold units of an item out of a published sale (a
-- restock's negative add, admin.Service.Restock), atomically: never more
-- than are left. Run on the sale's shard 0 (every sale of one shard), under
-- the activity's row lock in MySQL, before MySQL records the removal: so
-- Redis never holds more units than MySQL says the sale has. The load that
-- follows (load.lua, of the version that records it) finds the totals
-- already MySQL's and changes nothing more.
--
-- KEYS[1] meta   fs:{act:<id>}:meta
-- KEYS[2] stock  fs:{act:<id>}:stock   units left (of every item)
-- KEYS[3] items  fs:{act:<id>}:items   a sale of several items' (load.lua)
-- ARGV[1] the item's sku; in a sale of one item, its stock is the sale's
-- ARGV[2] units to take, from 1
-- ARGV[3] the activity's version in MySQL (read under its row lock): Redis
--         must hold it. A sale at an older version would let a late load of
--         an older version — which knows nothing of this removal — put the
--         units back on sale before the removal's own load.
--
-- Returns {code, units left of the item}: 0 taken; 1 fewer left than asked
-- (nothing taken); 2 the sale is not in Redis; 3 Redis holds an older
-- version (load the activity's, then take); 4 Redis holds a newer one (an
-- admin change the caller does not know: read again); 5 the sale has no
-- such item.
local m = redis.call('HMGET', KEYS[1], 'version', 'items', 'sale_total', 'total')
if not m[4] then
  return {2, 0}
end
local v, want = tonumber(m[1] or '0'), tonumber(ARGV[3])
if v < want then
  return {3, 0}
elseif v > want then
  return {4, 0}
end
local units = tonumber(ARGV[2])
local left = tonumber(redis.call('GET', KEYS[2]) or '0')
local ileft = left
local several = tonumber(m[2] or '1') > 1
if several then
  local f = redis.call('HMGET', KEYS[3], 'left:' .. ARGV[1], 'total:' .. ARGV[1])
  if not f[2] then
    return {5, 0}
  end
  ileft = tonumber(f[1] or '0')
end
if ileft < units then
  return {1, ileft}
end
if several then
  redis.call('HINCRBY', KEYS[3], 'left:' .. ARGV[1], -units)
  redis.call('HINCRBY', KEYS[3], 'total:' .. ARGV[1], -units)
end
redis.call('DECRBY', KEYS[2], units)
redis.call('HINCRBY', KEYS[1], 'total', -units)
redis.call('HSET', KEYS[1], 'sale_total', tonumber(m[3] or m[4]) - units)
return {0, ileft - units}
