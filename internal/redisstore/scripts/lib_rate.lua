-- lib_rate.lua: the per-client rate limits, GCRA, kept in a hash per time
-- window instead of a key per client: rate_limit(calls), written for a
-- batch of calls (luascript.Merged's merged.lua says how calls tells each
-- call's keys and arguments), with one server time for all. The order's
-- script (place.lua) charges the per-user limit with it, in the same
-- script as the accept, so the limit costs an order no round trip of its
-- own; rate_limit.lua runs it for the /v1 middleware's limiter
-- (redisstore.Limiter), so a user's orders and other requests draw on one
-- budget.
--
-- The algorithm is go-redis/redis_rate v10's (its allowN script, after
-- github.com/rwz/redis-gcra, © 2017 Pavel Pravosud, MIT), step for step;
-- what differs is where the theoretical arrival time (TAT) is kept, and
-- that it is counted in whole microseconds.
--
-- Why a hash per window: a key per client, written with an expiry, cost
-- Redis a key created, and a second later one expired, for every client
-- of every second. Kept in hashes, the calls of a batch cost one HMGET of
-- each of two windows and one HSET. Measured (make bench-rediscost, 64
-- callers, runs alternated on one machine, docs/benchmarks.md): Redis's
-- CPU per order 29.7-29.9 µs with a key per user (four runs), 27.6-28.1
-- with these hashes (two), and commands run per order 2.8 against 1.0.
--
-- The windows: a client allowed now gets a TAT at most burst_offset (the
-- burst's worth of emission intervals) ahead of now. Windows of W >=
-- burst_offset seconds therefore need only two to be read: a TAT written
-- in window w is at most the end of window w + 1, so one of window w - 2 or
-- before has passed, and a passed TAT limits nothing. A window's hash is
-- <base>:<W>:<w> (W and w in whole seconds since 2017-01-01, redis_rate's
-- epoch); the caller's base key carries a hash tag, so the windows of one
-- base share its Redis Cluster slot. (The script names them from its one
-- declared key, the base, which routes the call: Redis lets a script touch
-- keys it did not declare as long as they are in the declared key's slot.) Each window expires at the end of
-- window w + 2, and a batch in window w unlinks window w - 2 first:
-- UNLINK frees a big hash off the main thread, where an expiry (with
-- Redis's default lazyfree-lazy-expire no) would free its tens of thousands
-- of fields in one go on it.
--
-- A call's key, KEYS[k + 1] for k = calls.k[i]:
--   the limiter's base key (rediskeys.RateLimit): fs:rl:{<scope>}
-- Its arguments, ARGV[a + j] for a = calls.a[i]: 1 requests per second, 2
-- who (the client: a user id, an address; after the rate, so that an
-- order's call in place.lua shares its user id with the accept's). The
-- limit is redis_rate's
-- PerSecond: a burst of that many, then that many a second, each request
-- costing one. (Its burst, period and cost were arguments of every call
-- until 2026-11-25, always the same three; each argument of a call costs
-- Redis about 0.1 µs of the order path, docs/benchmarks.md.)
--
-- rate_limit returns, per call, false when allowed (the cost is charged),
-- else {retry after, in seconds, as a string}: nothing is charged.

local jan_1_2017 = 1483228800

local function rate_limit(calls)
  local t = redis.call('TIME')
  local now_s = tonumber(t[1]) - jan_1_2017
  local now = now_s * 1000000 + tonumber(t[2]) -- µs since 2017-01-01

  -- The calls of each limit (a base key and a rate), in the order they were
  -- made. A batch's calls mostly share one, so its numbers are worked out
  -- once, not per call.
  local limits, last, order = {}, {}, {}
  for i = 1, calls.n do
    local a = calls.a[i]
    local base, rate = KEYS[calls.k[i] + 1], ARGV[a + 1]
    local l = last[base]
    if not l or l.rate ~= rate then
      local id = base .. ':' .. rate
      l = limits[id]
      if not l then
        local emission = 1000000 / tonumber(rate) -- µs; the burst is the rate, the period 1 s
        local w_len = math.max(1, math.ceil(emission * tonumber(rate) / 1000000))
        l = {rate = rate, emission = emission, offset = emission * tonumber(rate),
          bucket = base .. ':' .. w_len .. ':', len = w_len, w = math.floor(now_s / w_len), idx = {}, who = {}, n = 0}
        limits[id] = l
        order[#order + 1] = l
      end
      last[base] = l
    end
    local m = l.n + 1
    l.n, l.idx[m], l.who[m] = m, i, ARGV[a + 2]
  end

  local out = {}
  for _, l in ipairs(order) do
    local cur = l.bucket .. l.w
    redis.call('UNLINK', l.bucket .. (l.w - 2))
    local now_v = redis.call('HMGET', cur, unpack(l.who))
    local prev_v = redis.call('HMGET', l.bucket .. (l.w - 1), unpack(l.who))
    local tats, set, ns = {}, {}, 0
    local idx, whos = l.idx, l.who
    for j = 1, l.n do
      local i, who = idx[j], whos[j]
      local tat = tats[who]
      if tat then
        tat = math.max(tat, now)
      else
        -- A shopper new in both windows (every one at a launch) has no
        -- TAT to parse.
        local a, b = now_v[j], prev_v[j]
        tat = now
        if a then
          tat = math.max(tat, tonumber(a))
        end
        if b then
          tat = math.max(tat, tonumber(b))
        end
      end
      local new_tat = tat + l.emission -- a cost of one
      local diff = now - (new_tat - l.offset)
      if diff < 0 then
        out[i] = {tostring(-diff / 1000000)}
      else
        if tats[who] == nil then
          set[ns + 1], set[ns + 2] = who, 0 -- its TAT, filled in below: the batch's last
          ns = ns + 2
        end
        tats[who] = math.ceil(new_tat)
        out[i] = false
      end
    end
    if ns > 0 then
      for j = 1, ns, 2 do
        set[j + 1] = string.format('%d', tats[set[j]])
      end
      redis.call('HSET', cur, unpack(set))
      redis.call('EXPIREAT', cur, jan_1_2017 + (l.w + 3) * l.len)
    end
  end
  return out
end
