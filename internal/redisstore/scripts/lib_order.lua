-- lib_order.lua: creating an order record, for every script that accepts an
-- order: a flash-sale order, and a group buy's leader or member.
--
-- uses: lib_sale

-- record_taken: a record already stands at key. Order numbers and group ids
-- carry 80 random bits, so another request's record is never expected
-- there; but a script that wrote over an accepted order would lose it and
-- its units, so each refuses (code 13) and the caller draws a new number.
local function record_taken(key)
  return redis.call('EXISTS', key) == 1
end

-- own_order: the order at order_key if this very request made it — the
-- same user and group: the client (go-redis) sent the script again after a
-- read timeout although it had run. Then the script answers as the first
-- run did, instead of code 13, which would have the caller make a second
-- order. Returns created_ms, pay_by_ms, price, or nil.
local function own_order(order_key, user, group)
  local o = redis.call('HMGET', order_key, 'user', 'group', 'created_ms', 'pay_by_ms', 'price')
  if o[1] == user and (o[2] or '') == group then
    return tonumber(o[3]), tonumber(o[4]), tonumber(o[5])
  end
  return nil
end

-- record_ttl is how long an order or group record of the sale is kept, in
-- ms: meta's keep_ms (load.lua: its last possible change after creation —
-- group time plus payment time — plus the retention, activity.RecordTTL),
-- or fallback for a sale loaded before keep_ms existed. keep_ms is the
-- value sale_check read, if the caller has it (nil: read it here).
local function record_ttl(meta_key, fallback, keep_ms)
  if keep_ms == nil then
    keep_ms = redis.call('HGET', meta_key, 'keep_ms')
  end
  return tonumber(keep_ms or fallback)
end

-- order_create writes the order record (a hash at order_key, kept for
-- record_ttl), appends it to the outbox stream, and returns its pay-by
-- time and price. group is the group id, or '' for a flash sale; sale is
-- what sale_check returned (price, payment time, keep_ms: no second read
-- of the meta hash).
--
-- The record holds only what is not its default: no 'fence' (0 until the
-- first change), 'persisted' (not yet), 'group' (a flash sale's '') or
-- 'amount' (price × qty) — each field is work for Redis on every order
-- (redisstore.parseOrder and the scripts read a missing one as its default).
local function order_create(order_key, outbox_key, meta_key, user, qty, no, now, retention, group, sale)
  local price = tonumber(sale.price)
  local pay_by = now + tonumber(sale.pay_ttl_ms)
  local entry = redis.call('XADD', outbox_key, '*', 'o', no)
  expire_with_sale(meta_key, outbox_key)
  if group ~= '' then
    redis.call('HSET', order_key, 'user', user, 'qty', qty, 'price', sale.price, 'status', 'pending_payment',
      'created_ms', string.format('%d', now), 'pay_by_ms', string.format('%d', pay_by), 'outbox', entry, 'group', group)
  else
    redis.call('HSET', order_key, 'user', user, 'qty', qty, 'price', sale.price, 'status', 'pending_payment',
      'created_ms', string.format('%d', now), 'pay_by_ms', string.format('%d', pay_by), 'outbox', entry)
  end
  redis.call('PEXPIRE', order_key, record_ttl(meta_key, retention, sale.keep_ms))
  return pay_by, price
end
