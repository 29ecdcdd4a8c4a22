-- lib_fence.lua: used by every script that mints fencing tokens.
--
-- mint_fence(counter, lifetime_ms, n) reserves n fences and returns the last.
-- A counter that is new or has expired restarts from the server clock in
-- microseconds: above every fence the old counter handed out unless it handed
-- out more than one per microsecond of its life (docs/locking.md, "Fencing
-- tokens"). Strings, not Lua numbers, go to Redis: Lua 5.1 prints large
-- numbers in exponent form.
local function mint_fence(counter, lifetime_ms, n)
  local last = redis.call('INCRBY', counter, n)
  if last == n then
    local t = redis.call('TIME')
    last = tonumber(t[1] .. string.format('%06d', tonumber(t[2]))) + n
    redis.call('SET', counter, string.format('%d', last), 'PX', lifetime_ms)
  end
  return last
end

