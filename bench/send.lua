-- wrk script of bench/send.ts: POST /v2/messages, a template send to a random German mobile number,
-- with a unique Idempotency-Key per request, rotating over the bearer tokens of many applications.
-- With BATCH (1-1,000): POST /v2/messages/batch, BATCH such sends per request, each item with a
-- unique idempotency_key (no header), counting the items by the status of their row.
--
--   wrk -t2 -c64 -d20s -s bench/send.lua http://127.0.0.1:PORT -- TOKENS_FILE RUN_ID [BATCH]
--
-- TOKENS_FILE: one access token a line. RUN_ID: makes the keys unique across runs and phases.
-- At the end it prints one line `BENCH_RESULT {json}`: status counts (every response, by HTTP status),
-- in batch mode item counts by row status too, latency percentiles (microseconds), socket errors,
-- and a few bodies of non-201 answers (of non-201 rows in batch mode).

local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

local tokens = {}
local counter = 0
local prefix = ""
local batch = 0
statuses = {}
-- Batch mode: items by the status of their row (201 accepted, 200 replay, 4xx refused).
items = {}
samples = {}
nsamples = 0

function init(args)
  local path, run = args[1], args[2] or "run"
  batch = tonumber(args[3] or "0") or 0
  for line in io.lines(path) do
    if line ~= "" then
      tokens[#tokens + 1] = line
    end
  end
  if #tokens == 0 then
    error("no tokens in " .. tostring(path))
  end
  prefix = "bench-" .. run .. "-t" .. tostring(tid) .. "-"
  math.randomseed(os.time() + tid * 7919)
end

local function single()
  counter = counter + 1
  local token = tokens[(counter * 7 + tid) % #tokens + 1]
  local body = string.format(
    '{"to":"+4915%08d","template":{"name":"order_shipped","language":"en","variables":{"body":["Ana","A-%d"]}}}',
    math.random(0, 99999999),
    counter
  )
  return wrk.format("POST", "/v2/messages", {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = prefix .. tostring(counter),
  }, body)
end

-- One batch body: the items' strings in a table reused by every request, joined once.
local parts = {}

local function batched()
  counter = counter + 1
  local token = tokens[(counter * 7 + tid) % #tokens + 1]
  local key = prefix .. tostring(counter) .. "-"
  for i = 1, batch do
    parts[i] = string.format(
      '{"to":"+4915%08d","template":{"name":"order_shipped","language":"en","variables":{"body":["Ana","A-%d-%d"]}},"idempotency_key":"%s%d"}',
      math.random(0, 99999999),
      counter,
      i,
      key,
      i
    )
  end
  return wrk.format("POST", "/v2/messages/batch", {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, '{"messages":[' .. table.concat(parts, ",", 1, batch) .. "]}")
end

function request()
  if batch > 0 then
    return batched()
  end
  return single()
end

-- The api's batch row: {"object":"batch_result","index":N,"status":S,"message":...,"error":...}
-- (bench/send.ts checks this form on a first batch before wrk runs).
local ROW = '"object":"batch_result","index":%d+,"status":(%d+)'

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if batch > 0 and status == 200 and body then
    for row in string.gmatch(body, ROW) do
      items[row] = (items[row] or 0) + 1
      if row ~= "201" and nsamples < 3 then
        nsamples = nsamples + 1
        local at = string.find(body, '"status":' .. row .. ",", 1, true) or 1
        samples[nsamples] = "row " .. row .. " " .. string.sub(body, at, at + 300)
      end
    end
    return
  end
  local expected = batch > 0 and 200 or 201
  if status ~= expected and nsamples < 3 then
    nsamples = nsamples + 1
    samples[nsamples] = tostring(status) .. " " .. string.sub(body or "", 1, 300)
  end
end

local function quote(s)
  s = string.gsub(s, '[%c"\\]', function(c)
    return string.format("\\u%04x", string.byte(c))
  end)
  return '"' .. s .. '"'
end

function done(summary, latency, requests)
  local total = {}
  local rows = {}
  local bodies = {}
  for _, thread in ipairs(threads) do
    local counts = thread:get("statuses") or {}
    for status, n in pairs(counts) do
      total[status] = (total[status] or 0) + n
    end
    for status, n in pairs(thread:get("items") or {}) do
      rows[status] = (rows[status] or 0) + n
    end
    for _, sample in ipairs(thread:get("samples") or {}) do
      if #bodies < 5 then
        bodies[#bodies + 1] = quote(sample)
      end
    end
  end
  local counts = {}
  for status, n in pairs(total) do
    counts[#counts + 1] = string.format('"%d":%d', status, n)
  end
  local itemCounts = {}
  for status, n in pairs(rows) do
    itemCounts[#itemCounts + 1] = string.format('"%s":%d', status, n)
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"duration_us":%d,"requests":%d,"bytes":%d,"statuses":{%s},"items":{%s},' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},"samples":[%s]}\n',
    summary.duration, summary.requests, summary.bytes, table.concat(counts, ","), table.concat(itemCounts, ","),
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    table.concat(bodies, ",")
  ))
end
