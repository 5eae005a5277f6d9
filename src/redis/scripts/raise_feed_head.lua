-- Raises one tenant's feed head (src/feed/heads.ts), never lowers it: a slower sequencer that
-- committed earlier, or a full sync that read feed_heads before the latest tick, may arrive last.
-- KEYS[1]  the tenant's feed head, "epoch:last_seq"
-- ARGV[1]  epoch the tenant's cursors carry
-- ARGV[2]  last feed position committed in that epoch
-- Returns  1 when raised, 0 when the stored head is already at or past (epoch, last_seq)
-- A later epoch wins whatever its position (an operator bumped it: older cursors restart at 0).
local epoch = tonumber(ARGV[1])
local seq = tonumber(ARGV[2])
local stored = redis.call('GET', KEYS[1])
if stored then
  local e, s = string.match(stored, '^(%d+):(%d+)$')
  e, s = tonumber(e), tonumber(s)
  if e and (e > epoch or (e == epoch and s >= seq)) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
return 1
