-- Shared Lua helpers, prepended to the scripts that need them.
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
-- a payload's URL: its first field, or, for a request stored whole ('J': its to_dict() as
-- JSON, whose first key is "url": codec.py), the URL read by pattern (by cjson when it holds
-- an escape; the whole text if neither reads one)
local function url_of(payload)
    if string.byte(payload, 1) ~= 74 then return split(payload, 2)[1] end
    local url = string.match(payload, '^J{"url":"([^"\\]*)"')
    if url then return url end
    local ok, data = pcall(cjson.decode, string.sub(payload, 2))
    if ok and type(data) == 'table' and type(data.url) == 'string' then return data.url end
    return payload
end
-- In flight: the set 'flying' holds the seq of every lease whose download has not ended,
-- 'hflight' counts them per host, whatever the limit. A host with max_flight in flight
-- (0: no limit) stays out of the ready heap until one of them lands; whatever the limit,
-- a landing makes the host due again its interval after it, when that is later than its
-- next time already (as in Nutch and Heritrix: politeness counts from the end of a
-- download; under a limit above 1, or none, a request handed out while another is in
-- flight counts from the hand-out before it).
-- Each script sets max_flight and default_interval (ms) first.
-- A host's own limit (hlimit: the crawl rules' in_flight) replaces max_flight when there is any.
local max_flight = 0
local default_interval = '0'
-- whether the key ``name`` of the crawl exists, looked up once per call (a script that
-- creates it sets present[name] = true): hashes most crawls never have (hlimit, hrush,
-- hkeen, hpaused, hdropped; hdelay, hslow, hfail, hdown while no host has a Crawl-delay or
-- failed; lclass without politeness per address) cost one EXISTS a call, not a look-up a host
local present = {}
local function exists_once(prefix, name)
    if present[name] == nil then present[name] = redis.call('EXISTS', prefix .. name) == 1 end
    return present[name]
end
local function at_limit(prefix, host)
    if max_flight <= 0 then return false end
    local limit = max_flight
    if exists_once(prefix, K.hlimit) then
        limit = tonumber(redis.call('HGET', prefix .. K.hlimit, host) or max_flight)
    end
    return tonumber(redis.call('HGET', prefix .. K.hflight, host) or '0') >= limit
end
-- FRONTIER_ORDER importance: a host's new URLs wait in its ranked queue (rq:<host>, a zset:
-- URL -> level x RANK - cash, lowest first: a higher priority level first, then the most
-- cash, OPIC's importance; RANK 1e4 keeps cash exact to some 1e-12 within a level, cash
-- above RANK would pass into the level above), their payloads in 'rqpay' (URL -> the payload without the URL
-- when it begins with it; no entry for a payload that is the URL alone: a window of seeds
-- holds each URL once). Its back queue (follow-ups, retries, submissions) comes first.
local RANK = 1e4
local function has_queue(prefix, host)
    return redis.call('EXISTS', prefix .. K.back .. host, prefix .. K.ranked .. host) > 0
end
local function ranked_payload(prefix, url)
    local rest = redis.call('HGET', prefix .. K.ranked_payloads, url) or ''
    redis.call('HDEL', prefix .. K.ranked_payloads, url)
    if rest == '' then return url end
    if string.byte(rest, 1) == 31 then return url .. rest end
    return rest
end
-- A lease's second field is its attempt (a drop's: -code), followed by ':<cash>' when it
-- carries importance (FRONTIER_ORDER importance, OPIC's cash). A URL back at the head of
-- its host's back queue after a lease (expired, given back, or taken over by its retry or
-- its redirect's target) keeps that field: '\029<attempt>[:<cash>]\031<payload>' (none
-- for a first attempt without cash), so that it is handed out again with its importance.
local function lease_field(attempt, cash)
    if cash and cash > 0 then return attempt .. ':' .. string.format('%.9g', cash) end
    return tostring(attempt)
end
local function attempt_of(field)  -- attempt, cash
    local cut = string.find(field, ':', 1, true)
    if not cut then return tonumber(field), 0 end
    return tonumber(string.sub(field, 1, cut - 1)), tonumber(string.sub(field, cut + 1))
end
local function requeued_entry(attempt, cash, payload)
    if attempt == 1 and cash <= 0 then return payload end
    return '\029' .. lease_field(attempt, cash) .. SEP .. payload
end
-- a back queue entry's payload without what a lease left on it, and that lease field (nil
-- for an entry without)
local function unattempted(e)
    if string.byte(e, 1) ~= 29 then return e, nil end
    local cut = string.find(e, SEP, 2, true)
    return string.sub(e, cut + 1), string.sub(e, 2, cut - 1)
end
-- a leased URL goes back into its host's queue (a lease expired or given back, a retry or
-- a follow-up in its place): when it is a promoted URL whose promoted copy was handed out
-- (its time in 'promoted' negated: POP drops a copy that comes up after it), this copy
-- counts as the promoted one again, so POP hands out one copy of the URL, not none
local function promoted_back(prefix, payload, now)
    if not exists_once(prefix, K.promoted) then return end
    local url = url_of((unattempted(payload)))
    local at = redis.call('ZSCORE', prefix .. K.promoted, url)
    if at and tonumber(at) < 0 then redis.call('ZADD', prefix .. K.promoted, now, url) end
end
-- the host's most important URL (its payload and cash), or nil
local function take_ranked(prefix, host)
    local top = redis.call('ZPOPMIN', prefix .. K.ranked .. host)
    if #top == 0 then return nil end
    local cash = math.fmod(-tonumber(top[2]), RANK)
    if cash < 0 then cash = cash + RANK end
    return ranked_payload(prefix, top[1]), cash
end
-- Spill (decision 0055): with a window (FRONTIER_HOST_WINDOW > 0) a host's queue is, in
-- order, its window in Redis (its back and ranked queues), its chunks in the spill store
-- (sc:<host>: their ids, oldest first) and its buffer (sb:<host>: URLs not yet written out;
-- a ranked one as '\030<score>\031<payload>'). Only hosts with a window are in the ready
-- heap; at most active_hosts of them get a window that they did not have (a new host's
-- URLs, a chunk loaded for a host without one), the others wait on disk. A window at half
-- its size or less is topped up: from the buffer when no chunk is on disk and no worker is
-- writing one, else by a worker that loads the oldest chunk (refill). Each script that tops
-- up sets these first (window 0: no spill, everything in the window).
local window = 0
local active_hosts = 0
-- whether hosts may have ranked queues (FRONTIER_ORDER importance); a script that knows the
-- crawl's order may say false (a fifo crawl's windows are back queues alone)
local ranked_order = true
-- ``n`` more (or fewer) of the host's URLs in chunks: 'hspilled' (count_host), and the
-- counter 'spilled' as well (count_spilled)
local function count_host(prefix, host, n)
    if redis.call('HINCRBY', prefix .. K.host_spilled, host, n) <= 0 then
        redis.call('HDEL', prefix .. K.host_spilled, host)
    end
end
local function count_spilled(prefix, host, n)
    redis.call('HINCRBY', prefix .. K.counters, 'spilled', n)
    count_host(prefix, host, n)
end
-- a SPILL or EVICT claim's reply: chunk ``id`` of ``host``, entries[from..to], appended to
-- ``out`` as host, id, count, entry... (frontier.py's _claimed_chunks reads it)
local function reply_chunk(out, host, id, entries, from, to)
    out[#out + 1] = host
    out[#out + 1] = id
    out[#out + 1] = to - from + 1
    for i = from, to do out[#out + 1] = entries[i] end
end
local function window_size(prefix, host)
    local have = redis.call('LLEN', prefix .. K.back .. host)
    if not ranked_order then return have end
    return have + redis.call('ZCARD', prefix .. K.ranked .. host)
end
-- a host without a window may get one: fewer than active_hosts hosts are in the ready heap
-- (with ``opened``: those given one in this call, not in the heap yet; ``heap``: its size, when
-- the caller read it)
local function room_for_host(prefix, opened, heap)
    return active_hosts <= 0 or (heap or redis.call('ZCARD', prefix .. K.ready)) + (opened or 0) < active_hosts
end
-- whether the host may have URLs beyond its window: chunks, a buffer, or (any host's) URLs in
-- the crawl's inbox
local function beyond_window(prefix, host)
    return redis.call('EXISTS', prefix .. K.spilled .. host, prefix .. K.buffer .. host, prefix .. K.inbox) > 0
end
-- FRONTIER_ORDER importance: a URL linked again gains its cash where it waits: in its
-- window's ranked queue, else, while the host may have URLs beyond its window (spilled,
-- buffered, in the inbox), in scr:<host> until it reaches the window (to_window); true if it
-- was waiting in either
local function credit(prefix, host, url, cash)
    if redis.call('ZADD', prefix .. K.ranked .. host, 'XX', 'INCR', -cash, url) then return true end
    if not beyond_window(prefix, host) then return false end
    redis.call('HINCRBYFLOAT', prefix .. K.spill_credit .. host, url, cash)
    return true
end
-- Fifo's priority levels with a window: a new URL whose front queue level is not the
-- default one (priority 0's) carries the difference in its back queue, buffer and chunk
-- entries, '\028<level - default>\031<payload>' (a higher level: below 0), and a host's
-- back queue is kept in order of that difference (an entry without it: 0), then of
-- arrival. 'hlevels' marks the hosts whose back queue holds an entry of a lower level
-- (above 0): a new entry of the default level is merged there, not appended.
local function level_of(e)
    if string.byte(e, 1) ~= 28 then return 0 end
    return tonumber(string.sub(e, 2, string.find(e, SEP, 2, true) - 1))
end
-- the payload of a back queue entry that may carry its level
local function unlevelled(e)
    if string.byte(e, 1) ~= 28 then return e end
    return string.sub(e, string.find(e, SEP, 2, true) + 1)
end
-- entries at the tail of the list ``key``, a thousand a call (Lua's unpack has a limit)
local function push_all(key, entries)
    for i = 1, #entries, 1000 do
        redis.call('RPUSH', key, unpack(entries, i, math.min(i + 999, #entries)))
    end
end
-- Higher levels first across hosts: 'hkeen' marks the hosts whose back queue's head is a
-- URL of a higher level than the default (to_back put it there); 'keen' holds those of them
-- in the ready heap with their score there (kept by ready_at, unready and not_before, as
-- 'rush' is), so that POP takes such a due host after those with submissions and before
-- the others. A hand-out that leaves another URL at the head unmarks the host (unkeen).
-- the host, marked in the hash ``name`` (hrush, hkeen), goes in that hash's mirror of the
-- ready heap (rush, keen) with its score there, if it is in the heap
local function mirror_ready(prefix, name, mirror, host)
    present[name] = true
    local score = redis.call('ZSCORE', prefix .. K.ready, host)
    if score then
        redis.call('ZADD', prefix .. mirror, score, host)
        present[mirror] = true
    end
end
local function unkeen(prefix, host)
    if not exists_once(prefix, K.hkeen) then return end
    local head = redis.call('LINDEX', prefix .. K.back .. host, 0)
    if head and level_of(head) < 0 then return end
    redis.call('HDEL', prefix .. K.hkeen, host)
    redis.call('ZREM', prefix .. K.keen, host)
end
-- new entries (in arrival order) into the host's back queue, each behind those of its
-- level and above; the submissions waiting at its head (hrush) and the retries there stay
-- first, whatever the level of what comes after them. Only the queue's tail of entries of
-- a lower level than the highest new one is read and merged (found from the tail: most
-- often none, or the few lower-level entries behind the default ones).
local function to_back(prefix, host, entries)
    if #entries == 0 then return end
    local bq = prefix .. K.back .. host
    local mixed = exists_once(prefix, K.hlevels) and redis.call('HEXISTS', prefix .. K.hlevels, host) == 1
    local top = 0  -- the highest level (the lowest difference) among the new entries
    for _, e in ipairs(entries) do
        local l = level_of(e)
        if l ~= 0 then mixed = true end
        if l < top then top = l end
    end
    if not mixed then return push_all(bq, entries) end
    local n = redis.call('LLEN', bq)
    local floor = 0  -- entries at the head that stay there: pinned (only passed when top < 0)
    if top < 0 and n > 0 then
        floor = math.min(tonumber(redis.call('HGET', prefix .. K.hrush, host) or '0'), n)
        while floor < n and string.byte(redis.call('LINDEX', bq, floor), 1) == 29 do floor = floor + 1 end
    end
    local at = n  -- the merged tail starts here: entries [at, n) are of a lower level than top
    while at > floor and level_of(redis.call('LINDEX', bq, at - 1)) > top do at = at - 1 end
    local keyed = {}
    if at < n then
        for i, e in ipairs(redis.call('LRANGE', bq, at, -1)) do keyed[#keyed + 1] = {level_of(e), i, e} end
        if at == 0 then redis.call('DEL', bq) else redis.call('LTRIM', bq, 0, at - 1) end
    end
    local old = #keyed
    for i, e in ipairs(entries) do keyed[#keyed + 1] = {level_of(e), old + i, e} end
    table.sort(keyed, function(a, b)
        if a[1] ~= b[1] then return a[1] < b[1] end
        return a[2] < b[2]
    end)
    local merged = {}
    for i, k in ipairs(keyed) do merged[i] = k[3] end
    push_all(bq, merged)
    if at == 0 and keyed[1][1] < 0 then
        redis.call('HSET', prefix .. K.hkeen, host, 1)
        mirror_ready(prefix, K.hkeen, K.keen, host)
    end
    if keyed[#keyed][1] > 0 then  -- (the queue's tail: its lowest level)
        redis.call('HSET', prefix .. K.hlevels, host, 1)
        present[K.hlevels] = true
    else
        redis.call('HDEL', prefix .. K.hlevels, host)
    end
end
-- buffer entries (payloads, or ranked '\030<score>\031<payload>') at the tail of the host's
-- window; returns how many were there already (a ranked URL waiting twice: counted out)
local function to_window(prefix, host, entries)
    local twice = 0
    local listed = {}
    local credits = prefix .. K.spill_credit .. host
    local credited = nil  -- (looked up at the first ranked entry: a fifo crawl's have none)
    for _, e in ipairs(entries) do
        if string.byte(e, 1) == 30 then
            if credited == nil then credited = redis.call('EXISTS', credits) == 1 end
            local cut = string.find(e, SEP, 2, true)
            local score, payload = tonumber(string.sub(e, 2, cut - 1)), string.sub(e, cut + 1)
            local url, rest = payload, payload
            if string.byte(payload, 1) ~= 74 then  -- 'J': kept whole, keyed by its own text
                url = split(payload, 2)[1]
                rest = string.sub(payload, #url + 1)
            end
            local gained = credited and redis.call('HGET', credits, url)
            if gained then
                redis.call('HDEL', credits, url)
                score = score - tonumber(gained)
            end
            if redis.call('ZADD', prefix .. K.ranked .. host, 'NX', score, url) == 1 then
                if rest ~= '' then redis.call('HSET', prefix .. K.ranked_payloads, url, rest) end
            else
                twice = twice + 1
            end
        else
            listed[#listed + 1] = e
        end
    end
    to_back(prefix, host, listed)
    if twice > 0 then redis.call('HINCRBY', prefix .. K.counters, 'queued', -twice) end
    if credited and not beyond_window(prefix, host) then
        redis.call('DEL', credits)  -- (credits of URLs fetched before they were linked again)
    end
    return twice
end
-- the payload of a buffer entry
local function buffered_payload(e)
    if string.byte(e, 1) == 30 then return string.sub(e, string.find(e, SEP, 2, true) + 1) end
    return unlevelled(e)
end
-- the host has nothing beyond its window any more: it forgets the highest level there (PUSH)
local function beyond_checked(prefix, host)
    if exists_once(prefix, K.hbeyond)
        and redis.call('EXISTS', prefix .. K.spilled .. host, prefix .. K.buffer .. host) == 0 then
        redis.call('HDEL', prefix .. K.hbeyond, host)
    end
end
-- a worker is to load the host's oldest chunk: at once ('refill') for a host with a window
-- or in the heap (or ``now_or_never``: a dropped host's), when there is room for one more
-- window ('dormant', oldest first) else; ``listed``: the caller knows it has a chunk listed
local function wants_load(prefix, host, now, now_or_never, have, listed)
    if not listed and redis.call('EXISTS', prefix .. K.spilled .. host) == 0 then return false end
    if now_or_never or (have or window_size(prefix, host)) > 0 or redis.call('ZSCORE', prefix .. K.ready, host) then
        redis.call('ZADD', prefix .. K.refill, 'LT', now, host)
    else
        redis.call('ZADD', prefix .. K.dormant, 'NX', now, host)
        present[K.dormant] = true
    end
    return true
end
-- top the host's window up when it is at half its size or less (see above); whether the
-- window holds URLs (has_queue), or nil when not known (no window; a window that took
-- buffered entries); ``listed``: the caller knows the host has a chunk listed (SPILL's commit)
local function top_up(prefix, host, now, listed)
    if window <= 0 then return nil end
    local have = window_size(prefix, host)
    if have * 2 > window then return true end
    local sb = prefix .. K.buffer .. host
    -- (most hosts have every URL in their window: neither chunks nor a buffer, one look)
    if not listed and redis.call('EXISTS', prefix .. K.spilled .. host, sb) == 0 then return have > 0 end
    if wants_load(prefix, host, now, false, have, listed) then return have > 0 end
    if redis.call('HEXISTS', prefix .. K.spill_claims, host) == 1 then return have > 0 end
    if have == 0 and not room_for_host(prefix) and redis.call('ZSCORE', prefix .. K.ready, host) == false then
        return false
    end
    local entries = redis.call('LPOP', sb, window - have)
    if not entries then return have > 0 end
    to_window(prefix, host, entries)
    if redis.call('EXISTS', sb) == 0 then
        redis.call('ZREM', prefix .. K.spill, host)
        beyond_checked(prefix, host)
    end
    if have > 0 then return true end
end
-- URLs to be recorded as not fetched: 'drops' holds code SEP host SEP payload (code 1: the
-- host dropped by the operator, 2: given up, down too long, 3: over its host's page quota)
local function to_drops(prefix, entries)
    push_all(prefix .. K.drops, entries)
end
-- A drop moves a host's URLs to 'drops' a chunk at a time, at most DROP_CHUNK entries a
-- call: its back queue first, then its ranked queue, then (``delayed``: at the drop itself)
-- its delayed retries, found in its own index dq:<host> (never by reading 'delayed'). A
-- host with entries left stays in 'dropping' (host -> 1 while its delayed retries are to
-- move too), whose next chunk HOLD's caller or the next POP moves (next_drop_chunk); a
-- requeued entry loses its attempt count. Returns true when the host's queues are done.
local DROP_CHUNK = 1000
local function drop_queued(prefix, host, code, delayed)
    local dropping = prefix .. K.dropping
    if not delayed then delayed = redis.call('ZSCORE', dropping, host) == '1' end
    local head = code .. SEP .. host .. SEP
    local moved, room = {}, DROP_CHUNK
    local bq = prefix .. K.back .. host
    local entries = redis.call('LRANGE', bq, 0, room - 1)
    for _, e in ipairs(entries) do
        moved[#moved + 1] = head .. unlevelled((unattempted(e)))
    end
    if #entries > 0 then redis.call('LTRIM', bq, #entries, -1) end
    if redis.call('EXISTS', bq) == 0 then
        redis.call('HDEL', prefix .. K.hlevels, host)
        redis.call('HDEL', prefix .. K.hkeen, host)
        redis.call('ZREM', prefix .. K.keen, host)
    end
    room = room - #entries
    if room > 0 then
        local rq = prefix .. K.ranked .. host
        local urls = redis.call('ZRANGE', rq, 0, room - 1)
        for _, url in ipairs(urls) do moved[#moved + 1] = head .. ranked_payload(prefix, url) end
        if #urls > 0 then redis.call('ZREMRANGEBYRANK', rq, 0, #urls - 1) end
        room = room - #urls
    end
    if room > 0 and redis.call('HEXISTS', prefix .. K.spill_claims, host) == 0 then  -- its buffer
        local sb = prefix .. K.buffer .. host
        local buffered = redis.call('LRANGE', sb, 0, room - 1)
        for _, e in ipairs(buffered) do moved[#moved + 1] = head .. buffered_payload(e) end
        if #buffered > 0 then redis.call('LTRIM', sb, #buffered, -1) end
        if redis.call('EXISTS', sb) == 0 then redis.call('ZREM', prefix .. K.spill, host) end
        room = room - #buffered
    end
    wants_load(prefix, host, 0, true)  -- its chunks: each goes to 'drops' as it is loaded
    redis.call('HDEL', prefix .. K.hrush, host)
    redis.call('ZREM', prefix .. K.rush, host)
    if delayed and room > 0 then
        local dq = prefix .. K.host_delayed .. host
        local retries = redis.call('ZRANGE', dq, 0, room - 1)
        for _, m in ipairs(retries) do
            local parts = split(m, 2)  -- seq, payload
            redis.call('ZREM', prefix .. K.delayed, parts[1] .. SEP .. host .. SEP .. parts[2])
            moved[#moved + 1] = head .. unattempted(parts[2])
        end
        if #retries > 0 then redis.call('ZREMRANGEBYRANK', dq, 0, #retries - 1) end
        room = room - #retries
    end
    to_drops(prefix, moved)
    if room > 0 then  -- every queue gave less than it was asked for: none is left
        redis.call('ZREM', dropping, host)
        return true
    end
    redis.call('ZADD', dropping, delayed and 1 or 0, host)
    return false
end
-- the drop code of a host's hdropped value (``<ms>:<reason>``)
local function drop_code(dropped)
    return DROP[string.match(dropped, ':(%a+)$')] or DROP.operator
end
-- the next chunk of the drop of ``host`` (nil: the first host of 'dropping'; one resumed
-- meanwhile leaves it); returns true while the host has entries left to move
local function next_drop_chunk(prefix, host)
    if not host then
        host = redis.call('ZRANGE', prefix .. K.dropping, 0, 0)[1]
        if not host then return false end
    end
    local dropped = redis.call('HGET', prefix .. K.hdropped, host)
    if not dropped then
        redis.call('ZREM', prefix .. K.dropping, host)
        return false
    end
    return not drop_queued(prefix, host, drop_code(dropped), false)
end
-- a paused host (hpaused) stays out of the ready heap until resumed (HOLD); so does a
-- dropped one (hdropped), whose URLs go to 'drops' (a chunk) whenever they would make it ready
-- (each hash looked up a host only when it exists: most crawls pause and drop no host)
local function held(prefix, host)
    if exists_once(prefix, K.hpaused) and redis.call('HEXISTS', prefix .. K.hpaused, host) == 1 then
        return true
    end
    if not exists_once(prefix, K.hdropped) then return false end
    local dropped = redis.call('HGET', prefix .. K.hdropped, host)
    if not dropped then return false end
    drop_queued(prefix, host, drop_code(dropped), false)
    return true
end
-- Submissions first: 'hrush' counts a host's submissions waiting at the head of its back
-- queue; 'rush' holds those of its hosts that are in the ready heap, with their score there
-- (every change of a host's score or presence in the heap goes through the three functions
-- below), so that POP takes a due host with a submission before the other due hosts.
local MIRRORED = {{K.hrush, K.rush}, {K.hkeen, K.keen}}  -- marks of hosts, their mirrors of the heap
local function ready_at(prefix, host, score)
    redis.call('ZADD', prefix .. K.ready, score, host)
    for _, m in ipairs(MIRRORED) do
        if exists_once(prefix, m[1]) and redis.call('HEXISTS', prefix .. m[1], host) == 1 then
            redis.call('ZADD', prefix .. m[2], score, host)
            present[m[2]] = true
        end
    end
end
local function unready(prefix, host)
    redis.call('ZREM', prefix .. K.ready, host)
    if exists_once(prefix, K.rush) then redis.call('ZREM', prefix .. K.rush, host) end
    if exists_once(prefix, K.keen) then redis.call('ZREM', prefix .. K.keen, host) end
end
-- the host in the heap (only) is not due before t
local function not_before(prefix, host, t)
    redis.call('ZADD', prefix .. K.ready, 'XX', 'GT', t, host)
    redis.call('ZADD', prefix .. K.rush, 'XX', 'GT', t, host)
    redis.call('ZADD', prefix .. K.keen, 'XX', 'GT', t, host)
end
-- a submission was put at the head of the host's back queue (after make_ready; a dropped
-- host's went to 'drops' instead)
local function rush(prefix, host)
    if redis.call('EXISTS', prefix .. K.back .. host) == 0 then return end
    redis.call('HINCRBY', prefix .. K.hrush, host, 1)
    mirror_ready(prefix, K.hrush, K.rush, host)
end
-- a URL of the host was handed out: one submission fewer waiting (the count may run ahead
-- of the queue's head, when a retry or an expired lease went before: it ends with the queue)
local function rushed(prefix, host)
    if not exists_once(prefix, K.hrush) then return end
    local count = tonumber(redis.call('HGET', prefix .. K.hrush, host) or '0')
    if count > 1 then
        redis.call('HSET', prefix .. K.hrush, host, count - 1)
    elseif count == 1 then
        redis.call('HDEL', prefix .. K.hrush, host)
        redis.call('ZREM', prefix .. K.rush, host)
    end
end
-- the host's queue is empty: out of the heap, and no submission of it waits any more
local MARKS = {K.hrush, K.hlevels, K.hkeen}  -- (hashes most crawls never have: exists_once)
local function emptied(prefix, host)
    unready(prefix, host)
    for _, name in ipairs(MARKS) do
        if exists_once(prefix, name) then redis.call('HDEL', prefix .. name, host) end
    end
end
-- put a host that is not in the ready heap into it, due no earlier than its hnext
-- time, unless it is at its in-flight limit or paused
local function add_ready(prefix, host, now)
    if at_limit(prefix, host) or held(prefix, host) then return end
    local nxt = tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0')
    if nxt < now then nxt = now end
    ready_at(prefix, host, nxt)
    -- a host waiting wholly on disk ('dormant') that enters the heap (a follow-up or a
    -- submission, a retry come due, a URL above the default level): a host in the heap has
    -- a window, and its chunks load behind what it holds (wants_load: 'refill'); it waits in
    -- one place, and is counted once
    if exists_once(prefix, K.dormant) and redis.call('ZREM', prefix .. K.dormant, host) == 1 then
        wants_load(prefix, host, now)
    end
end
local function make_ready(prefix, host, now)
    if not redis.call('ZSCORE', prefix .. K.ready, host) then add_ready(prefix, host, now) end
end
-- Leases by URL: 'leased' counts the leases of each URL in 'leases' (URL -> count), so
-- that PROMOTE finds whether a lease holds a URL without reading 'leases'. Every script
-- that adds a lease (POP) or removes one (acknowledged, expired, replaced by a follow-up:
-- POP, ACK, PUSH) calls leased with +1 or -1 for each member it added or removed (a
-- renewal or a give-back, ZADD XX from the client, changes no member). The URL is the
-- payload's URL (url_of).
local function leased(prefix, member, by)
    local payload = split(member, 4)[4]
    if not payload then return end
    local key = prefix .. K.leased
    local url = url_of(payload)
    if redis.call('HINCRBY', key, url, by) <= 0 then redis.call('HDEL', key, url) end
end
-- a host's interval (ms): its own (hdelay: Crawl-delay or the operator's override) or
-- the default, times its slow-down factor (hslow: failures slow a host, answers bring it back)
local function interval_of(prefix, host)
    local ms = tonumber(default_interval)
    if exists_once(prefix, K.hdelay) then
        ms = tonumber(redis.call('HGET', prefix .. K.hdelay, host) or default_interval)
    end
    local f = exists_once(prefix, K.hslow) and redis.call('HGET', prefix .. K.hslow, host)
    if f then ms = math.floor(ms * tonumber(f)) end
    return ms
end
-- AIMD: each answer adds `recovery` times the host's base rate back (a factor f becomes
-- 1 / (1/f + recovery)), and ends its run of failures
local recovery = 0.25
local function recover(prefix, host)
    if exists_once(prefix, K.hfail) then redis.call('HDEL', prefix .. K.hfail, host) end
    if exists_once(prefix, K.hdown) then redis.call('HDEL', prefix .. K.hdown, host) end
    local f = exists_once(prefix, K.hslow) and redis.call('HGET', prefix .. K.hslow, host)
    if f then
        f = 1 / (1 / tonumber(f) + recovery)
        if f < 1.01 then
            redis.call('HDEL', prefix .. K.hslow, host)
        else
            redis.call('HSET', prefix .. K.hslow, host, string.format('%.3f', f))
        end
    end
end
-- Politeness per address (FRONTIER_ADDRESS_POLITENESS; POP's address gate): a host's address
-- and its class ('haddr': host -> class SEP address SEP expiry ms, written by RESOLVE) give
-- the host a second budget, its class's, shared by every host of it: at most one hand-out
-- every interval (adelay: the class's own, else the default) and at most a cap of leases in
-- flight (alimit, else the default; 0: none). 'anext' is when the class may next be handed
-- a URL: an interval after the last hand-out and after the end of the last response, as a
-- host's (a request that left late is never followed too soon); 'alast', what the rate
-- limiter's SLOT counts from: the last slot taken and the last response's end. 'aflight'
-- counts its leases in flight, 'lclass' names the class of each and its interval (seq ->
-- class SEP ms), so that a lease gives back its class's place when it lands whatever the
-- host's address is by then. A host whose class is not free waits out of the ready heap in
-- 'apark:<class>' (host -> time it was parked, the longest first), and the class in
-- 'aready' at the time its hosts are to be looked at again (a landing brings it forward).
-- the class's own interval (ms), else ``default``
local function class_interval(prefix, class, default)
    return tonumber(redis.call('HGET', prefix .. K.adelay, class) or default)
end
-- how many more leases the class may have in flight (its own cap, else ``default_cap``;
-- 0: no cap, math.huge)
local function class_room(prefix, class, default_cap)
    local cap = tonumber(redis.call('HGET', prefix .. K.alimit, class) or default_cap)
    if cap <= 0 then return math.huge end
    return cap - tonumber(redis.call('HGET', prefix .. K.aflight, class) or '0')
end
local function wake_class_at(prefix, class, at)
    if redis.call('EXISTS', prefix .. K.apark .. class) == 1 then
        redis.call('ZADD', prefix .. K.aready, at, class)
    end
end
-- a response from the class ended at ``now``: its next hand-out and slot count from there
local function class_ended(prefix, class, interval, now)
    if tonumber(redis.call('HGET', prefix .. K.alast, class) or '0') < now then
        redis.call('HSET', prefix .. K.alast, class, now)
    end
    local at = tonumber(redis.call('HGET', prefix .. K.anext, class) or '0')
    if at < now + interval then
        at = now + interval
        redis.call('HSET', prefix .. K.anext, class, at)
    end
    return at
end
-- the lease ``seq`` ended at ``now``: its class has one more place
local function release_class(prefix, seq, now)
    if not exists_once(prefix, K.lclass) then return end  -- (no politeness per address, nor any before)
    local record = redis.call('HGET', prefix .. K.lclass, seq)
    if not record then return end
    redis.call('HDEL', prefix .. K.lclass, seq)
    local class, interval = string.match(record, '^(.*)' .. SEP .. '(%d+)$')
    if redis.call('HINCRBY', prefix .. K.aflight, class, -1) <= 0 then
        redis.call('HDEL', prefix .. K.aflight, class)
    end
    wake_class_at(prefix, class, class_ended(prefix, class, tonumber(interval), now))
end
-- the download of a lease ended (landed, acknowledged, expired, given back or replaced
-- by a follow-up): its host may have one more in flight, and is due its interval after
-- now; idempotent per lease. `ok`: the host answered (see recover), counted even when
-- the lease had landed already (its follow-up or its ack may come first). With
-- ``landings`` (new_landings: a call's landings, gathered by host), what it changes of
-- its host waits for ends_landed, once a host: several leases of a host (a pop's share)
-- land with one look at its count in flight, its next time and the heap, and the host is
-- due its interval after the latest of them
local function new_landings()
    return {hosts = {}, order = {}}
end
local function ends_landed(prefix, landings)
    for _, host in ipairs(landings.order) do
        local h = landings.hosts[host]  -- {leases, its next time, the latest landing}
        if redis.call('HINCRBY', prefix .. K.hflight, host, -h[1]) <= 0 then
            redis.call('HDEL', prefix .. K.hflight, host)
        end
        if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < h[2] then
            redis.call('HSET', prefix .. K.hnext, host, h[2])
        end
        if has_queue(prefix, host) then make_ready(prefix, host, h[3]) end
    end
end
local function land(prefix, member, now, ok, landings)
    local seq = string.match(member, '^(%d+)' .. SEP)
    if not seq then return end
    local host = split(member, 4)[3]
    if ok then recover(prefix, host) end
    if redis.call('SREM', prefix .. K.flying, seq) == 0 then return end
    release_class(prefix, seq, now)
    local nxt = now + interval_of(prefix, host)
    local own = landings or new_landings()
    local h = own.hosts[host]
    if h then
        h[1] = h[1] + 1
        h[2] = math.max(h[2], nxt)
        h[3] = math.max(h[3], now)
    else
        own.hosts[host] = {1, nxt, now}
        own.order[#own.order + 1] = host
    end
    if not landings then ends_landed(prefix, own) end
end
