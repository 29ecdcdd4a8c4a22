-- counters.lua: a sale's waiting room's counters, for the queue streams
-- (stream.Queue; docs/waiting-room.md "The streams"): an api process runs it
-- once a tick per sale it has streams of, whatever their number, and
-- computes each stream's position (ticket - serving) itself. It advances
-- the serving counter as a read does (lib_queue), so a sale whose shoppers
-- all stream, none polling, admits at its rate all the same.
--
-- uses: lib_queue
--
-- KEYS[1] meta   fs:{act:<id>}:meta     the sale's rules and the queue's counters (lib_queue)
-- KEYS[2] stock  fs:{act:<id>}:stock    units left
-- KEYS[3] hist   fs:{act:<id>}:q:hist   the serving counter second by second (lib_queue)
--
-- Returns {status, serving, rate}: rate, while waiting, is the estimate's in
-- thousandths of a shopper a second (lib_queue's queue_est_rate; 0 while paused)
--   status 0 not on sale or no waiting room, 1 waiting (serving is the counter), 3 sold out,
--   4 closed, 5 before the start (no position is final yet)

local meta, stock, hist = KEYS[1], KEYS[2], KEYS[3]
local m = redis.call('HMGET', meta, 'wr_rate', 'wr_srv', 'wr_at', 'wr_joined', 'accepted', 'wr_ttl_ms',
  'starts_ms', 'expire_at_ms', 'status', 'wr', 'ends_ms', 'paused')
local status, wr = m[9], m[10]
if (status ~= 'published' and status ~= 'closed') or wr ~= '1' then
  return {0, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts, ends, rate = tonumber(m[7]), tonumber(m[11]), tonumber(m[1])
if status == 'closed' or now >= ends then
  return {4, 0, rate}
end
if now < starts then
  return {5, 0, rate}
end
local paused = m[12] == '1'
local serving = queue_advance(meta, stock, hist, m, now, false, paused)
if tonumber(redis.call('GET', stock) or '0') <= 0 then
  return {3, serving, rate}
end
if paused then
  return {1, serving, 0} -- no rate while paused: no estimate
end
return {1, serving, queue_est_rate(meta, rate)}
