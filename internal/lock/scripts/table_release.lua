-- table_release.lua: release mutexes kept in tables (lock.InTable;
-- lib_table.lua says how a table holds them), only while each is held —
-- release.lua for tables. The body of a merged script
-- (luascript.Merged): it runs as a function of calls, the releases of
-- concurrent holders. The calls of one table cost one HMGET and one HDEL
-- between them.
--
-- uses: lib_lock
--
-- A call's key: the table's hash. Its arguments: the lock's name (its
-- field), the owner value, the release channel (not a key).
--
-- Returns, per call, lock_release's code: 0 not held, 1 released, 2
-- released and waiters woken.
local refs = {}
for i = 1, calls.n do
  local k, a = calls.k[i], calls.a[i]
  refs[i] = {KEYS[k + 1], KEYS[k + 1], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]}
end
return lock_release(refs, table_now())
