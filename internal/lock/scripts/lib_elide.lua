-- lib_elide.lua: a step run under a free mutex without taking it (lock
-- elision), for elide.lua and table_elide.lua, which find the calls whose
-- lock is free.
--
-- A hold that only runs a guard and a finish, both inside Redis, is one
-- script's worth of work: when nobody holds the lock, checking that and
-- running them in one script excludes every other holder exactly as
-- obtain, finish and release would, and writes nothing for the lock. A
-- client's waiting marker is not looked at: it only asks a release to
-- publish, and an obtain takes a free lock whatever the marker says. The guard and the finish are the caller's batch
-- functions (guard(calls), finish(calls), defined before this), each
-- handed only its own keys and arguments.

-- elide_run runs the guards of the calls in free (indexes into calls, in
-- call order, each with the lock free), then the finishes of those the
-- guard let through, and puts their answers into out: {2, refusal} for a
-- refusal, the guard's error reply as it is, {1, the finish's reply}
-- otherwise. All guards of a run go before all finishes: the guard must
-- not read what the finish writes (a rate limit and a sale's stock: they
-- touch different keys), so the result is the calls' one after the other.
-- A call's last two arguments are the guard's key and argument counts;
-- lock_keys and lock_args are how many of a call's keys and arguments,
-- counting those two, belong to the lock.
local function elide_run(calls, free, out, lock_keys, lock_args)
  local g = {n = #free, k = {}, a = {}, nk = {}, na = {}}
  local gk, ga = {}, {}
  for x, i in ipairs(free) do
    local last = calls.a[i] + calls.na[i]
    gk[x], ga[x] = tonumber(ARGV[last - 1]), tonumber(ARGV[last])
    g.k[x], g.a[x], g.nk[x], g.na[x] = calls.k[i], calls.a[i], gk[x], ga[x]
  end
  local refusals = guard(g)
  local f, which = {n = 0, k = {}, a = {}, nk = {}, na = {}}, {}
  for x, i in ipairs(free) do
    local r = refusals[x]
    if r and type(r) == 'table' and r.err then
      out[i] = r
    elseif r then
      out[i] = {2, r}
    else
      local y = f.n + 1
      f.n = y
      f.k[y], f.a[y] = calls.k[i] + gk[x], calls.a[i] + ga[x]
      f.nk[y], f.na[y] = calls.nk[i] - gk[x] - lock_keys, calls.na[i] - ga[x] - lock_args
      which[y] = i
    end
  end
  if f.n == 0 then
    return
  end
  local replies = finish(f)
  for y = 1, f.n do
    local r = replies[y]
    if r == nil then
      r = false
    end
    out[which[y]] = {1, r}
  end
end
