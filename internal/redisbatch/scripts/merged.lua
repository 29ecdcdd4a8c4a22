-- merged.lua: the frame of a merged script (redisbatch.Merged). It runs
-- after `local function batch(calls) … end` (the script's own body, made a
-- function by NewMerged), unpacks the calls packed into KEYS and ARGV, runs
-- batch on them, and returns its replies.
--
-- KEYS    every call's keys, one call after the other
-- ARGV[1] n, how many calls
-- ARGV[2i], ARGV[2i+1] (i = 1..n) how many keys and arguments call i has
-- ARGV[2n+2 …] every call's arguments, one call after the other
--
-- Returns a list of n replies, call i's at i: what batch returned for it
-- (a nil becomes false, which Redis answers as a nil reply, so the list
-- has no holes).
local n = tonumber(ARGV[1])
local calls, ki, ai = {}, 1, 2 * n + 2
for i = 1, n do
  local nk, na = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local keys, args = {}, {}
  for j = 1, nk do
    keys[j] = KEYS[ki + j - 1]
  end
  for j = 1, na do
    args[j] = ARGV[ai + j - 1]
  end
  ki, ai = ki + nk, ai + na
  calls[i] = {keys = keys, args = args}
end
local replies = batch(calls)
local out = {}
for i = 1, n do
  local r = replies[i]
  if r == nil then
    r = false
  end
  out[i] = r
end
return out
