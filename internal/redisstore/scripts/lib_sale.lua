-- lib_sale.lua: the sale's rules, used by every script that takes or returns
-- units (internal/redisstore's accept, open_group, join_group, transition),
-- so there is one copy of them (sale_decide). Their codes are turned into errors in one
-- place: redisstore.SaleRefusal (codes.go, the one table of them).

-- sale_read reads what a decision about the sale needs: the meta hash's
-- rules and settings in one HMGET, and the server time in ms. It returns
-- sale ({status, starts_ms, ends_ms, limit, type, price, pay_ttl_ms,
-- keep_ms, items, sku, paused}: the window, the limit and the count of
-- items numbers, read once for a batch's sale_decide calls, the rest
-- strings; nil or false when missing) and now. The window is checked
-- against Redis server time, the same clock for every API instance.
-- items is the sale's count of items (nil: loaded before items, one);
-- sku its one item's, when it has one (nil: loaded before items, and any
-- item named is taken for it).
local function sale_read(meta_key)
  local m = redis.call('HMGET', meta_key, 'status', 'starts_ms', 'ends_ms', 'limit',
    'type', 'price', 'pay_ttl_ms', 'keep_ms', 'items', 'sku', 'paused')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return {status = m[1], starts_ms = tonumber(m[2]), ends_ms = tonumber(m[3]), limit = tonumber(m[4]), type = m[5], price = m[6],
    pay_ttl_ms = m[7], keep_ms = m[8], items = tonumber(m[9] or '1'), sku = m[10] or nil, paused = m[11] == '1'}, now
end

-- sale_decide decides whether a user holding held units may take qty more
-- of a sale read by sale_read at now, with left units left (of the item,
-- in a sale of several); ilimit, when not nil, is the item's own per-user
-- limit and iheld the user's units of it. The one copy of the sale's
-- rules; its code:
--   0 ok   1 not on sale (unknown or draft)   2 not started   3 ended or closed
--   4 over the user's limit   5 not enough units left
--   6 qty is not a whole number from 1 (the Go side validates first, but a
--     negative quantity here would give units back instead of taking them)
--   14 paused   17 over the item's own limit
local function sale_decide(sale, now, left, held, qty, ilimit, iheld)
  local status = sale.status
  if not qty or qty < 1 or qty ~= math.floor(qty) then
    return 6
  elseif not status then
    return 1
  elseif status == 'closed' then
    return 3
  elseif status ~= 'published' then
    return 1
  elseif sale.paused then
    return 14
  elseif now < sale.starts_ms then
    return 2
  elseif now >= sale.ends_ms then
    return 3
  elseif held + qty > sale.limit then
    return 4
  elseif ilimit and iheld + qty > ilimit then
    return 17
  elseif left < qty then
    return 5
  end
  return 0
end

-- sale_several reports whether a sale read by sale_read sells several
-- items (their stock in the items hash), not one (its stock the sale's).
local function sale_several(sale)
  return sale.items and sale.items > 1
end

-- item_fields are the fields of the items hash that an order of item sku
-- reads: its price, its own limit, its units left.
local function item_fields(sku)
  return 'p:' .. sku, 'l:' .. sku, 'left:' .. sku
end

-- sale_item resolves the item sku an order names in a sale read by
-- sale_read: code 0 and the item {sku, price (a string), limit (nil:
-- none), left (nil: the sale's stock is its)}, or code 15 (a sale of
-- several items, and no item named) or 16 (no such item). In a sale of
-- one item, sku may be '' (that item); the item is the meta's sku. f, when
-- given, is what item_fields(sku) hold (read for a batch at once).
local function sale_item(sale, items_key, sku, f)
  if not sale_several(sale) then
    if sku ~= '' and sale.sku and sku ~= sale.sku then
      return 16
    end
    return 0, {sku = sale.sku or '', price = sale.price}
  end
  if sku == '' then
    return 15
  end
  f = f or redis.call('HMGET', items_key, item_fields(sku))
  if not f[1] then
    return 16
  end
  return 0, {sku = sku, price = f[1], limit = tonumber(f[2]), left = tonumber(f[3] or '0')}
end

-- sale_check decides whether user may take qty units of item sku ('' in
-- a sale of one item) now: sale_read, sale_item, then sale_decide on the
-- stock and the user's units in Redis. It returns code, units left (of
-- the item), units the user holds (in the sale), server time in ms, the
-- sale as sale_read read it, and the item (sale_item's; nil with a code
-- of sale_item's).
local function sale_check(meta_key, stock_key, users_key, items_key, item_users_key, user, qty, sku)
  local sale, now = sale_read(meta_key)
  local code, item = sale_item(sale, items_key, sku)
  if code ~= 0 then
    return code, 0, 0, now, sale, nil
  end
  local left, iheld = item.left, nil
  if not left then
    left = tonumber(redis.call('GET', stock_key) or '0')
  elseif item.limit then
    iheld = tonumber(redis.call('HGET', item_users_key, user .. ':' .. sku) or '0')
  end
  local held = tonumber(redis.call('HGET', users_key, user) or '0')
  return sale_decide(sale, now, left, held, qty, item.limit, iheld), left, held, now, sale, item
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

-- sale_take takes qty units of item (sale_check's) for user; call it only
-- after sale_check said 0. It returns the units left of the item (the
-- sale's, of one item), the units the user now holds, and the units left
-- of the whole sale (0: this order sold it out). The user's units
-- of an item are counted only for an item with a limit of its own
-- (lib_accept.lua says why).
local function sale_take(meta_key, stock_key, users_key, items_key, item_users_key, user, qty, item)
  local left = redis.call('DECRBY', stock_key, qty)
  local sale_left = left
  local held = redis.call('HINCRBY', users_key, user, qty)
  expire_with_sale(meta_key, users_key)
  if item.left then
    left = redis.call('HINCRBY', items_key, 'left:' .. item.sku, -qty)
    if item.limit then
      redis.call('HINCRBY', item_users_key, user .. ':' .. item.sku, qty)
      expire_with_sale(meta_key, item_users_key)
    end
  end
  redis.call('HINCRBY', meta_key, 'accepted', 1)
  return left, held, sale_left
end

-- sale_return gives qty units of user's order of item sku back ('' or any
-- sku in a sale of one item), never above the total (the sale's, and in a
-- sale of several items the item's), and publishes on restock_channel
-- when a sold-out sale, or item, has units again. It returns the units
-- left.
local function sale_return(meta_key, stock_key, users_key, items_key, item_users_key, user, qty, sku, restock_channel)
  if redis.call('EXISTS', meta_key) == 0 then
    return 0 -- the sale's keys are gone (expired): nothing to give back to, nothing to create
  end
  local m = redis.call('HMGET', meta_key, 'total', 'items')
  local left = tonumber(redis.call('GET', stock_key) or '0')
  local back = math.min(qty, tonumber(m[1] or '0') - left)
  local several = tonumber(m[2] or '1') > 1 and sku ~= ''
  local ileft, limited = 0, false
  if several then
    local f = redis.call('HMGET', items_key, 'left:' .. sku, 'total:' .. sku, 'l:' .. sku)
    ileft, limited = tonumber(f[1] or '0'), f[3] ~= false
    back = math.min(back, tonumber(f[2] or '0') - ileft)
  end
  if back > 0 then
    left = redis.call('INCRBY', stock_key, back)
    if several then
      redis.call('HINCRBY', items_key, 'left:' .. sku, back)
    end
  end
  local held = redis.call('HINCRBY', users_key, user, -qty)
  if held <= 0 then
    redis.call('HDEL', users_key, user)
  end
  if limited then
    local f = user .. ':' .. sku
    if redis.call('HINCRBY', item_users_key, f, -qty) <= 0 then
      redis.call('HDEL', item_users_key, f)
    end
  end
  redis.call('HINCRBY', meta_key, 'returned', 1)
  if back > 0 and (left - back <= 0 or (several and ileft <= 0)) then
    redis.call('PUBLISH', restock_channel, '1')
  end
  return left
end
