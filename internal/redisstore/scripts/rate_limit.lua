-- rate_limit.lua: the per-user rate limit, as the guard of the per-user
-- order lock (lock.NewBatchGuard): it runs in the same script as the
-- lock's obtain, so the limit costs an order no round trip of its own.
-- Written for a batch: it runs as a function of calls, the obtains of
-- concurrent requests (internal/redisbatch's merged.lua says how calls
-- tells each call's keys and arguments), with one server time for all.
--
-- The algorithm and the key's format are go-redis/redis_rate v10's (its
-- allowN script, after github.com/rwz/redis-gcra, © 2017 Pavel Pravosud,
-- MIT), step for step but for the reply: the /v1 middleware limits the
-- other routes with redis_rate on the same key, so a user has one budget,
-- and TestRateLimitGuard_agreesWithRedisRate holds the two together.
--
-- A call's key, KEYS[k + 1] for k = calls.k[i]:
--   rate:fs:rl:user:<id>  string: the theoretical arrival time, seconds
--                         since 2017-01-01 (GCRA)
-- Its arguments, ARGV[a + j] for a = calls.a[i]: 1 burst, 2 rate per
-- period, 3 period in seconds, 4 cost.
--
-- Returns, per call, nil when allowed (the cost is charged), else {retry
-- after, in seconds, as a string}: nothing is charged.

-- Seconds since 2017-01-01 as a float: redis_rate's epoch, which keeps the
-- value within a double's exact digits until 2048.
local jan_1_2017 = 1483228800
local t = redis.call("TIME")
local now = (t[1] - jan_1_2017) + (t[2] / 1000000)

local out = {}
for i = 1, calls.n do
  local a = calls.a[i]
  local rate_limit_key = KEYS[calls.k[i] + 1]
  local burst, rate, period, cost = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4])

  local emission_interval = period / rate
  local increment = emission_interval * cost
  local burst_offset = emission_interval * burst

  local tat = redis.call("GET", rate_limit_key)
  if not tat then
    tat = now
  else
    tat = tonumber(tat)
  end
  tat = math.max(tat, now)

  local new_tat = tat + increment
  local allow_at = new_tat - burst_offset
  local diff = now - allow_at

  if diff < 0 then
    out[i] = {tostring(diff * -1)}
  else
    local reset_after = new_tat - now
    if reset_after > 0 then
      redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
    end
    out[i] = false
  end
end
return out
