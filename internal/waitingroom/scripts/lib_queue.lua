-- lib_queue.lua: the waiting room's serving counter (docs/waiting-room.md),
-- used by the queue's script (queue.lua) and by stock's load.lua (which
-- advances it at the old rate before it sets a new admit_per_second), so
-- there is one copy of the rule.
--
-- The sale's meta hash holds the queue's counters:
--   wr '1' when the sale has a waiting room; wr_rate admit_per_second;
--   wr_ttl_ms the admission's life; wr_pow join_pow_bits;
--   wr_joined tickets given; wr_early the joins before starts_at;
--   wr_srv the serving counter in thousandths of a shopper (rate x ms adds
--   exactly); wr_at the ms it was last advanced to (absent: starts_ms);
--   wr_mr the measured admission rate (shoppers a second, queue_measure).
-- The history hash (hist) holds, per second s, field s mod (ttl + 2) =
-- "<s>:<serving at s>": how many were admitted within the last ttl, which
-- bounds the admitted who may still order.

-- queue_fields are the meta fields queue_advance reads, in this order.
local queue_fields = {'wr_rate', 'wr_srv', 'wr_at', 'wr_joined', 'accepted', 'wr_ttl_ms', 'starts_ms', 'expire_at_ms'}

-- queue_room is how many admitted and not yet ordered shoppers a sale with
-- left units left may have: left plus a tenth (a margin for the admitted
-- who never order, before their admission lapses), at least 1 while units
-- are left.
local function queue_room(left)
  if left <= 0 then
    return 0
  end
  return left + math.ceil(left / 10)
end

-- queue_ago is the serving counter at second sec (of the history hist with
-- ttl_s), or at the latest second within 3 before it that has one; 0 when
-- none has (which only makes the bound it feeds more cautious).
local function queue_ago(hist, sec, ttl_s)
  local n = ttl_s + 2
  for d = 0, 3 do
    local s = sec - d
    local h = redis.call('HGET', hist, tostring(s % n))
    if h then
      local i = string.find(h, ':', 1, true)
      if tonumber(string.sub(h, 1, i - 1)) == s then
        return tonumber(string.sub(h, i + 1))
      end
    end
  end
  return 0
end

-- queue_tau is the measured rate's time constant (ms): an advance of dt ms
-- moves wr_mr 1 - e^(-dt/tau) of the way to the rate the step achieved, so
-- the estimate follows a stall or a new rate within a minute or so and does
-- not jump about with each step (issue 42: "the estimate is steady: from the
-- measured admission rate").
local queue_tau = 30000

-- queue_measure updates the measured rate (wr_mr) after an advance of the
-- counter from srv to nsrv over dt ms (both in thousandths of a shopper, so
-- (nsrv - srv) / dt is shoppers a second), and returns it. Only a step with
-- shoppers waiting throughout (waiting) measures anything: an empty queue's
-- standing counter is no sign of a slow one. A pause is not measured either
-- (the estimate is withheld while paused, and the pause is not the rate's).
-- Absent, it starts at the rate set.
local function queue_measure(meta, mr, rate, srv, nsrv, dt, waiting)
  mr = mr or rate
  if waiting and dt > 0 then
    local w = 1 - math.exp(-dt / queue_tau)
    mr = mr + ((nsrv - srv) / dt - mr) * w
    redis.call('HSET', meta, 'wr_mr', tostring(mr))
  end
  return mr
end

-- queue_est_rate is the rate a waiting shopper's estimate uses, in
-- thousandths of a shopper a second (scripts return integers): the measured
-- rate, never above the rate set (a lowered rate tells at once; a raised
-- one as it is achieved).
local function queue_est_rate(meta, rate)
  local mr = tonumber(redis.call('HGET', meta, 'wr_mr') or '')
  if not mr or mr > rate then
    mr = rate
  end
  return math.floor(mr * 1000)
end

-- queue_advance moves the serving counter of the sale (meta, its stock key,
-- its history key hist) to now (ms) and returns it in whole shoppers. m is
-- the meta's queue_fields as HMGET returned them. The counter advances at
-- wr_rate a second (smoothly: a thousandth of a shopper a ms per unit of
-- rate), never past the tickets given, and not while the admitted who may
-- still order (the least of: admitted less orders accepted; admitted within
-- the last admission ttl) fill queue_room of the units left: a stall banks
-- no time (wr_at moves on), so admission resumes at its rate, not in a burst.
-- Before starts_ms it stays 0. While the sale is paused (paused: the
-- admin's pause, which also refuses orders) it does not move either, and
-- banks no time: admission resumes at its rate with the sale, not in a burst.
-- It moves at most once in queue_step ms (a
-- poll in between reads the counter as it is, at most that much behind):
-- most polls of a crowd then write nothing.
local queue_step = 10
local function queue_advance(meta, stock, hist, m, now, force, paused)
  local rate, srv = tonumber(m[1] or '0'), tonumber(m[2] or '0')
  local at = tonumber(m[3] or m[7] or '0')
  local serving = math.floor(srv / 1000)
  if now <= at or (now - at < queue_step and not force) then
    return serving
  end
  local joined, ordered = tonumber(m[4] or '0'), tonumber(m[5] or '0')
  local ttl_s = math.floor(tonumber(m[6] or '300000') / 1000)
  local left = tonumber(redis.call('GET', stock) or '0')
  local sec = math.floor(now / 1000)
  local outstanding = math.min(serving - ordered, serving - queue_ago(hist, sec - ttl_s, ttl_s))
  local room = queue_room(left) - math.max(outstanding, 0)
  local nsrv = srv
  if room > 0 and not paused then
    nsrv = math.min(srv + rate * (now - at), joined * 1000, (serving + room) * 1000)
    nsrv = math.max(nsrv, srv)
  end
  redis.call('HSET', meta, 'wr_srv', nsrv, 'wr_at', now)
  queue_measure(meta, tonumber(redis.call('HGET', meta, 'wr_mr') or ''), rate, srv, nsrv, now - at,
    not paused and nsrv < joined * 1000)
  if math.floor(at / 1000) ~= sec or not m[3] then
    redis.call('HSET', hist, tostring(sec % (ttl_s + 2)), sec .. ':' .. math.floor(nsrv / 1000))
    if m[8] then
      redis.call('PEXPIREAT', hist, m[8]) -- the sale's keys' expiry (load.lua)
    end
  end
  return math.floor(nsrv / 1000)
end
