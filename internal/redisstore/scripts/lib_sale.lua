-- lib_sale.lua: the sale's rules, used by every script that takes or returns
-- units (internal/redisstore's accept, open_group, join_group, transition),
-- so there is one copy of them (sale_decide). Their codes are turned into errors in one
-- place: redisstore.SaleRefusal (codes.go, the one table of them).

-- sale_read reads what a decision about the sale needs: the meta hash's
-- rules and settings in one HMGET, and the server time in ms. It returns
-- sale ({status, starts_ms, ends_ms, limit, type, price, pay_ttl_ms,
-- keep_ms}: the window and the limit numbers, read once for a batch's
-- sale_decide calls, the rest strings; nil or false when missing) and now. The window is checked against Redis
-- server time, the same clock for every API instance.
local function sale_read(meta_key)
  local m = redis.call('HMGET', meta_key, 'status', 'starts_ms', 'ends_ms', 'limit',
    'type', 'price', 'pay_ttl_ms', 'keep_ms')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return {status = m[1], starts_ms = tonumber(m[2]), ends_ms = tonumber(m[3]), limit = tonumber(m[4]), type = m[5], price = m[6],
    pay_ttl_ms = m[7], keep_ms = m[8]}, now
end

-- sale_decide decides whether a user holding held units may take qty more
-- of a sale read by sale_read at now, with left units left. The one copy of
-- the sale's rules; its code:
--   0 ok   1 not on sale (unknown or draft)   2 not started   3 ended or closed
--   4 over the user's limit   5 not enough units left
--   6 qty is not a whole number from 1 (the Go side validates first, but a
--     negative quantity here would give units back instead of taking them)
local function sale_decide(sale, now, left, held, qty)
  local status = sale.status
  if not qty or qty < 1 or qty ~= math.floor(qty) then
    return 6
  elseif not status then
    return 1
  elseif status == 'closed' then
    return 3
  elseif status ~= 'published' then
    return 1
  elseif now < sale.starts_ms then
    return 2
  elseif now >= sale.ends_ms then
    return 3
  elseif held + qty > sale.limit then
    return 4
  elseif left < qty then
    return 5
  end
  return 0
end

-- sale_check decides whether user may take qty units now (sale_read, then
-- sale_decide on the stock and the user's units in Redis). It returns
-- code, units left, units the user holds, server time in ms, and the sale
-- as sale_read read it.
local function sale_check(meta_key, stock_key, users_key, user, qty)
  local sale, now = sale_read(meta_key)
  local left = tonumber(redis.call('GET', stock_key) or '0')
  local held = tonumber(redis.call('HGET', users_key, user) or '0')
  return sale_decide(sale, now, left, held, qty), left, held, now, sale
end

-- expire_with_sale gives key, a key of the sale that a script creates after
-- the sale was loaded (the users hash, the outbox, the group sets), the
-- sale's own expiry (meta's expire_at_ms, set by load.lua), unless it has
-- one: no key of a sale outlives it. When the sale's keys are gone (they
-- expired before a record that still changes) and like_key, that record,
-- is given, key lives at least as long as it. A sale loaded before
-- expire_at_ms existed leaves key as it is.
local function expire_with_sale(meta_key, key, like_key)
  local ttl = redis.call('PTTL', key)
  if ttl ~= -1 and not like_key then
    return
  end
  local m = redis.call('HMGET', meta_key, 'expire_at_ms', 'status')
  if m[2] then
    if ttl == -1 and m[1] then
      redis.call('PEXPIREAT', key, m[1])
    end
  elseif like_key then
    local want = redis.call('PTTL', like_key)
    if want > 0 and (ttl == -1 or ttl < want) then
      redis.call('PEXPIRE', key, want)
    end
  end
end

-- sale_count adds n to one of the sale's counters, if the sale's keys are
-- still there (a late settlement must not bring back a meta hash without
-- its rules or its expiry).
local function sale_count(meta_key, counter, n)
  if redis.call('EXISTS', meta_key) == 1 then
    redis.call('HINCRBY', meta_key, counter, n)
  end
end

-- sale_take takes qty units for user; call it only after sale_check said 0.
-- It returns the units left and the units the user now holds.
local function sale_take(meta_key, stock_key, users_key, user, qty)
  local left = redis.call('DECRBY', stock_key, qty)
  local held = redis.call('HINCRBY', users_key, user, qty)
  expire_with_sale(meta_key, users_key)
  redis.call('HINCRBY', meta_key, 'accepted', 1)
  return left, held
end

-- sale_return gives qty units of user back, never above the total, and
-- publishes on restock_channel when a sold-out sale has units again. It
-- returns the units left.
local function sale_return(meta_key, stock_key, users_key, user, qty, restock_channel)
  if redis.call('EXISTS', meta_key) == 0 then
    return 0 -- the sale's keys are gone (expired): nothing to give back to, nothing to create
  end
  local left = tonumber(redis.call('GET', stock_key) or '0')
  local total = tonumber(redis.call('HGET', meta_key, 'total') or '0')
  local back = math.min(qty, total - left)
  if back > 0 then
    left = redis.call('INCRBY', stock_key, back)
  end
  local held = redis.call('HINCRBY', users_key, user, -qty)
  if held <= 0 then
    redis.call('HDEL', users_key, user)
  end
  redis.call('HINCRBY', meta_key, 'returned', 1)
  if left - back <= 0 and left > 0 then
    redis.call('PUBLISH', restock_channel, '1')
  end
  return left
end

