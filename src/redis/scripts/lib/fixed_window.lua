-- Shared by the scripts that rate-limit (prepended when they are loaded; see src/redis/connect.ts).
-- A fixed one-second window (SPEC §8) on Redis's own clock, so every api process agrees where a
-- second starts. `key` is a counter worth `window second * 1e6 + requests counted in it`: one INCR
-- counts a request and says which window the count is of (a hash {w, n} took an HMGET and an
-- HINCRBY). The first request of a window sets it anew, with a 2 s expiry.
-- `now`: Redis's TIME, when the caller read it already (one read for a batch of requests).
-- Returns allowed (boolean), remaining, reset_ms (until the window ends), reset_epoch_s.
local function take_fixed_window(key, limit, now)
  now = now or redis.call('TIME')
  local second = tonumber(now[1])
  local reset_ms = 1000 - math.floor(tonumber(now[2]) / 1000)
  local value = redis.call('INCR', key)
  local count = value % 1000000
  if (value - count) / 1000000 ~= second then
    -- A window gone by (or no counter): this request is the new window's first. '%.0f': Lua would
    -- write a number this large in exponent form.
    redis.call('SET', key, string.format('%.0f', second * 1000000 + 1), 'PX', 2000)
    count = 1
  end
  if count > limit then
    return false, 0, reset_ms, second + 1
  end
  return true, limit - count, reset_ms, second + 1
end
