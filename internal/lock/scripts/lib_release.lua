-- lib_release.lua: how a mutex hold ends, for release.lua and
-- release_with.lua.

-- release_hold deletes a held mutex's key and, if some client marked itself
-- waiting, consumes the marker and wakes the waiters. Every waiter marks the
-- key on each failed attempt, and retries at least every recheck interval,
-- within the marker's ttl: no marker, no waiter, no PUBLISH needed. Returns
-- 1 when nobody waited, 2 when waiters were woken.
local function release_hold(lock_key, waiting_key, channel)
  redis.call('DEL', lock_key)
  if redis.call('DEL', waiting_key) == 1 then
    redis.call('PUBLISH', channel, '1')
    return 2
  end
  return 1
end
