-- transition.lua: move an order on: pay it, cancel it (the user), expire it
-- (its payment time ran out), or settle it in a failed group (refund if
-- paid, cancel if not). One atomic step, so pay and expiry, or pay and a
-- group's deadline, racing on one order end one way, every time. Every
-- change but pay gives the units back.
--
-- uses: lib_sale, lib_record
--
-- KEYS[1] meta     fs:{act:<id>}:meta
-- KEYS[2] stock    fs:{act:<id>}:stock
-- KEYS[3] users    fs:{act:<id>}:users
-- KEYS[4] orders   fs:{act:<id>}:orders          hash: order no -> record (lib_record)
-- KEYS[5] group    fs:{act:<id>}:g:<group id>    (of the order's group; unused otherwise)
-- KEYS[6] members  fs:{act:<id>}:gm:<group id>
-- KEYS[7] forming  fs:{act:<id>}:groups:forming
-- KEYS[8] outbox   fs:{act:<id>}:outbox          zset: orders not yet in MySQL, by when
-- KEYS[9] items    fs:{act:<id>}:items           a sale of several items': the order's item's units go back there too
-- KEYS[10] itemusers fs:{act:<id>}:itemusers     hash: "<user>:<sku>" -> units held of the item
-- ARGV[1] what: pay | cancel | expire | refund | settle (cancel in a failed group)
-- ARGV[2] fencing token of the per-order lock the caller holds
-- ARGV[3] restock channel
-- ARGV[4] the user asking (pay, cancel); '' for the system
-- ARGV[5] the order's group id, '' for a flash-sale order
-- ARGV[6] the order no
-- ARGV[7] the provider's payment that pays it (pay); '' for none
--
-- Returns {code, status now, fence now} and, when done (code 0), the
-- order's record after and 1 if it is on the outbox (not yet in MySQL),
-- else 0: the caller has the order as it is now without reading it again
-- (codes: redisstore/codes.go, the one table of every order script's
-- codes):
--   0 done — also when this very change ran before: the order is in the
--   change's status with the caller's fence (the client, go-redis, sent the
--   script again after a lost answer; fences are unique per hold of the
--   order's lock, so no other change can have left that); 31 no such order
--   (or not this user's); 32 not in a state for this change (nothing
--   changes: this is how a refund happens once); 33 pay refused, the
--   payment time is over; 34 expire refused, not due yet; 35 the fence is
--   not above the order's (stale: not final, a retry takes the lock, and a
--   fence, anew); 36 settle/refund refused, the group has not failed; 37 pay
--   refused, the group is closed (failed, or past its deadline); 38 an
--   unknown action (nothing changes).
local o = record_decode(redis.call('HGET', KEYS[4], ARGV[6]))

-- changed writes the order's new state and, since it is not in MySQL yet,
-- puts the order (back) on the outbox, scored now: one entry per order.
-- Its sync task is sent by the api's relay a few milliseconds later; if the
-- api dies before that, the reconciler finds the entry and records the
-- change.
-- It returns the record written.
local function changed(now)
  if redis.call('ZSCORE', KEYS[8], ARGV[6]) == false then
    o.persisted = '1' -- off the outbox: MySQL has it (lib_record)
  end
  redis.call('ZADD', KEYS[8], now, ARGV[6]) -- first: a key of another type there fails before any write
  local rec = record_encode(o)
  redis.call('HSET', KEYS[4], ARGV[6], rec)
  expire_with_sale(KEYS[1], KEYS[8])
  return rec
end

local what = ARGV[1]
if what ~= 'pay' and what ~= 'cancel' and what ~= 'expire' and what ~= 'refund' and what ~= 'settle' then
  return {38, '', 0}
end
if not o or (ARGV[4] ~= '' and ARGV[4] ~= o.user) then
  return {31, '', 0}
end
local status = o.status
local fence = record_fence(o)
local g = nil
if ARGV[5] ~= '' then
  g = redis.call('HMGET', KEYS[5], 'status', 'size', 'expires_ms')
end
local target = 'cancelled'
if what == 'pay' then
  target = 'paid'
elseif what == 'refund' then
  target = 'refunded'
end
if status == target and fence == tonumber(ARGV[2]) then
  -- This change, run before: its answer again.
  local queued = 0
  if redis.call('ZSCORE', KEYS[8], ARGV[6]) then
    queued = 1
  end
  return {0, status, fence, redis.call('HGET', KEYS[4], ARGV[6]), queued}
end
local wanted = 'pending_payment'
if what == 'refund' then
  wanted = 'paid'
end
if status ~= wanted then
  return {32, status, fence}
end
if tonumber(ARGV[2]) <= fence then
  return {35, status, fence}
end
if (what == 'refund' or what == 'settle') and not (g and g[1] == 'failed') then
  return {36, status, fence}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stamp = string.format('%d', now)

if what == 'pay' then
  if now >= tonumber(o.pay_by_ms) then
    return {33, status, fence}
  end
  if g and (g[1] ~= 'forming' or now >= tonumber(g[3])) then
    return {37, status, fence}
  end
  o.status, o.fence, o.paid_ms = 'paid', ARGV[2], stamp
  if ARGV[7] and ARGV[7] ~= '' then
    o.payment = ARGV[7]
  end
  local rec = changed(now)
  if g and redis.call('HINCRBY', KEYS[5], 'paid', 1) >= tonumber(g[2]) then
    -- The last slot is paid: the group succeeds now.
    redis.call('HSET', KEYS[5], 'status', 'succeeded', 'succeeded_ms', stamp)
    redis.call('ZREM', KEYS[7], ARGV[5])
    -- It stays in unsettled until its settle task at the deadline, which
    -- records the group's row again: if the api dies before queueing the
    -- row's sync now, that task (or the reconciler, if it was lost too)
    -- still brings MySQL in line.
    sale_count(KEYS[1], 'groups_succeeded', 1)
  end
  return {0, 'paid', tonumber(ARGV[2]), rec, 1}
end
if what == 'expire' and now < tonumber(o.pay_by_ms) then
  return {34, status, fence}
end

local to = 'cancelled'
if what == 'refund' then
  to = 'refunded'
else
  -- Why, for order.cancelled's reason (the status alone does not say).
  o.reason = ({cancel = 'shopper', expire = 'timeout', settle = 'group_failed'})[what]
end
o.status, o.fence, o[to .. '_ms'] = to, ARGV[2], stamp
local rec = changed(now)
sale_return(KEYS[1], KEYS[2], KEYS[3], KEYS[9], KEYS[10], o.user, tonumber(o.qty), o.item, ARGV[3])
if g and g[1] == 'forming' then
  -- An unpaid member left a forming group: the slot opens again.
  redis.call('HDEL', KEYS[6], o.user)
  redis.call('HINCRBY', KEYS[5], 'members', -1)
  if now < tonumber(g[3]) and redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('ZADD', KEYS[7], g[3], ARGV[5])
    expire_with_sale(KEYS[1], KEYS[7])
  end
end
return {0, to, tonumber(ARGV[2]), rec, 1}
