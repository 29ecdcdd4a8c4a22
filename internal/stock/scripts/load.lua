-- load.lua: publish an activity into Redis, or refresh its rules. Idempotent:
-- the stock is set only the first time, so publishing again never undoes
-- sales. Admin changes may race (a close with a publish and two edits):
-- each carries the activity's version from MySQL, one more per change, and
-- a load older than the one Redis holds changes nothing, so Redis ends at
-- MySQL's latest. Closed is final: no load reopens a closed sale.
--
-- Restocks are carried by loads (admin.Service.Restock; docs/orders.md,
-- "Restock"): a load of a newer version brings the sale's units in all,
-- and each item's, to MySQL's, by adding the difference to what is left —
-- so a restock whose load failed lands with the next load (the
-- reconciler's Repair, or any later change), and one loaded twice adds
-- once. Units are added after MySQL has them and removed before
-- (stock_take.lua, under the activity's row lock), so Redis never sells
-- more than MySQL's record says the sale has; a load that would leave an
-- item with fewer than none left (Redis sold what MySQL removed: not by
-- design) removes what is left and keeps the rest in its total, which the
-- reconciliation then reports.
--
-- KEYS[1] meta       fs:{act:<id>}:meta      hash: the rules the scripts check
-- KEYS[2] stock      fs:{act:<id>}:stock     units left (of every item)
-- KEYS[3] users      fs:{act:<id>}:users     hash: user id -> units held
-- KEYS[4] outbox     fs:{act:<id>}:outbox    (only its expiry is set here)
-- KEYS[5] forming    fs:{act:<id>}:groups:forming    (expiry only)
-- KEYS[6] unsettled  fs:{act:<id>}:groups:unsettled  (expiry only)
-- KEYS[7] orders     fs:{act:<id>}:orders    (expiry only)
-- KEYS[8] idem       fs:{act:<id>}:idem      (expiry only)
-- KEYS[9] payments   fs:{act:<id>}:payments  (expiry only)
-- KEYS[10] transit   fs:{act:<id>}:transit   (expiry only)
-- KEYS[11] taken     fs:{act:<id>}:taken     (expiry only)
-- KEYS[12] applied   fs:{act:<id>}:applied   (expiry only)
-- KEYS[13] items     fs:{act:<id>}:items     a sale of several items': per item
--                    p:<sku> price, l:<sku> own limit, left:<sku>, total:<sku>
-- KEYS[14] itemusers fs:{act:<id>}:itemusers (expiry only)
-- KEYS[15] queue hist fs:{act:<id>}:q:hist  the waiting room's history (lib_queue;
--                    expiry, and the advance at the old rate when the rate changes)
-- ARGV[1] status (published or closed)
-- ARGV[2] starts_at, unix ms
-- ARGV[3] ends_at, unix ms
-- ARGV[4] per-user limit (across the items)
-- ARGV[5] total stock (the items' sum: initial, plus restocks, less removals)
-- ARGV[6] expire every key of the sale at this unix ms (activity.LiveUntil:
--         retention after the last moment an order can still change)
-- ARGV[7] price in cents (the first item's)
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
--          total is shard 0's 'sale_total' (ARGV[5]), and what a restock
--          adds or takes goes to shard 0 (from where dry shards pull)
-- ARGV[16] this shard (absent: 0)
-- ARGV[17] '1' paused, '0' not (absent: not)
-- ARGV[18] the count of items n (absent: 1, with no ARGV[19...])
-- ARGV[19...] per item, 4 each: sku, price, its own per-user limit (0:
--          none), its stock. A sale of one item keeps its stock in KEYS[2]
--          alone, its sku in the meta, and the lesser of the two limits as
--          the sale's; a sale of several keeps each item in KEYS[13]
-- ARGV[w...] for w = 19 + 4n, the waiting room (absent: none): '1' or '0',
--          admit_per_second, the admission's ttl in ms, join_pow_bits. A new
--          rate, a pause or a resume takes effect from now: the serving
--          counter is first advanced to now as it ran until then (lib_queue's
--          queue_advance: at the old rate, or not at all while paused).
-- A sharded sale is loaded shard by shard (stock.Keeper.Load), each its
-- own slot: every shard's meta carries the rules, so a shard decides its
-- users' orders alone.
--
-- Every key of the sale follows its expiry (ARGV[6]) on every load: the
-- keys above, and the records of the groups not yet settled (g:<id>,
-- gm:<id>, listed by unsettled; the only groups that can still change).
-- A settled group's records keep the expiry they were given, which is
-- retention past its settlement at least (it was settled by the sale's
-- last change then). The sale's presence (watching) and its console
-- samples have short lives of their own, and a rate limit's window its
-- own. (Until 2026-11-28 the payments hash kept the first expiry: a sale
-- extended by more than the retention lost every payment record made
-- before — a failed group's refund found none. A test lists the sale's
-- keys after a reload, so the next key is not forgotten.)
--
-- uses: lib_queue
--
-- Returns {units left, 1 if loaded or 0 if Redis had this version or a newer one}.
local cur = redis.call('HMGET', KEYS[1], 'status', 'version', 'expire_at_ms', 'sale_total', 'total')
-- A meta from before versions existed (no version field) takes any load.
if cur[1] and tonumber(cur[2] or '-1') >= tonumber(ARGV[13]) then
  return {tonumber(redis.call('GET', KEYS[2]) or '0'), 0}
end
local shards, share = ARGV[14] or '1', ARGV[15] or ARGV[5]
local shard, n = tonumber(ARGV[16] or '0'), tonumber(ARGV[18] or '1')
local status = ARGV[1]
if cur[1] == 'closed' then
  status = 'closed'
end
local was_paused = redis.call('HGET', KEYS[1], 'paused') == '1' -- the waiting room's counter, below
local limit = ARGV[4]
if n == 1 and ARGV[19] and tonumber(ARGV[21]) > 0 and tonumber(ARGV[21]) < tonumber(limit) then
  limit = ARGV[21] -- one item: its own limit is the sale's, the lesser
end
redis.call('HSET', KEYS[1], 'status', status, 'starts_ms', ARGV[2], 'ends_ms', ARGV[3],
  'limit', limit, 'price', ARGV[7], 'pay_ttl_ms', ARGV[8],
  'type', ARGV[9], 'group_size', ARGV[10], 'group_ttl_ms', ARGV[11],
  'keep_ms', ARGV[12], 'expire_at_ms', ARGV[6], 'version', ARGV[13], 'shards', shards,
  'paused', ARGV[17] or '0', 'items', n)
if n == 1 and ARGV[19] then
  redis.call('HSET', KEYS[1], 'sku', ARGV[19])
end
local w = 19 + 4 * n
if ARGV[w] == '1' then
  local q = redis.call('HMGET', KEYS[1], unpack(queue_fields))
  -- A new rate, a pause or a resume takes effect from now: the counter
  -- is first advanced to now as it ran until then (at the old rate; not
  -- at all if it was paused, so a resume banks no paused time).
  if q[1] and (q[1] ~= ARGV[w + 1] or was_paused ~= (ARGV[17] == '1')) then
    local t = redis.call('TIME')
    queue_advance(KEYS[1], KEYS[2], KEYS[15], q, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), true, was_paused)
  end
  redis.call('HSET', KEYS[1], 'wr', '1', 'wr_rate', ARGV[w + 1], 'wr_ttl_ms', ARGV[w + 2], 'wr_pow', ARGV[w + 3])
elseif ARGV[w] == '0' then
  redis.call('HSET', KEYS[1], 'wr', '0')
end
redis.call('HSETNX', KEYS[1], 'accepted', 0)
redis.call('HSETNX', KEYS[1], 'returned', 0)
local tag = string.sub(KEYS[1], 1, -6) -- less ':meta'
if redis.call('SET', KEYS[2], share, 'NX') then
  redis.call('HSET', KEYS[1], 'total', share, 'sale_total', ARGV[5])
  if n > 1 then
    local f = {}
    for i = 0, n - 1 do
      local sku, price, own, units = ARGV[19 + 4 * i], ARGV[20 + 4 * i], ARGV[21 + 4 * i], ARGV[22 + 4 * i]
      f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'p:' .. sku, price, 'left:' .. sku, units
      f[#f + 1], f[#f + 2] = 'total:' .. sku, units
      if tonumber(own) > 0 then
        f[#f + 1], f[#f + 2] = 'l:' .. sku, own
      end
    end
    redis.call('HSET', KEYS[13], unpack(f))
  end
elseif shard ~= 0 then
  redis.call('HSETNX', KEYS[1], 'total', share)
  redis.call('HSET', KEYS[1], 'sale_total', ARGV[5]) -- shard 0's is the sale's
else
  -- Shard 0 (every sale of one shard): the restocks since the last load.
  redis.call('HSETNX', KEYS[1], 'total', share)
  local was = tonumber(cur[4] or cur[5] or share) -- sale_total; before it, 'total'
  local left = tonumber(redis.call('GET', KEYS[2]) or '0')
  local add, again = 0, left <= 0
  if n > 1 then
    local f = {}
    for i = 0, n - 1 do
      local sku, units = ARGV[19 + 4 * i], tonumber(ARGV[22 + 4 * i])
      local v = redis.call('HMGET', KEYS[13], 'left:' .. sku, 'total:' .. sku)
      local ileft, itotal = tonumber(v[1] or '0'), tonumber(v[2] or units)
      local d = math.max(units - itotal, -ileft)
      if d ~= 0 then
        f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'left:' .. sku, ileft + d, 'total:' .. sku, itotal + d
        add = add + d
        again = again or (ileft <= 0 and d > 0)
      end
    end
    if #f > 0 then
      redis.call('HSET', KEYS[13], unpack(f))
    end
  else
    add = math.max(tonumber(ARGV[5]) - was, -left)
  end
  if add ~= 0 then
    left = redis.call('INCRBY', KEYS[2], add)
    redis.call('HINCRBY', KEYS[1], 'total', add)
  end
  redis.call('HSET', KEYS[1], 'sale_total', was + add)
  if add > 0 and again then
    redis.call('PUBLISH', tag .. ':restock', '1') -- the sold-out flags let go
  end
end
local left = tonumber(redis.call('GET', KEYS[2]))
-- An expiry already past deletes the keys (a sale closed after its live
-- records' time): that is what it should do; the units left are reported
-- as they were.
for i = 1, #KEYS do
  redis.call('PEXPIREAT', KEYS[i], ARGV[6])
end
if cur[3] and cur[3] ~= ARGV[6] then
  -- The sale's expiry moved: its unsettled groups' records follow (their
  -- keys are in this slot: the tag of meta's name).
  for _, gid in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
    redis.call('PEXPIREAT', tag .. ':g:' .. gid, ARGV[6])
    redis.call('PEXPIREAT', tag .. ':gm:' .. gid, ARGV[6])
  end
end
return {left, 1}
