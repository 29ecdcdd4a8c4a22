-- each.lua: the body of a merged script made of a script written for one
-- call (luascript.Each): it runs after `local function one(KEYS, ARGV) …
-- end`, and calls one for each call in turn, with that call's own keys and
-- arguments as its KEYS and ARGV, under pcall, so a call whose script
-- raises an error gets that error as its reply and the others go on. (A
-- call's writes made before its error stay, as they would have had it run
-- alone: Redis does not roll a script back.)
--
-- calls: the batch, as merged.lua describes it.
-- Returns one reply per call.
local replies = {}
for i = 1, calls.n do
  local keys, args = {}, {}
  local k0, a0 = calls.k[i], calls.a[i]
  for j = 1, calls.nk[i] do
    keys[j] = KEYS[k0 + j]
  end
  for j = 1, calls.na[i] do
    args[j] = ARGV[a0 + j]
  end
  local ok, r = pcall(one, keys, args)
  if not ok then
    if type(r) == 'table' and r.err then
      replies[i] = r
    else
      replies[i] = {err = tostring(r)}
    end
  elseif r == nil then
    replies[i] = false
  else
    replies[i] = r
  end
end
return replies
