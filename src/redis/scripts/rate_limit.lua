-- Fixed one-second window rate limit (SPEC §8), on Redis's own clock so every api process
-- agrees on where a second starts.
-- KEYS[1]  hash holding {w = window second, n = requests counted in it}
-- ARGV[1]  limit: requests allowed per second
-- Returns  {allowed (1|0), limit, remaining, reset_ms (until the window ends), reset_epoch_s}
local limit = tonumber(ARGV[1])
local now = redis.call('TIME')
local second = tonumber(now[1])
local reset_ms = 1000 - math.floor(tonumber(now[2]) / 1000)

local window = tonumber(redis.call('HGET', KEYS[1], 'w'))
local count = 0
if window == second then
  count = tonumber(redis.call('HGET', KEYS[1], 'n')) or 0
end

if count >= limit then
  return {0, limit, 0, reset_ms, second + 1}
end

if window == second then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
else
  redis.call('HSET', KEYS[1], 'w', second, 'n', 1)
  redis.call('PEXPIRE', KEYS[1], 2000)
end
return {1, limit, limit - count - 1, reset_ms, second + 1}
