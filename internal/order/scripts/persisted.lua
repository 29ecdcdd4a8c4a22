-- persisted.lua: note that an order is in MySQL, and take it off the outbox.
--
-- KEYS[1] order    fs:{act:<id>}:o:<order no>
-- KEYS[2] outbox   fs:{act:<id>}:outbox
--
-- Returns 1, or 0 when the order record is gone (expired).
local entry = redis.call('HGET', KEYS[1], 'outbox')
if not entry then
  return 0
end
redis.call('HSET', KEYS[1], 'persisted', 1)
redis.call('XDEL', KEYS[2], entry)
return 1
