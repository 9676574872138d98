-- BACKOFF: keep every worker away from a host for a while: it answered 429 or sent
-- Retry-After (reason 'throttled'), its robots.txt is unreachable ('robots'), or it is
-- down ('down', see FAIL). ARGV[1] key prefix, ARGV[2] host, ARGV[3] now (ms), ARGV[4]
-- minimum back-off (ms), ARGV[5] maximum (ms), ARGV[6] quiet period (ms) after which the
-- host's back-off level is forgiven, ARGV[7] Retry-After (ms, 0: none), ARGV[8] jitter
-- factor (>= 1), ARGV[9] reason, ARGV[10] give up after (ms, HOST_GIVE_UP_AFTER; 0:
-- never). The delay is Retry-After if given (capped at the maximum), else minimum *
-- 2^level times the jitter, capped (see includes/back_off.lua).
-- Returns the delay (ms).
--- @include "helpers"
--- @include "back_off"
give_up = tonumber(ARGV[10])
return back_off(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
    tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9])
