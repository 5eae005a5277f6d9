-- Reserves up to ARGV[5] units of a tenant's daily per-channel quota at once (POST /messages/batch:
-- one unit per item, the batch's rate unit spent by its route's policy). Units of items that do not
-- end in a new message are given back by the caller (refund_quota.lua with a count). The counter
-- is seeded like send_admission.lua's (lib/quota_counter.lua); the same round trip reads the
-- tenant's directory version.
-- KEYS[1]  quota counter of the tenant, channel and UTC day
-- KEYS[2]  the tenant's directory version (same {tenant} hash tag)
-- ARGV[1]  daily quota
-- ARGV[2]  seconds the quota counter lives (past the day's end)
-- ARGV[3]  seed: the day's count rebuilt from Postgres, or -1 when the caller has none
-- ARGV[4]  seconds a directory version lives when this script has to create it
-- ARGV[5]  units wanted
-- Returns  {code, granted, quota_used, directory_version}: code 1 reserved `granted` (0..wanted),
--          3 counter missing: call again with a seed
local quota_used, version = quota_counter_and_version(
  KEYS[1], KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[2]), tonumber(ARGV[4]))
if not quota_used then
  return {3, 0, 0, version}
end
local granted = math.min(tonumber(ARGV[5]), tonumber(ARGV[1]) - quota_used)
if granted <= 0 then
  return {1, 0, quota_used, version}
end
quota_used = redis.call('INCRBY', KEYS[1], granted)
return {1, granted, quota_used, version}
