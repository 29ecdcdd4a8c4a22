-- transition.lua: move an order on: pay it, cancel it (the user), or expire
-- it (its payment time ran out). One atomic step, so pay and expiry racing
-- on one order end one way, every time. Cancelling and expiring give the
-- units back. (stock's lib_sale.lua is prepended.)
--
-- KEYS[1] meta     fs:{act:<id>}:meta
-- KEYS[2] stock    fs:{act:<id>}:stock
-- KEYS[3] users    fs:{act:<id>}:users
-- KEYS[4] order    fs:{act:<id>}:o:<order no>
-- ARGV[1] what: pay | cancel | expire
-- ARGV[2] fencing token of the per-order lock the caller holds
-- ARGV[3] restock channel
-- ARGV[4] the user asking (pay, cancel); '' for the system (expire)
--
-- Returns {code, status now, fence now}:
--   0 done; 1 no such order (or not this user's); 2 not pending payment
--   (already paid, cancelled...: nothing changes); 3 pay refused, the payment
--   time is over; 4 expire refused, the payment time is not over yet;
--   5 the fence is not above the order's (a stale holder of the order lock).
local o = redis.call('HMGET', KEYS[4], 'status', 'user', 'qty', 'pay_by_ms', 'fence')
local status = o[1]
if not status or (ARGV[4] ~= '' and ARGV[4] ~= o[2]) then
  return {1, '', 0}
end
local fence = tonumber(o[5])
if status ~= 'pending_payment' then
  return {2, status, fence}
end
if tonumber(ARGV[2]) <= fence then
  return {5, status, fence}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = now >= tonumber(o[4])
if ARGV[1] == 'pay' then
  if due then
    return {3, status, fence}
  end
  redis.call('HSET', KEYS[4], 'status', 'paid', 'fence', ARGV[2], 'paid_ms', string.format('%d', now))
  return {0, 'paid', tonumber(ARGV[2])}
end
if ARGV[1] == 'expire' and not due then
  return {4, status, fence}
end
redis.call('HSET', KEYS[4], 'status', 'cancelled', 'fence', ARGV[2], 'cancelled_ms', string.format('%d', now))
sale_return(KEYS[1], KEYS[2], KEYS[3], o[2], tonumber(o[3]), ARGV[3])
return {0, 'cancelled', tonumber(ARGV[2])}
