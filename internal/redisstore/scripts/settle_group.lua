-- settle_group.lua: at a group's deadline, fail it if it has not succeeded.
-- Idempotent: a group already failed or succeeded stays as it is. The
-- members' orders are settled one by one after this (refunded if paid,
-- cancelled if not), each under its own lock.
--
-- uses: lib_sale
--
-- KEYS[1] meta     fs:{act:<id>}:meta
-- KEYS[2] group    fs:{act:<id>}:g:<group id>
-- KEYS[3] members  fs:{act:<id>}:gm:<group id>
-- KEYS[4] forming  fs:{act:<id>}:groups:forming
-- KEYS[5] unsettled fs:{act:<id>}:groups:unsettled
-- ARGV[1] group id
--
-- Returns {status, expires ms, member order no...}; status '' when there is
-- no such group, 'forming' when its deadline has not come yet.
local g = redis.call('HMGET', KEYS[2], 'status', 'expires_ms')
if not g[1] then
  return {'', '0'}
end
local status = g[1]
if status == 'forming' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now < tonumber(g[2]) then
    return {'forming', g[2]}
  end
  status = 'failed'
  redis.call('HSET', KEYS[2], 'status', 'failed', 'failed_ms', string.format('%d', now))
  redis.call('ZREM', KEYS[4], ARGV[1])
  sale_count(KEYS[1], 'groups_failed', 1)
end
redis.call('ZREM', KEYS[5], ARGV[1])
local out = {status, g[2]}
for _, no in ipairs(redis.call('HVALS', KEYS[3])) do
  out[#out + 1] = no
end
return out
