-- lib_accept.lua: accept flash-sale orders, each all or nothing: check the
-- sale (window, status, per-user limit, stock), take the units, write the
-- order record, put it on the activity's outbox, and remember the
-- Idempotency-Key. accept(calls) is written for a batch: the accepts of
-- concurrent requests, in the order they were made (place.lua hands it the
-- calls of one run that passed the lock and the rate limit). What the
-- calls of one sale share is read once and written once — the rules, the
-- stock, the users' units, one HSET of the new records, one ZADD to the
-- outbox — so a batch costs Redis little more than one order. Nothing of a
-- sale is written before every call of it is decided, and the outbox is
-- written first: a script error (a key of another type there, say) leaves
-- that sale's calls unwritten. The order path runs the calls of one sale
-- per script (redispipe groups them by sale), so an error in one sale
-- never fails another's calls, nor finds them written.
--
-- uses: lib_sale, lib_record, lib_order
--
-- A call's keys (of its sale), KEYS[k + j] for k = calls.k[i]
-- (luascript.Merged's merged.lua):
--   1 meta      fs:{act:<id>}:meta
--   2 stock     fs:{act:<id>}:stock     units left (of every item)
--   3 users     fs:{act:<id>}:users     hash: user id -> units held (of every item)
--   4 orders    fs:{act:<id>}:orders    hash: order no -> record (lib_record)
--   5 idem      fs:{act:<id>}:idem      hash: Idempotency-Key field -> order no
--   6 outbox    fs:{act:<id>}:outbox    zset: orders not yet in MySQL, by when
--   7 items     fs:{act:<id>}:items     a sale of several items': their prices,
--                                       limits and units left (rediskeys.Items)
--   8 itemusers fs:{act:<id>}:itemusers hash: "<user>:<sku>" -> units held of an item
--                                       with a limit of its own (the only ones counted)
-- Its arguments, ARGV[a + j] for a = calls.a[i]:
--   1 user id
--   2 quantity
--   3 order no
--   4 the Idempotency-Key's field in idem (rediskeys.IdempotencyField),
--     '' when the request has none
--   5 the item's SKU; '' for the sale's one item (a sale of several
--     refuses it, 15)
--
-- accept returns per call {code, order no, units left (of the item), units
-- the user holds (in the sale), created ms, pay-by ms, price, item, units
-- the sale has left}:
--   0 accepted; 1-6, 14, 17 refused (lib_sale's sale_decide: not on sale,
--   not started, ended, over the limit, sold out, a bad quantity, paused,
--   over the item's own limit); 15 no item named, in a sale of several; 16
--   no such item; 7 the key named an order before, whose number is
--   returned and nothing else is done; 8 a group buy (its orders are
--   placed by opening or joining a group); 13 an order with this number
--   exists (never written over: draw another number) — unless it is this
--   request's own, made by a run whose answer was lost (the client sent it
--   again): then the answer is the first run's, code 0. The item is the
--   one ordered ('' when not known: a sale loaded before items).
--
-- A sale of several items decides each order on its item's units left and,
-- for an item with a limit of its own, the user's units of it, and on the
-- user's units across the items (the sale's limit): read for the batch's
-- items at once (one HMGET of the items hash; one of itemusers when an
-- item of the batch has its own limit) and written once (one HSET each),
-- with the sale's stock, the sum, taken as for one item. Only an item
-- with its own limit counts its buyers' units: the others need no count to
-- decide, and a count of every buyer of every item cost Redis about a
-- microsecond an order (docs/benchmarks.md, "Items").

-- accept_sale decides and writes the calls idx (indexes into calls) of one
-- sale, putting each answer into out. known, when not nil, holds per call
-- (calls' index) what its caller's script read at its order number in
-- the orders hash known.key in the same run (the record, or false: none),
-- so it is not read twice (place.lua reads it for the rate limit); a call
-- not in it, or of another sale's orders, is read here.
local function accept_sale(calls, idx, out, known)
  local k = calls.k[idx[1]]
  local meta, stock, users, orders, idem, outbox = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]
  local items_key, item_users = KEYS[k + 7], KEYS[k + 8]
  local sale, now = sale_read(meta)
  local several = sale_several(sale)
  local left = tonumber(redis.call('GET', stock) or '0')
  local left_before = left
  local user_ids, nos, keyed = {}, {}, {}
  local skus, sku_list = {}, {}
  local found, unknown, unknown_nos, nu = {}, {}, {}, 0
  if not (known and known.key == orders) then
    known = nil
  end
  local n, ca = #idx, calls.a
  for j = 1, n do
    local i = idx[j]
    local a = ca[i]
    local no = ARGV[a + 3]
    user_ids[j], nos[j] = ARGV[a + 1], no
    if ARGV[a + 4] ~= '' then
      keyed[#keyed + 1] = ARGV[a + 4]
    end
    local sku = ARGV[a + 5] or ''
    if several and sku ~= '' and not skus[sku] then
      skus[sku] = true
      sku_list[#sku_list + 1] = sku
    end
    local r = known and known[i]
    if r == nil then
      nu = nu + 1
      unknown[nu], unknown_nos[nu] = j, no
    else
      found[j] = r
    end
  end
  local held_read = redis.call('HMGET', users, unpack(user_ids))
  if nu > 0 then
    local v = redis.call('HMGET', orders, unpack(unknown_nos))
    for x = 1, nu do
      found[unknown[x]] = v[x]
    end
  end
  local named = {}
  if #keyed > 0 then
    local v = redis.call('HMGET', idem, unpack(keyed))
    for j, f in ipairs(keyed) do
      named[f] = v[j]
    end
  end
  -- A sale of several items: the batch's items, and the users' units of
  -- them, as this batch leaves them.
  local item_of, iheld = {}, {}
  if #sku_list > 0 then
    local fields = {}
    for _, sku in ipairs(sku_list) do
      fields[#fields + 1], fields[#fields + 2], fields[#fields + 3] = item_fields(sku)
    end
    local v = redis.call('HMGET', items_key, unpack(fields))
    local limited = false
    for x, sku in ipairs(sku_list) do
      local _, item = sale_item(sale, items_key, sku, {v[3 * x - 2], v[3 * x - 1], v[3 * x]})
      item_of[sku] = item or false
      limited = limited or (item and item.limit ~= nil)
    end
    if limited then -- the buyers' units of the items with a limit of their own
      local pairs_list, seen = {}, {}
      for _, i in ipairs(idx) do
        local a = calls.a[i]
        local item = item_of[ARGV[a + 5]]
        local pair = ARGV[a + 1] .. ':' .. (ARGV[a + 5] or '')
        if item and item.limit and not seen[pair] then
          seen[pair] = true
          pairs_list[#pairs_list + 1] = pair
        end
      end
      local v2 = redis.call('HMGET', item_users, unpack(pairs_list))
      for x, pair in ipairs(pairs_list) do
        iheld[pair] = tonumber(v2[x] or '0')
      end
    end
  end
  -- A sale of one item: its item, the same for every order (sale_item's).
  local one_item = {sku = sale.sku or '', price = sale.price}
  -- Each item's price as a number, and each quantity's argument as a
  -- number and the record's string, made once a batch, not once an order:
  -- Lua's tonumber and number-to-string are 0.2-0.6 µs of Redis's time
  -- each here.
  local price_n, quantities = {}, {}
  local now_s = string.format('%d', now)
  local pay_by = now + tonumber(sale.pay_ttl_ms or '0')
  local pay_by_s = string.format('%d', pay_by)
  local held = {} -- user -> units, as this batch leaves them
  for j = 1, n do
    local u = user_ids[j]
    if held[u] == nil then
      local v = held_read[j]
      held[u] = v and tonumber(v) or 0 -- a new shopper (every one at a launch): nothing to parse
    end
  end
  local took, accepted = 0, 0
  local user_set, record_set, outbox_add, idem_set, made = {}, {}, {}, {}, {}
  local item_set, iuser_set = {}, {}
  for j = 1, n do
    local i = idx[j]
    local a = ca[i]
    local user, qa, no, key, sku = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5] or ''
    local q = quantities[qa] -- {number, its string}, or false: not a number
    if q == nil then
      local v = tonumber(qa)
      q = v and {v, tostring(v)} or false
      quantities[qa] = q
    end
    local qty = q and q[1]
    local r = record_decode(found[j])
    -- The item: a sale of one item's is the sale's (its stock the sale's).
    local code, item = 0, nil
    if several then
      if sku == '' then
        code = 15
      elseif not item_of[sku] then
        code = 16
      else
        item = item_of[sku]
      end
    elseif sku ~= '' and sale.sku and sku ~= sale.sku then
      code = 16 -- sale_item's rule for a sale of one item, without a table an order
    else
      item = one_item
    end
    if key ~= '' and named[key] then
      out[i] = {7, named[key], 0, 0, 0, 0, 0, '', 0}
    elseif r or made[no] then
      if own_order(r, user, '') then
        local ileft = left
        if several and item_of[r.item] then
          ileft = item_of[r.item].left
        end
        out[i] = {0, no, ileft, held[user], tonumber(r.created_ms), tonumber(r.pay_by_ms), tonumber(r.price), r.item, left}
      else
        out[i] = {13, '', 0, 0, 0, 0, 0, '', 0}
      end
    elseif code ~= 0 then
      out[i] = {code, '', 0, held[user], 0, 0, 0, sku, left}
    else
      local ileft, pair = left, nil
      if item.left then
        ileft = item.left
      end
      if item.limit then
        pair = user .. ':' .. sku
      end
      code = sale_decide(sale, now, ileft, held[user], qty, item.limit, pair and iheld[pair])
      if code == 0 and sale.type == 'groupbuy' then
        code = 8
      end
      if code ~= 0 then
        out[i] = {code, '', ileft, held[user], 0, 0, 0, item.sku, left}
      else
        left, held[user] = left - qty, held[user] + qty
        took, accepted = took + qty, accepted + 1
        made[no] = true
        user_set[user] = held[user]
        ileft = left
        if item.left then
          item.left = item.left - qty
          ileft = item.left
          item_set[item.sku] = item.left
          if pair then
            iheld[pair] = iheld[pair] + qty
            iuser_set[pair] = iheld[pair]
          end
        end
        local pn = price_n[item]
        if not pn then
          pn = tonumber(item.price)
          price_n[item] = pn
        end
        local m = 2 * accepted -- the records' and the outbox's pairs so far, this one's included
        record_set[m - 1], record_set[m] = no, record_new(user, q[2], item.price, now_s, pay_by_s, '', item.sku)
        outbox_add[m - 1], outbox_add[m] = now_s, no
        if key ~= '' then
          named[key] = no
          idem_set[#idem_set + 1] = key
          idem_set[#idem_set + 1] = no
        end
        out[i] = {0, no, ileft, held[user], now, pay_by, pn, item.sku, left}
      end
    end
  end
  if accepted == 0 then
    return
  end
  if left_before > 0 and left == 0 then
    -- This batch sold the sale out: its last accepted order carries the
    -- sale's version (order_sold_out).
    local r = record_decode(record_set[#record_set])
    order_sold_out(meta, r)
    record_set[#record_set] = record_encode(r)
  end
  local units, nun = {}, 0
  for u, h in pairs(user_set) do
    units[nun + 1], units[nun + 2] = u, h
    nun = nun + 2
  end
  -- The outbox first: a key of another type there (a sale in the form
  -- before 2026-11-24, not yet moved by api upgrade-redis) fails the
  -- script before it has written anything.
  redis.call('ZADD', outbox, unpack(outbox_add))
  redis.call('DECRBY', stock, took)
  redis.call('HSET', users, unpack(units))
  redis.call('HINCRBY', meta, 'accepted', accepted)
  redis.call('HSET', orders, unpack(record_set))
  expire_with_sale(meta, users)
  expire_with_sale(meta, orders)
  expire_with_sale(meta, outbox)
  if next(item_set) then
    local lefts, iunits = {}, {}
    for sku, n in pairs(item_set) do
      lefts[#lefts + 1], lefts[#lefts + 2] = 'left:' .. sku, n
    end
    for pair, n in pairs(iuser_set) do
      iunits[#iunits + 1], iunits[#iunits + 2] = pair, n
    end
    redis.call('HSET', items_key, unpack(lefts))
    if #iunits > 0 then
      redis.call('HSET', item_users, unpack(iunits))
      expire_with_sale(meta, item_users)
    end
  end
  if #idem_set > 0 then
    redis.call('HSET', idem, unpack(idem_set))
    expire_with_sale(meta, idem)
  end
end

-- accept decides and writes calls, sale by sale (see above); known, when
-- not nil, is accept_sale's.
local function accept(calls, known)
  -- The calls of each sale, in the order they were made.
  local sales, by_meta = {}, {}
  for i = 1, calls.n do
    local m = KEYS[calls.k[i] + 1]
    if not by_meta[m] then
      by_meta[m] = {}
      sales[#sales + 1] = m
    end
    local idx = by_meta[m]
    idx[#idx + 1] = i
  end
  local out = {}
  for _, m in ipairs(sales) do
    accept_sale(calls, by_meta[m], out, known)
  end
  return out
end
