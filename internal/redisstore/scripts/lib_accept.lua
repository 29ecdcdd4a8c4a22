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
--   1 meta     fs:{act:<id>}:meta
--   2 stock    fs:{act:<id>}:stock
--   3 users    fs:{act:<id>}:users     hash: user id -> units held
--   4 orders   fs:{act:<id>}:orders    hash: order no -> record (lib_record)
--   5 idem     fs:{act:<id>}:idem      hash: Idempotency-Key field -> order no
--   6 outbox   fs:{act:<id>}:outbox    zset: orders not yet in MySQL, by when
-- Its arguments, ARGV[a + j] for a = calls.a[i]:
--   1 user id
--   2 quantity
--   3 order no
--   4 the Idempotency-Key's field in idem (rediskeys.IdempotencyField),
--     '' when the request has none
--
-- accept returns per call {code, order no, units left, units the user
-- holds, created ms, pay-by ms, price}:
--   0 accepted; 1-6 refused (lib_sale's sale_decide: not on sale, not
--   started, ended, over the limit, sold out, a bad quantity); 7 the key
--   named an order before, whose number is returned and nothing else is
--   done; 8 a group buy (its orders are placed by opening or joining a
--   group); 13 an order with this number exists (never written over: draw
--   another number) — unless it is this request's own, made by a run whose
--   answer was lost (the client sent it again): then the answer is the
--   first run's, code 0.

-- accept_sale decides and writes the calls idx (indexes into calls) of one
-- sale, putting each answer into out.
local function accept_sale(calls, idx, out)
  local k = calls.k[idx[1]]
  local meta, stock, users, orders, idem, outbox = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]
  local sale, now = sale_read(meta)
  local left = tonumber(redis.call('GET', stock) or '0')
  local user_ids, nos, keyed = {}, {}, {}
  for j, i in ipairs(idx) do
    local a = calls.a[i]
    user_ids[j], nos[j] = ARGV[a + 1], ARGV[a + 3]
    if ARGV[a + 4] ~= '' then
      keyed[#keyed + 1] = ARGV[a + 4]
    end
  end
  local held_read = redis.call('HMGET', users, unpack(user_ids))
  local found = redis.call('HMGET', orders, unpack(nos))
  local named = {}
  if #keyed > 0 then
    local v = redis.call('HMGET', idem, unpack(keyed))
    for j, f in ipairs(keyed) do
      named[f] = v[j]
    end
  end
  local price = tonumber(sale.price)
  local now_s = string.format('%d', now)
  local pay_by = now + tonumber(sale.pay_ttl_ms or '0')
  local pay_by_s = string.format('%d', pay_by)
  local held = {} -- user -> units, as this batch leaves them
  for j, u in ipairs(user_ids) do
    if held[u] == nil then
      held[u] = tonumber(held_read[j] or '0')
    end
  end
  local took, accepted = 0, 0
  local user_set, record_set, outbox_add, idem_set, made = {}, {}, {}, {}, {}
  for j, i in ipairs(idx) do
    local a = calls.a[i]
    local user, qty, no, key = ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 3], ARGV[a + 4]
    local r = record_decode(found[j])
    if key ~= '' and named[key] then
      out[i] = {7, named[key], 0, 0, 0, 0, 0}
    elseif r or made[no] then
      if own_order(r, user, '') then
        out[i] = {0, no, left, held[user], tonumber(r.created_ms), tonumber(r.pay_by_ms), tonumber(r.price)}
      else
        out[i] = {13, '', 0, 0, 0, 0, 0}
      end
    else
      local code = sale_decide(sale, now, left, held[user], qty)
      if code == 0 and sale.type == 'groupbuy' then
        code = 8
      end
      if code ~= 0 then
        out[i] = {code, '', left, held[user], 0, 0, 0}
      else
        left, held[user] = left - qty, held[user] + qty
        took, accepted = took + qty, accepted + 1
        made[no] = true
        user_set[user] = held[user]
        record_set[#record_set + 1] = no
        record_set[#record_set + 1] = record_new(user, qty, sale.price, now_s, pay_by_s, '')
        outbox_add[#outbox_add + 1] = now_s
        outbox_add[#outbox_add + 1] = no
        if key ~= '' then
          named[key] = no
          idem_set[#idem_set + 1] = key
          idem_set[#idem_set + 1] = no
        end
        out[i] = {0, no, left, held[user], now, pay_by, price}
      end
    end
  end
  if accepted == 0 then
    return
  end
  local units = {}
  for u, n in pairs(user_set) do
    units[#units + 1] = u
    units[#units + 1] = n
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
  if #idem_set > 0 then
    redis.call('HSET', idem, unpack(idem_set))
    expire_with_sale(meta, idem)
  end
end

-- accept decides and writes calls, sale by sale (see above).
local function accept(calls)
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
    accept_sale(calls, by_meta[m], out)
  end
  return out
end
