-- release.lua: delete the mutex only if this owner still holds it, and wake waiters.
--
-- KEYS[1] lock             fs:lock:{name}
-- ARGV[1] the owner's value, exactly as obtain.lua stored it
-- ARGV[2] pub/sub channel waiters listen on (not a key: channels have no slot)
--
-- Returns 1 when released; 0 when the lock had expired or belongs to someone else
-- (nothing is changed then).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 1
