-- Gives an Idempotency-Key's in-flight claim back if it is still the caller's (send_admission.lua
-- made it): the read and the delete in one step, so a claim that lapsed and was taken by another
-- request in between is never deleted with it.
-- KEYS[1]  the key's marker
-- ARGV[1]  the claim's owner token (the in-flight marker's `t`)
-- Returns  1 when deleted; 0 when there is none, or it is not ours (a done marker, another owner's)
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local ok, marker = pcall(cjson.decode, raw)
if not ok or type(marker) ~= 'table' or marker.s ~= 'p' or marker.t ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
