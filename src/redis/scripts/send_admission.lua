-- Admission of one send (POST /messages), using lib/fixed_window.lua: the application's fixed one-second rate limit, the
-- tenant's daily per-channel quota and the Idempotency-Key claim, in one round trip. A quota unit is
-- reserved here and given back by the caller if the request does not end in a newly accepted
-- message. The same round trip reads the tenant's directory version, which tells the send path
-- whether its cached senders and templates are still current.
-- KEYS[1]  window counter of the application's send limit (lib/fixed_window.lua)
-- KEYS[2]  quota counter of the tenant, channel and UTC day (same {tenant} hash tag as KEYS[1])
-- KEYS[3]  the tenant's directory version (same {tenant} hash tag), set anew by every change
-- KEYS[4]  the Idempotency-Key's marker (same {tenant} hash tag); any key of the tenant when
--          ARGV[7] is empty (a request without the header: no claim)
-- ARGV[1]  rate limit per second
-- ARGV[2]  daily quota
-- ARGV[3]  seconds the quota counter lives (past the day's end)
-- ARGV[4]  seed: the day's count rebuilt from Postgres, or -1 when the caller has none
-- ARGV[5]  seconds a directory version lives when this script has to create it
-- ARGV[6]  milliseconds an in-flight claim lives (a crashed request frees its key by then)
-- ARGV[7]  the in-flight marker to claim KEYS[4] with (JSON naming its owner), or '' for no claim
-- Returns  {code, limit, remaining, reset_ms, reset_epoch_s, quota_used, directory_version, marker}
--          code 1 admitted (the key, if any, claimed), 0 rate limited, 2 quota exhausted,
--          3 counter missing: call again with a seed, 4 the key is taken: `marker` is its value
--          (in flight or done), and no quota unit was reserved
-- One MGET for both reads keeps the commands per send as they were (lib/quota_counter.lua).
local quota_used, version = quota_counter_and_version(
  KEYS[2], KEYS[3], tonumber(ARGV[4]), tonumber(ARGV[3]), tonumber(ARGV[5]))
if not quota_used then
  return {3, 0, 0, 0, 0, 0, version, ''}
end

local limit = tonumber(ARGV[1])
local allowed, remaining, reset_ms, reset_epoch = take_fixed_window(KEYS[1], limit)
if not allowed then
  return {0, limit, 0, reset_ms, reset_epoch, quota_used, version, ''}
end
if quota_used >= tonumber(ARGV[2]) then
  return {2, limit, remaining, reset_ms, reset_epoch, quota_used, version, ''}
end
if ARGV[7] ~= '' then
  -- A twin in flight, or a finished request: the caller answers 409 or replays; nothing is reserved.
  if not redis.call('SET', KEYS[4], ARGV[7], 'PX', tonumber(ARGV[6]), 'NX') then
    return {4, limit, remaining, reset_ms, reset_epoch, quota_used, version, redis.call('GET', KEYS[4])}
  end
end
quota_used = redis.call('INCR', KEYS[2])
return {1, limit, remaining, reset_ms, reset_epoch, quota_used, version, ''}
