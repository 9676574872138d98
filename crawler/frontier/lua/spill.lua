-- SPILL: a worker writes hosts' buffers out to the spill store as chunks (decision 0055).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'claim' or 'commit'
-- ARGV[4] the worker's token (unique per worker)   ARGV[5] the host window (chunk size)
-- claim:  ARGV[6] claim time (ms)   ARGV[7] hosts at most
--   Takes up to ARGV[7] hosts whose buffer is due to be written ('spill' scored <= now),
--   skipping those another worker holds a live claim on; for each, a new chunk id
--   ('chunk:seq') and the first window's worth of its buffer, noted in 'sclaim' as
--   ``<token>:<id>:<count>:<expiry>``. Returns {host, id, count, entry..., host, ...}; the
--   caller writes each chunk under (host, id), then commits.
-- commit: ARGV[6] FRONTIER_SPILL_AGE (ms)
--   ARGV[7..] (host, id, count) of each chunk written. A chunk whose claim is still the
--   caller's leaves the buffer (its first count entries: nothing but this claim takes from
--   the head of a claimed buffer) and joins the host's chunks (sc:<host>) and the counter
--   'spilled'; the host's buffer is due again (now when a window's worth is left, after
--   ARGV[6] when less, not at all when empty), and its window marked for a load when low. A chunk whose claim
--   was lost (expired, and taken by another worker) is not listed: never read, it is the
--   caller's to delete. Returns the ids of the chunks committed.
-- Idempotent per claim: a commit sent twice finds no claim the second time.
--- @include "helpers"
local prefix, now, verb, token = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
window = tonumber(ARGV[5])
local spill = prefix .. K.spill
local claims = prefix .. K.spill_claims

local function claim()
    local claim_ms, most = tonumber(ARGV[6]), tonumber(ARGV[7])
    local out = {}
    local taken = 0
    for _, host in ipairs(redis.call('ZRANGEBYSCORE', spill, '-inf', now, 'LIMIT', 0, most * 2)) do
        if taken >= most then break end
        local claimed = redis.call('HGET', claims, host)
        if not claimed or tonumber(string.match(claimed, ':(%d+)$')) <= now then
            local entries = redis.call('LRANGE', prefix .. K.buffer .. host, 0, window - 1)
            if #entries == 0 then
                redis.call('ZREM', spill, host)
                redis.call('HDEL', claims, host)
            else
                local id = redis.call('INCR', prefix .. K.chunk_seq)
                redis.call('HSET', claims, host, string.format('%s:%d:%d:%d', token, id, #entries, now + claim_ms))
                out[#out + 1] = host
                out[#out + 1] = id
                out[#out + 1] = #entries
                for _, e in ipairs(entries) do out[#out + 1] = e end
                taken = taken + 1
            end
        end
    end
    return out
end

local function commit()
    local age = tonumber(ARGV[6])
    local done = {}
    for i = 7, #ARGV, 3 do
        local host, id, count = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
        local claimed = redis.call('HGET', claims, host)
        if claimed and string.find(claimed, token .. ':' .. id .. ':', 1, true) == 1 then
            redis.call('HDEL', claims, host)
            local sb = prefix .. K.buffer .. host
            redis.call('LTRIM', sb, count, -1)
            redis.call('RPUSH', prefix .. K.spilled .. host, id)
            redis.call('HINCRBY', prefix .. K.counters, 'spilled', count)
            local left = redis.call('LLEN', sb)
            if left >= window then
                redis.call('ZADD', spill, now, host)
            elseif left > 0 then
                redis.call('ZADD', spill, now + age, host)
            else
                redis.call('ZREM', spill, host)
            end
            top_up(prefix, host, now)
            done[#done + 1] = id
        end
    end
    return done
end

if verb == 'claim' then return claim() end
return commit()
