-- lib_lock.lua: mutexes as a script sees them — the lock library's own
-- releases (release.lua, table_release.lua), and a caller's script that
-- runs a step under a mutex in the same atomic step as checking that the
-- lock is free or releasing it (lock.Ref: Client.Elide, Lock.ReleaseIn;
-- docs/locking.md, "A step under a lock"). Link lock.Lua to use it.
--
-- uses: lib_table
--
-- A ref is one mutex, as lock.Ref hands it to a script (its two keys, then
-- its three arguments), read as {key, waiting, field, value, channel}:
--   key      the lock's key, or its table's hash (lock.InTable)
--   waiting  its waiting marker's key; for a lock in a table the table's
--            hash again (its marker is the table's field 'w|<field>')
--   field    its field in the table; '' for a lock with keys of its own
--   value    the holder's value (token, then metadata); '' for a lock
--            nobody took (Client.Elide)
--   channel  its release channel (not a key: channels have no slot)

-- lock_ref reads the ref whose keys start at KEYS[k + 1] and arguments at
-- ARGV[a + 1] (lock.Ref's order).
local function lock_ref(k, a)
  return {KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]}
end

-- lock_holders returns, per ref of refs, false when nobody holds it, else
-- {ms its holder has left (0: no expiry), the holder's value}. The refs of
-- one table cost one HMGET between them. now is the server time in ms
-- (table_now), which a table's holds are compared with.
local function lock_holders(refs, now)
  -- (Counted lists and numeric loops, not `#t + 1` and ipairs: the order
  -- path runs this for every order of a batch, in Redis's slow Lua.)
  local out, tables, order = {}, {}, {}
  for i = 1, #refs do
    local r = refs[i]
    if r[3] == '' then
      local v = redis.call('GET', r[1])
      if v then
        out[i] = {math.max(redis.call('PTTL', r[1]), 0), v}
      else
        out[i] = false
      end
    else
      local t = tables[r[1]]
      if not t then
        t = {idx = {}, names = {}, n = 0}
        tables[r[1]] = t
        order[#order + 1] = r[1]
      end
      local m = t.n + 1
      t.n, t.idx[m], t.names[m] = m, i, r[3]
    end
  end
  for o = 1, #order do
    local t = tables[order[o]]
    local cur = redis.call('HMGET', order[o], unpack(t.names))
    local idx = t.idx
    for j = 1, t.n do
      local i, c = idx[j], cur[j]
      out[i] = false
      if c then -- a field held or once held (most are not: nothing to parse)
        local expires, v = table_hold(c)
        if expires and expires > now then
          out[i] = {expires - now, v}
        end
      end
    end
  end
  return out
end

-- lock_release releases each ref's mutex if its value still holds it, and
-- wakes the lock's waiters if some client marked itself waiting (every
-- waiter marks the lock on each failed attempt and retries within the
-- marker's ttl: no marker, no waiter, no PUBLISH needed). It returns, per
-- ref: 0 not held by its value (nothing changed, but that a table field of
-- that value past its time is cleared), 1 released, 2 released and
-- waiters woken (their marker is consumed; they mark again if they fail).
-- The refs of one table cost one HMGET and one HDEL between them.
local function lock_release(refs, now)
  local out, tables, order = {}, {}, {}
  for i, r in ipairs(refs) do
    if r[3] == '' then
      if redis.call('GET', r[1]) ~= r[4] then
        out[i] = 0
      else
        redis.call('DEL', r[1])
        if redis.call('DEL', r[2]) == 1 then
          redis.call('PUBLISH', r[5], '1')
          out[i] = 2
        else
          out[i] = 1
        end
      end
    else
      local t = tables[r[1]]
      if not t then
        t = {idx = {}, names = {}}
        tables[r[1]] = t
        order[#order + 1] = r[1]
      end
      t.idx[#t.idx + 1] = i
      t.names[#t.names + 1] = r[3]
      t.names[#t.names + 1] = 'w|' .. r[3]
    end
  end
  for _, tb in ipairs(order) do
    local t = tables[tb]
    local cur = redis.call('HMGET', tb, unpack(t.names))
    local del = {}
    for j, i in ipairs(t.idx) do
      local r = refs[i]
      local expires, value = table_hold(cur[2 * j - 1])
      if value ~= r[4] then
        out[i] = 0
      elseif expires <= now then
        del[#del + 1] = r[3] -- ours, but its time passed: not held; clear it
        out[i] = 0
      else
        del[#del + 1] = r[3]
        local marker = cur[2 * j]
        if marker then
          del[#del + 1] = 'w|' .. r[3] -- a marker past its time goes too: it would linger
        end
        if (tonumber(marker or '0') or 0) > now then
          redis.call('PUBLISH', r[5], '1')
          out[i] = 2
        else
          out[i] = 1
        end
      end
    end
    if #del > 0 then
      redis.call('HDEL', tb, unpack(del))
    end
  end
  return out
end
