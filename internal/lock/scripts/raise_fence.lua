-- raise_fence.lua: make a Redlock node's fence counter at least a floor, so a
-- later holder's fence from this node is above it.
--
-- KEYS[1] fence counter    fs:redlock:{name}:fence
-- ARGV[1] floor (the fence the holder took: the largest over its quorum)
-- ARGV[2] lifetime of the counter if it is (re)written, in milliseconds
--
-- Returns 1.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
