-- join_group.lua: take a place in a forming group, the user's participation
-- and the stock in one atomic step: a group never has more members than its
-- size, whatever the concurrency.
--
-- uses: lib_sale, lib_record, lib_order
--
-- KEYS and ARGV as open_group.lua (ARGV[5]: the key's field for "join";
-- no ARGV[6]: a member gets the group's item, which its hash keeps, ''
-- for a group opened before items, of the sale's one item).
--
-- Returns {code, units left, expires ms, pay-by ms, price, order no, item}:
-- 0 joined; 1-6, 14, 17 sale_decide's refusals; 7 the key joined before: that
-- order's number is returned and nothing else is done; 9 no such group;
-- 10 the group is closed (succeeded, failed, or past its deadline);
-- 11 already a member; 12 full; 13 the order number is taken (0 when by
-- this request's own run whose answer was lost).
if ARGV[5] ~= '' then
  local existing = redis.call('HGET', KEYS[10], ARGV[5])
  if existing then
    return {7, 0, 0, 0, 0, existing, ''}
  end
end
local g = redis.call('HMGET', KEYS[6], 'status', 'size', 'members', 'expires_ms', 'item')
if not g[1] then
  return {9, 0, 0, 0, 0, '', ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = tonumber(g[4])
-- Before the group's own checks: this request's own run, whose answer was
-- lost, made the user a member and may have filled the group.
local r = order_taken(KEYS[4], ARGV[3])
if r then
  if not own_order(r, ARGV[1], ARGV[4]) then
    return {13, 0, expires, 0, 0, '', ''}
  end
  return {0, tonumber(redis.call('GET', KEYS[2]) or '0'), expires, tonumber(r.pay_by_ms), tonumber(r.price), ARGV[3], r.item}
end
if g[1] ~= 'forming' or now >= expires then
  return {10, 0, expires, 0, 0, '', ''}
end
if redis.call('HEXISTS', KEYS[7], ARGV[1]) == 1 then
  return {11, 0, expires, 0, 0, '', ''}
end
if tonumber(g[3]) >= tonumber(g[2]) then
  return {12, 0, expires, 0, 0, '', ''}
end
local qty = tonumber(ARGV[2])
local sku = g[5] or ''
local code, left, _, _, sale, item = sale_check(KEYS[1], KEYS[2], KEYS[3], KEYS[11], KEYS[12], ARGV[1], qty, sku)
if code ~= 0 then
  return {code, left, expires, 0, 0, '', sku}
end
local took_left, _held, sale_left = sale_take(KEYS[1], KEYS[2], KEYS[3], KEYS[11], KEYS[12], ARGV[1], qty, item)
left = took_left
local rec, pay_by, price = order_new(ARGV[1], qty, now, ARGV[4], sale, item)
if sale_left == 0 then
  order_sold_out(KEYS[1], rec) -- the group's order took the sale's last unit
end
order_create(KEYS[1], KEYS[4], KEYS[5], ARGV[3], rec)
redis.call('HSET', KEYS[7], ARGV[1], ARGV[3])
if redis.call('HINCRBY', KEYS[6], 'members', 1) >= tonumber(g[2]) then
  redis.call('ZREM', KEYS[8], ARGV[4]) -- no free place: not listed as open
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[10], ARGV[5], ARGV[3])
  expire_with_sale(KEYS[1], KEYS[10])
end
return {0, left, expires, pay_by, price, ARGV[3], item.sku}
