-- transfer_give.lua: the second step of moving units between two shards
-- (transfer_take.lua says the first): give them to the receiver, once per
-- transfer id, however often it is sent (a mover's retry, the reconciler
-- finishing a transfer whose mover died).
--
-- KEYS[1] meta     fs:{act:<id>:<shard>}:meta     the receiver's
-- KEYS[2] stock    fs:{act:<id>:<shard>}:stock
-- KEYS[3] applied  fs:{act:<id>:<shard>}:applied  set: transfer ids given
-- ARGV[1] the transfer's id
-- ARGV[2] units
--
-- Returns 1 when the units were given now, 0 when this id was given before
-- (or the sale's keys are gone: nothing to give to).
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  return 0
end
local at = redis.call('HGET', KEYS[1], 'expire_at_ms')
if not at then
  return 0
end
local n = tonumber(ARGV[2])
local left = redis.call('INCRBY', KEYS[2], n)
redis.call('HINCRBY', KEYS[1], 'total', n)
-- 'moves' is read by no reader now (shard_read.lua counts by allotments);
-- it is still counted so that apis of the version before, whose double
-- collect watched it, stay right through a rolling upgrade.
redis.call('HINCRBY', KEYS[1], 'moves', 1)
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIREAT', KEYS[3], at) -- the sale's expiry, which a later end moves
return 1
