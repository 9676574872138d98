-- FAIL: a fetch of a leased URL failed; judge the host (the URL itself is retried on its
-- own schedule by the caller). ARGV[1] key prefix, ARGV[2] host, ARGV[3] now (ms),
-- ARGV[4] kind: 'url' (a 5xx or a timeout: this URL failed) or 'down' (connection
-- refused, DNS failure: the host failed), ARGV[5] a tag of the URL (distinct URLs,
-- distinct tags), ARGV[6] slow-down factor per failure (x2), ARGV[7] largest factor,
-- ARGV[8] distinct URLs failing in a row (no answer between) that make the host down (0: never),
-- ARGV[9] minimum back-off (ms), ARGV[10] maximum, ARGV[11] quiet period, ARGV[12] jitter,
-- ARGV[13] default host interval (ms), ARGV[14] give up after (ms; see includes/back_off.lua).
-- A 'url' failure multiplies the host's slow-down factor (hslow; its interval is
-- multiplied by it, for every worker, until answers bring it back: see recover) and the
-- host's next hand-out moves to now + the slowed interval. hfail keeps the tags of the
-- distinct URLs that failed since the host last answered; a 'down' failure, or as many
-- distinct failing URLs as ARGV[8], backs the host off (reason 'down'): it is probed
-- again, one request at a time, when the back-off ends.
-- Returns {state, delay (ms), factor x 1000}: state 0 slowed, 1 down (backed off).
--- @include "helpers"
--- @include "back_off"
local prefix, host, now, kind, tag = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local down_after = tonumber(ARGV[8])
default_interval = ARGV[13]
give_up = tonumber(ARGV[14])
local f = tonumber(redis.call('HGET', prefix .. K.hslow, host) or '1')
if kind == 'url' then
    f = math.min(f * tonumber(ARGV[6]), tonumber(ARGV[7]))
    if f > 1 then
        redis.call('HSET', prefix .. K.hslow, host, string.format('%.3f', f))
        present[K.hslow] = true
    end
end
local tags = {}
local known = false
for t in string.gmatch(redis.call('HGET', prefix .. K.hfail, host) or '', '[^,]+') do
    tags[#tags + 1] = t
    if t == tag then known = true end
end
if not known then tags[#tags + 1] = tag end
while #tags > math.max(down_after, 1) do table.remove(tags, 1) end
redis.call('HSET', prefix .. K.hfail, host, table.concat(tags, ','))
present[K.hfail] = true
if kind == 'down' or (down_after > 0 and #tags >= down_after) then
    local delay = back_off(prefix, host, now, tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]), 0,
        tonumber(ARGV[12]), 'down')
    return {1, delay, math.floor(f * 1000)}
end
local nxt = now + interval_of(prefix, host)
if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < nxt then
    redis.call('HSET', prefix .. K.hnext, host, nxt)
end
not_before(prefix, host, nxt)
return {0, 0, math.floor(f * 1000)}
