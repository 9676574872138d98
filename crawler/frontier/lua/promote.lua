-- PROMOTE: move submitted URLs that are queued already to the head of their hosts' back
-- queues (a submission jumps the queue: crawler/frontier/submit.py).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] forget promotions older than this (ms)
-- ARGV[4] max requests in flight per host (0: no limit)   ARGV[5] default host interval (ms)
-- ARGV[6..] one value per URL: host SEP payload (the payload begins with the URL and SEP,
--           or is the URL: codec.py's plain forms)
-- A queued URL sits in a front queue, a back queue or the delayed set, where finding it
-- would mean reading the queue; instead a copy of it goes to the head of its host's back
-- queue and the URL into 'promoted' (URL -> now): POP hands out whichever copy comes up
-- first and drops the other. A URL in flight (a lease holds it: the index of leases by URL,
-- 'leased', counts it; see helpers), or whose promoted copy was handed out, is not promoted
-- again; one promoted and not yet handed out is at the head of its queue already. Nothing
-- here reads a whole collection: a call costs the same whatever the leases held.
-- Returns one status per URL: 1 promoted, 0 not (in flight).
-- Promotions older than ARGV[3] are forgotten (a URL promoted when it was queued nowhere:
-- a page whose record the caller did not find, fetched by another worker meanwhile).
--- @include "helpers"
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local promoted = prefix .. K.promoted
max_flight = tonumber(ARGV[4])
default_interval = ARGV[5]
local horizon = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', promoted, '(' .. -horizon, '(' .. horizon)
local out, added = {}, 0
for i = 6, #ARGV do
    local parts = split(ARGV[i], 2)
    local host, payload = parts[1], parts[2]
    local url = split(payload, 2)[1]
    local at = redis.call('ZSCORE', promoted, url)
    local flying = redis.call('HEXISTS', prefix .. K.leased, url) == 1
    if flying or (at and tonumber(at) < 0) then  -- in flight, or just handed out
        out[#out + 1] = 0
    elseif at then  -- promoted already, at the head of its queue
        out[#out + 1] = 1
    else
        redis.call('ZADD', promoted, now, url)
        redis.call('LPUSH', prefix .. K.back .. host, payload)
        make_ready(prefix, host, now)
        rush(prefix, host)
        added = added + 1
        out[#out + 1] = 1
    end
end
if added > 0 then redis.call('HINCRBY', prefix .. K.counters, 'queued', added) end
return out
