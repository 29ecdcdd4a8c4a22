-- place.lua: the one script Redis runs for a flash-sale order
-- (redisstore.Orders.Accept): the per-user lock, the per-user rate limit
-- and the accept, in one atomic step, for the orders of concurrent requests
-- of one sale (a merged script, luascript.Merged; the pipe runs one sale's
-- calls per script).
--
-- The lock (docs/locking.md, "A step under a lock"): it serialises one
-- shopper's requests in a sale, and it guards exactly this script. So when
-- nobody holds it, the request does not take it at all ('elide': the
-- script checks it is free and goes on, writing nothing for it); when
-- someone does, the request waits its turn, obtains it, and this script
-- runs only if the request still holds it, releasing it ('held').
-- The rate limit (lib_rate.lua) is charged here, after the lock's check
-- and before the accept, so a refused order costs no script of its own. A
-- call whose order already stands under its number, made by this very
-- request (the client sent the script again after a lost answer), skips
-- the rate limit: its first run was charged, and the accept answers it as
-- that run did.
--
-- uses: lib_lock, lib_rate, lib_accept
--
-- A call's keys, KEYS[k + j] for k = calls.k[i]:
--   1     the rate limit's base key (rediskeys.RateLimit, scope "user");
--         any key of the sale when the rate is '0'
--   2-9   the sale's: meta, stock, users, orders, idem, outbox, items,
--         itemusers (lib_accept)
--   10-11 the per-user lock's Ref keys (lib_lock); any keys of the sale
--         when the lock is 'none'
-- Its arguments, ARGV[a + j] for a = calls.a[i]:
--   1     the user's rate limit, requests a second; '0' when not limited here
--   2-6   user id, quantity, order no, Idempotency-Key field, item (lib_accept)
--   7-9   the per-user lock's Ref arguments: field, value, channel
--   10    the lock: 'elide' (nobody took it: go on only if nobody holds
--         it), 'held' (the request holds it: go on only if it still does,
--         and release it), 'none' (no lock)
--
-- Returns per call (codes: redisstore/codes.go, the one table of them):
--   {20, ms left}       'elide', and someone holds the lock: nothing ran
--   {22}                'held', and the lock is no longer the request's:
--                       nothing ran
--   {21, retry after}   over the rate limit (retry after in seconds, a
--                       string): nothing else ran (but the release)
--   else lib_accept's reply {code, order no, units left (of the item),
--   units the user holds, created ms, pay-by ms, price, item, units the
--   sale has left}
-- and for 'held' (but 22) the lock's release code last: lib_lock's
-- lock_release, 1, or 2 when it woke waiters.

-- sub is the calls idx of calls, each narrowed to nk keys and na arguments
-- from its dk-th key and da-th argument on: the form rate_limit and accept
-- read.
local function sub(idx, dk, da, nk, na)
  local n, ck, ca = #idx, calls.k, calls.a
  local k, a, snk, sna = {}, {}, {}, {}
  for x = 1, n do
    local i = idx[x]
    k[x], a[x], snk[x], sna[x] = ck[i] + dk, ca[i] + da, nk, na
  end
  return {n = n, k = k, a = a, nk = snk, na = sna}
end

local out, released = {}, {}

-- The lock: a call goes on when it finds its lock free ('elide') or still
-- its own, which it releases ('held').
-- (The loops over a batch's calls count their lists' lengths and step by
-- number, not `#t + 1` and ipairs: Redis's Lua runs each per call, and
-- those cost a third more.)
local elide, elide_refs, held, held_refs, go = {}, {}, {}, {}, {}
local ne, nh = 0, 0
for i = 1, calls.n do
  local k, a = calls.k[i], calls.a[i]
  local mode = ARGV[a + 10]
  if mode == 'elide' then
    ne = ne + 1
    elide[ne], elide_refs[ne] = i, lock_ref(k + 9, a + 6)
  elseif mode == 'held' then
    nh = nh + 1
    held[nh], held_refs[nh] = i, lock_ref(k + 9, a + 6)
  end
end
local now = 0
if ne > 0 or nh > 0 then
  now = table_now()
end
if ne > 0 then
  local holders = lock_holders(elide_refs, now)
  for x = 1, ne do
    if holders[x] then
      out[elide[x]] = {20, holders[x][1]}
    end
  end
end
if nh > 0 then
  local codes = lock_release(held_refs, now)
  for x = 1, nh do
    local i = held[x]
    if codes[x] == 0 then
      out[i] = {22}
    else
      released[i] = codes[x]
    end
  end
end

-- The rate limit, but for a call whose order its own earlier run made.
local limited, limited_nos = {}, {}
local nl = 0
for i = 1, calls.n do
  local a = calls.a[i]
  if not out[i] and ARGV[a + 1] ~= '0' then
    nl = nl + 1
    limited[nl], limited_nos[nl] = i, ARGV[a + 4]
  end
end
-- What the own-order check read at each call's number (the record, or
-- false), by call, with the orders hash it read: the accept reads no call
-- twice.
local read_at, read_key = {}, nil
if nl > 0 then
  -- The calls of a run are of one sale: one HMGET of its orders.
  read_key = KEYS[calls.k[limited[1]] + 5]
  local found = redis.call('HMGET', read_key, unpack(limited_nos))
  local charge, nc = {}, 0
  for x = 1, nl do
    local i, f = limited[x], found[x]
    read_at[i] = f
    if not (f and own_order(record_decode(f), ARGV[calls.a[i] + 2], '')) then
      nc = nc + 1
      charge[nc] = i
    end
  end
  local refusals = rate_limit(sub(charge, 0, 0, 1, 2))
  for x = 1, nc do
    if refusals[x] then
      out[charge[x]] = {21, refusals[x][1]}
    end
  end
end

-- The accept, of every call that went on.
local known, ng = {key = read_key}, 0
for i = 1, calls.n do
  if not out[i] then
    ng = ng + 1
    go[ng], known[ng] = i, read_at[i]
  end
end
local accepted = accept(sub(go, 1, 1, 8, 5), known)
for x = 1, ng do
  out[go[x]] = accepted[x]
end
for i, code in pairs(released) do
  local r = out[i]
  r[#r + 1] = code
end
return out
