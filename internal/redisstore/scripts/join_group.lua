-- join_group.lua: take a place in a forming group, the user's participation
-- and the stock in one atomic step: a group never has more members than its
-- size, whatever the concurrency.
--
-- uses: lib_sale, lib_order
--
-- KEYS and ARGV as open_group.lua (KEYS[10]: fs:{act:<id>}:idem:join:<user>:<key>).
--
-- Returns {code, units left, expires ms, pay-by ms, price, order no}:
-- 0 joined; 1-5 sale_check's refusals; 7 the key joined before: that
-- order's number is returned and nothing else is done; 9 no such group;
-- 10 the group is closed (succeeded, failed, or past its deadline);
-- 11 already a member; 12 full; 13 the order number is taken (0 when by
-- this request's own run whose answer was lost).
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
local g = redis.call('HMGET', KEYS[6], 'status', 'size', 'members', 'expires_ms')
if not g[1] then
  return {9, 0, 0, 0, 0, ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = tonumber(g[4])
-- Before the group's own checks: this request's own run, whose answer was
-- lost, made the user a member and may have filled the group.
if record_taken(KEYS[4]) then
  local created, pay_by, price = own_order(KEYS[4], ARGV[1], ARGV[4])
  if not created then
    return {13, 0, expires, 0, 0, ''}
  end
  return {0, tonumber(redis.call('GET', KEYS[2]) or '0'), expires, pay_by, price, ARGV[3]}
end
if g[1] ~= 'forming' or now >= expires then
  return {10, 0, expires, 0, 0, ''}
end
if redis.call('HEXISTS', KEYS[7], ARGV[1]) == 1 then
  return {11, 0, expires, 0, 0, ''}
end
if tonumber(g[3]) >= tonumber(g[2]) then
  return {12, 0, expires, 0, 0, ''}
end
local qty = tonumber(ARGV[2])
local code, left, _, _, sale = sale_check(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
if code ~= 0 then
  return {code, left, expires, 0, 0, ''}
end
left = sale_take(KEYS[1], KEYS[2], KEYS[3], ARGV[1], qty)
local pay_by, price = order_create(KEYS[4], KEYS[5], KEYS[1], ARGV[1], qty, ARGV[3], now, ARGV[5], ARGV[4], sale)
redis.call('HSET', KEYS[7], ARGV[1], ARGV[3])
if redis.call('HINCRBY', KEYS[6], 'members', 1) >= tonumber(g[2]) then
  redis.call('ZREM', KEYS[8], ARGV[4]) -- no free place: not listed as open
end
if ARGV[6] == '1' then
  redis.call('SET', KEYS[10], ARGV[3], 'PX', ARGV[7])
end
return {0, left, expires, pay_by, price, ARGV[3]}
