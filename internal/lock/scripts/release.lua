-- release.lua: delete the mutex only if this owner still holds it, and wake waiters.
--
-- KEYS[1] lock             fs:lock:{name}
-- KEYS[2] waiting marker   fs:lock:{name}:waiting
-- ARGV[1] the owner's value, exactly as obtain.lua stored it
-- ARGV[2] pub/sub channel waiters listen on (not a key: channels have no slot)
--
-- Returns 0 when the lock had expired or belongs to someone else (nothing is
-- changed then); 1 when released; 2 when released and some client had marked
-- itself waiting (the marker is consumed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
if redis.call('DEL', KEYS[2]) == 1 then
  return 2
end
return 1
