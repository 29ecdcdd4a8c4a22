-- lib_obtain.lua: how a mutex with keys of its own is taken (obtain.lua).
--
-- uses: lib_fence

-- obtain_hold takes the mutex at lock_key for value (token, then holder
-- metadata) for ttl_ms if it is free, and mints its fencing tokens: n of
-- them in the counter fence_key (kept fence_life_ms), or none when n is
-- '0' (WithoutFence). When someone else holds it, a waiter (marker_ms not
-- '0') marks the key waited for.
--
-- Returns {1, last}: obtained, the fences last-n+1 .. last are the holder's
-- (0 without fences); {0, pttl}: held by someone else (pttl = remaining
-- ms, -1 = no expiry).
local function obtain_hold(lock_key, fence_key, waiting_key, value, ttl_ms, fence_life_ms, n, marker_ms)
  if not redis.call('SET', lock_key, value, 'NX', 'PX', ttl_ms) then
    if marker_ms ~= '0' then
      redis.call('SET', waiting_key, '1', 'PX', marker_ms)
    end
    return {0, redis.call('PTTL', lock_key)}
  end
  if n == '0' then
    return {1, 0}
  end
  return {1, mint_fence(fence_key, fence_life_ms, tonumber(n))}
end
