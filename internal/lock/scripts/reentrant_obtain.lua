-- reentrant_obtain.lua: take the reentrant lock, or take it again as its owner.
--
-- uses: lib_fence
--
-- KEYS[1] lock             fs:rlock:{name}   hash: o:<owner> -> hold count,
--                                             n:<nonce> -> 1 for each hold,
--                                             ~fence -> fence, ~meta -> holder metadata
-- KEYS[2] fence counter    fs:rlock:{name}:fence
-- ARGV[1] owner field, "o:" .. owner id
-- ARGV[2] ttl in milliseconds (also refreshed by a nested obtain)
-- ARGV[3] lifetime of a new fence counter, in milliseconds
-- ARGV[4] holder metadata (pid \31 acquired-at ms \31 host \31 label)
-- ARGV[5] this hold's nonce: a release, or the clean-up of an attempt whose
--         answer was lost, drops exactly this hold and no other
--
-- Returns {1, fence, count} when held by this owner now (count = its holds);
--         {0, pttl, 0}      when another owner holds it (nothing is changed).
if redis.call('EXISTS', KEYS[1]) == 0 then
  local fence = mint_fence(KEYS[2], ARGV[3], 1)
  redis.call('HSET', KEYS[1], ARGV[1], 1, 'n:' .. ARGV[5], 1, '~fence', string.format('%d', fence), '~meta', ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, fence, 1}
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('HSET', KEYS[1], 'n:' .. ARGV[5], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], '~fence')), n}
end
return {0, redis.call('PTTL', KEYS[1]), 0}
