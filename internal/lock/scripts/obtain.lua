-- obtain.lua: take the mutex if it is free and mint its fencing tokens.
--
-- uses: lib_fence
--
-- KEYS[1] lock             fs:lock:{name}          string: the owner's value
-- KEYS[2] fence counter    fs:lock:{name}:fence
-- KEYS[3] waiting marker   fs:lock:{name}:waiting  set while some client waits for the lock
-- ARGV[1] owner value: token (32 hex characters, 128 random bits), then holder
--         metadata, \31 between: token, pid, acquired-at ms, host, label
-- ARGV[2] ttl in milliseconds
-- ARGV[3] lifetime of a new fence counter, in milliseconds
-- ARGV[4] n: how many fences to reserve (1, or more for local handoffs); 0 =
--         none (WithoutFence): no counter is touched and the fence is 0
-- ARGV[5] waiting marker ttl in milliseconds; 0 = the caller will not wait
--
-- Returns {1, last} when obtained: the fences last-n+1 .. last are the holder's;
--         {0, pttl} when someone else holds it (pttl = remaining ms, -1 = no
--                   expiry); then only the waiting marker may be set.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[5] ~= '0' then
    redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
  end
  return {0, redis.call('PTTL', KEYS[1])}
end

if ARGV[4] == '0' then
  return {1, 0}
end
return {1, mint_fence(KEYS[2], ARGV[3], tonumber(ARGV[4]))}
