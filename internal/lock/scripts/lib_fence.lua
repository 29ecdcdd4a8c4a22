-- lib_fence.lua: used by every script that mints fencing tokens.
--
-- mint_fence(counter, lifetime_ms, n) reserves n fences and returns the last.
-- A fence is never below the server clock in microseconds: a counter that is
-- new, has expired, or fell behind the clock (it does, at fewer than one
-- fence a microsecond) moves up to it. So fences stay above every fence the
-- key ever had even when the counter lost increments: it expired, or a
-- failover promoted a replica that had not yet received the last ones (a
-- failover takes seconds, far more than such a replica lags, unless the
-- new primary's clock is behind the old one's by more than that;
-- docs/locking.md, "Fencing tokens"). Strings, not Lua numbers, go to
-- Redis: Lua 5.1 prints large numbers in exponent form.
local function mint_fence(counter, lifetime_ms, n)
  local last = redis.call('INCRBY', counter, n)
  local t = redis.call('TIME')
  local now = tonumber(t[1] .. string.format('%06d', tonumber(t[2])))
  if last <= now then
    last = now + n
    redis.call('SET', counter, string.format('%d', last), 'PX', lifetime_ms)
  end
  return last
end

