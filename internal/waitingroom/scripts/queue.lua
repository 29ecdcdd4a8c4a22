-- queue.lua: a shopper joins a sale's waiting room, or reads their place
-- (waitingroom.Service.Join, Read; docs/waiting-room.md). One place per
-- user: joining again answers the place given the first time.
--
-- uses: lib_queue
--
-- KEYS[1] meta   fs:{act:<id>}:meta       the sale's rules and the queue's counters (lib_queue)
-- KEYS[2] stock  fs:{act:<id>}:stock      units left
-- KEYS[3] hist   fs:{act:<id>}:q:hist     the serving counter second by second (lib_queue)
-- KEYS[4] bucket fs:{act:<id>}:q:u:<b>    hash: user id -> place, for the users whose id
--                                         mod ARGV[7] is b (a few dozen each: a listpack)
-- ARGV[1] 'join' or 'read'
-- ARGV[2] user id (decimal)
-- ARGV[3] a uniform random integer in [0, 2^52) (join before the start: the shuffle's draw)
-- ARGV[4] the join's proof of work: -2 none sent, -1 a challenge not ours (forged, expired,
--         another user's or sale's), else the leading zero bits of its SHA-256
-- ARGV[5] prefix of the early joiners' slot buckets, fs:{act:<id>}:q:s: (+ slot div 100)
-- ARGV[6] prefix of the user buckets, fs:{act:<id>}:q:u: (+ b)
-- ARGV[7] the count of user buckets
-- Keys built from ARGV[5] and ARGV[6] carry KEYS[1]'s hash tag: the sale's slot.
--
-- A place (the bucket's value) is "-<s>" for a join before the start, in
-- slot s of the shuffle (from 1); "<t>" for ticket t, a join after it; and
-- "<t>:<ms>" once the shopper has been seen admitted, admitted at ms. The
-- early joiners are shuffled as they join (an inside-out Fisher-Yates: the
-- i-th takes a uniform slot j of 1..i, and whoever held j moves to i), so
-- at any moment, and at the start, their order is a uniform random
-- permutation, at O(1) a join and nothing done at the start: slot s is
-- ticket s; the joins after the start take tickets from wr_early + 1 on.
--
-- Returns {code, status, ticket, position, until ms, rate, first admitted (1 or 0)}:
--   rate: while waiting, the estimate's rate in thousandths of a shopper a
--   second (lib_queue's queue_est_rate; 0 while paused: no estimate)
--   code 0 ok, 1 not on sale (unknown or draft), 30 the sale has no waiting room,
--        31 the user is not in the queue (read), 32 the user's admission lapsed,
--        33 a proof of work is required, 34 the proof of work is not good
--   status 1 waiting, 2 admitted, 3 sold out, 4 closed (0 with a code)
--   position: ticket - serving while waiting; -1 before the start (the
--   shuffle is not final); until ms: when the admission ends (admitted; 0 otherwise).

local meta, stock, hist, bucket = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local m = redis.call('HMGET', meta, 'wr_rate', 'wr_srv', 'wr_at', 'wr_joined', 'accepted', 'wr_ttl_ms',
  'starts_ms', 'expire_at_ms', 'status', 'wr', 'ends_ms', 'wr_early', 'wr_pow', 'paused')
local status, wr = m[9], m[10]
if status ~= 'published' and status ~= 'closed' then
  return {1, 0, 0, 0, 0, 0, 0}
end
if wr ~= '1' then
  return {30, 0, 0, 0, 0, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts, ends, rate = tonumber(m[7]), tonumber(m[11]), tonumber(m[1])
if status == 'closed' or now >= ends then
  return {0, 4, 0, 0, 0, rate, 0}
end
local user = ARGV[2]
local place = redis.call('HGET', bucket, user)
if not place then
  if ARGV[1] ~= 'join' then
    return {31, 0, 0, 0, 0, 0, 0}
  end
  local pow = tonumber(m[13] or '0')
  local proof = tonumber(ARGV[4])
  if pow > 0 and proof == -2 then
    return {33, 0, 0, 0, 0, 0, 0}
  elseif pow > 0 and proof < pow then
    return {34, 0, 0, 0, 0, 0, 0}
  end
  local expire = m[8]
  if now < starts then
    -- Before the start: the shuffle's step (inside-out Fisher-Yates).
    local i = tonumber(m[12] or '0') + 1
    local j = tonumber(ARGV[3]) % i + 1
    local ki = ARGV[5] .. math.floor(i / 100)
    if j == i then
      redis.call('HSET', ki, i, user)
    else
      local kj = ARGV[5] .. math.floor(j / 100)
      local other = redis.call('HGET', kj, j)
      local r = 0 -- other's bucket: its decimal id mod the count, exactly (ids past 2^53 too)
      for d = 1, #other do
        r = (r * 10 + string.byte(other, d) - 48) % tonumber(ARGV[7])
      end
      local ko = ARGV[6] .. r
      redis.call('HSET', ki, i, other)
      redis.call('HSET', ko, other, '-' .. i)
      redis.call('HSET', kj, j, user)
      if expire then
        redis.call('PEXPIREAT', kj, expire)
      end
    end
    if expire then
      redis.call('PEXPIREAT', ki, expire)
    end
    place = '-' .. j
    redis.call('HINCRBY', meta, 'wr_early', 1)
    redis.call('HINCRBY', meta, 'wr_joined', 1)
  else
    place = tostring(redis.call('HINCRBY', meta, 'wr_joined', 1))
    m[4] = place -- the tickets given, for the advance below
  end
  redis.call('HSET', bucket, user, place)
  if expire then
    redis.call('PEXPIREAT', bucket, expire)
  end
end
if now < starts then
  return {0, 1, 0, -1, 0, rate, 0}
end
local ticket, admitted = 0, 0
local c = string.find(place, ':', 1, true)
if c then
  ticket, admitted = tonumber(string.sub(place, 1, c - 1)), tonumber(string.sub(place, c + 1))
elseif string.sub(place, 1, 1) == '-' then
  ticket = tonumber(string.sub(place, 2))
else
  ticket = tonumber(place)
end
local paused = m[14] == '1'
local serving = queue_advance(meta, stock, hist, m, now, false, paused)
if tonumber(redis.call('GET', stock) or '0') <= 0 then
  return {0, 3, ticket, math.max(ticket - serving, 0), admitted, rate, 0}
end
if admitted == 0 and ticket <= serving then
  -- Seen admitted for the first time: admitted when the counter passed
  -- the ticket, at the rate, as far as can be told (not before the start).
  admitted = math.max(now - math.floor((serving - ticket) * 1000 / math.max(rate, 1)), starts)
  redis.call('HSET', bucket, user, ticket .. ':' .. admitted)
  if admitted + tonumber(m[6]) <= now then
    return {32, 0, ticket, 0, admitted, rate, 1}
  end
  return {0, 2, ticket, 0, admitted + tonumber(m[6]), rate, 1}
end
if admitted > 0 then
  if admitted + tonumber(m[6]) <= now then
    return {32, 0, ticket, 0, admitted, rate, 0}
  end
  return {0, 2, ticket, 0, admitted + tonumber(m[6]), rate, 0}
end
if paused then
  return {0, 1, ticket, ticket - serving, 0, 0, 0} -- no rate while paused: no estimate
end
return {0, 1, ticket, ticket - serving, 0, queue_est_rate(meta, rate), 0}
