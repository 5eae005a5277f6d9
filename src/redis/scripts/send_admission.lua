-- Admission of one send (POST /messages), using lib/fixed_window.lua: the application's fixed one-second rate limit and the
-- tenant's daily per-channel quota, in one round trip. A quota unit is reserved here and given
-- back by the caller if the request does not end in a newly accepted message.
-- KEYS[1]  rate-limit hash of the application's send limit {w = window second, n = count}
-- KEYS[2]  quota counter of the tenant, channel and UTC day (same {tenant} hash tag as KEYS[1])
-- ARGV[1]  rate limit per second
-- ARGV[2]  daily quota
-- ARGV[3]  seconds the quota counter lives (past the day's end)
-- ARGV[4]  seed: the day's count rebuilt from Postgres, or -1 when the caller has none
-- Returns  {code, limit, remaining, reset_ms, reset_epoch_s, quota_used}
--          code 1 admitted, 0 rate limited, 2 quota exhausted, 3 counter missing: call again with a seed
local quota_used = redis.call('GET', KEYS[2])
if not quota_used then
  local seed = tonumber(ARGV[4])
  if seed < 0 then
    return {3, 0, 0, 0, 0, 0}
  end
  -- NX: a concurrent caller may have seeded it first; its value wins.
  redis.call('SET', KEYS[2], seed, 'EX', tonumber(ARGV[3]), 'NX')
  quota_used = redis.call('GET', KEYS[2])
end
quota_used = tonumber(quota_used)

local limit = tonumber(ARGV[1])
local allowed, remaining, reset_ms, reset_epoch = take_fixed_window(KEYS[1], limit)
if not allowed then
  return {0, limit, 0, reset_ms, reset_epoch, quota_used}
end
if quota_used >= tonumber(ARGV[2]) then
  return {2, limit, remaining, reset_ms, reset_epoch, quota_used}
end
quota_used = redis.call('INCR', KEYS[2])
return {1, limit, remaining, reset_ms, reset_epoch, quota_used}
