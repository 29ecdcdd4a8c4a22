-- lib_table.lua: mutexes kept as fields of one hash, a table (lock.InTable):
-- for table_obtain.lua, table_refresh.lua and lib_lock.lua (releases, and
-- callers' scripts checking a lock).
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
