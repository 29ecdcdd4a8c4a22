-- save_payment.lua: record an order's payment at the provider, merged with
-- what is recorded (payment.Store.SavePayment). The record is the order's
-- one payment slot, and it belongs to the order's paying payment: the one
-- the order names (its record's 'payment', set by the pay transition in
-- the same slot). So:
--   - a payment the order names takes the slot from any other;
--   - while the order names a payment, no other takes the slot from it;
--   - while it names none, a payment of another id recorded first stays,
--     unless the new one is money that may pay the order (succeeded,
--     unflagged) and the recorded one is not (not succeeded, or flagged:
--     money given back).
-- (Before 2026-11-28 the first succeeded, unflagged payment kept the slot
-- even when another paid the order: two payments racing on one order left
-- the record naming the one that did not pay it, and a failed group
-- refunded that one and never the money that paid.) For the same
-- id, the status moves only forward — pending, then failed, canceled,
-- succeeded (the money, once come, stands) — and a flag, a refund id and a
-- client secret, once set, stay; the updated time is the latest. So two
-- apis saving one payment at once (a pay and its webhook) end with the same
-- record, whatever their order.
--
-- uses: lib_sale, lib_record
--
-- KEYS[1] meta      fs:{act:<id>}:meta      (the sale's expiry: expire_with_sale)
-- KEYS[2] payments  fs:{act:<id>}:payments  hash: order no -> payment (JSON)
-- KEYS[3] orders    fs:{act:<id>}:orders    hash: order no -> record (lib_record)
-- ARGV[1] the order no
-- ARGV[2] the payment, JSON: id, provider, order_no, activity_id,
--         amount_cents, currency, status, client_secret, flag, refund_id,
--         created_ms, updated_ms
--
-- Returns the payment recorded after, JSON; the payment as given, and
-- nothing written, when the sale's keys are gone (its meta expired): no
-- key of a sale outlives it (a confirmation of an order Redis let go is
-- judged from MySQL, and recorded there).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return ARGV[2]
end
local rank = {pending = 1, failed = 2, canceled = 3, succeeded = 4}
local new = cjson.decode(ARGV[2])
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local c = cjson.decode(cur)
  if c.id ~= new.id then
    local o = record_decode(redis.call('HGET', KEYS[3], ARGV[1]))
    local payer = o and o.payment or ''
    local takes
    if payer ~= '' then
      takes = new.id == payer
    else
      takes = new.status == 'succeeded' and (new.flag or '') == '' and
        (c.status ~= 'succeeded' or (c.flag or '') ~= '')
    end
    if not takes then
      return cur
    end
    c = new -- the money that paid the order takes its place
  end
  if (rank[new.status] or 0) > (rank[c.status] or 0) then
    c.status = new.status
  end
  for _, f in ipairs({'flag', 'refund_id', 'client_secret'}) do
    if (c[f] or '') == '' and (new[f] or '') ~= '' then
      c[f] = new[f]
    end
  end
  if (new.updated_ms or 0) > (c.updated_ms or 0) then
    c.updated_ms = new.updated_ms
  end
  new = c
end
local out = cjson.encode(new)
redis.call('HSET', KEYS[2], ARGV[1], out)
expire_with_sale(KEYS[1], KEYS[2])
return out
