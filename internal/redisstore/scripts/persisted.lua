-- persisted.lua: note that orders of one sale are in MySQL and, for each
-- whose state written is still its state, take it off the outbox. One
-- call for a worker's whole batch of the sale: one script, one HSET per
-- order, one XDEL for all (was a script and four commands per order).
--
-- KEYS[1]   outbox   fs:{act:<id>}:outbox
-- KEYS[i+1] order i  fs:{act:<id>}:o:<order no>
-- ARGV[i]   the fence of the state written of order i
--
-- Returns one code per order: 1; 2 when the order changed after it was
-- read (a pay, say, between the worker's read and this): its outbox entry
-- is the change's and stays, so the change is recorded even if its own sync
-- task is lost; 0 when the order record is gone (expired).
local codes, done = {}, {}
for i = 2, #KEYS do
  local o = redis.call('HMGET', KEYS[i], 'outbox', 'fence', 'status')
  if not o[3] then
    codes[#codes + 1] = 0
  elseif tonumber(o[2] or '0') ~= tonumber(ARGV[i - 1]) then
    redis.call('HSET', KEYS[i], 'persisted', 1)
    codes[#codes + 1] = 2
  elseif o[1] and o[1] ~= '' then
    redis.call('HSET', KEYS[i], 'persisted', 1, 'outbox', '')
    done[#done + 1] = o[1]
    codes[#codes + 1] = 1
  else
    redis.call('HSET', KEYS[i], 'persisted', 1)
    codes[#codes + 1] = 1
  end
end
-- XDEL takes many ids; in slices, within Lua's stack for unpack.
for i = 1, #done, 500 do
  redis.call('XDEL', KEYS[1], unpack(done, i, math.min(i + 499, #done)))
end
return codes
