-- guarded_obtain.lua: the obtains of concurrent holders of mutexes, each
-- with a guard run first (Client.ObtainGuarded), or none (Obtain). The body
-- of a merged script (internal/redisbatch): it runs as a function of calls
-- (merged.lua says how calls tells each call's keys and arguments) after a
-- local function guard(calls) — the caller's Lua for a batch, or one that
-- lets every call go on (see steps.go, which puts it before this).
--
-- uses: lib_obtain
--
-- A call's keys: the guard's, then the mutex's: lock, fence counter,
-- waiting marker (obtain.lua's KEYS). Its arguments: the guard's, then the
-- mutex's: owner value, ttl, fence counter lifetime, fences to reserve,
-- waiting marker ttl (obtain.lua's ARGV). The guard sees only its own.
--
-- guard returns, per call, nil or false to let the obtain go on, or its
-- refusal (an error reply, {err = …}, is that call's error).
--
-- Returns, per call: {2, the guard's refusal} when the guard refused
-- (nothing else happens), else obtain.lua's answer.
local own = {n = calls.n, k = calls.k, a = calls.a, nk = {}, na = {}}
for i = 1, calls.n do
  own.nk[i], own.na[i] = calls.nk[i] - 3, calls.na[i] - 5
end
local refusals = guard(own)
local out = {}
for i = 1, calls.n do
  local r = refusals[i]
  if r and type(r) == 'table' and r.err then
    out[i] = r
  elseif r then
    out[i] = {2, r}
  else
    local k, a = calls.k[i] + calls.nk[i], calls.a[i] + calls.na[i] -- the call's last key and argument
    out[i] = obtain_hold(KEYS[k - 2], KEYS[k - 1], KEYS[k], ARGV[a - 4], ARGV[a - 3], ARGV[a - 2], ARGV[a - 1], ARGV[a])
  end
end
return out
