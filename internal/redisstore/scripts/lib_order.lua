-- lib_order.lua: creating orders, for every script that accepts one: a
-- flash sale's (lib_accept.lua in place.lua, many at a time), and a group buy's leader or
-- member (open_group.lua, join_group.lua).
--
-- uses: lib_sale, lib_record

-- order_taken is the record of order no if one stands in the orders hash,
-- else nil. Order numbers and group ids carry 80 random bits, so another
-- request's record is never expected there; but a script that wrote over
-- an accepted order would lose it and its units, so each refuses (code 13)
-- and the caller draws a new number — unless the record is this very
-- request's (own_order).
local function order_taken(orders_key, no)
  return record_decode(redis.call('HGET', orders_key, no))
end

-- own_order reports whether r, a record found at the request's number, is
-- the request's own: the same user and group, made by a run of the script
-- whose answer was lost (the client, go-redis, sent the script again after
-- a read timeout although it had run). The script then answers as that
-- run did, instead of code 13, which would have the caller make a second
-- order.
local function own_order(r, user, group)
  return r ~= nil and r.user == user and r.group == group
end

-- order_new is the record of a new order of qty units of item (sale_item's)
-- for user, at now, in a sale as sale_read read it; group is the group id,
-- or '' for a flash sale. It returns the record, its pay-by time and price
-- (numbers): the item's.
local function order_new(user, qty, now, group, sale, item)
  local pay_by = now + tonumber(sale.pay_ttl_ms)
  return {user = user, qty = qty, price = item.price, status = 'pending_payment', created_ms = now,
    pay_by_ms = pay_by, group = group, item = item.sku}, pay_by, tonumber(item.price)
end

-- order_create writes one order's record r as no into the orders hash and
-- puts it on the outbox (scored by its creation time), both keys kept as
-- long as the sale's (expire_with_sale).
local function order_create(meta_key, orders_key, outbox_key, no, r)
  redis.call('ZADD', outbox_key, r.created_ms, no) -- first: a key of another type there fails before any write
  redis.call('HSET', orders_key, no, record_encode(r))
  expire_with_sale(meta_key, orders_key)
  expire_with_sale(meta_key, outbox_key)
end

-- order_sold_out marks r, the record of an order that just took the sale's
-- last unit, with the sale's version (soldout): the worker's write of the
-- order appends activity.sold_out with it as its sequence, in the order's
-- transaction (docs/webhooks.md). Read only then, so an accept that sells
-- nothing out pays nothing for it. A shard of a sharded sale selling its
-- last unit is not the sale selling out: none is marked there.
local function order_sold_out(meta_key, r)
  local m = redis.call('HMGET', meta_key, 'version', 'shards')
  if m[1] and tonumber(m[2] or '1') <= 1 then
    r.soldout = m[1]
  end
end
