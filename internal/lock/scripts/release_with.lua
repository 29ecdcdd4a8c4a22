-- release_with.lua: release mutex holds, each with its finish run first,
-- only while it is held (Lock.ReleaseWith). The body of a merged script
-- (internal/redisbatch): it runs as a function of calls, the holds of
-- concurrent releases, after a local function finish(calls) — the caller's
-- Lua for a batch (see steps.go) — that gets the calls whose lock is still
-- held, with only their finish's keys and arguments, and answers each.
--
-- calls[i].keys: [1] lock, [2] waiting marker, then the finish's keys
-- calls[i].args: [1] owner value, [2] release channel (not a key), [3] '1'
--                to keep the lock (it goes to a waiter of this process
--                next), then the finish's arguments
--
-- Returns, per call: {0} when the lock is not held (its finish did not
-- run), else {code, the finish's reply}: 1 released, 2 released and
-- waiters woken (the marker is consumed; they mark again if they fail),
-- 3 kept.
--
-- uses: lib_release
local held, items, out = {}, {}, {}
for i, c in ipairs(calls) do
  if redis.call('GET', c.keys[1]) == c.args[1] then
    local k, a = {}, {}
    for j = 3, #c.keys do
      k[#k + 1] = c.keys[j]
    end
    for j = 4, #c.args do
      a[#a + 1] = c.args[j]
    end
    held[#held + 1] = i
    items[#items + 1] = {keys = k, args = a}
  else
    out[i] = {0}
  end
end
if #items == 0 then
  return out
end
local replies = finish(items)
for x, i in ipairs(held) do
  local c, reply = calls[i], replies[x]
  if reply == nil then
    reply = false
  end
  if c.args[3] == '1' then
    out[i] = {3, reply}
  else
    out[i] = {release_hold(c.keys[1], c.keys[2], c.args[2]), reply}
  end
end
return out
