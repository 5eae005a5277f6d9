-- Reserves up to ARGV[5] units of a tenant's daily per-channel quota at once (POST /messages/batch:
-- one unit per item, the batch's rate unit spent by its route's policy). Units of items that do not
-- end in a new message are given back by the caller (refund_quota.lua with a count). The counter
-- is seeded like send_admission.lua's; the same round trip reads the tenant's directory version.
-- KEYS[1]  quota counter of the tenant, channel and UTC day
-- KEYS[2]  the tenant's directory version (same {tenant} hash tag)
-- ARGV[1]  daily quota
-- ARGV[2]  seconds the quota counter lives (past the day's end)
-- ARGV[3]  seed: the day's count rebuilt from Postgres, or -1 when the caller has none
-- ARGV[4]  seconds a directory version lives when this script has to create it
-- ARGV[5]  units wanted
-- Returns  {code, granted, quota_used, directory_version}: code 1 reserved `granted` (0..wanted),
--          3 counter missing: call again with a seed
local stored = redis.call('MGET', KEYS[1], KEYS[2])
local quota_used = stored[1]
local version = stored[2]
if not version then
  local now = redis.call('TIME')
  version = 't' .. now[1] .. string.format('%06d', tonumber(now[2]))
  redis.call('SET', KEYS[2], version, 'EX', tonumber(ARGV[4]))
end
if not quota_used then
  local seed = tonumber(ARGV[3])
  if seed < 0 then
    return {3, 0, 0, version}
  end
  redis.call('SET', KEYS[1], seed, 'EX', tonumber(ARGV[2]), 'NX')
  quota_used = redis.call('GET', KEYS[1])
end
quota_used = tonumber(quota_used)
local granted = math.min(tonumber(ARGV[5]), tonumber(ARGV[1]) - quota_used)
if granted <= 0 then
  return {1, 0, quota_used, version}
end
quota_used = redis.call('INCRBY', KEYS[1], granted)
return {1, granted, quota_used, version}
