-- release.lua: delete the mutex only if this owner still holds it, and wake
-- waiters if there are any.
--
-- uses: lib_release
--
-- KEYS[1] lock             fs:lock:{name}
-- KEYS[2] waiting marker   fs:lock:{name}:waiting
-- ARGV[1] the owner's value, exactly as obtain.lua stored it
-- ARGV[2] pub/sub channel waiters listen on (not a key: channels have no slot)
--
-- Returns 0 when the lock had expired or belongs to someone else (nothing is
-- changed then); 1 when released with nobody waiting; 2 when released and
-- waiters were woken (the marker is consumed; they mark again if they fail).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
return release_hold(KEYS[1], KEYS[2], ARGV[2])
