-- LOAD: a worker loads hosts' oldest chunks from the spill store into their windows
-- (decision 0055).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'claim' or 'load'
-- ARGV[4] the worker's token (unique per worker)   ARGV[5] the host window
-- ARGV[6] hosts with a window at most (FRONTIER_ACTIVE_HOSTS; 0: no limit)
-- ARGV[7] '1': FRONTIER_ORDER importance (hosts may have ranked queues), else ''
-- claim: ARGV[8] claim time (ms)   ARGV[9] hosts at most
--   Takes up to ARGV[9] hosts: first those of 'refill' due by now (hosts with a window, or a
--   dropped host's: its chunks go to 'drops'), then, while fewer than ARGV[6] hosts are in the
--   ready heap (with those claimed here), the longest waiting of 'dormant' (scored by when
--   each may have a window: a window given back, EVICT, once its host is due); skips those
--   another worker holds a live claim on, and takes a paused host it meets out of 'dormant'
--   (no window for a host that is not crawled; HOLD's resume puts it back); claims the
--   host's oldest chunk, or all its chunks when the URLs it has on disk (hspilled) fit in
--   the room its window has (a host of a few URLs at a time: chunks of one or two URLs,
--   loaded together at the cost of one), or, for a host of 'refill' whose window ran dry
--   before this load (handed out faster than its chunks came: no politeness), as many of
--   its oldest chunks as DRY windows hold by their mean size (hspilled / chunks listed),
--   notes ``<token>:<id>,<id>...:<expiry>`` in
--   'lclaim' and puts the host in 'refill' at the expiry (another worker tries again
--   then). A host without chunks leaves both. Returns {host, id, host, id...}, a host's
--   chunks one after another, oldest first.
-- load: ARGV[8] default host interval (ms)   ARGV[9] max requests in flight per host (0: no
--   limit)   ARGV[10..] chunks read: host, chunk id, its entries (their count and their
--   lengths, 4 bytes each, big-endian, then the entries: chunks.py's ``uncompressed``), a
--   host's chunks one after another in the order claimed; for each: if the chunk is still
--   the host's oldest, the claim the caller's, and (after the host's first) the entries
--   loaded with it stay within DRY windows, its entries join the tail of the host's
--   window (a dropped host's go to 'drops' as its window does) and the chunk leaves
--   sc:<host> and the counter 'spilled'; then, once for the host's chunks loaded, the claim
--   ends, the host is ready (add_ready: unless paused or at its limit) and marked for its
--   next chunk if its window is still low.
-- Returns (load): for each chunk, 1 loaded (the caller deletes the chunk), 2 the chunk is no longer listed
-- (loaded before: the caller deletes it), 0 the claim was lost or the chunk passes DRY
-- windows (the chunk stays: another load takes it).
--- @include "helpers"
local prefix, now, verb, token = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
window = tonumber(ARGV[5])
active_hosts = tonumber(ARGV[6])
ranked_order = ARGV[7] == '1'
local refill = prefix .. K.refill
local claims = prefix .. K.load_claims
local PAUSED_MET = 64  -- paused hosts a claim may take out of 'dormant' beside the hosts it takes
local DRY = 4  -- a host whose window ran dry before its load came loads up to DRY windows' worth

local function claim()
    local claim_ms, most = tonumber(ARGV[8]), tonumber(ARGV[9])
    local out, hosts = {}, 0
    local dormant = prefix .. K.dormant
    -- the host's oldest chunk, or all of them if its URLs on disk fit in its window's room,
    -- or (``ran_dry``: a host of 'refill', its window empty) up to DRY windows of them,
    -- unless another worker loads them now; whether it was claimed
    local function take(host, ran_dry)
        local sc = prefix .. K.spilled .. host
        local claimed = redis.call('HGET', claims, host)
        if claimed and tonumber(string.match(claimed, ':(%d+)$')) > now then return false end
        local ids = redis.call('LRANGE', sc, 0, 1)  -- (the oldest two: whether it has more than one)
        if #ids == 0 then
            redis.call('ZREM', refill, host)
            redis.call('ZREM', dormant, host)
            redis.call('HDEL', claims, host)
            return false
        end
        if #ids > 1 then  -- the oldest, or all when they fit
            local on_disk = tonumber(redis.call('HGET', prefix .. K.host_spilled, host) or '0')
            local have = window_size(prefix, host)
            if on_disk <= window - have then
                ids = redis.call('LRANGE', sc, 0, -1)
            elseif ran_dry and have == 0 then  -- (as many as DRY windows hold, by its chunks' mean size)
                local most_ids = math.floor(DRY * window * redis.call('LLEN', sc) / on_disk)
                ids = redis.call('LRANGE', sc, 0, math.max(most_ids, 1) - 1)
            else
                ids = {ids[1]}
            end
        end
        redis.call('HSET', claims, host, string.format('%s:%s:%d', token, table.concat(ids, ','), now + claim_ms))
        redis.call('ZADD', refill, now + claim_ms, host)
        redis.call('ZREM', dormant, host)
        for _, id in ipairs(ids) do
            out[#out + 1] = host
            out[#out + 1] = id
        end
        hosts = hosts + 1
        return true
    end
    for _, host in ipairs(redis.call('ZRANGEBYSCORE', refill, '-inf', now, 'LIMIT', 0, most)) do
        take(host, true)
    end
    local room = most - hosts
    if active_hosts > 0 then room = math.min(room, active_hosts - redis.call('ZCARD', prefix .. K.ready)) end
    if room > 0 then
        -- a paused host met here leaves 'dormant', as a pause takes a host out of the ready
        -- heap: no window for a host that is not crawled (its resume puts it back)
        local paused = prefix .. K.hpaused
        local seen = redis.call('ZRANGEBYSCORE', dormant, '-inf', now, 'LIMIT', 0, room + PAUSED_MET)
        for _, host in ipairs(seen) do
            if room == 0 then break end
            if exists_once(prefix, K.hpaused) and redis.call('HEXISTS', paused, host) == 1 then
                redis.call('ZREM', dormant, host)
            elseif take(host) then
                room = room - 1
            end
        end
    end
    return out
end

local unspilled = 0  -- URLs that left the spill store in this call: the counter 'spilled' once (load)
-- the entries of a chunk read (see ARGV[10..]) appended to ``into``
local function chunk_entries(data, into)
    local n = struct.unpack('>I4', data)
    local at = 5 + 4 * n  -- (the first entry)
    for i = 0, n - 1 do
        local size = struct.unpack('>I4', data, 5 + 4 * i)
        into[#into + 1] = string.sub(data, at, at + size - 1)
        at = at + size
    end
end
-- the chunks read of one host, each {id, data, at}: its entries in ARGV[data], its status
-- to go in out[at]
local function load_host(host, chunks, out)
    local sc = prefix .. K.spilled .. host
    local claimed = redis.call('HGET', claims, host)
    local listed  -- ',<id>,<id>,...,': the chunks of the host claimed by the caller
    if claimed and string.find(claimed, token .. ':', 1, true) == 1 then
        listed = ',' .. string.match(claimed, '^[^:]*:([^:]*):') .. ','
    end
    local entries, loaded = {}, false
    for _, c in ipairs(chunks) do
        local status = 0
        -- a chunk the caller claimed is the host's oldest (but after a claim lost): popped,
        -- and put back if it is another; after the first, only while the window stays within
        -- DRY windows (the others stay listed, for a later load)
        local mine = listed and string.find(listed, ',' .. c.id .. ',', 1, true)
        if mine and loaded and #entries + struct.unpack('>I4', ARGV[c.data]) > DRY * window then
            listed, mine = nil, nil
        end
        local head
        if mine then head = redis.call('LPOP', sc) else head = redis.call('LINDEX', sc, 0) end
        if mine and head == c.id then
            chunk_entries(ARGV[c.data], entries)
            loaded, status = true, 1
        else
            if mine and head then redis.call('LPUSH', sc, head) end
            if head ~= c.id and not redis.call('LPOS', sc, c.id) then status = 2 end
        end
        out[c.at] = status
    end
    if not loaded then return end
    redis.call('HDEL', claims, host)
    redis.call('ZREM', refill, host)
    redis.call('ZREM', prefix .. K.dormant, host)
    local gone = #entries
    local more = redis.call('LLEN', sc) > 0
    if more then
        count_host(prefix, host, -gone)
    else  -- (the host's last chunk: its count ends, a chunk lost or not)
        gone = math.max(gone, tonumber(redis.call('HGET', prefix .. K.host_spilled, host) or '0'))
        redis.call('HDEL', prefix .. K.host_spilled, host)
        beyond_checked(prefix, host)
    end
    unspilled = unspilled + gone
    local twice = to_window(prefix, host, entries)
    if #entries > twice or has_queue(prefix, host) then make_ready(prefix, host, now) end
    top_up(prefix, host, now, more or nil)
end

local function load()
    default_interval = ARGV[8]
    max_flight = tonumber(ARGV[9])
    local out, i, n = {}, 10, 0  -- n: the chunks read so far
    local host, chunks = nil, {}  -- the host whose chunks come now, those read of it
    while i <= #ARGV do
        if ARGV[i] ~= host then
            if host then load_host(host, chunks, out) end
            host, chunks = ARGV[i], {}
        end
        n = n + 1
        chunks[#chunks + 1] = {id = ARGV[i + 1], data = i + 2, at = n}
        i = i + 3
    end
    if host then load_host(host, chunks, out) end
    if unspilled ~= 0 then redis.call('HINCRBY', prefix .. K.counters, 'spilled', -unspilled) end
    return out
end

if verb == 'claim' then return claim() end
return load()
