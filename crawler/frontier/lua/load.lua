-- LOAD: a worker loads hosts' oldest chunks from the spill store into their windows
-- (decision 0055).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'claim' or 'load'
-- ARGV[4] the worker's token (unique per worker)   ARGV[5] the host window
-- ARGV[6] hosts with a window at most (FRONTIER_ACTIVE_HOSTS; 0: no limit)
-- claim: ARGV[7] claim time (ms)   ARGV[8] hosts at most
--   Takes up to ARGV[8] hosts: first those of 'refill' due by now (hosts with a window, or a
--   dropped host's: its chunks go to 'drops'), then, while fewer than ARGV[6] hosts are in the
--   ready heap (with those claimed here), the longest waiting of 'dormant' (scored by when
--   each may have a window: a window given back, EVICT, once its host is due); skips those
--   another worker holds a live claim on, and takes a paused host it meets out of 'dormant'
--   (no window for a host that is not crawled; HOLD's resume puts it back); notes
--   ``<token>:<id>:<expiry>`` in 'lclaim' for the host's oldest chunk and puts the host in
--   'refill' at the expiry (another worker tries again then). A host without chunks leaves
--   both. Returns {host, id, host, id...}.
-- load: ARGV[7] default host interval (ms)   ARGV[8] max requests in flight per host (0: no
--   limit)   ARGV[9..] chunks read: host, chunk id, the number of its entries, the entries;
--   for each: if the chunk is still the host's oldest and the claim the caller's, its entries join the
--   tail of the host's window (a dropped host's go to 'drops' as its window does), the chunk
--   leaves sc:<host> and the counter 'spilled', and the host is ready (add_ready: unless
--   paused or at its limit) and marked for its next chunk if its window is still low.
-- Returns (load): for each chunk, 1 loaded (the caller deletes the chunk), 2 the chunk is no longer listed
-- (loaded before: the caller deletes it), 0 the claim was lost (the chunk stays: another
-- worker loads it).
--- @include "helpers"
local prefix, now, verb, token = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
window = tonumber(ARGV[5])
active_hosts = tonumber(ARGV[6])
local refill = prefix .. K.refill
local claims = prefix .. K.load_claims
local PAUSED_MET = 64  -- paused hosts a claim may take out of 'dormant' beside the hosts it takes

local function claim()
    local claim_ms, most = tonumber(ARGV[7]), tonumber(ARGV[8])
    local out = {}
    local dormant = prefix .. K.dormant
    -- the host's oldest chunk, unless another worker loads it now; whether it was claimed
    local function take(host)
        local id = redis.call('LINDEX', prefix .. K.spilled .. host, 0)
        local claimed = redis.call('HGET', claims, host)
        if claimed and tonumber(string.match(claimed, ':(%d+)$')) > now then return false end
        if not id then
            redis.call('ZREM', refill, host)
            redis.call('ZREM', dormant, host)
            redis.call('HDEL', claims, host)
            return false
        end
        redis.call('HSET', claims, host, string.format('%s:%s:%d', token, id, now + claim_ms))
        redis.call('ZADD', refill, now + claim_ms, host)
        redis.call('ZREM', dormant, host)
        out[#out + 1] = host
        out[#out + 1] = id
        return true
    end
    for _, host in ipairs(redis.call('ZRANGEBYSCORE', refill, '-inf', now, 'LIMIT', 0, most)) do
        take(host)
    end
    local room = most - #out / 2
    if active_hosts > 0 then room = math.min(room, active_hosts - redis.call('ZCARD', prefix .. K.ready)) end
    if room > 0 then
        -- a paused host met here leaves 'dormant', as a pause takes a host out of the ready
        -- heap: no window for a host that is not crawled (its resume puts it back)
        local paused = prefix .. K.hpaused
        local seen = redis.call('ZRANGEBYSCORE', dormant, '-inf', now, 'LIMIT', 0, room + PAUSED_MET)
        for _, host in ipairs(seen) do
            if room == 0 then break end
            if redis.call('HEXISTS', paused, host) == 1 then
                redis.call('ZREM', dormant, host)
            elseif take(host) then
                room = room - 1
            end
        end
    end
    return out
end

-- one chunk read, its entries ARGV[first..last]
local function load_one(host, id, first, last)
    local sc = prefix .. K.spilled .. host
    if redis.call('LINDEX', sc, 0) ~= id then
        if redis.call('LPOS', sc, id) then return 0 end
        return 2
    end
    local claimed = redis.call('HGET', claims, host)
    if not claimed or string.find(claimed, token .. ':' .. id .. ':', 1, true) ~= 1 then return 0 end
    redis.call('HDEL', claims, host)
    redis.call('LPOP', sc)
    redis.call('ZREM', refill, host)
    redis.call('ZREM', prefix .. K.dormant, host)
    local entries = {}
    for i = first, last do entries[#entries + 1] = ARGV[i] end
    local gone = #entries  -- (the host's last chunk: its count ends, a chunk lost or not)
    if redis.call('LLEN', sc) == 0 then
        gone = math.max(gone, tonumber(redis.call('HGET', prefix .. K.host_spilled, host) or '0'))
        beyond_checked(prefix, host)
    end
    count_spilled(prefix, host, -gone)
    to_window(prefix, host, entries)
    if has_queue(prefix, host) then make_ready(prefix, host, now) end
    top_up(prefix, host, now)
    return 1
end

local function load()
    default_interval = ARGV[7]
    max_flight = tonumber(ARGV[8])
    local out, i = {}, 9
    while i <= #ARGV do
        local count = tonumber(ARGV[i + 2])
        out[#out + 1] = load_one(ARGV[i], ARGV[i + 1], i + 3, i + 2 + count)
        i = i + 3 + count
    end
    return out
end

if verb == 'claim' then return claim() end
return load()
