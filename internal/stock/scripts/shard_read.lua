-- shard_read.lua: what one shard of a sale holds, in one step of its slot
-- (stock.Keeper.Left reads every shard this way; twice when it finds
-- nothing left: a double collect).
--
-- KEYS[1] meta     fs:{act:<id>:<shard>}:meta
-- KEYS[2] stock    fs:{act:<id>:<shard>}:stock
--
-- Returns {units left, the shard's allotment ('total': what it sold and
-- holds), the sale's total ('sale_total'; -1 when the meta has none: a
-- sale loaded before it was written), returns so far ('returned', which
-- only grows)}.
--
-- The units on their way between shards are the sale's total less the
-- allotments: a transfer's take lowers its donor's, its give raises its
-- receiver's, once. Counting them from the donors' transit records instead
-- counted a transfer twice once it was given but its record still stood
-- (its mover lost Redis before the delete). What the sale holds, the units
-- left plus those on their way, is then the sale's total less what each
-- shard sold (allotment less stock): a transfer changes neither, so shards
-- read one by one add up to an exact figure while units move. Only an
-- order sells (a shard's sold only grows) and only a return unsells; so
-- two reads of every shard with no return between them, the first finding
-- nothing left, show the sale sold out at the moment between them.
local m = redis.call('HMGET', KEYS[1], 'total', 'sale_total', 'returned')
local left = tonumber(redis.call('GET', KEYS[2]) or '0')
local total = tonumber(m[1] or '0')
return {left, total, tonumber(m[2] or '-1'), tonumber(m[3] or '0')}
