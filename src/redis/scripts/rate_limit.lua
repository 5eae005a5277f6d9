-- Fixed one-second window rate limit (SPEC §8); uses lib/fixed_window.lua.
-- KEYS[1]  the window counter (lib/fixed_window.lua)
-- ARGV[1]  limit: requests allowed per second
-- Returns  {allowed (1|0), limit, remaining, reset_ms (until the window ends), reset_epoch_s}
local limit = tonumber(ARGV[1])
local allowed, remaining, reset_ms, reset_epoch = take_fixed_window(KEYS[1], limit)
return {allowed and 1 or 0, limit, remaining, reset_ms, reset_epoch}
