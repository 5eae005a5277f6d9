-- Attempts counted in a fixed window of several minutes (panel sign-in, failed credentials). The
-- window starts with the first attempt, so a burst cannot straddle two windows for double the allowance.
-- KEYS[1]  counter of attempts in the current window
-- ARGV[1]  limit: attempts allowed per window
-- ARGV[2]  window length in seconds
-- ARGV[3]  optional: "peek" reports without counting, allowed meaning "one more may be made"
--          (a caller over the limit is refused before anything is checked)
-- Returns  {allowed (1|0), seconds until the window ends (0 when none is open), attempts counted}
local limit = tonumber(ARGV[1])
if ARGV[3] == 'peek' then
  local count = tonumber(redis.call('GET', KEYS[1]) or '0')
  local ttl = redis.call('TTL', KEYS[1])
  if ttl < 0 then ttl = 0 end
  return {count < limit and 1 or 0, ttl, count}
end
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {count <= limit and 1 or 0, ttl, count}
