-- read_order.lua: orders' records and whether each is still on its sale's
-- outbox, for Store.Accept's check of an order refused by the rate limit
-- (was it this very call, sent again after its answer was lost?). Written
-- for a batch (internal/redisbatch's merged.lua): concurrent refusals'
-- reads are one script run in the batcher's pipeline, not a round trip of
-- their own each — under a storm of refused orders the separate read cost
-- Redis about two thirds of a refusal (docs/benchmarks.md).
--
-- A call's keys, KEYS[k + j] for k = calls.k[i]:
--   1 orders   fs:{act:<id>}:orders    hash: order no -> record (lib_record)
--   2 outbox   fs:{act:<id>}:outbox    zset: orders not yet in MySQL
-- Its argument, ARGV[calls.a[i] + 1]: the order no.
--
-- Returns per call {record or false, 1 if the order is on the outbox else 0}.
local out = {}
for i = 1, calls.n do
  local k, no = calls.k[i], ARGV[calls.a[i] + 1]
  local rec = redis.call('HGET', KEYS[k + 1], no)
  local queued = 0
  if rec and redis.call('ZSCORE', KEYS[k + 2], no) then
    queued = 1
  end
  out[i] = {rec, queued}
end
return out
