-- load.lua: publish an activity into Redis, or refresh its rules. Idempotent:
-- the stock is set only the first time, so publishing again never undoes sales.
--
-- KEYS[1] meta       fs:{act:<id>}:meta      hash: the rules the scripts check
-- KEYS[2] stock      fs:{act:<id>}:stock     units left
-- KEYS[3] users      fs:{act:<id>}:users     hash: user id -> units held
-- ARGV[1] status (published or closed)
-- ARGV[2] starts_at, unix ms
-- ARGV[3] ends_at, unix ms
-- ARGV[4] per-user limit
-- ARGV[5] total stock
-- ARGV[6] expire every key at this unix ms (well after the sale and its payments)
-- ARGV[7] price in cents
-- ARGV[8] payment ttl in ms (the order path reads price and ttl from here)
-- ARGV[9] type: seckill or groupbuy
-- ARGV[10] group size (0 for a flash sale)
-- ARGV[11] group ttl in ms (0 for a flash sale)
--
-- Returns the units left.
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'starts_ms', ARGV[2], 'ends_ms', ARGV[3],
  'limit', ARGV[4], 'total', ARGV[5], 'price', ARGV[7], 'pay_ttl_ms', ARGV[8],
  'type', ARGV[9], 'group_size', ARGV[10], 'group_ttl_ms', ARGV[11])
redis.call('HSETNX', KEYS[1], 'accepted', 0)
redis.call('HSETNX', KEYS[1], 'returned', 0)
redis.call('SET', KEYS[2], ARGV[5], 'NX')
for i = 1, 3 do
  redis.call('PEXPIREAT', KEYS[i], ARGV[6])
end
return tonumber(redis.call('GET', KEYS[2]))
