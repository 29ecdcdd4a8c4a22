-- accept.lua: accept an order, all or nothing: check the sale (window,
-- status, per-user limit, stock), take the units, write the order record,
-- append it to the activity's outbox, and remember the Idempotency-Key.
--
-- uses: lib_sale, lib_order
--
-- KEYS[1] meta     fs:{act:<id>}:meta
-- KEYS[2] stock    fs:{act:<id>}:stock
-- KEYS[3] users    fs:{act:<id>}:users
-- KEYS[4] order    fs:{act:<id>}:o:<order no>      hash: the order record
-- KEYS[5] idem     fs:{act:<id>}:idem:<user>:<key> order no of this key (unused without a key)
-- KEYS[6] outbox   fs:{act:<id>}:outbox            stream: orders not yet in MySQL
-- ARGV[1] user id
-- ARGV[2] quantity
-- ARGV[3] order no
-- ARGV[4] 1 if the request has an Idempotency-Key, else 0
-- ARGV[5] how long the key is remembered, ms
-- ARGV[6] how long the order record is kept, ms
--
-- Returns {code, order no, units left, units the user holds, created ms, pay-by ms, price}:
--   0 accepted; 1-5 refused (sale_check's codes: not on sale, not started,
--   ended, over the limit, sold out); 7 the key named an order before, whose
--   number is returned and nothing else is done; 8 a group buy (its orders
--   are placed by opening or joining a group); 13 an order with this number
--   exists (never written over: draw another number) — unless it is this
--   request's own, made by a run of this script whose answer was lost (the
--   client sent it again): then the answer is the first run's, code 0.
if ARGV[4] == '1' then
  local existing = redis.call('GET', KEYS[5])
  if existing then
    -- A write, though nothing changes: a WAIT after this script then covers
    -- the order it names (replicas apply writes in order), so a replay is
    -- reported only once the order is as safe as a first answer.
    redis.call('PEXPIRE', KEYS[5], ARGV[5])
    return {7, existing, 0, 0, 0, 0, 0}
  end
end
if record_taken(KEYS[4]) then
  local created, pay_by, price = own_order(KEYS[4], ARGV[1], '')
  if not created then
    return {13, '', 0, 0, 0, 0, 0}
  end
  return {0, ARGV[3], tonumber(redis.call('GET', KEYS[2]) or '0'),
    tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0'), created, pay_by, price}
end
local qty = tonumber(ARGV[2])
local code, left, held, now, sale = sale_check(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
if code ~= 0 then
  return {code, '', left, held, 0, 0, 0}
end
if sale.type == 'groupbuy' then
  return {8, '', left, held, 0, 0, 0}
end
left, held = sale_take(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
local pay_by, price = order_create(KEYS[4], KEYS[6], KEYS[1], ARGV[1], qty, ARGV[3], now, ARGV[6], '', sale)
if ARGV[4] == '1' then
  redis.call('SET', KEYS[5], ARGV[3], 'PX', ARGV[5])
end
return {0, ARGV[3], left, held, now, pay_by, price}
