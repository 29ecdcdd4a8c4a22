-- load.lua: publish an activity into Redis, or refresh its rules. Idempotent:
-- the stock is set only the first time, so publishing again never undoes
-- sales. Admin changes may race (a close with a publish and two edits):
-- each carries the activity's version from MySQL, one more per change, and
-- a load older than the one Redis holds changes nothing, so Redis ends at
-- MySQL's latest. Closed is final: no load reopens a closed sale.
--
-- KEYS[1] meta       fs:{act:<id>}:meta      hash: the rules the scripts check
-- KEYS[2] stock      fs:{act:<id>}:stock     units left
-- KEYS[3] users      fs:{act:<id>}:users     hash: user id -> units held
-- KEYS[4] outbox     fs:{act:<id>}:outbox    (only its expiry is set here)
-- KEYS[5] forming    fs:{act:<id>}:groups:forming    (expiry only)
-- KEYS[6] unsettled  fs:{act:<id>}:groups:unsettled  (expiry only)
-- KEYS[7] orders     fs:{act:<id>}:orders    (expiry only)
-- KEYS[8] idem       fs:{act:<id>}:idem      (expiry only)
-- ARGV[1] status (published or closed)
-- ARGV[2] starts_at, unix ms
-- ARGV[3] ends_at, unix ms
-- ARGV[4] per-user limit
-- ARGV[5] total stock
-- ARGV[6] expire every key of the sale at this unix ms (activity.LiveUntil:
--         retention after the last moment an order can still change)
-- ARGV[7] price in cents
-- ARGV[8] payment ttl in ms (the order path reads price and ttl from here)
-- ARGV[9] type: seckill or groupbuy
-- ARGV[10] group size (0 for a flash sale)
-- ARGV[11] group ttl in ms (0 for a flash sale)
-- ARGV[12] how long an order or group record is kept, ms (activity.RecordTTL)
-- ARGV[13] the activity's version in MySQL
-- ARGV[14] the sale's shards (activity.Shards); absent: 1
-- ARGV[15] this shard's share of the stock (absent: ARGV[5], all of it):
--          its stock and its 'total' the first time; afterwards a shard's
--          total moves with the units transferred (transfer_take.lua,
--          transfer_give.lua), so a load never sets it again; the sale's
--          total is every shard's 'sale_total' (ARGV[5])
-- A sharded sale is loaded shard by shard (stock.Keeper.Load), each its
-- own slot: every shard's meta carries the rules, so a shard decides its
-- users' orders alone.
--
-- Returns {units left, 1 if loaded or 0 if Redis had this version or a newer one}.
local cur = redis.call('HMGET', KEYS[1], 'status', 'version')
-- A meta from before versions existed (no version field) takes any load.
if cur[1] and tonumber(cur[2] or '-1') >= tonumber(ARGV[13]) then
  return {tonumber(redis.call('GET', KEYS[2]) or '0'), 0}
end
local shards, share = ARGV[14] or '1', ARGV[15] or ARGV[5]
local status = ARGV[1]
if cur[1] == 'closed' then
  status = 'closed'
end
redis.call('HSET', KEYS[1], 'status', status, 'starts_ms', ARGV[2], 'ends_ms', ARGV[3],
  'limit', ARGV[4], 'price', ARGV[7], 'pay_ttl_ms', ARGV[8],
  'type', ARGV[9], 'group_size', ARGV[10], 'group_ttl_ms', ARGV[11],
  'keep_ms', ARGV[12], 'expire_at_ms', ARGV[6], 'version', ARGV[13], 'shards', shards, 'sale_total', ARGV[5])
redis.call('HSETNX', KEYS[1], 'accepted', 0)
redis.call('HSETNX', KEYS[1], 'returned', 0)
if redis.call('SET', KEYS[2], share, 'NX') then
  redis.call('HSET', KEYS[1], 'total', share)
else
  redis.call('HSETNX', KEYS[1], 'total', share)
end
local left = tonumber(redis.call('GET', KEYS[2]))
-- An expiry already past deletes the keys (a sale closed after its live
-- records' time): that is what it should do; the units left are reported
-- as they were.
for i = 1, #KEYS do
  redis.call('PEXPIREAT', KEYS[i], ARGV[6])
end
return {left, 1}
