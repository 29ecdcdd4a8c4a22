-- orders.lua: a wrk script that places orders as a crowd: every request is
-- POST /v1/activities/<id>/orders {"quantity": q} with the next user's token,
-- so per-user limits and rate limits see many users, as in a real sale.
--
--   wrk -t2 -c64 -d10s -s orders.lua http://127.0.0.1:8080 -- <activity id> <tokens file> [quantity] [path] [once] [items]
--
-- path replaces /v1/activities/<id>/orders (the strategy benchmark points it
-- at other endpoints); "-" keeps it. The mode "once" is below; "get" sends
-- GET to path with no body (a waiting room's poll, GET .../queue); "-" is
-- none.
-- items, above 1, has each request name the next of a sale of that many
-- items, LOAD-1 to LOAD-<items> (loadtest.ItemSKU), in turn:
-- {"item": "LOAD-2", "quantity": q}.
-- The tokens file has one token per line, or "user_id<TAB>token" lines as
-- `api token --users N` prints them, or "user_id<TAB>token<TAB>admission"
-- lines (loadtest.WriteAdmittedTokenFiles): the order then carries the
-- admission as Admission-Token (a sale with a waiting room). Each thread
-- starts at its own place in the list and goes round it.
--
-- With "once", every request is a user the run has not seen (a launch:
-- each shopper buys once): thread i reads <tokens file>.<i>, a file of its
-- own (loadtest.WriteTokenFiles), one line per request as it goes. Nothing
-- is loaded up front, so no thread starts sending while another still
-- reads its list (wrk starts each thread as soon as its init is done, and
-- its clock only after the last: a list of 300,000 tokens took a thread
-- 0.2-0.8 s to load, requests counted but not timed). A thread that runs
-- out starts its file again and counts those requests as "reused": a run
-- that reused users did not measure new ones.
--
-- At the end it prints one line for machines,
--   FLASHSALE {"requests":…,"seconds":…,"p50_us":…,"p99_us":…,"codes":{"202":…,"409 SOLD_OUT":…},"reused":…,…}
-- after wrk's own summary (internal/loadtest parses it).

local threads = {}
local counter = 0

function setup(thread)
  thread:set("index", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

-- token is a line's bearer token and, when it has one, its admission.
local function token(line)
  local tok, adm = line:match("^%S+\t(%S+)\t(%S+)%s*$")
  if tok then return tok, adm end
  return line:match("\t(%S+)%s*$") or line:match("^(%S+)%s*$"), nil
end

function init(args)
  local activity, file, qty, other, mode = args[1], args[2], args[3] or "1", args[4], args[5]
  local items = tonumber(args[6] or "1")
  if not activity or not file then
    error("usage: wrk ... -s orders.lua <url> -- <activity id> <tokens file> [quantity] [path] [once] [items]")
  end
  if other == "" or other == "-" then other = nil end
  if mode == "-" then mode = nil end
  path = other or ("/v1/activities/" .. activity .. "/orders")
  bodies = {}
  if items > 1 then
    for i = 1, items do
      bodies[i] = '{"item":"LOAD-' .. i .. '","quantity":' .. qty .. '}'
    end
  else
    bodies[1] = '{"quantity":' .. qty .. '}'
  end
  sent = 0
  codes = {}
  reused = 0
  if mode == "once" then
    own = file .. "." .. index
    lines = assert(io.open(own, "r"))
    wrapped = false
    return
  elseif mode == "get" then
    method = "GET"
  elseif mode then
    error("unknown mode " .. mode .. ": once or get")
  end
  tokens, admissions = {}, {}
  for line in io.lines(file) do
    local tok, adm = token(line)
    if tok then
      table.insert(tokens, tok)
      admissions[#tokens] = adm
    end
  end
  if #tokens == 0 then error("no tokens in " .. file) end
  -- Threads start evenly spread over the list.
  nxt = math.floor(index * #tokens / 8) % #tokens
end

-- nextToken is the next request's token and admission (nil for none): the
-- next line of the thread's own file in "once" mode, else the next of the
-- list, round and round.
local function nextToken()
  if not lines then
    nxt = nxt % #tokens + 1
    return tokens[nxt], admissions[nxt]
  end
  local line = lines:read("*l")
  if not line then
    wrapped = true
    lines:seek("set", 0)
    line = lines:read("*l")
    if not line then error("no tokens in " .. own) end
  end
  if wrapped then reused = reused + 1 end
  return token(line)
end

function request()
  local tok, adm = nextToken()
  if method == "GET" then
    return wrk.format("GET", path, {["Authorization"] = "Bearer " .. tok})
  end
  sent = sent % #bodies + 1
  return wrk.format("POST", path, {
    ["Authorization"] = "Bearer " .. tok,
    ["Content-Type"] = "application/json",
    ["Admission-Token"] = adm,
  }, bodies[sent])
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
  local all, reusedAll = {}, 0
  for _, t in ipairs(threads) do
    for k, n in pairs(t:get("codes")) do
      all[k] = (all[k] or 0) + n
    end
    reusedAll = reusedAll + t:get("reused")
  end
  local parts = {}
  for k, n in pairs(all) do
    table.insert(parts, string.format('"%s":%d', k, n))
  end
  local e = summary.errors
  io.write(string.format('FLASHSALE {"requests":%d,"seconds":%.3f,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"codes":{%s},"reused":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, table.concat(parts, ","), reusedAll,
    e.connect, e.read, e.write, e.status, e.timeout))
end
