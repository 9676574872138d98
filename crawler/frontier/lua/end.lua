-- END: a response from a host (or a failure to get one) has just ended, for a request
-- the frontier does not track (robots.txt and its redirect hops): the host's next slot
-- counts from now, not from when the request left, and its next hand-out is no sooner
-- than now + its interval (so that the frontier and the limiter agree). ARGV[1] key
-- prefix, ARGV[2] host, ARGV[3] now (ms), ARGV[4] default interval (ms), ARGV[5] the
-- default interval (ms) of an address class, -1 without politeness per address: the host's
-- class (helpers: politeness per address) counts from now likewise.
--- @include "helpers"
local prefix, host, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
default_interval = ARGV[4]
if tonumber(redis.call('HGET', prefix .. K.hlast, host) or '0') < now then
    redis.call('HSET', prefix .. K.hlast, host, now)
end
local nxt = now + interval_of(prefix, host)
if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < nxt then
    redis.call('HSET', prefix .. K.hnext, host, nxt)
    not_before(prefix, host, nxt)
end
if tonumber(ARGV[5]) >= 0 then
    local record = redis.call('HGET', prefix .. K.haddr, host)
    if record then
        local class = split(record, 2)[1]
        class_ended(prefix, class, class_interval(prefix, class, ARGV[5]), now)
    end
end
