-- HOLD: the operator pauses or resumes the crawl, or one host (``scrapy frontier pause``),
-- or drops a host (``scrapy frontier drop``).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'pause', 'resume', 'drop' or 'more' (a
-- host only: the next chunk of its drop)
-- ARGV[4] a host (politeness key), or '' for the whole crawl
-- ARGV[5] max requests in flight per host (0: no limit)   ARGV[6] default host interval (ms)
-- The crawl paused: the key 'paused' holds the time, and POP hands out nothing while it
-- exists (acknowledgements, landings and expired leases go on). A host paused: 'hpaused'
-- holds it with the time, it leaves the ready heap, and add_ready keeps it out (every
-- script that would bring it back asks there); resumed, it rejoins the heap at its hnext
-- time when it has URLs queued. What was handed out before goes on: leases are renewed,
-- pages are stored and acknowledged. A host dropped: 'hdropped' holds it (``<ms>:operator``),
-- it leaves the heap (and the paused ones), and its back queue, ranked queue and delayed
-- retries go to 'drops' (as every URL of it that comes up later: see held), to be recorded
-- as not fetched, at most DROP_CHUNK (helpers) a call: the caller asks 'more' until none is
-- left (and POP moves a chunk of a drop under way at each call, should the caller stop);
-- resumed, a dropped (or given up) host is crawled again from its next URL (what its drop
-- had not moved yet stays queued).
-- Returns 1 if the state changed, 0 if it was so already; 'drop' returns 2 when the host
-- has entries left to move; 'more' returns 1 while entries are left after its chunk, else 0.
--- @include "helpers"
local prefix, now, verb, host = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
max_flight = tonumber(ARGV[5])
default_interval = ARGV[6]
if host == '' then
    if verb == 'pause' then return redis.call('SETNX', prefix .. K.paused, now) end
    return redis.call('DEL', prefix .. K.paused)
end
if verb == 'drop' then
    if redis.call('HSETNX', prefix .. K.hdropped, host, now .. ':operator') == 0 then return 0 end
    present[K.hdropped] = true
    redis.call('HDEL', prefix .. K.hpaused, host)
    unready(prefix, host)
    if drop_queued(prefix, host, DROP.operator, true) then return 1 end
    return 2
end
if verb == 'more' then
    if redis.call('ZSCORE', prefix .. K.dropping, host) and next_drop_chunk(prefix, host) then return 1 end
    return 0
end
if verb == 'pause' then
    if redis.call('HSETNX', prefix .. K.hpaused, host, now) == 0 then return 0 end
    present[K.hpaused] = true
    unready(prefix, host)
    return 1
end
local resumed = redis.call('HDEL', prefix .. K.hpaused, host) + redis.call('HDEL', prefix .. K.hdropped, host)
if resumed == 0 then return 0 end
redis.call('HDEL', prefix .. K.hdown, host)
redis.call('ZREM', prefix .. K.dropping, host)
if has_queue(prefix, host) then make_ready(prefix, host, now) end
wants_load(prefix, host, now)  -- (its chunks on disk, if it has any)
return 1
