-- read_payment.lua: an order's payment, as the payments hash holds it
-- (redisstore.Payments.Payment), or nil. A script only so that it goes
-- through the pipe with other callers' scripts (redispipe.RunRead), as
-- read_order.lua.
--
-- KEYS[1] payments fs:{act:<id>}:payments  hash: order no -> payment (JSON)
-- ARGV[1] the order no
return redis.call('HGET', KEYS[1], ARGV[1])
