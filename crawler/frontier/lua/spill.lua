-- SPILL: a worker writes hosts' buffers out to the spill store as chunks (decision 0055).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'claim' or 'commit'
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

if verb == 'claim' then return claim() end
return commit()
