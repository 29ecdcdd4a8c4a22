-- lib_record.lua: an order's record, one field of its sale's orders hash
-- (fs:{act:<id>}:orders, order no -> record): the fields below in this
-- order, '|' between them, a field holding its default left empty and
-- empty fields at the end left off. One hash field per order instead of a
-- hash per order: a sale's orders are read and written many at a time (one
-- HMGET, one HSET), and each costs Redis one field, not a key with its own
-- expiry (docs/benchmarks.md). redisstore's record.go reads the same form.
--
-- Defaults: group '' (a flash sale), fence 0 (never changed), persisted '',
-- no paid, cancelled or refunded time, no payment (the provider's
-- payment that paid the order, since 2026-11-26: a record written before
-- reads as none), and no item (the SKU of the item ordered, since items,
-- issue 40: a record written before, or of a sale loaded before, is of
-- its sale's one item), no cancel reason (why a cancelled order was:
-- shopper, timeout or group_failed, set by transition.lua since issue 41;
-- a record cancelled before has none) and no sell-out (soldout: on the
-- order that took a flash sale's last unit, the sale's version then, set
-- by lib_accept; the worker derives activity.sold_out from it,
-- docs/webhooks.md). persisted is '1' once a change
-- found the order recorded in MySQL (off the outbox); before that an order
-- is persisted when it is off the outbox (redisstore.Orders.Get), so the
-- worker's marks write nothing into records. No value holds a '|': user ids and numbers are digits, statuses
-- words, group ids base32.
local record_fields = {'user', 'qty', 'price', 'status', 'created_ms', 'pay_by_ms', 'group', 'fence',
  'persisted', 'paid_ms', 'cancelled_ms', 'refunded_ms', 'payment', 'item', 'reason', 'soldout'}

-- record_decode reads a record (a string, or false for none) into a table
-- of its fields, strings ('' for a default); nil for none.
local function record_decode(s)
  if not s then
    return nil
  end
  local r, i = {}, 1
  for v in string.gmatch(s .. '|', '([^|]*)|') do
    local name = record_fields[i]
    if name then
      r[name] = v
    end
    i = i + 1
  end
  for _, name in ipairs(record_fields) do
    if r[name] == nil then
      r[name] = ''
    end
  end
  return r
end

-- record_encode writes a record's fields (strings, or whole numbers) back
-- into its string.
local function record_encode(r)
  local parts, last = {}, 0
  for i, name in ipairs(record_fields) do
    local v = r[name]
    if v == nil or v == false then
      v = ''
    elseif type(v) == 'number' then
      v = string.format('%d', v)
    end
    parts[i] = v
    if v ~= '' then
      last = i
    end
  end
  return table.concat(parts, '|', 1, last)
end

-- record_new is the record of a new order, pending payment: its fields as
-- strings (times formatted with '%d'); group '' for a flash sale, item ''
-- for none known. Built by concatenation: an accept writes one per order,
-- and record_encode's loop costs Redis about four times as much
-- (docs/benchmarks.md).
local function record_new(user, qty, price, created_ms, pay_by_ms, group, item)
  local s = user .. '|' .. qty .. '|' .. price .. '|pending_payment|' .. created_ms .. '|' .. pay_by_ms
  if item ~= '' then
    return s .. '|' .. group .. '|||||||' .. item -- fence to payment empty
  elseif group ~= '' then
    s = s .. '|' .. group
  end
  return s
end

-- record_fence is a record's fence as a number (0 when never changed).
local function record_fence(r)
  return tonumber(r.fence ~= '' and r.fence or '0')
end

-- record_fence_of is the fence of the record string s (the 8th field; 0
-- when empty or left off), read without decoding the rest: the worker's
-- marks read it for every order they write.
local function record_fence_of(s)
  local f = string.match(s, '^[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|([^|]*)')
  return tonumber(f ~= nil and f ~= '' and f or '0')
end
