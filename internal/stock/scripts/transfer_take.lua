-- transfer_take.lua: the first step of moving units between two shards of
-- a sale (stock.Keeper.Pull): take them from the donor shard and write down
-- that they are on their way, in one step of the donor's slot. The second
-- step, transfer_give.lua, runs in the receiver's slot; then the record is
-- deleted here (HDEL). A mover that dies between the steps leaves the
-- record, and the reconciler gives the units (stock.Keeper.Settle): the
-- give is once per transfer id, so giving again changes nothing. Units on
-- their way count as the sale's (stock.Keeper.Left): nobody is answered
-- sold out while a unit is in transit.
--
-- KEYS[1] meta     fs:{act:<id>:<shard>}:meta     the donor's ('total' is
--                  its allotment: what it sold and holds; the sale's total
--                  less every shard's is the units on their way)
-- KEYS[2] stock    fs:{act:<id>:<shard>}:stock
-- KEYS[3] transit  fs:{act:<id>:<shard>}:transit  hash: transfer id ->
--                  "<to shard>:<units>:<taken ms>"
-- KEYS[4] taken    fs:{act:<id>:<shard>}:taken    set: every transfer id
--                  ever taken here, so a take sent again (go-redis resends
--                  a script after a lost reply) never takes twice, even
--                  after the transfer was finished and its record deleted
-- ARGV[1] the transfer's id
-- ARGV[2] the receiving shard
-- ARGV[3] units wanted (at most what is left is taken)
--
-- Returns the units taken: 0 when the donor has none left (nothing is
-- written); when this transfer id was taken before, what it took then
-- while its record stands, 0 once it was finished (nothing more to give).
if redis.call('SISMEMBER', KEYS[4], ARGV[1]) == 1 then
  local prev = redis.call('HGET', KEYS[3], ARGV[1])
  if not prev then
    return 0
  end
  local _, _, units = string.find(prev, '^%d+:(%d+):')
  return tonumber(units)
end
local left = tonumber(redis.call('GET', KEYS[2]) or '0')
local n = math.min(left, tonumber(ARGV[3]))
if n <= 0 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DECRBY', KEYS[2], n)
redis.call('HINCRBY', KEYS[1], 'total', -n)
-- 'moves' is read by no reader now (shard_read.lua counts by allotments);
-- it is still counted so that apis of the version before, whose double
-- collect watched it, stay right through a rolling upgrade.
redis.call('HINCRBY', KEYS[1], 'moves', 1)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ':' .. n .. ':' .. now)
redis.call('SADD', KEYS[4], ARGV[1])
-- With the sale's keys, whose expiry a later end moves (load.lua): set on
-- every take, not only the first.
local at = redis.call('HGET', KEYS[1], 'expire_at_ms')
if at then
  redis.call('PEXPIREAT', KEYS[3], at)
  redis.call('PEXPIREAT', KEYS[4], at)
end
return n
