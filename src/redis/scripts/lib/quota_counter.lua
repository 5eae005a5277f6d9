-- Shared by the scripts that spend the daily quota (send_admission.lua, reserve_quota.lua; prepended
-- when they are loaded, see src/redis/connect.ts). One MGET reads the tenant's day counter and its
-- directory version. A version Redis lost (a restart, its expiry, or it never existed) is set to a
-- value no cache can hold yet (Redis's clock in microseconds; changes set random ones), so every
-- cache reloads once. A counter Redis lost is seeded with `seed` (the day's count rebuilt from
-- Postgres; NX: a concurrent caller's seed wins), or left missing when the caller has none (-1).
-- Returns quota_used (nil: call again with a seed), version
local function quota_counter_and_version(quota_key, version_key, seed, counter_ttl, version_ttl)
  local stored = redis.call('MGET', quota_key, version_key)
  local quota_used = stored[1]
  local version = stored[2]
  if not version then
    local now = redis.call('TIME')
    version = 't' .. now[1] .. string.format('%06d', tonumber(now[2]))
    redis.call('SET', version_key, version, 'EX', version_ttl)
  end
  if not quota_used then
    if seed < 0 then
      return nil, version
    end
    redis.call('SET', quota_key, seed, 'EX', counter_ttl, 'NX')
    quota_used = redis.call('GET', quota_key)
  end
  return tonumber(quota_used), version
end
