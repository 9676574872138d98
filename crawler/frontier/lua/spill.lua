-- SPILL: a worker writes hosts' buffers (decision 0055) and the crawl's inbox (decision 0061)
-- out to the spill store as chunks.
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'claim' or 'commit' (buffers), 'take' or
-- 'put' (the inbox)
-- ARGV[4] the worker's token (unique per worker)   ARGV[5] the host window (chunk size)
-- claim:  ARGV[6] claim time (ms)   ARGV[7] hosts at most
--   Takes up to ARGV[7] hosts whose buffer is due to be written ('spill' scored <= now),
--   skipping those another worker holds a live claim on, and ARGV[7] windows' worth of
--   entries in all; for each host, the head of its buffer as chunks of a window each (as
--   many as it holds whole, at least one), each with a new id ('chunk:seq', consecutive for
--   a host), noted in 'sclaim' as ``<token>:<first id>:<last id>:<expiry>``. Returns {host,
--   id, count, entry..., host, ...}, a host's chunks in order; the caller writes each chunk
--   under (host, id), then commits.
-- commit: ARGV[6] FRONTIER_SPILL_AGE (ms)
--   ARGV[7..] (host, id, count) of each chunk written, a host's in the order claimed. A
--   chunk whose claim is still the caller's leaves the buffer (its first count entries:
--   nothing but this claim takes from the head of a claimed buffer) and joins the host's
--   chunks (sc:<host>) and the counter 'spilled'; after the claim's last chunk, the claim
--   ends, the host's buffer is due again (now when a window's worth is left, after ARGV[6]
--   when less, not at all when empty), and its window is marked for a load when low. A
--   chunk whose claim was lost (expired, and taken by another worker) is not listed: never
--   read, it is the caller's to delete. Returns the ids of the chunks committed.
-- Idempotent per claim: a commit sent twice (a client's retry after the reply was lost)
-- finds no claim the second time, and returns the chunks the first listed, still listed:
-- they are not the caller's to delete.
-- The crawl's inbox (PUSH: new URLs of the default level or below, of every host; decision
-- 0061) is written out a slice at a time, by one worker at a time:
-- take: ARGV[6] claim time (ms)   ARGV[7] entries at most   ARGV[8] '1': only if the inbox is
--   due ('inbox:due' <= now; else whatever it holds)
--   Unless another worker holds a live claim on it, claims the inbox's first entries (up to
--   ARGV[7]) and ids for their chunks: as many as there could be, one more than the entries
--   over the window (a host's entries make chunks of a window each, the host's first chunk
--   the first id, its next one the next); notes ``<token>:<count>:<first id>:<expiry>`` in
--   'inbox:claim'. Returns {first id, count}, or {} (nothing, or another's live claim). The
--   caller reads the inbox's first count entries (LRANGE, not through Lua: a slice's strings
--   would be garbage that the scripts after it collect; while the claim is the caller's, no
--   one else trims the inbox's head, and a put of entries read after it was lost is refused),
--   groups them by host, writes each host's chunks under (host, first id + k), then puts them.
-- put: ARGV[6] entries claimed  ARGV[7] first id  ARGV[8] the inbox's entries that make it
--   due at once (a slice)  ARGV[9] FRONTIER_SPILL_AGE (ms)  ARGV[10] '1': FRONTIER_ORDER
--   importance (hosts may have ranked queues), else ''  ARGV[11] the chunks and URLs of each
--   host written, two 4-byte big-endian numbers a host, in the order of ARGV[12..], the hosts
--   (one string a host: a slice's arguments are garbage that the scripts after it collect).
--   If the claim is still the caller's (expired or not: only a claim takes from the inbox's
--   head, and no other was made), the entries leave the inbox, each host's chunks join its
--   list (sc:<host>), the host's count and the counter 'spilled', and a host that had no
--   chunks is marked for a load as top_up marks it: 'refill' when its window holds half of it
--   or less, or none while the host is in the ready heap; 'dormant' when it has none and is
--   out of the heap (a window more than half full loads at its next top-up; a host that had
--   chunks waits for theirs already); a thousand hosts a command (HSET, ZMSCORE, ZADD). The
--   entries left are due at once when they make a slice, else ARGV[9] from now ('inbox:due').
--   Returns the number of hosts (every host's chunks listed) when the claim was the caller's;
--   else one status a host: 1 listed, 0 not (its chunks are the caller's to delete).
--   Idempotent: put sent again after its reply was lost finds no claim, and a host's chunks
--   are found listed while the last of them is (its chunks load oldest first: a host whose
--   last chunk is loaded had all of them loaded).
--- @include "helpers"
local prefix, now, verb, token = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
window = tonumber(ARGV[5])
local spill = prefix .. K.spill
local claims = prefix .. K.spill_claims

local function claim()
    local claim_ms, most = tonumber(ARGV[6]), tonumber(ARGV[7])
    local out = {}
    local taken, room = 0, most * window  -- hosts taken, entries left to take
    for _, host in ipairs(redis.call('ZRANGEBYSCORE', spill, '-inf', now, 'LIMIT', 0, most * 2)) do
        if taken >= most or room <= 0 then break end
        local claimed = redis.call('HGET', claims, host)
        if not claimed or tonumber(string.match(claimed, ':(%d+)$')) <= now then
            local sb = prefix .. K.buffer .. host
            local whole = math.floor(math.min(redis.call('LLEN', sb), room) / window)
            local entries = redis.call('LRANGE', sb, 0, math.max(whole, 1) * window - 1)
            if #entries == 0 then
                redis.call('ZREM', spill, host)
                redis.call('HDEL', claims, host)
            else
                local chunks = math.ceil(#entries / window)
                local last = redis.call('INCRBY', prefix .. K.chunk_seq, chunks)
                local first = last - chunks + 1
                redis.call('HSET', claims, host, string.format('%s:%d:%d:%d', token, first, last, now + claim_ms))
                for c = 0, chunks - 1 do
                    local from, to = c * window + 1, math.min((c + 1) * window, #entries)
                    reply_chunk(out, host, first + c, entries, from, to)
                end
                taken = taken + 1
                room = room - #entries
            end
        end
    end
    return out
end

local function commit()
    local age = tonumber(ARGV[6])
    local done = {}
    local moved = 0  -- URLs committed: the counter 'spilled' once a call (each host's: count_host)
    local listed = {}  -- hosts this call listed a chunk of
    for i = 7, #ARGV, 3 do
        local host, id, count = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
        local claimed = redis.call('HGET', claims, host)
        local first, last
        if claimed and string.find(claimed, token .. ':', 1, true) == 1 then
            first, last = string.match(claimed, '^[^:]*:(%d+):(%d+):')
            first, last = tonumber(first), tonumber(last)
        end
        id = tonumber(id)
        if first and first <= id and id <= last then
            local sb = prefix .. K.buffer .. host
            redis.call('LTRIM', sb, count, -1)
            redis.call('RPUSH', prefix .. K.spilled .. host, id)
            count_host(prefix, host, count)
            moved = moved + count
            listed[host] = true
            done[#done + 1] = id
        elseif redis.call('LPOS', prefix .. K.spilled .. host, id) then
            done[#done + 1] = id  -- listed by this commit sent before (see above)
        end
        if first and id == last then  -- the claim's last chunk: it ends
            redis.call('HDEL', claims, host)
            local sb = prefix .. K.buffer .. host
            local left = redis.call('LLEN', sb)
            if left >= window then
                redis.call('ZADD', spill, now, host)
            elseif left > 0 then
                redis.call('ZADD', spill, now + age, host)
            else
                redis.call('ZREM', spill, host)
            end
            top_up(prefix, host, now, listed[host])
        end
    end
    if moved > 0 then redis.call('HINCRBY', prefix .. K.counters, 'spilled', moved) end
    return done
end

local inbox, inbox_claim = prefix .. K.inbox, prefix .. K.inbox_claim

local function take()
    local claim_ms, most = tonumber(ARGV[6]), tonumber(ARGV[7])
    local claimed = redis.call('GET', inbox_claim)
    if claimed and string.find(claimed, token .. ':', 1, true) ~= 1
        and tonumber(string.match(claimed, ':(%d+)$')) > now then
        return {}
    end
    if ARGV[8] == '1' and tonumber(redis.call('GET', prefix .. K.inbox_due) or now + 1) > now then
        return {}
    end
    local count = math.min(redis.call('LLEN', inbox), most)
    if count == 0 then
        redis.call('DEL', inbox_claim, prefix .. K.inbox_due)
        return {}
    end
    local ids = math.floor(count / window) + 1
    local last = redis.call('INCRBY', prefix .. K.chunk_seq, ids)
    local first = last - ids + 1
    redis.call('SET', inbox_claim, string.format('%s:%d:%d:%d', token, count, first, now + claim_ms))
    return {first, count}
end

local function put()
    local count, first = tonumber(ARGV[6]), tonumber(ARGV[7])
    ranked_order = ARGV[10] == '1'
    local sizes = ARGV[11]
    local function size(i)  -- the chunks and URLs of the host ARGV[i]
        return struct.unpack('>I4I4', sizes, 8 * (i - 12) + 1)
    end
    local claimed = redis.call('GET', inbox_claim)
    local mine = string.format('%s:%d:%d:', token, count, first)
    if not claimed or string.sub(claimed, 1, #mine) ~= mine then  -- (sent again, or a claim lost: see above)
        local out = {}
        for i = 12, #ARGV do
            local last = first + size(i) - 1
            out[#out + 1] = redis.call('LPOS', prefix .. K.spilled .. ARGV[i], last) and 1 or 0
        end
        return out
    end
    redis.call('LTRIM', inbox, count, -1)
    redis.call('DEL', inbox_claim)
    local left = redis.call('LLEN', inbox)
    if left == 0 then
        redis.call('DEL', prefix .. K.inbox_due)
    elseif left >= tonumber(ARGV[8]) then
        redis.call('SET', prefix .. K.inbox_due, now)
    else  -- (come after the slice taken, they wait as new entries do)
        redis.call('SET', prefix .. K.inbox_due, now + tonumber(ARGV[9]))
    end
    local moved = 0
    local fresh, counts = {}, {}  -- the hosts whose first chunks these are, and (host, URLs) of each
    local ids = {}
    for i = 12, #ARGV do
        local host = ARGV[i]
        local chunks, urls = size(i)
        local listed
        if chunks == 1 then  -- (most hosts of a slice)
            listed = redis.call('RPUSH', prefix .. K.spilled .. host, first)
        else  -- (a thousand ids a call: Lua's unpack has a limit, and a host may fill a slice)
            for from = 1, chunks, 1000 do
                local to = math.min(from + 999, chunks)
                for c = from, to do ids[c - from + 1] = first + c - 1 end
                listed = redis.call('RPUSH', prefix .. K.spilled .. host, unpack(ids, 1, to - from + 1))
            end
        end
        moved = moved + urls
        -- a host that had chunks listed waits for their load already ('dormant', 'refill', or
        -- its window's next top-up), and its new chunks load behind them
        if listed == chunks then
            fresh[#fresh + 1] = host
            counts[#counts + 1] = host
            counts[#counts + 1] = urls
        else
            count_host(prefix, host, urls)
        end
    end
    for i = 1, #counts, 2000 do  -- (a host without chunks has no count: a thousand an HSET)
        redis.call('HSET', prefix .. K.host_spilled, unpack(counts, i, math.min(i + 1999, #counts)))
    end
    -- each host of its first chunks marked for a load, as top_up(listed) does (a window at half
    -- or less: 'refill'; none, out of the ready heap: 'dormant'), a thousand a call
    local refills, idle = {}, {}
    for _, host in ipairs(fresh) do
        local have = window_size(prefix, host)
        if have * 2 <= window then
            if have > 0 then
                refills[#refills + 1] = host
            else
                idle[#idle + 1] = host
            end
        end
    end
    local dormant = {}
    for i = 1, #idle, 1000 do
        local part = {unpack(idle, i, math.min(i + 999, #idle))}
        for j, score in ipairs(redis.call('ZMSCORE', prefix .. K.ready, unpack(part))) do
            if score then refills[#refills + 1] = part[j] else dormant[#dormant + 1] = part[j] end
        end
    end
    local function mark(key, how, hosts)
        for i = 1, #hosts, 1000 do
            local args = {}
            for j = i, math.min(i + 999, #hosts) do
                args[#args + 1] = now
                args[#args + 1] = hosts[j]
            end
            redis.call('ZADD', prefix .. key, how, unpack(args))
        end
    end
    mark(K.refill, 'LT', refills)
    mark(K.dormant, 'NX', dormant)
    if moved > 0 then redis.call('HINCRBY', prefix .. K.counters, 'spilled', moved) end
    return #ARGV - 11  -- (every host's chunks listed)
end

if verb == 'claim' then return claim() end
if verb == 'take' then return take() end
if verb == 'put' then return put() end
return commit()
