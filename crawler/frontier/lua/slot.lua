-- SLOT: the rate limiter's atomic step (Aragog's lastScheduledFetchTime), run just before
-- every request leaves a worker. ARGV[1] key prefix, ARGV[2] host, ARGV[3] now (ms),
-- ARGV[4] default interval (ms), ARGV[5] longest wait (ms) a request may take,
-- ARGV[6] the operator's override of the host's interval (ms, '' for none; it is stored
-- in hdelay, so that the frontier's hand-outs follow it too), ARGV[7] not before (ms:
-- the due time the frontier handed the request out with, 0 for none), ARGV[8] the default
-- interval (ms) of an address class, -1 without politeness per address.
-- slot = max(now, not before, last + interval, end of the host's back-off), interval from the
-- override, else hdelay (robots.txt Crawl-delay), else the default, times the host's
-- slow-down factor (hslow); ``last`` (hlast) is the later of the last slot taken and the
-- end of the last response (END). When the slot is at most the longest wait away, it is
-- taken (hlast = slot) and the caller waits for it; otherwise nothing is taken and the
-- host's next hand-out time (hnext, and its score in the ready heap) moves to the slot,
-- so the caller can give the request back to the frontier. Returns the slot (ms).
local prefix, host, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local interval = redis.call('HGET', prefix .. K.hdelay, host)
if ARGV[6] ~= '' and interval ~= ARGV[6] then
    interval = ARGV[6]
    redis.call('HSET', prefix .. K.hdelay, host, interval)
end
interval = tonumber(interval or ARGV[4])
local f = redis.call('HGET', prefix .. K.hslow, host)
if f then interval = math.floor(interval * tonumber(f)) end
local last = redis.call('HGET', prefix .. K.hlast, host)
local slot = math.max(now, tonumber(ARGV[7]))
if last and tonumber(last) + interval > slot then slot = tonumber(last) + interval end
local back = redis.call('HGET', prefix .. K.hback, host)
if back then
    local until_ms = tonumber(string.match(back, '^%d+:%d+:(%d+)'))
    if until_ms > slot then slot = until_ms end
end
-- by address (ARGV[8] >= 0: FRONTIER_ADDRESS_POLITENESS, the default interval of an address
-- class): no sooner than the class's interval after the last slot any host of it took
local class = nil
if tonumber(ARGV[8]) >= 0 then
    local record = redis.call('HGET', prefix .. K.haddr, host)
    if record then
        class = string.sub(record, 1, string.find(record, '\031', 1, true) - 1)
        local a_last = redis.call('HGET', prefix .. K.alast, class)
        local a_interval = tonumber(redis.call('HGET', prefix .. K.adelay, class) or ARGV[8])
        if a_last and tonumber(a_last) + a_interval > slot then slot = tonumber(a_last) + a_interval end
    end
end
if slot - now <= tonumber(ARGV[5]) then
    redis.call('HSET', prefix .. K.hlast, host, slot)
    if class then redis.call('HSET', prefix .. K.alast, class, slot) end
else
    if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < slot then
        redis.call('HSET', prefix .. K.hnext, host, slot)
    end
    -- (not_before's three calls: SLOT, run before every request, goes without the helpers)
    redis.call('ZADD', prefix .. K.ready, 'XX', 'GT', slot, host)
    redis.call('ZADD', prefix .. K.rush, 'XX', 'GT', slot, host)
    redis.call('ZADD', prefix .. K.keen, 'XX', 'GT', slot, host)
end
return slot
