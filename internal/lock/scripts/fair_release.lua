-- fair_release.lua: release the fair lock and grant it to the next live
-- waiter. KEYS as listed in lib_fair.lua.
--
-- uses: lib_fence, lib_fair
--
-- ARGV[1] holder token
-- ARGV[2] pub/sub channel grants are published on
-- ARGV[3] lifetime of a new fence counter, in milliseconds
--
-- Returns 1 when released; 0 when token does not hold it (nothing changes).
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
grant_next(now_ms(), ARGV[2], ARGV[3])
return 1
