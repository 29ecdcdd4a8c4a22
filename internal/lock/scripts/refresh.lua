-- refresh.lua: extend the mutex only if this owner still holds it.
--
-- KEYS[1] lock             fs:lock:{name}
-- ARGV[1] the owner's value, exactly as obtain.lua stored it
-- ARGV[2] new ttl in milliseconds
--
-- Returns 1 when extended; 0 when the lock had expired or belongs to someone else
-- (a renewal never extends another holder's lock).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
