-- Gives back units of a tenant's daily quota (sends refused or replayed after their admission).
-- Only a counter that still exists is decremented, and never below zero: a counter Redis lost is
-- rebuilt by the next admission from the day's accepted messages (send_admission.lua), and a DECR of
-- a missing key would write -1 with no TTL, which that admission would then trust.
-- KEYS[1]  the day's quota counter
-- ARGV[1]  units to give back (1 when absent)
-- Returns  the counter after the refund, or -1 when there was none to refund
local count = tonumber(redis.call('GET', KEYS[1]))
if count == nil then return -1 end
if count <= 0 then return 0 end
local units = tonumber(ARGV[1] or '1')
return redis.call('DECRBY', KEYS[1], math.min(count, units))
