-- elide.lua: steps run under free mutexes without taking them
-- (Deferred.RunWith; lib_elide.lua says why that is a hold's equal). The
-- body of a merged script (internal/redisbatch): it runs as a function of
-- calls after local functions guard(calls) and finish(calls).
--
-- uses: lib_elide
--
-- A call's keys: the guard's, the finish's, then the mutex's lock key.
-- Its arguments: the guard's, the finish's, then how many keys and
-- arguments the guard has.
--
-- Returns, per call: {0, pttl} when the lock is held (pttl: the holder's
-- ms left, 0 when it has no expiry): nothing ran, the caller takes the
-- lock as usual; {2, the guard's refusal}; {1, the finish's reply}.
local out, free = {}, {}
for i = 1, calls.n do
  local pttl = redis.call('PTTL', KEYS[calls.k[i] + calls.nk[i]])
  if pttl ~= -2 then
    out[i] = {0, math.max(pttl, 0)}
  else
    free[#free + 1] = i
  end
end
if #free > 0 then
  elide_run(calls, free, out, 1, 2)
end
return out
