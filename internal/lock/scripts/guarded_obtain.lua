-- guarded_obtain.lua: a mutex's obtain with a guard run first, in the same
-- script (Client.ObtainGuarded). It runs after two local functions of
-- (KEYS, ARGV): guard, the caller's Lua, and obtain, obtain.lua (see
-- steps.go, which puts them before it).
--
-- KEYS[1..3] and ARGV[1..5] are obtain.lua's; the guard's own KEYS and ARGV
-- follow them.
--
-- Returns {2, the guard's reply} when the guard refused (nothing else
-- happens), else obtain.lua's answer.
local step_keys, step_args = {}, {}
for i = 4, #KEYS do
  step_keys[#step_keys + 1] = KEYS[i]
end
for i = 6, #ARGV do
  step_args[#step_args + 1] = ARGV[i]
end
local refused = guard(step_keys, step_args)
if refused then
  return {2, refused}
end
return obtain(KEYS, ARGV)
