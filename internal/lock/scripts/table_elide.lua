-- table_elide.lua: steps run under free mutexes kept in tables
-- (lock.InTable; lib_table.lua says how a table holds them) without taking
-- them — elide.lua for tables. The body of a merged script
-- (internal/redisbatch): it runs as a function of calls after local
-- functions guard(calls) and finish(calls). The calls of one table cost
-- one HMGET between them, and nothing is written to the table.
--
-- uses: lib_table, lib_elide
--
-- A call's keys: the guard's, the finish's, then the table's hash. Its
-- arguments: the guard's, the finish's, then: the lock's name (its field),
-- how many keys and arguments the guard has.
--
-- Returns, per call: {0, pttl} when the lock is held (pttl: the holder's
-- ms left): nothing ran, the caller takes the lock as usual; {2, the guard's refusal}; {1, the finish's
-- reply}.
local now = table_now()
local tables, order = table_group(calls, 2, false)
local out, free = {}, {}
for _, tb in ipairs(order) do
  local t = tables[tb]
  local cur = redis.call('HMGET', tb, unpack(t.names))
  for j, i in ipairs(t.idx) do
    local expires = table_hold(cur[j])
    if expires and expires > now then
      out[i] = {0, expires - now}
    else
      free[#free + 1] = i
    end
  end
end
if #free > 0 then
  if #order > 1 then
    table.sort(free) -- the calls' own order, not the tables'
  end
  elide_run(calls, free, out, 1, 3)
end
return out
