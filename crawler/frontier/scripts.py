"""The frontier's Lua scripts. Each runs atomically in Redis in one round trip.

All keys of a crawl share the prefix ``crawl:{NAME}:`` (see keys.py). The scripts
build per-host key names from that prefix, so they are passed the prefix rather than
every key; all keys of a crawl hash to one Redis Cluster slot through the hash tag.
Times are integer milliseconds given by the caller (``now``), so that every worker's
clock enters only as the "now" of its own call.

Entry formats:
    front queue entry   ``<host>\\x1f<payload>``
    back queue entry    ``<payload>``, or ``\\x1d<attempt>\\x1f<payload>`` for a URL whose
                        lease expired before (``attempt`` >= 2)
    lease data          ``<attempt>\\x1f<host>\\x1f<payload>``
"""

# Shared Lua helpers, prepended to the scripts that need them.
_HELPERS = r"""
local SEP = '\031'
local function split(s, n)
    -- split s on SEP into at most n parts (the last part keeps any SEP)
    local parts, start = {}, 1
    for _ = 1, n - 1 do
        local i = string.find(s, SEP, start, true)
        if not i then break end
        parts[#parts + 1] = string.sub(s, start, i - 1)
        start = i + 1
    end
    parts[#parts + 1] = string.sub(s, start)
    return parts
end
-- put a host into the ready heap (if absent), due no earlier than its hnext time;
-- returns the score it has
local function make_ready(prefix, host, now)
    local score = redis.call('ZSCORE', prefix .. 'ready', host)
    if score then return tonumber(score) end
    local nxt = tonumber(redis.call('HGET', prefix .. 'hnext', host) or '0')
    if nxt < now then nxt = now end
    redis.call('ZADD', prefix .. 'ready', nxt, host)
    return nxt
end
"""

# PUSH: admit a batch of URLs into the frontier.
#
# ARGV[1]  key prefix            ARGV[2]  filter generation G the caller hashed for
# ARGV[3]  capacity of filter G-1 ARGV[4]  comma list of k (bits per URL) of filters 0..G-1
# ARGV[5]  max URLs per host (0: no limit)   ARGV[6]  now (ms)
# ARGV[7]  number of entries, then per entry 5 + sum(k) values:
#          flags   'f' = check and update URL-seen; 'b' = straight into the host's back
#                  queue at its head (follow-ups: retries, redirects)
#          host    politeness key            level  front queue level (0 = highest)
#          payload opaque request encoding   lease  lease id this entry replaces, or ''
#          positions: k_0 bit offsets into seen:0, then k_1 into seen:1, ...
# Returns: -1 if G is not the current generation (caller reloads and retries; nothing
#          was changed), else one status per entry processed: 1 added, 0 already seen,
#          2 refused (host reached max URLs). A replaced lease is released in every case.
#          When an entry fills filter G-1, the script starts filter G and stops there:
#          fewer statuses than entries means "reload the generation and send the rest".
# Atomic: the seen test, the filter update and the enqueue of each URL happen together,
#         so a URL enters the frontier at most once however many workers push it.
PUSH = (
    _HELPERS
    + r"""
local prefix = ARGV[1]
local gen = tonumber(ARGV[2])
if tonumber(redis.call('HGET', prefix .. 'seen:meta', 'gen') or '1') ~= gen then
    return -1
end
local cap = tonumber(ARGV[3])
local ks = {}
for k in string.gmatch(ARGV[4], '%d+') do ks[#ks + 1] = tonumber(k) end
local maxhost = tonumber(ARGV[5])
local now = tonumber(ARGV[6])
local n = tonumber(ARGV[7])
local npos = 0
for _, k in ipairs(ks) do npos = npos + k end
local out = {}
local a = 8
local added = 0
local full = false
for e = 1, n do
    local flags, host, level, payload, lease = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
    local p = a + 5
    a = p + npos
    local status = 1
    local check = string.find(flags, 'f', 1, true) ~= nil
    if check then
        local off = p
        for i, k in ipairs(ks) do
            local key = prefix .. 'seen:' .. (i - 1)
            local all = true
            for j = off, off + k - 1 do
                if redis.call('GETBIT', key, ARGV[j]) == 0 then all = false; break end
            end
            off = off + k
            if all then status = 0; break end
        end
    end
    if status == 1 and check and maxhost > 0 then
        if tonumber(redis.call('HGET', prefix .. 'hpages', host) or '0') >= maxhost then
            status = 2
        end
    end
    if status == 1 then
        if check then
            local key = prefix .. 'seen:' .. (gen - 1)
            for j = p + npos - ks[gen], p + npos - 1 do
                redis.call('SETBIT', key, ARGV[j], 1)
            end
            local cnt = redis.call('HINCRBY', prefix .. 'seen:meta', 'n:' .. (gen - 1), 1)
            if cnt >= cap then
                redis.call('HSET', prefix .. 'seen:meta', 'gen', gen + 1)
                full = true
            end
            redis.call('HINCRBY', prefix .. 'hpages', host, 1)
        end
        if string.find(flags, 'b', 1, true) then
            redis.call('LPUSH', prefix .. 'bq:' .. host, payload)
            make_ready(prefix, host, now)
        else
            redis.call('RPUSH', prefix .. 'fq:' .. level, host .. SEP .. payload)
        end
        added = added + 1
    end
    if lease ~= '' and redis.call('ZREM', prefix .. 'leases', lease) == 1 then
        redis.call('HDEL', prefix .. 'lease:data', lease)
        redis.call('HINCRBY', prefix .. 'counters', 'acked', 1)
    end
    out[e] = status
    if full then break end
end
if added > 0 then
    redis.call('HINCRBY', prefix .. 'counters', 'queued', added)
    redis.call('HINCRBY', prefix .. 'counters', 'pushed', added)
end
return out
"""
)

# POP: lease up to n URLs from hosts that are due.
#
# ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] n   ARGV[4] lease time (ms)
# ARGV[5] default host interval (ms)      ARGV[6] max front-queue entries moved per call
# ARGV[7] comma list of front queue weights, level 0 first
# ARGV[8] max attempts of one URL whose leases keep expiring (0: no limit)
# Steps, all in one atomic call:
#   1. expired leases (up to 100) go back to the head of their host's back queue, or are
#      abandoned (counted) after max attempts; a lease whose expiry is 0 was given back
#      by its worker (release) and does not count as an attempt;
#   2. refill: while fewer than n hosts are due, move entries from the front queues to
#      their back queues (weighted round robin over the levels, so a higher level is
#      preferred but a lower one is never starved); a host new to the heap is due at
#      max(now, its hnext time);
#   3. hand out one URL from each of the first n due hosts; each such host's next time
#      becomes now + its interval (hdelay or the default); a host whose back queue is
#      now empty leaves the heap but keeps its hnext time;
#   4. lease each handed-out URL until now + lease time.
# Returns {next_due, id1, payload1, id2, payload2, ...}; next_due is the earliest time
# (ms) any host in the heap is due, or -1 when the heap is empty.
POP = (
    _HELPERS
    + r"""
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local lease_ms = tonumber(ARGV[4])
local default_interval = tonumber(ARGV[5])
local refill_max = tonumber(ARGV[6])
local weights = {}
for w in string.gmatch(ARGV[7], '%d+') do weights[#weights + 1] = tonumber(w) end
local max_attempts = tonumber(ARGV[8])
local ready = prefix .. 'ready'
local counters = prefix .. 'counters'

-- 1. expired leases
local expired = redis.call('ZRANGEBYSCORE', prefix .. 'leases', '-inf', now, 'WITHSCORES', 'LIMIT', 0, 100)
for x = 1, #expired, 2 do
    local id = expired[x]
    local data = redis.call('HGET', prefix .. 'lease:data', id)
    redis.call('ZREM', prefix .. 'leases', id)
    redis.call('HDEL', prefix .. 'lease:data', id)
    if data then
        local parts = split(data, 3)
        local attempt = tonumber(parts[1])
        -- score 0 marks a lease given back by its worker (release), not a failed attempt
        if tonumber(expired[x + 1]) > 0 then attempt = attempt + 1 end
        if max_attempts > 0 and attempt > max_attempts then
            redis.call('HINCRBY', counters, 'abandoned', 1)
        else
            local entry = parts[3]
            if attempt > 1 then entry = '\029' .. attempt .. SEP .. entry end
            redis.call('LPUSH', prefix .. 'bq:' .. parts[2], entry)
            make_ready(prefix, parts[2], now)
            redis.call('HINCRBY', counters, 'queued', 1)
            redis.call('HINCRBY', counters, 'expired', 1)
        end
    end
end

-- 2. refill back queues from the front queues
local due = redis.call('ZCOUNT', ready, '-inf', now)
if due < n then
    local total = 0
    for _, w in ipairs(weights) do total = total + w end
    local moved = 0
    while due < n and moved < refill_max do
        local turn = redis.call('HINCRBY', counters, 'turn', 1) % total
        local level = 1
        while turn >= weights[level] do turn = turn - weights[level]; level = level + 1 end
        local entry = redis.call('LPOP', prefix .. 'fq:' .. (level - 1))
        if not entry then
            for l = 1, #weights do
                entry = redis.call('LPOP', prefix .. 'fq:' .. (l - 1))
                if entry then break end
            end
        end
        if not entry then break end
        local parts = split(entry, 2)
        redis.call('RPUSH', prefix .. 'bq:' .. parts[1], parts[2])
        if not redis.call('ZSCORE', ready, parts[1]) then
            if make_ready(prefix, parts[1], now) <= now then due = due + 1 end
        end
        moved = moved + 1
    end
end

-- 3 and 4. hand out and lease
local out = {-1}
local hosts = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, n)
local popped = 0
for _, host in ipairs(hosts) do
    local bq = prefix .. 'bq:' .. host
    local payload = redis.call('LPOP', bq)
    if payload then
        local interval = tonumber(redis.call('HGET', prefix .. 'hdelay', host) or default_interval)
        local nxt = now + interval
        redis.call('HSET', prefix .. 'hnext', host, nxt)
        if redis.call('LLEN', bq) > 0 then
            redis.call('ZADD', ready, nxt, host)
        else
            redis.call('ZREM', ready, host)
        end
        local attempt = 1
        if string.byte(payload, 1) == 29 then
            local parts = split(string.sub(payload, 2), 2)
            attempt = tonumber(parts[1])
            payload = parts[2]
        end
        local id = redis.call('INCR', prefix .. 'lease:seq')
        redis.call('ZADD', prefix .. 'leases', now + lease_ms, id)
        redis.call('HSET', prefix .. 'lease:data', id, attempt .. SEP .. host .. SEP .. payload)
        out[#out + 1] = tostring(id)
        out[#out + 1] = payload
        popped = popped + 1
    else
        redis.call('ZREM', ready, host)
    end
end
if popped > 0 then
    redis.call('HINCRBY', counters, 'queued', -popped)
    redis.call('HINCRBY', counters, 'popped', popped)
end
local first = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
if first[2] then out[1] = tonumber(first[2]) end
return out
"""
)

# ACK: release leases whose pages have been handled (stored, or failed for good).
# ARGV[1] key prefix, ARGV[2..] lease ids. Returns how many were still held.
# Acknowledging an unknown or expired lease is a no-op, so acks are idempotent.
ACK = r"""
local prefix = ARGV[1]
local done = 0
for i = 2, #ARGV do
    if redis.call('ZREM', prefix .. 'leases', ARGV[i]) == 1 then
        redis.call('HDEL', prefix .. 'lease:data', ARGV[i])
        done = done + 1
    end
end
if done > 0 then redis.call('HINCRBY', prefix .. 'counters', 'acked', done) end
return done
"""
