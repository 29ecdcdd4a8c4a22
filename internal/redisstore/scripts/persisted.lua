-- persisted.lua: note that orders of one sale are in MySQL and, for each
-- whose state written is still its state, take it off the outbox. One
-- call for a worker's whole batch of the sale: one HMGET, one HSET and one
-- ZREM for all.
--
-- uses: lib_record
--
-- KEYS[1] orders   fs:{act:<id>}:orders    hash: order no -> record (lib_record)
-- KEYS[2] outbox   fs:{act:<id>}:outbox    zset: orders not yet in MySQL
-- ARGV[2i-1], ARGV[2i]  order no i, and the fence of its state written
--
-- Returns one code per order: 1; 2 when the order changed after it was
-- read (a pay, say, between the worker's read and this): its outbox entry
-- is the change's and stays, so the change is recorded even if its own sync
-- task is lost; 0 when the order record is gone (expired).
-- many runs cmd on key with the values of list, in slices: Lua's unpack
-- stops at about 8,000 values, and a worker's batch may be larger.
local function many(cmd, key, list)
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end

local nos, fences = {}, {}
for i = 1, #ARGV, 2 do
  nos[#nos + 1] = ARGV[i]
  fences[#fences + 1] = tonumber(ARGV[i + 1])
end
if #nos == 0 then
  return {}
end
local found = {}
for i = 1, #nos, 1000 do
  local part = redis.call('HMGET', KEYS[1], unpack(nos, i, math.min(i + 999, #nos)))
  for j, v in ipairs(part) do
    found[i + j - 1] = v
  end
end
local codes, marked, done = {}, {}, {}
for i, no in ipairs(nos) do
  local r = record_decode(found[i])
  if not r then
    codes[i] = 0
  else
    if r.persisted ~= '1' then
      r.persisted = '1'
      marked[#marked + 1] = no
      marked[#marked + 1] = record_encode(r)
    end
    if record_fence(r) ~= fences[i] then
      codes[i] = 2
    else
      done[#done + 1] = no
      codes[i] = 1
    end
  end
end
many('HSET', KEYS[1], marked) -- an even slice: no and record stay together
many('ZREM', KEYS[2], done)
return codes
