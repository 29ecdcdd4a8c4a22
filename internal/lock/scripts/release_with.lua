-- release_with.lua: release mutex holds, each with its finish run first,
-- only while it is held (Lock.ReleaseWith; a plain Release has a finish
-- that does nothing). The body of a merged script (internal/redisbatch):
-- it runs as a function of calls, the holds of concurrent releases
-- (merged.lua says how calls tells each call's keys and arguments), after
-- a local function finish(calls) — the caller's Lua for a batch (see
-- steps.go) — that gets the calls whose lock is still held, each with only
-- its own keys and arguments, and answers each.
--
-- uses: lib_release
--
-- A call's keys: the finish's, then the mutex's: lock, waiting marker. Its
-- arguments: the finish's, then the mutex's: owner value, release channel
-- (not a key), '1' to keep the lock (it goes to a waiter of this process
-- next).
--
-- Returns, per call: {0} when the lock is not held (its finish did not
-- run), else {code, the finish's reply}: 1 released, 2 released and
-- waiters woken (the marker is consumed; they mark again if they fail),
-- 3 kept.
local held = {n = 0, k = {}, a = {}, nk = {}, na = {}}
local which, out = {}, {}
for i = 1, calls.n do
  local k, a = calls.k[i] + calls.nk[i], calls.a[i] + calls.na[i] -- the call's last key and argument
  if redis.call('GET', KEYS[k - 1]) == ARGV[a - 2] then
    local x = held.n + 1
    held.n = x
    held.k[x], held.a[x], held.nk[x], held.na[x] = calls.k[i], calls.a[i], calls.nk[i] - 2, calls.na[i] - 3
    which[x] = i
  else
    out[i] = {0}
  end
end
if held.n == 0 then
  return out
end
local replies = finish(held)
for x = 1, held.n do
  local i = which[x]
  local k, a = calls.k[i] + calls.nk[i], calls.a[i] + calls.na[i]
  local reply = replies[x]
  if reply == nil then
    reply = false
  end
  if ARGV[a] == '1' then
    out[i] = {3, reply}
  else
    out[i] = {release_hold(KEYS[k - 1], KEYS[k], ARGV[a - 1]), reply}
  end
end
return out
