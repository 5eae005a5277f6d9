-- Admission of sends (POST /messages) of one tenant and UTC day, a batch at once: the api gathers
-- the sends of a turn of its event loop into one call (src/redis/coalesce.ts). For each send, in
-- order: its application's fixed one-second rate limit (lib/fixed_window.lua), a unit of the
-- tenant's daily per-channel quota and its Idempotency-Key claim. A quota unit is reserved here and
-- given back by the caller if the request does not end in a newly accepted message. The same call
-- reads the tenant's directory version, which tells the send path whether its cached senders and
-- templates are still current. One TIME, one MGET and one INCRBY serve the whole batch.
-- KEYS[1]      quota counter of the tenant, channel and UTC day
-- KEYS[2]      the tenant's directory version (same {tenant} hash tag), set anew by every change
-- KEYS[2i+1]   send i's window counter of its application's send limit (same {tenant} hash tag)
-- KEYS[2i+2]   send i's Idempotency-Key marker (same {tenant} hash tag); any key of the tenant when
--              it claims none (ARGV[2i+5] is empty)
-- ARGV[1]      daily quota
-- ARGV[2]      seconds the quota counter lives (past the day's end)
-- ARGV[3]      seed: the day's count rebuilt from Postgres, or -1 when the caller has none
-- ARGV[4]      seconds a directory version lives when this script has to create it
-- ARGV[5]      milliseconds an in-flight claim lives (a crashed request frees its key by then)
-- ARGV[2i+4]   send i's rate limit per second
-- ARGV[2i+5]   send i's in-flight marker to claim its key with (JSON naming its owner), or ''
-- Returns      one reply per send, in order:
--              {code, limit, remaining, reset_ms, reset_epoch_s, quota_used, directory_version, marker}
--              code 1 admitted (the key, if any, claimed), 0 rate limited, 2 quota exhausted,
--              3 counter missing: call again with a seed, 4 the key is taken: `marker` is its value
--              (in flight or done), and no quota unit was reserved
local sends = (#KEYS - 2) / 2
local replies = {}
local quota_used, version = quota_counter_and_version(
  KEYS[1], KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[2]), tonumber(ARGV[4]))
if not quota_used then
  for i = 1, sends do
    replies[i] = {3, 0, 0, 0, 0, 0, version, ''}
  end
  return replies
end

local quota = tonumber(ARGV[1])
local claim_ms = tonumber(ARGV[5])
local now = redis.call('TIME')
local reserved = 0
for i = 1, sends do
  local claim_key = KEYS[2 * i + 2]
  local limit = tonumber(ARGV[2 * i + 4])
  local marker = ARGV[2 * i + 5]
  local allowed, remaining, reset_ms, reset_epoch = take_fixed_window(KEYS[2 * i + 1], limit, now)
  if not allowed then
    replies[i] = {0, limit, 0, reset_ms, reset_epoch, quota_used, version, ''}
  elseif quota_used >= quota then
    replies[i] = {2, limit, remaining, reset_ms, reset_epoch, quota_used, version, ''}
  elseif marker ~= '' and not redis.call('SET', claim_key, marker, 'PX', claim_ms, 'NX') then
    -- A twin in flight, or a finished request: the caller answers 409 or replays; nothing is reserved.
    replies[i] = {4, limit, remaining, reset_ms, reset_epoch, quota_used, version, redis.call('GET', claim_key)}
  else
    quota_used = quota_used + 1
    reserved = reserved + 1
    replies[i] = {1, limit, remaining, reset_ms, reset_epoch, quota_used, version, ''}
  end
end
if reserved > 0 then
  redis.call('INCRBY', KEYS[1], reserved)
end
return replies
