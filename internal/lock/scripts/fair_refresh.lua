-- fair_refresh.lua: extend the fair lock if token holds it.
--
-- KEYS[1] lock      fs:flock:{name}
-- ARGV[1] holder token
-- ARGV[2] new ttl in milliseconds
--
-- Returns 1 when extended; 0 when token does not hold it.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
