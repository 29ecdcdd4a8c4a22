-- table_release_with.lua: release mutexes kept in tables (lock.InTable;
-- lib_table.lua says how), each with its finish run first, only while it
-- is held — release_with.lua for tables. The body of a merged script
-- (internal/redisbatch): it runs as a function of calls after a local
-- function finish(calls). The calls of one table cost one HMGET and one
-- HDEL between them.
--
-- uses: lib_table
--
-- A call's keys: the finish's, then the table's hash. Its arguments: the
-- finish's, then: the lock's name (its field), owner value, release
-- channel (not a key), '1' to keep the lock (it goes to a waiter of this
-- process next).
--
-- Returns, per call: {0} when the lock is not held (its finish did not
-- run), else {code, the finish's reply}: 1 released, 2 released and
-- waiters woken (their marker is consumed; they mark again if they fail),
-- 3 kept.
local now = table_now()
local tables, order = table_group(calls, 3, true)
local held = {n = 0, k = {}, a = {}, nk = {}, na = {}}
local which, out, gone = {}, {}, {}
for _, tb in ipairs(order) do
  local t = tables[tb]
  local cur = redis.call('HMGET', tb, unpack(t.names))
  for j, i in ipairs(t.idx) do
    local a = calls.a[i] + calls.na[i]
    local expires, value = table_hold(cur[2 * j - 1])
    if value == ARGV[a - 2] and expires > now then
      local x = held.n + 1
      held.n = x
      held.k[x], held.a[x], held.nk[x], held.na[x] = calls.k[i], calls.a[i], calls.nk[i] - 1, calls.na[i] - 4
      local marked = tonumber(cur[2 * j] or '0') or 0
      which[x] = {i = i, tb = tb, waiters = marked > now, marker = cur[2 * j] ~= false}
    else
      if value == ARGV[a - 2] then
        gone[#gone + 1] = {tb, ARGV[a - 3]} -- ours, but its time passed: not held; clear it
      end
      out[i] = {0}
    end
  end
end
for _, g in ipairs(gone) do
  redis.call('HDEL', g[1], g[2])
end
if held.n == 0 then
  return out
end
local replies = finish(held)
local del = {}
for x = 1, held.n do
  local w = which[x]
  local i = w.i
  local a = calls.a[i] + calls.na[i]
  local reply = replies[x]
  if reply == nil then
    reply = false
  end
  if ARGV[a] == '1' then
    out[i] = {3, reply}
  else
    local name = ARGV[a - 3]
    local d = del[w.tb]
    if not d then
      d = {}
      del[w.tb] = d
    end
    d[#d + 1] = name
    if w.marker then
      d[#d + 1] = 'w|' .. name -- a marker past its time goes too: it would linger in the table
    end
    if w.waiters then
      redis.call('PUBLISH', ARGV[a - 1], '1')
      out[i] = {2, reply}
    else
      out[i] = {1, reply}
    end
  end
end
for tb, d in pairs(del) do
  redis.call('HDEL', tb, unpack(d))
end
return out
