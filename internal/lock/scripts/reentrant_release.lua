-- reentrant_release.lua: drop one hold; the last one deletes the lock and wakes waiters.
--
-- KEYS[1] lock             fs:rlock:{name}
-- ARGV[1] owner field, "o:" .. owner id
-- ARGV[2] pub/sub channel waiters listen on
-- ARGV[3] the hold's nonce (see reentrant_obtain.lua)
--
-- Returns the owner's holds left (0 = released); -1 when this hold is not in
-- the lock (it expired, or was released already): nothing is changed then,
-- even if the same owner holds the lock again through newer holds.
if redis.call('HDEL', KEYS[1], 'n:' .. ARGV[3]) == 0 then
  return -1
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if n > 0 then
  return n
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 0
