-- reentrant_refresh.lua: extend the reentrant lock if this owner holds it.
--
-- KEYS[1] lock             fs:rlock:{name}
-- ARGV[1] owner field, "o:" .. owner id
-- ARGV[2] new ttl in milliseconds
--
-- Returns 1 when extended; 0 when this owner does not hold it.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
