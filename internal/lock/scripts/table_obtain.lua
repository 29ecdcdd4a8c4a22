-- table_obtain.lua: the obtains of concurrent holders of mutexes kept in
-- tables (lock.InTable; lib_table.lua says how a table holds them). The
-- body of a merged script (luascript.Merged): it runs as a function of
-- calls. The calls of one table cost one HMGET and one HSET between them,
-- and their fences one INCRBY.
--
-- uses: lib_fence, lib_table
--
-- A call's keys: the table's hash, the table's fence counter. Its
-- arguments: the lock's name (its field), owner value, ttl ms, fence
-- counter lifetime ms, fences to reserve (0 = none), waiting marker ttl ms
-- ('0' = the caller will not wait), the table's life ms.
--
-- Returns, per call: {1, last}: obtained, the fences last-n+1 .. last are
-- the holder's (0 without fences); {0, pttl}: held by someone else (ms
-- left).
local now = table_now()
local out, tables, order = {}, {}, {}
for i = 1, calls.n do
  local k = calls.k[i]
  local tb = KEYS[k + 1]
  local t = tables[tb]
  if not t then
    t = {fence = KEYS[k + 2], idx = {}, names = {}}
    tables[tb] = t
    order[#order + 1] = tb
  end
  t.idx[#t.idx + 1] = i
  t.names[#t.names + 1] = ARGV[calls.a[i] + 1]
end
for _, tb in ipairs(order) do
  local t = tables[tb]
  local cur = redis.call('HMGET', tb, unpack(t.names))
  local set, until_ms, need, fence_life, life = {}, {}, 0, 0, 0
  for j, i in ipairs(t.idx) do
    local a = calls.a[i] + 7 -- the call's last argument
    local name, value, ttl, n, marker = ARGV[a - 6], ARGV[a - 5], tonumber(ARGV[a - 4]), tonumber(ARGV[a - 2]), ARGV[a - 1]
    fence_life, life = math.max(fence_life, tonumber(ARGV[a - 3])), math.max(life, tonumber(ARGV[a]))
    local held = until_ms[name] -- taken by an earlier call of this run
    if not held then
      local expires, holder = table_hold(cur[j])
      -- Held by this very value: this run's own obtain sent again by the
      -- client after a lost answer (the value's token is random): it is
      -- obtained, not waited for.
      if expires and expires > now and holder ~= value then
        held = expires
      end
    end
    if held then
      out[i] = {0, held - now}
      if marker ~= '0' then
        set[#set + 1] = 'w|' .. name
        set[#set + 1] = string.format('%d', now + tonumber(marker))
      end
    else
      until_ms[name] = now + ttl
      set[#set + 1] = name
      set[#set + 1] = string.format('%d', now + ttl) .. '|' .. value
      out[i] = {1, n}
      need = need + n
    end
  end
  if #set > 0 then
    redis.call('HSET', tb, unpack(set))
    table_keep(tb, life)
  end
  if need > 0 then
    -- One counter for the table: each holder's fences are above every
    -- fence the table handed out before, which is all a fence promises.
    local last = mint_fence(t.fence, fence_life, need) - need
    for _, i in ipairs(t.idx) do
      local o = out[i]
      if o[1] == 1 and o[2] > 0 then
        last = last + o[2]
        o[2] = last
      end
    end
  end
end
return out
