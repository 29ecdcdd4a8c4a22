-- lib_order.lua: creating an order record, for every script that accepts an
-- order: a flash-sale order, and a group buy's leader or member.

-- order_create writes the order record (a hash at order_key, kept for
-- retention ms), appends it to the outbox stream, and returns its pay-by
-- time and price. group is the group id, or '' for a flash sale.
local function order_create(order_key, outbox_key, meta_key, user, qty, no, now, retention, group)
  local price = tonumber(redis.call('HGET', meta_key, 'price'))
  local pay_by = now + tonumber(redis.call('HGET', meta_key, 'pay_ttl_ms'))
  local entry = redis.call('XADD', outbox_key, '*', 'o', no)
  redis.call('HSET', order_key,
    'user', user, 'qty', qty, 'price', string.format('%d', price),
    'amount', string.format('%d', price * qty), 'status', 'pending_payment', 'fence', 0,
    'created_ms', string.format('%d', now), 'pay_by_ms', string.format('%d', pay_by),
    'outbox', entry, 'persisted', 0, 'group', group)
  redis.call('PEXPIRE', order_key, retention)
  return pay_by, price
end

