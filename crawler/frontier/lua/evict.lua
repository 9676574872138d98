-- EVICT: a host that will not be due for long gives its window back to the spill store
-- while hosts wait wholly on disk for one (decision 0055; BUbiNG's workbench keeps the
-- hosts that will be due soon).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'claim' or 'commit'
-- ARGV[4] the worker's token (unique per worker)
-- claim:  ARGV[5] claim time (ms)   ARGV[6] idle time (ms, FRONTIER_WINDOW_IDLE)
--   ARGV[7] hosts at most   ARGV[8] the default host interval (ms)
--   While hosts wait in 'dormant' since now or before, takes as many (at most ARGV[7]) of
--   the ready heap's hosts due furthest ahead (looking at 1,000 at most, those skipped
--   included), no sooner than now + ARGV[6] nor than twice the host's own interval (its
--   Crawl-delay or override, stretched by failures) from now (a host slow by its own pace is
--   not idle: it would write its window out and read it back at each turn): those with
--   a window, nothing in flight, no submission or retry waiting at its head (they stay
--   first: a chunk's entries are merged by level when loaded), and no live claim of a worker
--   to load or evict them. For each: a new chunk id ('chunk:seq'), its window as the chunk's entries
--   (its back queue, then its ranked queue as '\030<score>\031<payload>'), noted in 'eclaim'
--   as ``<token>:<id>:<expiry>:<digest of the entries>``. Nothing leaves the window yet.
--   Returns {host, id, count, entry..., host, ...}; the caller writes each chunk under
--   (host, id), then commits.
-- commit: ARGV[5] the default front queue level (Scrapy's priority 0)   ARGV[6..] (host, id)
--   of each chunk written. A chunk whose claim is still the caller's, whose host is still
--   in the ready heap and whose window is what was claimed (the same entries) becomes the
--   host's oldest chunk (head of sc:<host>), its window leaves Redis, the host leaves the
--   ready heap for 'dormant', scored by when it is due (LOAD gives it a window again once
--   it is due and there is room), the counter 'spilled' grows, and 'hbeyond' keeps the
--   window's highest level when above the default (a new URL of that level waits behind
--   it: PUSH). A chunk whose claim was lost, whose host left the heap (paused, parked for
--   its address) or whose window changed (a hand-out, a follow-up) is not listed: the
--   caller deletes it. Returns the ids committed.
-- Idempotent per claim: a commit sent twice (a client's retry after the reply was lost)
-- finds no claim the second time, and returns the chunks the first listed, still listed:
-- they are not the caller's to delete.
--- @include "helpers"
local prefix, now, verb, token = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local claims = prefix .. K.evict_claims
local ready = prefix .. K.ready
local EXAMINED_MOST = 1000  -- hosts a claim looks at, at most (those it skips included)

-- the host's window as chunk entries: its back queue, then its ranked queue as buffer entries
local function window_entries(host)
    local entries = redis.call('LRANGE', prefix .. K.back .. host, 0, -1)
    local ranked = redis.call('ZRANGE', prefix .. K.ranked .. host, 0, -1, 'WITHSCORES')
    for i = 1, #ranked, 2 do
        local url = ranked[i]
        local rest = redis.call('HGET', prefix .. K.ranked_payloads, url) or ''
        local payload = rest
        if rest == '' then payload = url elseif string.byte(rest, 1) == 31 then payload = url .. rest end
        entries[#entries + 1] = '\030' .. ranked[i + 1] .. SEP .. payload
    end
    return entries
end

local function digest(entries)
    return redis.sha1hex(table.concat(entries, '\0'))
end

local function live(key, host)
    local claimed = redis.call('HGET', key, host)
    return claimed and tonumber(string.match(claimed, '^[^:]*:[^:]*:(%d+)')) > now
end

local function claim()
    local claim_ms, idle_ms, most = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
    default_interval = ARGV[8]
    local waiting = redis.call('ZCOUNT', prefix .. K.dormant, '-inf', now)
    most = math.min(most, waiting)
    local out, taken = {}, 0
    if most <= 0 then return out end
    local page, examined = math.max(most * 2, 100), 0
    while taken < most and examined < EXAMINED_MOST do
        local far = redis.call('ZREVRANGEBYSCORE', ready, '+inf', now + idle_ms, 'WITHSCORES', 'LIMIT', examined, page)
        for i = 1, #far, 2 do
            if taken >= most then break end
            local host, due = far[i], tonumber(far[i + 1])
            local head = redis.call('LINDEX', prefix .. K.back .. host, 0)
            if due - now >= 2 * interval_of(prefix, host)
                and tonumber(redis.call('HGET', prefix .. K.hflight, host) or '0') <= 0
                and redis.call('HEXISTS', prefix .. K.hrush, host) == 0
                and not (head and string.byte(head, 1) == 29)
                and not live(claims, host) and not live(prefix .. K.load_claims, host) then
                local entries = window_entries(host)
                if #entries > 0 then
                    local id = redis.call('INCR', prefix .. K.chunk_seq)
                    local note = string.format('%s:%d:%d:%s', token, id, now + claim_ms, digest(entries))
                    redis.call('HSET', claims, host, note)
                    reply_chunk(out, host, id, entries, 1, #entries)
                    taken = taken + 1
                end
            end
        end
        examined = examined + #far / 2
        if #far / 2 < page then break end
    end
    return out
end

-- the highest level of the host's window, as a difference from the default ``base``: its
-- back queue's head (kept in level order, nothing pinned there: see claim), its ranked
-- queue's first (level x RANK - cash, 0 <= cash < RANK)
local function top_level(host, base)
    local head = redis.call('LINDEX', prefix .. K.back .. host, 0)
    local d = head and level_of(head) or 0
    local first = redis.call('ZRANGE', prefix .. K.ranked .. host, 0, 0, 'WITHSCORES')
    if #first > 0 then d = math.min(d, math.ceil(tonumber(first[2]) / RANK) - base) end
    return d
end

local function commit()
    local base = tonumber(ARGV[5])
    local done = {}
    for i = 6, #ARGV, 2 do
        local host, id = ARGV[i], ARGV[i + 1]
        local claimed = redis.call('HGET', claims, host)
        if claimed and string.find(claimed, token .. ':' .. id .. ':', 1, true) == 1 then
            redis.call('HDEL', claims, host)
            local due = tonumber(redis.call('ZSCORE', ready, host))  -- (nil: paused or parked since)
            local entries = due and window_entries(host) or {}
            if #entries > 0 and string.match(claimed, ':(%x+)$') == digest(entries) then
                local top = top_level(host, base)
                if top < tonumber(redis.call('HGET', prefix .. K.hbeyond, host) or '0') then
                    redis.call('HSET', prefix .. K.hbeyond, host, top)
                end
                for _, url in ipairs(redis.call('ZRANGE', prefix .. K.ranked .. host, 0, -1)) do
                    redis.call('HDEL', prefix .. K.ranked_payloads, url)
                end
                redis.call('DEL', prefix .. K.back .. host, prefix .. K.ranked .. host)
                unready(prefix, host)
                redis.call('HDEL', prefix .. K.hkeen, host)
                redis.call('HDEL', prefix .. K.hlevels, host)
                redis.call('ZREM', prefix .. K.refill, host)
                redis.call('LPUSH', prefix .. K.spilled .. host, id)
                redis.call('ZADD', prefix .. K.dormant, math.max(due, now), host)
                present[K.dormant] = true
                count_spilled(prefix, host, #entries)
                done[#done + 1] = tonumber(id)
            end
        elseif redis.call('LPOS', prefix .. K.spilled .. host, id) then
            done[#done + 1] = tonumber(id)  -- listed by this commit sent before (see above)
        end
    end
    return done
end

if verb == 'claim' then return claim() end
return commit()
