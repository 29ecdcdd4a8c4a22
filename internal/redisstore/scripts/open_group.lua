-- open_group.lua: open a group buy's group with the caller's order as its
-- first member, all or nothing.
--
-- uses: lib_sale, lib_record, lib_order
--
-- KEYS[1] meta     fs:{act:<id>}:meta
-- KEYS[2] stock    fs:{act:<id>}:stock
-- KEYS[3] users    fs:{act:<id>}:users
-- KEYS[4] orders   fs:{act:<id>}:orders          hash: order no -> record (lib_record)
-- KEYS[5] outbox   fs:{act:<id>}:outbox          zset: orders not yet in MySQL, by when
-- KEYS[6] group    fs:{act:<id>}:g:<group id>    hash: status, size, members, paid, expires_ms, ...
-- KEYS[7] members  fs:{act:<id>}:gm:<group id>   hash: user id -> order no
-- KEYS[8] forming  fs:{act:<id>}:groups:forming  zset: groups with a free slot, by deadline
-- KEYS[9] unsettled fs:{act:<id>}:groups:unsettled zset: groups not yet settled, by deadline
-- KEYS[10] idem    fs:{act:<id>}:idem            hash: Idempotency-Key field -> order no
-- KEYS[11] items   fs:{act:<id>}:items           a sale of several items' (lib_accept)
-- KEYS[12] itemusers fs:{act:<id>}:itemusers     hash: "<user>:<sku>" -> units held of the item
-- ARGV[1] user id
-- ARGV[2] quantity
-- ARGV[3] order no
-- ARGV[4] group id
-- ARGV[5] the Idempotency-Key's field in idem (rediskeys.GroupIdempotencyField
--         "open"), '' when the request has none
-- ARGV[6] the item's SKU ('' for the sale's one item): the group's, which
--         its joiners get (the group's hash keeps it)
--
-- Returns {code, units left, expires ms, pay-by ms, price, order no, item}:
-- 0 opened; 1-6, 14, 17 sale_decide's refusals, 15 and 16 sale_item's (no
-- item named in a sale of several, no such item); 7 the key opened a group before:
-- that order's number is returned and nothing else is done; 8 not a group
-- buy; 13 the order number or group id is taken (draw others), unless by
-- this request's own run whose answer was lost: then 0, as that run said;
-- also 13 for a group id that a record cannot hold (with a '|', lib_record's
-- separator: order.NewNo never draws one, so only a caller that skipped
-- the Go side's checks sends one).
--
-- FuzzScripts found (2026-11-24) that a group id holding a '|' was written
-- into its orders' records as two fields: the record then named another
-- group (whose settlement never refunded it) and a fence that is not a
-- number (transition.lua failed with a Lua error).
if string.find(ARGV[4], '|', 1, true) then
  return {13, 0, 0, 0, 0, '', ''}
end
if ARGV[5] ~= '' then
  local existing = redis.call('HGET', KEYS[10], ARGV[5])
  if existing then
    return {7, 0, 0, 0, 0, existing, ''}
  end
end
local r = order_taken(KEYS[4], ARGV[3])
if r or redis.call('EXISTS', KEYS[6]) == 1 then
  if not own_order(r, ARGV[1], ARGV[4]) or redis.call('HGET', KEYS[6], 'leader') ~= ARGV[1] then
    return {13, 0, 0, 0, 0, '', ''}
  end
  -- This request's own group, opened by a run whose answer was lost.
  return {0, tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(redis.call('HGET', KEYS[6], 'expires_ms')),
    tonumber(r.pay_by_ms), tonumber(r.price), ARGV[3], r.item}
end
local qty = tonumber(ARGV[2])
local sku = ARGV[6] or ''
local code, left, held, now, sale, item = sale_check(KEYS[1], KEYS[2], KEYS[3], KEYS[11], KEYS[12], ARGV[1], qty, sku)
if code ~= 0 then
  return {code, left, 0, 0, 0, '', sku}
end
if sale.type ~= 'groupbuy' then
  return {8, left, 0, 0, 0, '', sku}
end
local took_left, _held, sale_left = sale_take(KEYS[1], KEYS[2], KEYS[3], KEYS[11], KEYS[12], ARGV[1], qty, item)
left = took_left
local rec, pay_by, price = order_new(ARGV[1], qty, now, ARGV[4], sale, item)
if sale_left == 0 then
  order_sold_out(KEYS[1], rec) -- the group's order took the sale's last unit
end
order_create(KEYS[1], KEYS[4], KEYS[5], ARGV[3], rec)
local expires = now + tonumber(redis.call('HGET', KEYS[1], 'group_ttl_ms'))
redis.call('HSET', KEYS[6], 'status', 'forming', 'size', redis.call('HGET', KEYS[1], 'group_size'),
  'members', 1, 'paid', 0, 'leader', ARGV[1], 'expires_ms', string.format('%d', expires),
  'created_ms', string.format('%d', now))
if item.sku ~= '' then
  redis.call('HSET', KEYS[6], 'item', item.sku) -- its joiners' item
end
redis.call('HSET', KEYS[7], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[8], expires, ARGV[4])
redis.call('ZADD', KEYS[9], expires, ARGV[4])
for i = 6, 9 do
  expire_with_sale(KEYS[1], KEYS[i])
end
sale_count(KEYS[1], 'groups_opened', 1)
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[10], ARGV[5], ARGV[3])
  expire_with_sale(KEYS[1], KEYS[10])
end
return {0, left, expires, pay_by, price, ARGV[3], item.sku}
