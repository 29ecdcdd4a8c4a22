-- lib_table.lua: mutexes kept as fields of one hash, a table (lock.InTable):
-- for table_obtain.lua, table_release_with.lua, table_refresh.lua and
-- table_elide.lua.
--
-- A held lock is the field <name> = "<expires ms>|<owner value>": Redis
-- keeps no expiry per field, so the scripts compare the time in the value
-- with the server's (TIME): a lock whose time has passed is free, whatever
-- is left in its field. A client waiting for it marks the field "w|<name>" =
-- "<expires ms>" (as a mutex's own key has a waiting marker). The table
-- itself expires: every obtain and renewal keeps it at least its life
-- argument, so fields of holders that died unreleased go with it.

-- table_now is the server time in ms.
local function table_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- table_hold reads a lock's field: its expiry (ms) and owner value, or nil
-- when the field holds nothing.
local function table_hold(v)
  if not v then
    return nil
  end
  local sep = string.find(v, '|', 1, true)
  if not sep then
    return nil
  end
  return tonumber(string.sub(v, 1, sep - 1)), string.sub(v, sep + 1)
end

-- table_keep makes the table live at least life ms from now.
local function table_keep(table_key, life)
  if life > 0 and redis.call('PTTL', table_key) < life then
    redis.call('PEXPIRE', table_key, life)
  end
end

-- table_group groups calls (a merged script's, internal/redisbatch) by
-- their table, each call's last key. It returns tables, by the table's
-- key: {idx = the calls' indexes, in call order; names = the fields one
-- HMGET of the table reads for them}, and order, the tables' keys as they
-- first appear. A call's lock name (its field) is its argument name_back
-- places before its last; with markers, each name is followed in names by
-- its waiting marker's field, 'w|<name>'.
local function table_group(calls, name_back, markers)
  local tables, order = {}, {}
  for i = 1, calls.n do
    local tb = KEYS[calls.k[i] + calls.nk[i]]
    local t = tables[tb]
    if not t then
      t = {idx = {}, names = {}}
      tables[tb] = t
      order[#order + 1] = tb
    end
    local name = ARGV[calls.a[i] + calls.na[i] - name_back]
    t.idx[#t.idx + 1] = i
    t.names[#t.names + 1] = name
    if markers then
      t.names[#t.names + 1] = 'w|' .. name
    end
  end
  return tables, order
end
