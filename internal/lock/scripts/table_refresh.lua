-- table_refresh.lua: extend a mutex kept in a table (lock.InTable) only if
-- this owner still holds it — refresh.lua for tables.
--
-- uses: lib_table
--
-- KEYS[1] the table's hash
-- ARGV[1] the lock's name (its field)
-- ARGV[2] the owner's value, exactly as table_obtain.lua stored it
-- ARGV[3] new ttl in milliseconds
-- ARGV[4] the table's life in milliseconds
--
-- Returns 1 when extended; 0 when the lock had expired or belongs to
-- someone else (a renewal never extends another holder's lock).
local now = table_now()
local expires, value = table_hold(redis.call('HGET', KEYS[1], ARGV[1]))
if value ~= ARGV[2] or expires <= now then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now + tonumber(ARGV[3])) .. '|' .. ARGV[2])
table_keep(KEYS[1], tonumber(ARGV[4]))
return 1
