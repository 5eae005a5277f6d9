-- Shared by the scripts that rate-limit (prepended when they are loaded; see src/redis/connect.ts).
-- A fixed one-second window (SPEC §8) on Redis's own clock, so every api process agrees where a
-- second starts. `key` is a hash {w = window second, n = requests counted in it}.
-- Returns allowed (boolean), remaining, reset_ms (until the window ends), reset_epoch_s.
local function take_fixed_window(key, limit)
  local now = redis.call('TIME')
  local second = tonumber(now[1])
  local reset_ms = 1000 - math.floor(tonumber(now[2]) / 1000)
  -- One read of both fields (a command fewer on every request than two HGETs).
  local stored = redis.call('HMGET', key, 'w', 'n')
  local window = tonumber(stored[1])
  local count = 0
  if window == second then
    count = tonumber(stored[2]) or 0
  end
  if count >= limit then
    return false, 0, reset_ms, second + 1
  end
  if window == second then
    redis.call('HINCRBY', key, 'n', 1)
  else
    redis.call('HSET', key, 'w', second, 'n', 1)
    redis.call('PEXPIRE', key, 2000)
  end
  return true, limit - count - 1, reset_ms, second + 1
end
