-- open_group.lua: open a group buy's group with the caller's order as its
-- first member, all or nothing.
--
-- uses: lib_sale, lib_order
--
-- KEYS[1] meta     fs:{act:<id>}:meta
-- KEYS[2] stock    fs:{act:<id>}:stock
-- KEYS[3] users    fs:{act:<id>}:users
-- KEYS[4] order    fs:{act:<id>}:o:<order no>
-- KEYS[5] outbox   fs:{act:<id>}:outbox
-- KEYS[6] group    fs:{act:<id>}:g:<group id>    hash: status, size, members, paid, expires_ms, ...
-- KEYS[7] members  fs:{act:<id>}:gm:<group id>   hash: user id -> order no
-- KEYS[8] forming  fs:{act:<id>}:groups:forming  zset: groups with a free slot, by deadline
-- KEYS[9] unsettled fs:{act:<id>}:groups:unsettled zset: groups not yet settled, by deadline
-- KEYS[10] idem    fs:{act:<id>}:idem:open:<user>:<key>  order no of this key (unused without a key)
-- ARGV[1] user id
-- ARGV[2] quantity
-- ARGV[3] order no
-- ARGV[4] group id
-- ARGV[5] how long the records are kept, ms, for a sale loaded before
--         meta had keep_ms (lib_order's record_ttl)
-- ARGV[6] 1 if the request has an Idempotency-Key, else 0
-- ARGV[7] how long the key is remembered, ms
--
-- Returns {code, units left, expires ms, pay-by ms, price, order no}:
-- 0 opened; 1-5 sale_check's refusals; 7 the key opened a group before:
-- that order's number is returned and nothing else is done; 8 not a group
-- buy; 13 the order number or group id is taken (draw others), unless by
-- this request's own run whose answer was lost: then 0, as that run said.
if ARGV[6] == '1' then
  local existing = redis.call('GET', KEYS[10])
  if existing then
    -- A write, though nothing changes: a WAIT after this script then covers
    -- the order it names (replicas apply writes in order), so a replay is
    -- reported only once the order is as safe as a first answer.
    redis.call('PEXPIRE', KEYS[10], ARGV[7])
    return {7, 0, 0, 0, 0, existing}
  end
end
if record_taken(KEYS[4]) or record_taken(KEYS[6]) then
  local created, pay_by, price = own_order(KEYS[4], ARGV[1], ARGV[4])
  if not created or redis.call('HGET', KEYS[6], 'leader') ~= ARGV[1] then
    return {13, 0, 0, 0, 0, ''}
  end
  -- This request's own group, opened by a run whose answer was lost.
  return {0, tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(redis.call('HGET', KEYS[6], 'expires_ms')),
    pay_by, price, ARGV[3]}
end
local qty = tonumber(ARGV[2])
local code, left, held, now, sale = sale_check(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
if code ~= 0 then
  return {code, left, 0, 0, 0, ''}
end
if sale.type ~= 'groupbuy' then
  return {8, left, 0, 0, 0, ''}
end
left = sale_take(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
local pay_by, price = order_create(KEYS[4], KEYS[5], KEYS[1], ARGV[1], qty, ARGV[3], now, ARGV[5], ARGV[4], sale)
local expires = now + tonumber(redis.call('HGET', KEYS[1], 'group_ttl_ms'))
redis.call('HSET', KEYS[6], 'status', 'forming', 'size', redis.call('HGET', KEYS[1], 'group_size'),
  'members', 1, 'paid', 0, 'leader', ARGV[1], 'expires_ms', string.format('%d', expires),
  'created_ms', string.format('%d', now))
redis.call('HSET', KEYS[7], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[8], expires, ARGV[4])
redis.call('ZADD', KEYS[9], expires, ARGV[4])
expire_with_sale(KEYS[1], KEYS[8])
expire_with_sale(KEYS[1], KEYS[9])
local keep = record_ttl(KEYS[1], ARGV[5], sale.keep_ms)
redis.call('PEXPIRE', KEYS[6], keep)
redis.call('PEXPIRE', KEYS[7], keep)
sale_count(KEYS[1], 'groups_opened', 1)
if ARGV[6] == '1' then
  redis.call('SET', KEYS[10], ARGV[3], 'PX', ARGV[7])
end
return {0, left, expires, pay_by, price, ARGV[3]}
