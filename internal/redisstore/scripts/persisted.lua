-- persisted.lua: note that an order is in MySQL and, when the state written
-- is still the order's state, take it off the outbox.
--
-- KEYS[1] order    fs:{act:<id>}:o:<order no>
-- KEYS[2] outbox   fs:{act:<id>}:outbox
-- ARGV[1] the fence of the state that was written
--
-- Returns 1; 2 when the order changed after it was read (a pay, say, between
-- the worker's read and this): its outbox entry is the change's and stays,
-- so the change is recorded even if its own sync task is lost; 0 when the
-- order record is gone (expired).
local o = redis.call('HMGET', KEYS[1], 'outbox', 'fence')
if not o[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'persisted', 1)
if tonumber(o[2]) ~= tonumber(ARGV[1]) then
  return 2
end
if o[1] and o[1] ~= '' then
  redis.call('XDEL', KEYS[2], o[1])
  redis.call('HSET', KEYS[1], 'outbox', '')
end
return 1
