-- persisted.lua: orders of one sale are in MySQL: take each whose state
-- written is still its state off the outbox. One call for a worker's whole
-- batch of the sale: one HMGET and one ZREM for all, and no record written
-- (an order off the outbox is persisted; transition.lua notes it in the
-- record when the order changes again: lib_record).
--
-- uses: lib_record
--
-- KEYS[1] orders   fs:{act:<id>}:orders    hash: order no -> record (lib_record)
-- KEYS[2] outbox   fs:{act:<id>}:outbox    zset: orders not yet in MySQL
-- ARGV[2i-1], ARGV[2i]  order no i, and the fence of its state written
--
-- Returns one code per order: 1; 2 when the order changed after it was
-- read (a pay, say, between the worker's read and this): it stays on the
-- outbox, so the change is recorded even if its own sync task is lost; 0
-- when the order record is gone (expired).
local nos, fences = {}, {}
for i = 1, #ARGV, 2 do
  nos[#nos + 1] = ARGV[i]
  fences[#fences + 1] = tonumber(ARGV[i + 1])
end
local codes, done = {}, {}
-- In slices: Lua's unpack stops at about 8,000 values, and a worker's
-- batch may be larger.
for from = 1, #nos, 1000 do
  local to = math.min(from + 999, #nos)
  local found = redis.call('HMGET', KEYS[1], unpack(nos, from, to))
  for j, s in ipairs(found) do
    local i = from + j - 1
    if not s then
      codes[i] = 0
    elseif record_fence_of(s) ~= fences[i] then
      codes[i] = 2
    else
      codes[i] = 1
      done[#done + 1] = nos[i]
    end
  end
end
for i = 1, #done, 1000 do
  redis.call('ZREM', KEYS[2], unpack(done, i, math.min(i + 999, #done)))
end
return codes
