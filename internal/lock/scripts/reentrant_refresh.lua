-- reentrant_refresh.lua: extend the reentrant lock if this owner holds it
-- in the same hold (same fence) this process renews.
--
-- KEYS[1] lock             fs:rlock:{name}
-- ARGV[1] owner field, "o:" .. owner id
-- ARGV[2] new ttl in milliseconds
-- ARGV[3] the fence of the hold being renewed
--
-- Returns 1 when extended; 0 otherwise (a hold that expired is never revived
-- through a newer hold of the same owner).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 or redis.call('HGET', KEYS[1], '~fence') ~= ARGV[3] then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
