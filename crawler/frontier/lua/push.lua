-- PUSH: admit a batch of URLs into the frontier.
--
-- ARGV[1]  key prefix             ARGV[2]  URL-seen generation G the caller sized for
-- ARGV[3]  capacity of generation G-1
-- ARGV[4]  max URLs per host (0: no limit, and no per-host count is kept)
-- ARGV[5]  now (ms)
-- ARGV[6]  number of entries     ARGV[7]  max requests in flight per host (0: no limit)
-- ARGV[8]  default host interval (ms)
-- ARGV[9]  the host window (FRONTIER_HOST_WINDOW; 0: no spill)   ARGV[10] hosts with a window
--          at most (FRONTIER_ACTIVE_HOSTS; 0: no limit)   ARGV[11] ms a partial spill buffer
--          waits before it is written out (FRONTIER_SPILL_AGE)
-- ARGV[12] the default front queue level (Scrapy's priority 0): with a window, a fifo URL
--          of another level carries the difference (helpers: to_back)
-- ARGV[13] the kind of URL-seen's buckets: 'sets' or 'strings' (urlseen.py; seen:meta's layout)
-- ARGV[14] with a window: the inbox's entries that make it due to be written out at once
-- ARGV[15..] one value per entry (fewer arguments are cheaper for the client to send):
--          its fields joined by \x1f, in this order, '' for one not given (the last two,
--          host and payload, are the front queue entry as it stands):
--          check      '1': check and update URL-seen
--          back       '1': straight into the host's back queue, at its head (follow-ups:
--                     retries, redirects; submissions)
--          urgent     '1' (with back): a submission: its host is handed out before the
--                     other due hosts (rush, hrush)
--          retry_at   ms: not before that time: into the delayed set (a URL's own retry),
--                     and its host's index of it (dq:<host>: seq SEP payload), from which
--                     POP moves it to the head of its back queue once due
--          quota      the host's page quota, in place of ARGV[4] (the crawl rules' max_pages)
--          in_flight  the host's in-flight limit (hlimit: the crawl rules' in_flight); '0':
--                     none of its own (any before it forgotten)
--          ranked     '1': FRONTIER_ORDER importance: a new URL goes to its host's ranked
--                     queue
--          cash       with ranked: the importance it brings (OPIC: its share of the cash of
--                     the page that links to it; a URL seen and still in its ranked queue
--                     gains it)
--          level      front queue level (0 = highest)
--          lease      i if the entry replaces lease ARGV[14 + n + i] (leases follow the
--                     entries); the replaced lease ends (its download lands) and its cash
--                     goes on with the follow-up (helpers: requeued_entry); a follow-up
--                     whose lease is no longer held (a push sent twice after a timeout, or a
--                     lease that expired and was requeued) is not enqueued again (status 0);
--                     the replaced lease leaves the index of leases by URL ('leased')
--          hashes     the URL's bucket in each generation 0..G-1, comma-separated, then a
--                     space and its fingerprint f as a signed 32-bit number, all decimal
--                     ('' without check; urlseen.py hashes_text)
--          host       politeness key
--          payload    opaque request encoding
--          A plain entry (checked, of a level, nothing else: a seed, a link) is sent as
--          \002 level \x1f hashes \x1f host \x1f payload: its other fields are ''.
-- URL-seen: generation i's bucket for the URL is seen:<i>:<its bucket number i>. A URL is seen if
-- a bucket of any generation holds its fingerprint; otherwise its fingerprint is added to
-- its bucket in generation G-1. 'sets': a bucket is a set of the signed fingerprints (an
-- intset: 4 bytes each), the older generations asked with SISMEMBER, G-1's added with SADD,
-- which says whether it was there. 'strings' (crawls that recorded their layout before):
-- a bucket is a string of 4-byte big-endian fingerprints (f + 2^31) one after another, a
-- fingerprint held at an offset that is a multiple of 4, the bucket rewritten whole (SET)
-- rather than appended to: APPEND and SETRANGE grow a string's allocation by doubling
-- (~30% unused on average), SET allocates what the string needs.
-- With a window (ARGV[9] > 0), a new URL (neither back nor retry_at) of the default level or
-- below goes to the crawl's inbox, ``<host> SEP <entry>`` (an entry as a chunk holds it: a fifo
-- URL's levelled payload, a ranked one's '\030<score>\031<payload>'), whatever its host holds:
-- PUSH looks no host up for it, and a spill round writes the inbox out as chunks (SPILL's
-- take and put), which its host's window loads as they come (decision 0061). The inbox is
-- due to be written out ('inbox:due', ms) ARGV[11] after its first entry came, at once when
-- it holds ARGV[14] entries, and whenever a worker's pop comes back short (POP's work).
-- A new URL of a level above the default is not held behind its host's URLs beyond the
-- window: it goes to its host's window while it has room, nothing of the host is spilled or
-- buffered, and the host has a window or there is room for one more (helpers: spill);
-- while none of its level or above is beyond (hbeyond), it joins the window past its size,
-- up to twice it (a host without a window, waiting on disk, gets one for it if there is
-- room for one more under ARGV[10]); once one of its level goes beyond, the others of that
-- level follow it there (fifo within a level), to the host's buffer, which is due to be
-- written out (spill) at once when it holds a window's worth, else after ARGV[11].
-- Returns: -1 if G is not the current generation (caller reloads and retries; nothing
--          was changed), else one status per entry processed: 1 added, 0 already seen,
--          2 over its host's quota (the URL stays marked as seen, and goes to 'drops', to
--          be recorded as not fetched: POP hands it out first, due -3). A replaced
--          lease is released in every case. When an entry fills generation G-1, the
--          script starts generation G and stops there: fewer statuses than entries means
--          "reload the generation and send the rest".
-- Atomic: the seen test, the filter update and the enqueue of each URL happen together,
--         so a URL enters the frontier at most once however many workers push it.
--- @include "helpers"
local prefix = ARGV[1]
local gen = tonumber(ARGV[2])
local meta = prefix .. K.seen_meta
if tonumber(redis.call('HGET', meta, 'gen') or '1') ~= gen then
    return -1
end
local cap = tonumber(ARGV[3])
local in_sets = ARGV[13] == 'sets'
local seen_prefix = prefix .. K.seen
local generations = {}  -- generation i's key prefix, seen:<i - 1>:
for i = 1, gen do generations[i] = seen_prefix .. (i - 1) .. ':' end
local function holds(s, fp)
    -- s holds the 4-byte fingerprint fp at an entry boundary
    local at = 1
    while true do
        local j = string.find(s, fp, at, true)
        if not j then return false end
        if j % 4 == 1 then return true end
        at = j + 1
    end
end
-- an entry's fields before host and payload, and the two of them (the front queue entry)
local ENTRY = '^' .. string.rep('([^\031]*)\031', 11) .. '(.*)$'
-- level, buckets, fingerprint, host SEP payload
local PLAIN = '^\002([^\031]*)\031([%d,]*) (%-?%d+)\031(.*)$'
local HASHES = '^([%d,]*) (%-?%d+)$'  -- an entry's hashes: buckets, fingerprint
local count_field = 'n:' .. (gen - 1)
local count = tonumber(redis.call('HGET', meta, count_field) or '0')
local maxhost = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
max_flight = tonumber(ARGV[7])
default_interval = ARGV[8]
window = tonumber(ARGV[9])
active_hosts = tonumber(ARGV[10])
local spill_age = tonumber(ARGV[11])
local default_level = tonumber(ARGV[12])
local inbox_slice = tonumber(ARGV[14])
local FIRST = 14  -- the entries follow
local out, front = {}, {}
-- With a window, each host's decision is made once a call: room[host] is how many more new
-- URLs its window takes in this call (0: the rest go to its buffer); the URLs for windows and
-- buffers are gathered per host and written after the loop (tails[host], buffers[host]).
local room, tails, buffers, grown = {}, {}, {}, {}  -- grown[host]: its window took URLs
local opened = 0  -- hosts given a window in this call (in the ready heap after the loop)
-- size[host]: its window's size now (nil: not looked up); far[host]: the highest level
-- beyond its window before this call, as a difference (math.huge: nothing beyond; nil: not
-- looked up); ahead[host]: the highest level among those this call sends to its buffer
local size, far, ahead = {}, {}, {}
-- had[host]: its window held URLs before this call: it is in the ready heap already, or out of
-- it for a reason a new URL does not change (in-flight limit, paused, waiting for its address)
local had = {}
local NOTHING = math.huge
-- the ready heap's size, read once a call (room_for_host's ZCARD at each new host cost a
-- Redis call a host): the hosts this call gives a window are counted in ``opened``, and a
-- follow-up's host made ready, or a lease landed, in the loop makes it read again
local heap = nil
local function room_for_window()
    if active_hosts > 0 and heap == nil then heap = redis.call('ZCARD', prefix .. K.ready) end
    return room_for_host(prefix, opened, heap)
end
local function window_has(host, ranked)
    -- (a fifo crawl's windows are back queues alone: no ranked queue to count)
    return ranked == '1' and window_size(prefix, host) or redis.call('LLEN', prefix .. K.back .. host)
end
local function window_room(host, ranked)
    local r = room[host]
    if r == nil then
        r = 0
        if redis.call('EXISTS', prefix .. K.spilled .. host, prefix .. K.buffer .. host) == 0 then
            local have = window_has(host, ranked)
            if have > 0 then
                r = math.max(window - have, 0)
                had[host] = true
            elseif room_for_window() then
                r = window
                opened = opened + 1
            end
            size[host], far[host] = have, NOTHING
            if exists_once(prefix, K.hbeyond) then redis.call('HDEL', prefix .. K.hbeyond, host) end
        end
        room[host] = r
    end
    return r
end
-- a URL of level difference d, for which the window has no room, joins it past its size
-- (see above): above the default level, above everything beyond, into a window less than
-- twice its size (a host without one: if something is beyond it)
local function past_window(host, d, ranked)
    if d >= 0 then return false end
    local best = far[host]
    if best == nil then
        best = tonumber(redis.call('HGET', prefix .. K.hbeyond, host) or '0')
        far[host], size[host] = best, window_has(host, ranked)
        if size[host] > 0 then had[host] = true end
    end
    best = math.min(best, ahead[host] or NOTHING)
    if d >= best or size[host] >= 2 * window then return false end
    if size[host] == 0 then
        -- a host without a window gets one if something is beyond it and there is room for
        -- one more (FRONTIER_ACTIVE_HOSTS: else it waits on disk, that URL in its buffer)
        if best == NOTHING or not room_for_window() then return false end
        opened = opened + 1  -- (it leaves 'dormant' as it enters the heap: add_ready)
    end
    return true
end
-- a URL joined the host's window
local function took(host)
    if room[host] > 0 then room[host] = room[host] - 1 end
    if size[host] then size[host] = size[host] + 1 end
    grown[host] = true
end
-- a fifo entry for a window or a buffer, with its level's difference d from the default
-- when it is not 0
local function levelled(d, payload)
    if d == 0 then return payload end
    return '\028' .. d .. SEP .. payload
end
local function gather(into, host, entry)
    local q = into[host]
    if not q then q = {}; into[host] = q end
    q[#q + 1] = entry
end
local inbox = {}  -- host SEP entry, for the crawl's inbox
local added, full = 0, false
local pages = {}  -- host -> URLs admitted (hpages), for the hosts of this call with a quota
for e = 1, n do
    local arg = ARGV[FIRST + e]
    local check, back, urgent, retry_at, quota, in_flight, ranked, cash, level, lease, hashes, tail
    local bs, f  -- the URL's bucket numbers (generation 0's first, comma-separated), its fingerprint
    if string.byte(arg, 1) == 2 then
        level, bs, f, tail = string.match(arg, PLAIN)
        check, back, urgent, retry_at, quota, in_flight, ranked, cash, lease = '1', '', '', '', '', '', '', '', ''
    else
        check, back, urgent, retry_at, quota, in_flight, ranked, cash, level, lease, hashes, tail =
            string.match(arg, ENTRY)
        if check == '1' then bs, f = string.match(hashes, HASHES) end
    end
    local cut = string.find(tail, SEP, 1, true)
    local host = string.sub(tail, 1, cut - 1)
    local status = 1
    if check == '1' then
        local keys, newest  -- its buckets' keys in generations 0..G-1 (when G > 1), its key in G-1
        if gen == 1 then
            newest = generations[1] .. bs
        else
            keys = {}
            for b in string.gmatch(bs, '%d+') do keys[#keys + 1] = generations[#keys + 1] .. b end
            newest = keys[gen]
        end
        if in_sets then
            for i = 1, gen - 1 do
                if redis.call('SISMEMBER', keys[i], f) == 1 then
                    status = 0
                    break
                end
            end
            if status == 1 and redis.call('SADD', newest, f) == 0 then
                status = 0
            end
        else
            local fp = struct.pack('>I4', tonumber(f) + 2147483648)
            local key, s
            for i = 1, gen do
                key = i < gen and keys[i] or newest
                s = redis.call('GET', key)
                if s and holds(s, fp) then
                    status = 0
                    break
                end
            end
            if status == 1 then redis.call('SET', key, (s or '') .. fp) end  -- (generation G-1's)
        end
        if status == 0 and ranked == '1' and (tonumber(cash) or 0) > 0 and string.byte(tail, cut + 1) ~= 74 then
            local url = split(string.sub(tail, cut + 1), 2)[1]
            credit(prefix, host, url, tonumber(cash))
        end
        if status == 1 then
            count = count + 1
            if count >= cap then full = true end
            local most = maxhost
            if quota ~= '' then most = tonumber(quota) end
            if most > 0 then  -- (its count read once a call, written once after the loop)
                local admitted = pages[host]
                if admitted == nil then admitted = tonumber(redis.call('HGET', prefix .. K.hpages, host) or '0') end
                pages[host] = admitted + 1
                if admitted + 1 > most then status = 2 end
            end
        end
    end
    local kept = 0  -- the cash of the lease it takes over (its importance goes on with it)
    if lease ~= '' then  -- before the enqueue: a follow-up may make its host ready
        local member = ARGV[FIRST + n + tonumber(lease)]
        kept = select(2, attempt_of(split(member, 4)[2]))
        if redis.call('ZREM', prefix .. K.leases, member) == 1 then
            leased(prefix, member, -1)
            promoted_back(prefix, string.sub(tail, cut + 1), now)
        elseif back == '1' then
            status = 0
        end
        land(prefix, member, now, false)
        heap = nil  -- (a landing may bring its host back to the heap)
    end
    if in_flight == '0' then  -- (a rules file without one for this host: none)
        redis.call('HDEL', prefix .. K.hlimit, host)
    elseif in_flight ~= '' and redis.call('HGET', prefix .. K.hlimit, host) ~= in_flight then
        redis.call('HSET', prefix .. K.hlimit, host, in_flight)
        present[K.hlimit] = true
    end
    if status == 2 then
        redis.call('RPUSH', prefix .. K.drops, DROP.quota .. SEP .. tail)
        added = added + 1
    elseif status == 1 then
        local d = tonumber(level) - default_level  -- (below 0: a higher level than the default)
        if retry_at ~= '' then
            local seq = redis.call('INCR', prefix .. K.lease_seq)
            local entry = requeued_entry(1, kept, string.sub(tail, cut + 1))
            redis.call('ZADD', prefix .. K.delayed, retry_at, seq .. SEP .. host .. SEP .. entry)
            redis.call('ZADD', prefix .. K.host_delayed .. host, retry_at, seq .. SEP .. entry)
        elseif back == '1' then
            redis.call('LPUSH', prefix .. K.back .. host, requeued_entry(1, kept, string.sub(tail, cut + 1)))
            make_ready(prefix, host, now)
            heap = nil
            if urgent == '1' then rush(prefix, host) end
        elseif window > 0 and d >= 0 then  -- the inbox (see above)
            if ranked == '1' then
                local score = tonumber(level) * RANK - (tonumber(cash) or 0)
                local entry = '\030' .. string.format('%.17g', score) .. SEP .. string.sub(tail, cut + 1)
                inbox[#inbox + 1] = host .. SEP .. entry
            elseif d == 0 then
                inbox[#inbox + 1] = tail  -- (host SEP payload as it came)
            else
                inbox[#inbox + 1] = host .. SEP .. levelled(d, string.sub(tail, cut + 1))
            end
        elseif window > 0 and window_room(host, ranked) == 0 and not past_window(host, d, ranked) then
            if d < (ahead[host] or NOTHING) then ahead[host] = d end
            local payload = string.sub(tail, cut + 1)
            if ranked == '1' then
                local score = tonumber(level) * RANK - (tonumber(cash) or 0)
                payload = '\030' .. string.format('%.17g', score) .. SEP .. payload
            else
                payload = levelled(d, payload)
            end
            gather(buffers, host, payload)
        elseif ranked == '1' then
            local payload = string.sub(tail, cut + 1)
            local url, rest = payload, payload
            if string.byte(payload, 1) ~= 74 then  -- 'J': kept whole, keyed by its own text
                url = split(payload, 2)[1]
                rest = string.sub(payload, #url + 1)
            end
            local score = tonumber(level) * RANK - (tonumber(cash) or 0)
            if redis.call('ZADD', prefix .. K.ranked .. host, 'NX', score, url) == 1 then
                if rest ~= '' then redis.call('HSET', prefix .. K.ranked_payloads, url, rest) end
                if window > 0 then
                    took(host)
                else
                    make_ready(prefix, host, now)
                end
            else  -- waiting there already (a URL pushed again past URL-seen: a recrawl's)
                status = 0
            end
        elseif window > 0 then
            gather(tails, host, levelled(d, string.sub(tail, cut + 1)))
            took(host)
        else
            local q = front[level]
            if not q then q = {}; front[level] = q end
            q[#q + 1] = tail  -- host SEP payload: the front queue entry as it stands
        end
        if status == 1 then added = added + 1 end
    end
    out[e] = status
    if full then break end
end
-- with a window: each host's new URLs at the tail of its window, the others in its buffer
for host, q in pairs(tails) do to_back(prefix, host, q) end
for host in pairs(grown) do
    if not had[host] then make_ready(prefix, host, now) end
end
for host, d in pairs(ahead) do  -- a level above the default went beyond the window
    if d < 0 and d < tonumber(redis.call('HGET', prefix .. K.hbeyond, host) or '0') then
        redis.call('HSET', prefix .. K.hbeyond, host, d)
    end
end
for host, q in pairs(buffers) do
    local length
    for i = 1, #q, 1000 do
        length = redis.call('RPUSH', prefix .. K.buffer .. host, unpack(q, i, math.min(i + 999, #q)))
    end
    local before = length - #q  -- (a host with a buffer is in 'spill' already, due by its length)
    if length >= window and before < window then  -- a chunk's worth: due to be written out now, else when old
        redis.call('ZADD', prefix .. K.spill, 'LT', now, host)
    elseif before == 0 then
        redis.call('ZADD', prefix .. K.spill, 'NX', now + spill_age, host)
    end
end
for level, q in pairs(front) do push_all(prefix .. K.front .. level, q) end
if #inbox > 0 then
    local length
    for i = 1, #inbox, 1000 do
        length = redis.call('RPUSH', prefix .. K.inbox, unpack(inbox, i, math.min(i + 999, #inbox)))
    end
    if length >= inbox_slice then
        redis.call('SET', prefix .. K.inbox_due, now)
    elseif length == #inbox then  -- (its first entries)
        redis.call('SET', prefix .. K.inbox_due, now + spill_age)
    end
end
local counts = {}  -- host, count, ...: each host's count of admitted URLs, a thousand an HSET
for host, c in pairs(pages) do
    counts[#counts + 1] = host
    counts[#counts + 1] = c
end
for i = 1, #counts, 2000 do
    redis.call('HSET', prefix .. K.hpages, unpack(counts, i, math.min(i + 1999, #counts)))
end
redis.call('HSET', meta, count_field, count)
if full then redis.call('HSET', meta, 'gen', gen + 1) end
if added > 0 then
    redis.call('HINCRBY', prefix .. K.counters, 'queued', added)
    redis.call('HINCRBY', prefix .. K.counters, 'pushed', added)
end
return out
