-- merged.lua: the frame of a merged script (luascript.Merged). It runs
-- after `local function batch(calls) … end` (the script's own body, made a
-- function by NewMerged), tells batch where each call's keys and arguments
-- are, runs it, and returns its replies.
--
-- KEYS    every call's keys, one call after the other
-- ARGV[1] n, how many calls
-- ARGV[2i], ARGV[2i+1] (i = 1..n) how many keys and arguments call i has;
--         a count of keys -j (j < i): call i's keys are call j's, not sent
--         again (the calls of one sale name the same keys: pack in merged.go)
-- ARGV[2n+2 …] every call's arguments, one call after the other
--
-- calls, as batch gets it: calls.n, and for call i calls.k[i] and
-- calls.a[i], the offsets of its keys in KEYS and of its arguments in ARGV
-- (its j-th key is KEYS[calls.k[i] + j], its j-th argument
-- ARGV[calls.a[i] + j]), calls.nk[i] and calls.na[i], how many it has.
-- Offsets, not a table per call: a merged script is the order path's, and
-- copying every call's keys and arguments into tables of their own cost
-- Redis about a microsecond a call (docs/benchmarks.md).
--
-- Returns a list of n replies, call i's at i: what batch returned for it
-- (a nil becomes false, which Redis answers as a nil reply, so the list
-- has no holes).
local n = tonumber(ARGV[1])
local calls = {n = n, k = {}, a = {}, nk = {}, na = {}}
local ki, ai = 0, 2 * n + 1
-- The counts repeat (every call of a batch of one script has the same):
-- each distinct one is parsed once (tonumber is about 0.2 µs in Redis's
-- Lua; a lookup of the interned string a fifth of that).
local parsed = {}
for i = 1, n do
  local sk, sa = ARGV[2 * i], ARGV[2 * i + 1]
  local nk, na = parsed[sk], parsed[sa]
  if not nk then
    nk = tonumber(sk)
    parsed[sk] = nk
  end
  if not na then
    na = tonumber(sa)
    parsed[sa] = na
  end
  if nk < 0 then
    calls.k[i], calls.nk[i] = calls.k[-nk], calls.nk[-nk]
  else
    calls.k[i], calls.nk[i] = ki, nk
    ki = ki + nk
  end
  calls.a[i], calls.na[i] = ai, na
  ai = ai + na
end
local replies = batch(calls)
for i = 1, n do
  if replies[i] == nil then
    replies[i] = false
  end
end
return replies
