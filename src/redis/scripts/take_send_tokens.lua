-- One sender's pace (messages per second), shared by every send worker process: a token bucket
-- that holds at most one second's worth, refilled continuously. A batch asks for N tokens at once
-- and gets what is there; the rest waits (src/outbound/send.ts).
-- KEYS[1]  hash {t = tokens left (fractional), ms = when they were counted}, tagged {s:<sender>}
-- ARGV[1]  rate: tokens per second, also the bucket's size
-- ARGV[2]  tokens wanted
-- ARGV[3]  tokens worth waiting for when fewer than wanted were granted (a small batch, not one)
-- Returns  {granted, ms until ARGV[3] more tokens (or all still wanted) are there; 0 when all were granted}
-- Redis's own clock, so that workers on several machines share one time. A lost bucket starts full.
local rate = tonumber(ARGV[1])
local wanted = tonumber(ARGV[2])
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 't', 'ms')
local tokens = tonumber(state[1])
local then_ms = tonumber(state[2])
if not tokens or not then_ms then
  tokens = rate
else
  tokens = math.min(rate, tokens + math.max(0, now_ms - then_ms) * rate / 1000)
end
local granted = math.min(wanted, math.floor(tokens))
if granted < 0 then granted = 0 end
tokens = tokens - granted
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'ms', now_ms)
-- Full again after a second: an idle bucket may go (its absence means full).
redis.call('PEXPIRE', KEYS[1], 2000)
local wait_ms = 0
if granted < wanted then
  local next_batch = math.max(1, math.min(wanted - granted, tonumber(ARGV[3])))
  wait_ms = math.ceil((next_batch - tokens) * 1000 / rate)
  if wait_ms < 1 then wait_ms = 1 end
end
return {granted, wait_ms}
