-- rate_limit.lua: the per-user rate limit, as the guard of the per-user
-- order lock (lock.NewGuard): it runs in the same script as the lock's
-- obtain, so the limit costs an order no round trip of its own.
--
-- The algorithm and the key's format are go-redis/redis_rate v10's (its
-- allowN script, after github.com/rwz/redis-gcra, © 2017 Pavel Pravosud,
-- MIT), line for line but for the reply: the /v1 middleware limits the
-- other routes with redis_rate on the same key, so a user has one budget,
-- and TestRateLimitGuard_agreesWithRedisRate holds the two together.
--
-- KEYS[1] rate:fs:rl:user:<id> string: the theoretical arrival time, seconds
--                           since 2017-01-01 (GCRA)
-- ARGV[1] burst
-- ARGV[2] rate, per period
-- ARGV[3] period, seconds
-- ARGV[4] cost
--
-- Returns nil when allowed (the cost is charged), else {retry after, in
-- seconds, as a string}: nothing is charged.
local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])

local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst

-- Seconds since 2017-01-01 as a float: redis_rate's epoch, which keeps the
-- value within a double's exact digits until 2048.
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

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
  return {tostring(diff * -1)}
end

local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
end
return nil
