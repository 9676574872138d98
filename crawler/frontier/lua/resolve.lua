-- RESOLVE: hosts' addresses, resolved once for every worker (FRONTIER_ADDRESS_POLITENESS;
-- see helpers: politeness per address, and POP's address gate).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'claim' or 'commit'
-- ARGV[4] max requests in flight per host (0: no limit)   ARGV[5] default host interval (ms)
-- claim:  ARGV[6] claim time (ms)   ARGV[7] hosts at most
--   Takes up to ARGV[7] hosts due by now: first of 'resolve' (hosts POP met without an
--   address: work waiting for a look-up), then of 'refresh' (hosts with one: host -> its
--   expiry), each due again ARGV[6] later in its set (a worker that dies with its claim
--   leaves the host to the next claim). A host with nothing queued or in flight is not
--   looked up (its address, kept, is refreshed when it has URLs again). Returns {host,
--   known, ...}: known '1' when the host has an address already, '0' when it waits for one.
-- commit: ARGV[6..] (host, class, address, expiry ms, interval ms, cap) of each host
--   resolved (interval and cap: the class's own, from CRAWL_RULES' address entries; '' for
--   none, which forgets any it had): its record ('haddr': class SEP address SEP expiry),
--   its refresh at the expiry; a host that waited for its address goes back into the ready
--   heap. A host moving to another class takes its next hand-outs there; its leases in
--   flight give back their own class's place (lclass). An address '' (the host did not
--   resolve) changes no record: the host is looked up again at the expiry (in 'refresh'
--   when it has an address, else in 'resolve'). Returns how many were recorded.
-- A host that does not resolve is the caller's to report as down (FAIL 'down') when it has
-- no address yet; it waits out of the heap meanwhile. One that has keeps it.
-- Only 'resolve' is work a worker waits for (POP's next_due, the outlook): a refresh is not.
--- @include "helpers"
local prefix, now, verb = ARGV[1], tonumber(ARGV[2]), ARGV[3]
max_flight = tonumber(ARGV[4])
default_interval = ARGV[5]
local resolve, refresh = prefix .. K.resolve, prefix .. K.refresh

local function wanted(host)
    return has_queue(prefix, host)
        or redis.call('EXISTS', prefix .. K.spilled .. host, prefix .. K.buffer .. host) > 0
        or redis.call('HEXISTS', prefix .. K.hflight, host) == 1
end

local function claim()
    local claim_ms, most = tonumber(ARGV[6]), tonumber(ARGV[7])
    local out = {}
    for _, key in ipairs({resolve, refresh}) do
        for _, host in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', 0, most - #out / 2)) do
            if wanted(host) then
                redis.call('ZADD', key, now + claim_ms, host)
                out[#out + 1] = host
                out[#out + 1] = redis.call('HEXISTS', prefix .. K.haddr, host) == 1 and '1' or '0'
            else
                redis.call('ZREM', key, host)
            end
        end
        if #out / 2 >= most then break end
    end
    return out
end

local function commit()
    local recorded = 0
    for i = 6, #ARGV, 6 do
        local host, class, address, expiry = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
        if address ~= '' then
            redis.call('ZREM', resolve, host)
            redis.call('ZADD', refresh, expiry, host)
            redis.call('HSET', prefix .. K.haddr, host, class .. SEP .. address .. SEP .. expiry)
            for j, key in ipairs({K.adelay, K.alimit}) do
                if ARGV[i + 3 + j] == '' then
                    redis.call('HDEL', prefix .. key, class)
                else
                    redis.call('HSET', prefix .. key, class, ARGV[i + 3 + j])
                end
            end
            if has_queue(prefix, host) then make_ready(prefix, host, now) end
            recorded = recorded + 1
        elseif redis.call('HEXISTS', prefix .. K.haddr, host) == 1 then
            redis.call('ZADD', refresh, expiry, host)
        else
            redis.call('ZADD', resolve, expiry, host)
        end
    end
    return recorded
end

if verb == 'claim' then return claim() end
return commit()
