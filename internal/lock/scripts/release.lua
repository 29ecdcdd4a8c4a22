-- release.lua: delete the mutex only if this owner still holds it, and wake waiters.
--
-- KEYS[1] lock hash        fs:lock:{name}
-- ARGV[1] owner token
-- ARGV[2] pub/sub channel waiters listen on (not a key: channels have no slot)
--
-- Returns 1 when released; 0 when the lock had expired or belongs to someone else
-- (nothing is changed then).
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 1
