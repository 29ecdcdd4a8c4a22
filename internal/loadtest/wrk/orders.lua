-- orders.lua: a wrk script that places orders as a crowd: every request is
-- POST /v1/activities/<id>/orders {"quantity": q} with the next user's token,
-- so per-user limits and rate limits see many users, as in a real sale.
--
--   wrk -t2 -c64 -d10s -s orders.lua http://127.0.0.1:8080 -- <activity id> <tokens file> [quantity] [path]
--
-- path replaces /v1/activities/<id>/orders (the strategy benchmark points it
-- at other endpoints).
-- The tokens file has one token per line, or "user_id<TAB>token" lines as
-- `api token --users N` prints them. Each thread starts at its own place in
-- the list. At the end it prints one line for machines,
--   FLASHSALE {"requests":…,"seconds":…,"p50_us":…,"p99_us":…,"codes":{"202":…,"409 SOLD_OUT":…},…}
-- after wrk's own summary (internal/loadtest parses it).

local threads = {}
local counter = 0

function setup(thread)
  thread:set("index", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  local activity, file, qty, other = args[1], args[2], args[3] or "1", args[4]
  if not activity or not file then
    error("usage: wrk ... -s orders.lua <url> -- <activity id> <tokens file> [quantity]")
  end
  tokens = {}
  for line in io.lines(file) do
    local tok = line:match("\t(%S+)%s*$") or line:match("^(%S+)%s*$")
    if tok then table.insert(tokens, tok) end
  end
  if #tokens == 0 then error("no tokens in " .. file) end
  path = other or ("/v1/activities/" .. activity .. "/orders")
  body = '{"quantity":' .. qty .. '}'
  -- Threads start evenly spread over the list.
  nxt = math.floor(index * #tokens / 8) % #tokens
  codes = {}
end

function request()
  nxt = nxt % #tokens + 1
  return wrk.format("POST", path, {
    ["Authorization"] = "Bearer " .. tokens[nxt],
    ["Content-Type"] = "application/json",
  }, body)
end

-- Answers are counted by status and, for errors, by the error code in the
-- body ({"error":{"code":"SOLD_OUT",...}}): "202", "409 SOLD_OUT", ...
function response(status, headers, body)
  local k = tostring(status)
  if status >= 400 then
    local code = body:match('"code":"([%u_]+)"')
    if code then k = k .. " " .. code end
  end
  codes[k] = (codes[k] or 0) + 1
end

function done(summary, latency, requests)
  local all = {}
  for _, t in ipairs(threads) do
    for k, n in pairs(t:get("codes")) do
      all[k] = (all[k] or 0) + n
    end
  end
  local parts = {}
  for k, n in pairs(all) do
    table.insert(parts, string.format('"%s":%d', k, n))
  end
  local e = summary.errors
  io.write(string.format('FLASHSALE {"requests":%d,"seconds":%.3f,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"codes":{%s},"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, table.concat(parts, ","),
    e.connect, e.read, e.write, e.status, e.timeout))
end
