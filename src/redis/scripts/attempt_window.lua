-- Attempts counted in a fixed window of several minutes (panel sign-in throttling). The window
-- starts with the first attempt, so a burst cannot straddle two windows for double the allowance.
-- KEYS[1]  counter of attempts in the current window
-- ARGV[1]  limit: attempts allowed per window
-- ARGV[2]  window length in seconds
-- Returns  {allowed (1|0), seconds until the window ends}
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
if count > tonumber(ARGV[1]) then
  return {0, ttl}
end
return {1, ttl}
