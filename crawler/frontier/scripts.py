"""The frontier's Lua scripts. Each runs atomically in Redis in one round trip.

All keys of a crawl share the prefix ``crawl:{NAME}:`` (see keys.py). The scripts
build per-host key names from that prefix, so they are passed the prefix rather than
every key; all keys of a crawl hash to one Redis Cluster slot through the hash tag.
The names after the prefix come from keys.NAMES, as the table ``K`` each script starts
with (``prefix .. K.ready``): no key name is spelled here; nor a drop code (words.DROP_CODES,
the table ``DROP``).
Times are integer milliseconds given by the caller (``now``), so that every worker's
clock enters only as the "now" of its own call.

Entry formats:
    front queue entry   ``<host>\\x1f<payload>``
    back queue entry    ``<payload>``, or ``\\x1d<attempt>\\x1f<payload>`` for a URL whose
                        lease expired before (``attempt`` >= 2)
    lease (its id)      ``<seq>\\x1f<attempt>\\x1f<host>\\x1f<payload>``: the member of the
                        ``leases`` sorted set, scored by expiry, carries everything
                        needed to put the URL back
"""

from crawler.frontier.keys import lua_table
from crawler.frontier.words import DROP_CODES

_K = lua_table() + "local DROP = {" + ", ".join(f"{name} = {code}" for name, code in DROP_CODES.items()) + "}\n"

# Shared Lua helpers, prepended to the scripts that need them.
_HELPERS = r"""
local SEP = '\031'
local unpack = unpack or table.unpack
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
local host_limits = nil  -- whether hlimit exists (looked up once per call)
local function at_limit(prefix, host)
    if max_flight <= 0 then return false end
    local limit = max_flight
    if host_limits == nil then host_limits = redis.call('EXISTS', prefix .. K.hlimit) == 1 end
    if host_limits then limit = tonumber(redis.call('HGET', prefix .. K.hlimit, host) or max_flight) end
    return tonumber(redis.call('HGET', prefix .. K.hflight, host) or '0') >= limit
end
-- FRONTIER_ORDER importance: a host's new URLs wait in its ranked queue (rq:<host>, a zset:
-- URL -> level x RANK - cash, lowest first: a higher priority level first, then the most
-- cash, OPIC's importance; RANK 1e4 keeps cash exact to some 1e-12 within a level, cash
-- above RANK would pass into the level above), their payloads in 'rqpay' (URL -> the payload without the URL
-- when it begins with it). Its back queue (follow-ups, retries, submissions) comes first.
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
-- the host's most important URL (its payload and cash), or nil
local function take_ranked(prefix, host)
    local top = redis.call('ZPOPMIN', prefix .. K.ranked .. host)
    if #top == 0 then return nil end
    local cash = math.fmod(-tonumber(top[2]), RANK)
    if cash < 0 then cash = cash + RANK end
    return ranked_payload(prefix, top[1]), cash
end
-- URLs to be recorded as not fetched: 'drops' holds code SEP host SEP payload (code 1: the
-- host dropped by the operator, 2: given up, down too long, 3: over its host's page quota)
local function to_drops(prefix, entries)
    for i = 1, #entries, 1000 do
        redis.call('RPUSH', prefix .. K.drops, unpack(entries, i, math.min(i + 999, #entries)))
    end
end
-- a dropped host's back queue, ranked queue and (``delayed``: at the drop itself) its
-- delayed retries move to 'drops' (a requeued entry loses its attempt count)
local function drop_queued(prefix, host, code, delayed)
    local bq = prefix .. K.back .. host
    local moved = {}
    for _, e in ipairs(redis.call('LRANGE', bq, 0, -1)) do
        if string.byte(e, 1) == 29 then e = split(string.sub(e, 2), 2)[2] end
        moved[#moved + 1] = code .. SEP .. host .. SEP .. e
    end
    redis.call('DEL', bq)
    for _, url in ipairs(redis.call('ZRANGE', prefix .. K.ranked .. host, 0, -1)) do
        moved[#moved + 1] = code .. SEP .. host .. SEP .. ranked_payload(prefix, url)
    end
    redis.call('DEL', prefix .. K.ranked .. host)
    redis.call('HDEL', prefix .. K.hrush, host)
    redis.call('ZREM', prefix .. K.rush, host)
    for _, m in ipairs(delayed and redis.call('ZRANGE', prefix .. K.delayed, 0, -1) or {}) do
        local parts = split(m, 3)  -- seq, host, payload
        if parts[2] == host then
            redis.call('ZREM', prefix .. K.delayed, m)
            moved[#moved + 1] = code .. SEP .. host .. SEP .. parts[3]
        end
    end
    to_drops(prefix, moved)
end
-- a host the operator paused (hpaused) stays out of the ready heap until resumed (HOLD); so
-- does a dropped one (hdropped), whose URLs go to 'drops' whenever they would make it ready
local function held(prefix, host)
    if redis.call('HEXISTS', prefix .. K.hpaused, host) == 1 then return true end
    local dropped = redis.call('HGET', prefix .. K.hdropped, host)
    if not dropped then return false end
    drop_queued(prefix, host, DROP[string.match(dropped, ':(%a+)$')] or DROP.operator, false)
    return true
end
-- Submissions first: 'hrush' counts a host's submissions waiting at the head of its back
-- queue; 'rush' holds those of its hosts that are in the ready heap, with their score there
-- (every change of a host's score or presence in the heap goes through the three functions
-- below), so that POP takes a due host with a submission before the other due hosts.
local rushing = nil  -- whether hrush exists (looked up once per call)
local function any_rush(prefix)
    if rushing == nil then rushing = redis.call('EXISTS', prefix .. K.hrush) == 1 end
    return rushing
end
local function ready_at(prefix, host, score)
    redis.call('ZADD', prefix .. K.ready, score, host)
    if any_rush(prefix) and redis.call('HEXISTS', prefix .. K.hrush, host) == 1 then
        redis.call('ZADD', prefix .. K.rush, score, host)
    end
end
local function unready(prefix, host)
    redis.call('ZREM', prefix .. K.ready, host)
    redis.call('ZREM', prefix .. K.rush, host)
end
-- the host in the heap (only) is not due before t
local function not_before(prefix, host, t)
    redis.call('ZADD', prefix .. K.ready, 'XX', 'GT', t, host)
    redis.call('ZADD', prefix .. K.rush, 'XX', 'GT', t, host)
end
-- a submission was put at the head of the host's back queue (after make_ready; a dropped
-- host's went to 'drops' instead)
local function rush(prefix, host)
    if redis.call('EXISTS', prefix .. K.back .. host) == 0 then return end
    redis.call('HINCRBY', prefix .. K.hrush, host, 1)
    rushing = true
    local score = redis.call('ZSCORE', prefix .. K.ready, host)
    if score then redis.call('ZADD', prefix .. K.rush, score, host) end
end
-- a URL of the host was handed out: one submission fewer waiting (the count may run ahead
-- of the queue's head, when a retry or an expired lease went before: it ends with the queue)
local function rushed(prefix, host)
    if not any_rush(prefix) then return end
    local count = tonumber(redis.call('HGET', prefix .. K.hrush, host) or '0')
    if count > 1 then
        redis.call('HSET', prefix .. K.hrush, host, count - 1)
    elseif count == 1 then
        redis.call('HDEL', prefix .. K.hrush, host)
        redis.call('ZREM', prefix .. K.rush, host)
    end
end
-- the host's queue is empty: out of the heap, and no submission of it waits any more
local function emptied(prefix, host)
    unready(prefix, host)
    redis.call('HDEL', prefix .. K.hrush, host)
end
-- put a host that is not in the ready heap into it, due no earlier than its hnext
-- time, unless it is at its in-flight limit or paused
local function add_ready(prefix, host, now)
    if at_limit(prefix, host) or held(prefix, host) then return end
    local nxt = tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0')
    if nxt < now then nxt = now end
    ready_at(prefix, host, nxt)
end
local function make_ready(prefix, host, now)
    if not redis.call('ZSCORE', prefix .. K.ready, host) then add_ready(prefix, host, now) end
end
-- a host's interval (ms): its own (hdelay: Crawl-delay or the operator's override) or
-- the default, times its slow-down factor (hslow: failures slow a host, answers bring it back)
local function interval_of(prefix, host)
    local ms = tonumber(redis.call('HGET', prefix .. K.hdelay, host) or default_interval)
    local f = redis.call('HGET', prefix .. K.hslow, host)
    if f then ms = math.floor(ms * tonumber(f)) end
    return ms
end
-- AIMD: each answer adds `recovery` times the host's base rate back (a factor f becomes
-- 1 / (1/f + recovery)), and ends its run of failures
local recovery = 0.25
local function recover(prefix, host)
    redis.call('HDEL', prefix .. K.hfail, host)
    redis.call('HDEL', prefix .. K.hdown, host)
    local f = redis.call('HGET', prefix .. K.hslow, host)
    if f then
        f = 1 / (1 / tonumber(f) + recovery)
        if f < 1.01 then
            redis.call('HDEL', prefix .. K.hslow, host)
        else
            redis.call('HSET', prefix .. K.hslow, host, string.format('%.3f', f))
        end
    end
end
-- the download of a lease ended (landed, acknowledged, expired, given back or replaced
-- by a follow-up): its host may have one more in flight, and is due its interval after
-- now; idempotent per lease. `ok`: the host answered (see recover), counted even when
-- the lease had landed already (its follow-up or its ack may come first)
local function land(prefix, member, now, ok)
    local seq = string.match(member, '^(%d+)' .. SEP)
    if not seq then return end
    local host = split(member, 4)[3]
    if ok then recover(prefix, host) end
    if redis.call('SREM', prefix .. K.flying, seq) == 0 then return end
    if redis.call('HINCRBY', prefix .. K.hflight, host, '-1') <= 0 then
        redis.call('HDEL', prefix .. K.hflight, host)
    end
    local nxt = now + interval_of(prefix, host)
    if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < nxt then
        redis.call('HSET', prefix .. K.hnext, host, nxt)
    end
    if has_queue(prefix, host) then make_ready(prefix, host, now) end
end
"""

# Acknowledgements and landings, shared by POP and ACK: ARGV[first] is the number a of
# acknowledged leases that follow it; the arguments after those are landings, two each:
# the time (ms) the download ended, at most now (the worker got the response then, so
# the site's answer had ended: the host's next turn counts from there), and the landed
# lease, prefixed '+' when its host answered (an HTTP answer other than 5xx or 429).
# The acknowledged leases still held are counted in the second ``now`` falls in
# (``acked:recent``: field second mod 64, value ``<second>:<count>``, a field of an older
# second started again), so that the last minute's pages are a read of 64 fields, and in
# the counter ``done`` (pages handled: what CRAWL_MAX_PAGES counts, with the leases held;
# a drop's lease, its attempt negative, is no page).
_SETTLE = r"""
local function count_recent(prefix, now, n)
    local second = math.floor(now / 1000)
    local field = tostring(second % 64)
    local key = prefix .. K.acked_recent
    local old = redis.call('HGET', key, field)
    if old then
        local at, count = string.match(old, '^(%d+):(%d+)$')
        if tonumber(at) == second then n = n + tonumber(count) end
    end
    redis.call('HSET', key, field, string.format('%d:%d', second, n))
end
local function settle(prefix, first, now)
    local a = tonumber(ARGV[first])
    local acked = 0
    for i = first + a + 1, #ARGV, 2 do
        local ended, m = math.min(tonumber(ARGV[i]), now), ARGV[i + 1]
        if string.byte(m, 1) == 43 then land(prefix, string.sub(m, 2), ended, true) else land(prefix, m, ended, false) end
    end
    local done = 0
    for i = first + 1, first + a do
        local held = redis.call('ZREM', prefix .. K.leases, ARGV[i])
        acked = acked + held
        if held == 1 and not string.find(ARGV[i], '^%d+\031%-') then done = done + 1 end  -- (not a drop's)
        land(prefix, ARGV[i], now, false)
    end
    if acked > 0 then count_recent(prefix, now, acked) end
    if done > 0 then redis.call('HINCRBY', prefix .. K.counters, 'done', done) end
    return acked
end
"""

# The host back-off, shared by BACKOFF and FAIL. hback holds host ->
# ``level:time:until:reason`` (ms) of its last back-off; the level doubles the delay
# until a quiet period passes; the host may not be handed out before ``until``: its
# hnext time and, if it is in the ready heap, its score move there (never earlier).
# A host backed off as down or for its robots.txt keeps the time of its first such back-off
# since it last answered (hdown); once that is ``give_up`` ms (HOST_GIVE_UP_AFTER; each
# script sets it, 0: never) ago, the host is given up: dropped (hdropped, reason 'down'),
# its URLs to 'drops', to be recorded as not fetched.
_BACK_OFF = r"""
local give_up = 0
local function back_off(prefix, host, now, lo, hi, quiet, retry_after, jitter, reason)
    if reason == 'down' or reason == 'robots' then
        redis.call('HSETNX', prefix .. K.hdown, host, now)
        local since = tonumber(redis.call('HGET', prefix .. K.hdown, host))
        if give_up > 0 and now - since >= give_up and redis.call('HSETNX', prefix .. K.hdropped, host, now .. ':down') == 1 then
            unready(prefix, host)
            drop_queued(prefix, host, DROP.down, true)
        end
    end
    local state = redis.call('HGET', prefix .. K.hback, host)
    local level = 0
    if state then
        local old_level, last = string.match(state, '^(%d+):(%d+):')
        if now - tonumber(last) <= quiet then level = tonumber(old_level) + 1 end
    end
    local delay = retry_after
    if delay <= 0 then delay = math.floor(math.min(hi, lo * 2 ^ level) * jitter) end
    delay = math.min(delay, hi)
    local until_ms = now + delay
    redis.call('HSET', prefix .. K.hback, host, string.format('%d:%d:%d:%s', level, now, until_ms, reason))
    if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < until_ms then
        redis.call('HSET', prefix .. K.hnext, host, until_ms)
    end
    not_before(prefix, host, until_ms)
    return delay
end
"""

# PUSH: admit a batch of URLs into the frontier.
#
# ARGV[1]  key prefix             ARGV[2]  URL-seen generation G the caller sized for
# ARGV[3]  capacity of generation G-1
# ARGV[4]  comma list of the bucket counts of generations 0..G-1 (urlseen.py)
# ARGV[5]  max URLs per host (0: no limit, and no per-host count is kept)
# ARGV[6]  now (ms)
# ARGV[7]  number of entries     ARGV[8]  max requests in flight per host (0: no limit)
# ARGV[9]  default host interval (ms)
# ARGV[10..] one value per entry (fewer arguments are cheaper for
#          the client to send), six fields joined by \x1f, ending with host and payload
#          (so the end of the value is the front queue entry as it stands):
#          flags   'f' = check and update URL-seen; 'b' = straight into the host's back
#                  queue at its head (follow-ups: retries, redirects); 'u' with 'b' = a
#                  submission: its host is handed out before other due hosts (rush, hrush);
#                  'd<ms>' = not
#                  before that time: into the delayed set (a URL's own retry), from
#                  which POP moves it to the head of its back queue once due;
#                  'q<n>' = the host's quota is n in place of ARGV[5] (the crawl rules'
#                  max_pages); 'm<n>' = the host's in-flight limit is n (hlimit: the
#                  crawl rules' in_flight; m0: none of its own); 'r' = FRONTIER_ORDER importance: a new URL
#                  goes to its host's ranked queue, and 'c<cash>' is the importance it
#                  brings (OPIC: its share of the cash of the page that links to it; a URL
#                  seen and still in its ranked queue gains it)
#          level   front queue level (0 = highest)
#          lease   i if the entry replaces lease ARGV[9 + n + i] (leases follow the
#                  entries), or ''; the replaced lease ends (its download lands); a
#                  follow-up whose lease is no longer held (a push sent twice after a
#                  timeout, or a lease that expired and was requeued) is not enqueued
#                  again (status 0)
#          hashes  the URL's bucket hash and fingerprint, two decimal 32-bit numbers
#                  separated by a space ('' without flag 'f')
#          host    politeness key
#          payload opaque request encoding
# URL-seen: generation i's bucket for hash h is the string seen:<i>:<h mod buckets_i>,
# 4-byte big-endian fingerprints one after another. A URL is seen if a bucket of any
# generation holds its fingerprint (at an offset that is a multiple of 4); otherwise its
# fingerprint is added to its bucket in generation G-1. A bucket is rewritten whole (SET)
# rather than appended to: APPEND and SETRANGE grow a string's allocation by doubling
# (~30% unused on average), SET allocates what the string needs.
# Returns: -1 if G is not the current generation (caller reloads and retries; nothing
#          was changed), else one status per entry processed: 1 added, 0 already seen,
#          2 over its host's quota (the URL stays marked as seen, and goes to 'drops', to
#          be recorded as not fetched: POP hands it out first, due -3). A replaced
#          lease is released in every case. When an entry fills generation G-1, the
#          script starts generation G and stops there: fewer statuses than entries means
#          "reload the generation and send the rest".
# Atomic: the seen test, the filter update and the enqueue of each URL happen together,
#         so a URL enters the frontier at most once however many workers push it.
PUSH = (
    _K
    + _HELPERS
    + r"""
local prefix = ARGV[1]
local gen = tonumber(ARGV[2])
local meta = prefix .. K.seen_meta
if tonumber(redis.call('HGET', meta, 'gen') or '1') ~= gen then
    return -1
end
local cap = tonumber(ARGV[3])
local buckets = {}
for b in string.gmatch(ARGV[4], '%d+') do buckets[#buckets + 1] = tonumber(b) end
local seen_prefix = prefix .. K.seen
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
local ENTRY = '^([^\031]*)\031([^\031]*)\031([^\031]*)\031([^\031]*)\031(.*)$'
local count_field = 'n:' .. (gen - 1)
local count = tonumber(redis.call('HGET', meta, count_field) or '0')
local maxhost = tonumber(ARGV[5])
local now = tonumber(ARGV[6])
local n = tonumber(ARGV[7])
max_flight = tonumber(ARGV[8])
default_interval = ARGV[9]
local out, front = {}, {}
local added, full = 0, false
for e = 1, n do
    local flags, level, lease, hashes, tail = string.match(ARGV[9 + e], ENTRY)
    local cut = string.find(tail, SEP, 1, true)
    local host = string.sub(tail, 1, cut - 1)
    local status = 1
    if flags == 'f' or string.find(flags, 'f', 1, true) then
        local h, f = string.match(hashes, '^(%d+) (%d+)$')
        h = tonumber(h)
        local fp = struct.pack('>I4', tonumber(f))
        local key, s
        for i = 1, gen do
            key = seen_prefix .. (i - 1) .. ':' .. (h % buckets[i])
            s = redis.call('GET', key)
            if s and holds(s, fp) then
                status = 0
                break
            end
        end
        if status == 0 and string.find(flags, 'r', 1, true) and string.byte(tail, cut + 1) ~= 74 then
            local cash = tonumber(string.match(flags, 'c([%d%.e%-%+]+)') or '0')
            if cash > 0 then
                local url = split(string.sub(tail, cut + 1), 2)[1]
                redis.call('ZADD', prefix .. K.ranked .. host, 'XX', 'INCR', -cash, url)
            end
        end
        if status == 1 then  -- key and s: the bucket of generation G-1
            redis.call('SET', key, (s or '') .. fp)
            count = count + 1
            if count >= cap then full = true end
            local quota = maxhost
            local q = flags ~= 'f' and string.match(flags, 'q(%d+)')
            if q then quota = tonumber(q) end
            if quota > 0 and redis.call('HINCRBY', prefix .. K.hpages, host, '1') > quota then
                status = 2
            end
        end
    end
    if lease ~= '' then  -- before the enqueue: a follow-up may make its host ready
        local member = ARGV[9 + n + tonumber(lease)]
        if redis.call('ZREM', prefix .. K.leases, member) == 0 and string.find(flags, 'b', 1, true) then
            status = 0
        end
        land(prefix, member, now, false)
    end
    local due = flags ~= 'f' and string.match(flags, 'd(%d+)')
    local limit = flags ~= 'f' and string.match(flags, 'm(%d+)')
    if limit == '0' then  -- (a rules file without one for this host: none)
        redis.call('HDEL', prefix .. K.hlimit, host)
    elseif limit and redis.call('HGET', prefix .. K.hlimit, host) ~= limit then
        redis.call('HSET', prefix .. K.hlimit, host, limit)
        host_limits = true
    end
    if status == 2 then
        redis.call('RPUSH', prefix .. K.drops, DROP.quota .. SEP .. tail)
        added = added + 1
    elseif status == 1 then
        if due then
            local seq = redis.call('INCR', prefix .. K.lease_seq)
            redis.call('ZADD', prefix .. K.delayed, due, seq .. SEP .. tail)
        elseif flags ~= 'f' and string.find(flags, 'b', 1, true) then
            redis.call('LPUSH', prefix .. K.back .. host, string.sub(tail, cut + 1))
            make_ready(prefix, host, now)
            if string.find(flags, 'u', 1, true) then rush(prefix, host) end
        elseif flags ~= 'f' and string.find(flags, 'r', 1, true) then
            local payload = string.sub(tail, cut + 1)
            local url, rest = payload, payload
            if string.byte(payload, 1) ~= 74 then  -- 'J': kept whole, keyed by its own text
                url = split(payload, 2)[1]
                rest = string.sub(payload, #url + 1)
            end
            local cash = tonumber(string.match(flags, 'c([%d%.e%-%+]+)') or '0')
            if redis.call('ZADD', prefix .. K.ranked .. host, 'NX', tonumber(level) * RANK - cash, url) == 1 then
                redis.call('HSET', prefix .. K.ranked_payloads, url, rest)
                make_ready(prefix, host, now)
            else  -- waiting there already (a URL pushed again past URL-seen: a recrawl's)
                status = 0
            end
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
for level, q in pairs(front) do
    for i = 1, #q, 1000 do
        redis.call('RPUSH', prefix .. K.front .. level, unpack(q, i, math.min(i + 999, #q)))
    end
end
redis.call('HSET', meta, count_field, count)
if full then redis.call('HSET', meta, 'gen', gen + 1) end
if added > 0 then
    redis.call('HINCRBY', prefix .. K.counters, 'queued', added)
    redis.call('HINCRBY', prefix .. K.counters, 'pushed', added)
end
return out
"""
)

# POP: lease up to n URLs from hosts that are due (and acknowledge earlier leases).
#
# ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] n   ARGV[4] lease time (ms)
# ARGV[5] default host interval (ms)      ARGV[6] max front-queue entries moved per call
# ARGV[7] comma list of front queue weights, level 0 first
# ARGV[8] max attempts of one URL whose leases keep expiring (0: no limit)
# ARGV[9] max requests in flight per host (0: no limit)
# ARGV[10] recovery: the share of its base rate an answering host gets back (AIMD)
# ARGV[11] lookahead (ms): a host due within it is handed out now, with its due time, so
#           that the worker has its request ready when the host is due (the caller makes
#           it wait until then: the rate limiter)
# ARGV[12] the crawl's page budget (CRAWL_MAX_PAGES; 0: none): pages handled (``done``)
#           plus leases held never exceed it
# ARGV[13] '1': submissions only: step 2 looks at the due hosts with submissions waiting
#           (rush) and nothing else, steps 2a and 3 are skipped, and next_due is -1 (a
#           worker that holds as many unread pages as it may still takes a submission)
# ARGV[14..] acknowledgements and landings, as ACK takes them (see ACK), so that a
#           worker's acks ride on its next pop instead of costing a round trip each
# Steps, all in one atomic call:
#   0. acknowledge and land the given leases (as ACK does);
#   while the crawl is paused (the key 'paused', HOLD) or its budget is spent, steps 2
#   and 3 hand out nothing (and next_due is -1); a paused or dropped host is out of the
#   ready heap (add_ready) and none of its front queue entries is handed out;
#   2a. URLs to be recorded as not fetched ('drops': a dropped host's, a quota's) are handed
#      out first, at most n, each due -code (1 dropped, 2 given up, 3 over quota), the lease's
#      attempt -code (given back or expired, it goes back to 'drops'; acknowledged, it is no
#      page of the budget): the worker records them without a request;
#   1. expired leases (up to 100) go back to the head of their host's back queue, or are
#      abandoned (counted) after max attempts; a lease whose expiry is 0 was given back
#      by its worker (release) and does not count as an attempt; retries that are due
#      (up to 100) move from the delayed set to the head of their host's back queue;
#   2. hand out one URL from each of the first n hosts due by now + lookahead: those with
#      submissions waiting (rush) first, then the others of the ready heap, the longest due
#      first;
#   3. while fewer than n were handed out, refill from the front queues (weighted round
#      robin over the levels, so a higher level is preferred but a lower one is never
#      starved; at most ARGV[6] entries): an entry whose host has no back queue and is
#      due (hnext <= now + lookahead) is handed out at once; any other entry joins its
#      host's back queue, and a host new to the heap is due at its hnext time;
#   a URL promoted by a submission (PROMOTE) is queued twice: the first of its copies to
#   come up in steps 2 and 3 is handed out, the second is dropped (the host keeps its
#   turn; counted out of 'queued');
#   every URL handed out is leased until now + lease time and is in flight until it
#   lands; it is due at max(now, its host's due time); its host's next time becomes
#   that + its interval (hdelay or the default); a
#   host whose back queue is empty, or that reached its in-flight limit, leaves the
#   heap but keeps its hnext time (the landing of one of its leases brings it back).
# Returns {next_due, acked, due1, interval1, cash1, lease1, due2, ...} (a lease ends with
# its payload; its due time, ms, is when its request may leave; its host's interval, ms,
# is how long after its download ends the host is due again; its cash, the importance it
# carries, OPIC's, to share among its links: 0 but from a ranked queue); when
# fewer than n URLs were handed out, next_due is the earliest time (ms) any host in the
# heap or any delayed retry is due (now when the refill stopped at its limit with front
# queue entries left; -1: nothing is queued but in front queues, i.e. nothing at all);
# otherwise it is -1 (not looked up).
POP = (
    _K
    + _HELPERS
    + _SETTLE
    + r"""
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local lease_ms = tonumber(ARGV[4])
default_interval = ARGV[5]
local refill_max = tonumber(ARGV[6])
local max_attempts = tonumber(ARGV[8])
max_flight = tonumber(ARGV[9])
recovery = tonumber(ARGV[10])
local horizon = now + tonumber(ARGV[11])
local ready = prefix .. K.ready
local counters = prefix .. K.counters
local leases = prefix .. K.leases
local delayed = prefix .. K.delayed

-- 0. acknowledgements and landings
local urgent_only = ARGV[13] == '1'
local acked = settle(prefix, 14, now)

-- 1. expired leases
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 100)
for x = 1, #expired, 2 do
    redis.call('ZREM', leases, expired[x])
    land(prefix, expired[x], now, false)
    local parts = split(expired[x], 4)  -- seq, attempt, host, payload
    local attempt = tonumber(parts[2])
    -- score 0 marks a lease given back by its worker (release), not a failed attempt
    if attempt < 0 then  -- a drop's (attempt -code): back to 'drops', to be recorded
        redis.call('RPUSH', prefix .. K.drops, -attempt .. SEP .. parts[3] .. SEP .. parts[4])
        redis.call('HINCRBY', counters, 'queued', 1)
        redis.call('HINCRBY', counters, 'expired', 1)
    elseif tonumber(expired[x + 1]) > 0 then attempt = attempt + 1 end
    if attempt < 0 then  -- (done above)
    elseif max_attempts > 0 and attempt > max_attempts then
        redis.call('HINCRBY', counters, 'abandoned', 1)
    else
        local entry = parts[4]
        if attempt > 1 then entry = '\029' .. attempt .. SEP .. entry end
        redis.call('LPUSH', prefix .. K.back .. parts[3], entry)
        make_ready(prefix, parts[3], now)
        redis.call('HINCRBY', counters, 'queued', 1)
        redis.call('HINCRBY', counters, 'expired', 1)
    end
end
for _, entry in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', delayed, entry)
    local parts = split(entry, 3)  -- seq, host, payload
    redis.call('LPUSH', prefix .. K.back .. parts[2], parts[3])
    make_ready(prefix, parts[2], now)
end

-- the operator's pause, and the page budget (a drop is no page: handed out before it)
local max_pages = tonumber(ARGV[12])
local paused = redis.call('EXISTS', prefix .. K.paused) == 1
local budget = n
if max_pages > 0 then
    local used = tonumber(redis.call('HGET', counters, 'done') or '0') + redis.call('ZCARD', leases)
    budget = math.max(max_pages - used, 0)
end

-- 2. hand out one URL from each of the first n due hosts
local out = {-1, acked}
if paused or n == 0 then return out end
local popped = 0
-- a promoted URL (PROMOTE) is queued twice: the first copy to come up is handed out (its
-- time in 'promoted' negated), the second is dropped
local promoted = prefix .. K.promoted
local any_promoted = redis.call('ZCARD', promoted) > 0
local dropped = 0
local function stale(payload)
    if not any_promoted or string.byte(payload, 1) == 74 then return false end  -- 'J': never promoted
    if string.byte(payload, 1) == 29 then payload = split(string.sub(payload, 2), 2)[2] end
    local url = split(payload, 2)[1]
    local at = redis.call('ZSCORE', promoted, url)
    if not at then return false end
    if tonumber(at) > 0 then
        redis.call('ZADD', promoted, -now, url)
        return false
    end
    redis.call('ZREM', promoted, url)
    dropped = dropped + 1
    return true
end
local function lease(host, payload, due, interval, untracked, cash)
    local attempt = 1
    if due < 0 then attempt = due end  -- a drop's: -code, so that it goes back to 'drops' if given back
    if string.byte(payload, 1) == 29 then
        local parts = split(string.sub(payload, 2), 2)
        attempt = tonumber(parts[1])
        payload = parts[2]
    end
    local seq = redis.call('INCR', prefix .. K.lease_seq)
    local member = seq .. SEP .. attempt .. SEP .. host .. SEP .. payload
    redis.call('ZADD', leases, now + lease_ms, member)
    if not untracked then
        redis.call('SADD', prefix .. K.flying, seq)
        redis.call('HINCRBY', prefix .. K.hflight, host, '1')
    end
    out[#out + 1] = due
    out[#out + 1] = interval
    out[#out + 1] = string.format('%.9g', cash or 0)
    out[#out + 1] = member
    popped = popped + 1
end
-- lease the host's next URL, due at `due`; the host's next time is one interval later
local function hand_out(host, payload, due, cash)
    local interval = interval_of(prefix, host)
    redis.call('HSET', prefix .. K.hnext, host, due + interval)
    lease(host, payload, due, interval, false, cash)
    return due + interval
end
if not urgent_only then
    for _, d in ipairs(redis.call('LPOP', prefix .. K.drops, n) or {}) do
        local parts = split(d, 3)  -- code, host, payload
        lease(parts[2], parts[3], -tonumber(parts[1]), 0, true)  -- (no download: not in flight)
    end
end
n = popped + math.min(n - popped, budget)
local due_hosts = {}
if popped < n then
    -- the due hosts with submissions first (rush), then the others in the order they fell due
    local first = {}
    if any_rush(prefix) then
        first = redis.call('ZRANGEBYSCORE', prefix .. K.rush, '-inf', horizon, 'WITHSCORES', 'LIMIT', 0, n - popped)
    end
    local taken = {}
    for i = 1, #first, 2 do
        taken[first[i]] = true
        due_hosts[#due_hosts + 1] = first[i]
        due_hosts[#due_hosts + 1] = first[i + 1]
    end
    local room = n - popped - #first / 2
    if room > 0 and not urgent_only then
        local others = redis.call('ZRANGEBYSCORE', ready, '-inf', horizon, 'WITHSCORES', 'LIMIT', 0, room + #first / 2)
        for i = 1, #others, 2 do
            if room > 0 and not taken[others[i]] then
                due_hosts[#due_hosts + 1] = others[i]
                due_hosts[#due_hosts + 1] = others[i + 1]
                room = room - 1
            end
        end
    end
end
for i = 1, #due_hosts, 2 do
    local host, due = due_hosts[i], math.max(tonumber(due_hosts[i + 1]), now)
    local bq = prefix .. K.back .. host
    local payload = redis.call('LPOP', bq)
    while payload and stale(payload) do payload = redis.call('LPOP', bq) end
    local cash = 0
    if not payload then
        payload, cash = take_ranked(prefix, host)
        while payload and stale(payload) do payload, cash = take_ranked(prefix, host) end
    end
    if payload then
        local nxt = hand_out(host, payload, due, cash)
        rushed(prefix, host)
        if not has_queue(prefix, host) then
            emptied(prefix, host)
        elseif at_limit(prefix, host) then
            unready(prefix, host)
        else
            ready_at(prefix, host, nxt)
        end
    else
        emptied(prefix, host)
    end
end

-- 3. refill: while fewer than n were handed out, take entries from the front queues;
-- an entry of a host with no back queue that is due is handed out at once, any other
-- goes to its host's back queue (and a host new to the heap is due at max(now, hnext))
if popped < n and not urgent_only then
    local weights, total = {}, 0
    for w in string.gmatch(ARGV[7], '%d+') do
        weights[#weights + 1] = tonumber(w)
        total = total + tonumber(w)
    end
    local turn = tonumber(redis.call('HGET', counters, 'turn') or '0')
    local moved = 0
    while popped < n and moved < refill_max do
        turn = turn + 1
        local slot, level = turn % total, 1
        while slot >= weights[level] do slot = slot - weights[level]; level = level + 1 end
        local entry = redis.call('LPOP', prefix .. K.front .. (level - 1))
        if not entry then  -- that level is empty: take the highest non-empty one
            for l = 1, #weights do
                if l ~= level then
                    entry = redis.call('LPOP', prefix .. K.front .. (l - 1))
                    if entry then break end
                end
            end
        end
        if not entry then break end
        moved = moved + 1
        local parts = split(entry, 2)
        local host, payload = parts[1], parts[2]
        local bq = prefix .. K.back .. host
        if has_queue(prefix, host) then  -- in the heap already, or at its limit
            redis.call('RPUSH', bq, payload)
        else
            local nxt = tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0')
            if stale(payload) then
                -- (dropped: the host keeps its turn)
            elseif nxt <= horizon and not at_limit(prefix, host) and not held(prefix, host) then
                local due = math.max(nxt, now)
                hand_out(host, payload, due, 0)
            else
                redis.call('RPUSH', bq, payload)
                add_ready(prefix, host, now)
            end
        end
    end
    redis.call('HSET', counters, 'turn', turn % total)
    if popped < n and moved >= refill_max then out[1] = now end  -- front queues not done
end
if popped + dropped > 0 then
    redis.call('HINCRBY', counters, 'queued', -(popped + dropped))
end
if popped < n and out[1] < 0 and not urgent_only then
    for _, key in ipairs({ready, delayed}) do
        local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        if first[2] and (out[1] < 0 or tonumber(first[2]) < out[1]) then out[1] = tonumber(first[2]) end
    end
end
return out
"""
)

# BACKOFF: keep every worker away from a host for a while: it answered 429 or sent
# Retry-After (reason 'throttled'), its robots.txt is unreachable ('robots'), or it is
# down ('down', see FAIL). ARGV[1] key prefix, ARGV[2] host, ARGV[3] now (ms), ARGV[4]
# minimum back-off (ms), ARGV[5] maximum (ms), ARGV[6] quiet period (ms) after which the
# host's back-off level is forgiven, ARGV[7] Retry-After (ms, 0: none), ARGV[8] jitter
# factor (>= 1), ARGV[9] reason, ARGV[10] give up after (ms, HOST_GIVE_UP_AFTER; 0:
# never). The delay is Retry-After if given (capped at the maximum), else minimum *
# 2^level times the jitter, capped (see _BACK_OFF).
# Returns the delay (ms).
BACKOFF = (
    _K
    + _HELPERS
    + _BACK_OFF
    + r"""
give_up = tonumber(ARGV[10])
return back_off(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
    tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9])
"""
)

# FAIL: a fetch of a leased URL failed; judge the host (the URL itself is retried on its
# own schedule by the caller). ARGV[1] key prefix, ARGV[2] host, ARGV[3] now (ms),
# ARGV[4] kind: 'url' (a 5xx or a timeout: this URL failed) or 'down' (connection
# refused, DNS failure: the host failed), ARGV[5] a tag of the URL (distinct URLs,
# distinct tags), ARGV[6] slow-down factor per failure (x2), ARGV[7] largest factor,
# ARGV[8] distinct URLs failing in a row (no answer between) that make the host down (0: never),
# ARGV[9] minimum back-off (ms), ARGV[10] maximum, ARGV[11] quiet period, ARGV[12] jitter,
# ARGV[13] default host interval (ms), ARGV[14] give up after (ms; see _BACK_OFF).
# A 'url' failure multiplies the host's slow-down factor (hslow; its interval is
# multiplied by it, for every worker, until answers bring it back: see recover) and the
# host's next hand-out moves to now + the slowed interval. hfail keeps the tags of the
# distinct URLs that failed since the host last answered; a 'down' failure, or as many
# distinct failing URLs as ARGV[8], backs the host off (reason 'down'): it is probed
# again, one request at a time, when the back-off ends.
# Returns {state, delay (ms), factor x 1000}: state 0 slowed, 1 down (backed off).
FAIL = (
    _K
    + _HELPERS
    + _BACK_OFF
    + r"""
local prefix, host, now, kind, tag = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local down_after = tonumber(ARGV[8])
default_interval = ARGV[13]
give_up = tonumber(ARGV[14])
local f = tonumber(redis.call('HGET', prefix .. K.hslow, host) or '1')
if kind == 'url' then
    f = math.min(f * tonumber(ARGV[6]), tonumber(ARGV[7]))
    if f > 1 then redis.call('HSET', prefix .. K.hslow, host, string.format('%.3f', f)) end
end
local tags = {}
local known = false
for t in string.gmatch(redis.call('HGET', prefix .. K.hfail, host) or '', '[^,]+') do
    tags[#tags + 1] = t
    if t == tag then known = true end
end
if not known then tags[#tags + 1] = tag end
while #tags > math.max(down_after, 1) do table.remove(tags, 1) end
redis.call('HSET', prefix .. K.hfail, host, table.concat(tags, ','))
if kind == 'down' or (down_after > 0 and #tags >= down_after) then
    local delay = back_off(prefix, host, now, tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]), 0,
        tonumber(ARGV[12]), 'down')
    return {1, delay, math.floor(f * 1000)}
end
local nxt = now + interval_of(prefix, host)
if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < nxt then
    redis.call('HSET', prefix .. K.hnext, host, nxt)
end
not_before(prefix, host, nxt)
return {0, 0, math.floor(f * 1000)}
"""
)

# SLOT: the rate limiter's atomic step (Aragog's lastScheduledFetchTime), run just before
# every request leaves a worker. ARGV[1] key prefix, ARGV[2] host, ARGV[3] now (ms),
# ARGV[4] default interval (ms), ARGV[5] longest wait (ms) a request may take,
# ARGV[6] the operator's override of the host's interval (ms, '' for none; it is stored
# in hdelay, so that the frontier's hand-outs follow it too), ARGV[7] not before (ms:
# the due time the frontier handed the request out with, 0 for none).
# slot = max(now, not before, last + interval, end of the host's back-off), interval from the
# override, else hdelay (robots.txt Crawl-delay), else the default, times the host's
# slow-down factor (hslow); ``last`` (hlast) is the later of the last slot taken and the
# end of the last response (END). When the slot is at most the longest wait away, it is
# taken (hlast = slot) and the caller waits for it; otherwise nothing is taken and the
# host's next hand-out time (hnext, and its score in the ready heap) moves to the slot,
# so the caller can give the request back to the frontier. Returns the slot (ms).
SLOT = (
    _K
    + r"""
local prefix, host, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local interval = redis.call('HGET', prefix .. K.hdelay, host)
if ARGV[6] ~= '' and interval ~= ARGV[6] then
    interval = ARGV[6]
    redis.call('HSET', prefix .. K.hdelay, host, interval)
end
interval = tonumber(interval or ARGV[4])
local f = redis.call('HGET', prefix .. K.hslow, host)
if f then interval = math.floor(interval * tonumber(f)) end
local last = redis.call('HGET', prefix .. K.hlast, host)
local slot = math.max(now, tonumber(ARGV[7]))
if last and tonumber(last) + interval > slot then slot = tonumber(last) + interval end
local back = redis.call('HGET', prefix .. K.hback, host)
if back then
    local until_ms = tonumber(string.match(back, '^%d+:%d+:(%d+)'))
    if until_ms > slot then slot = until_ms end
end
if slot - now <= tonumber(ARGV[5]) then
    redis.call('HSET', prefix .. K.hlast, host, slot)
else
    if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < slot then
        redis.call('HSET', prefix .. K.hnext, host, slot)
    end
    -- (not_before's two calls: SLOT, run before every request, goes without the helpers)
    redis.call('ZADD', prefix .. K.ready, 'XX', 'GT', slot, host)
    redis.call('ZADD', prefix .. K.rush, 'XX', 'GT', slot, host)
end
return slot
"""
)

# END: a response from a host (or a failure to get one) has just ended, for a request
# the frontier does not track (robots.txt and its redirect hops): the host's next slot
# counts from now, not from when the request left, and its next hand-out is no sooner
# than now + its interval (so that the frontier and the limiter agree). ARGV[1] key
# prefix, ARGV[2] host, ARGV[3] now (ms), ARGV[4] default interval (ms).
END = (
    _K
    + _HELPERS
    + r"""
local prefix, host, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
default_interval = ARGV[4]
if tonumber(redis.call('HGET', prefix .. K.hlast, host) or '0') < now then
    redis.call('HSET', prefix .. K.hlast, host, now)
end
local nxt = now + interval_of(prefix, host)
if tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0') < nxt then
    redis.call('HSET', prefix .. K.hnext, host, nxt)
    not_before(prefix, host, nxt)
end
"""
)

# ACK: leases whose pages have been handled (stored, or failed for good), and leases
# whose downloads ended (landed) while their pages are still being handled.
# ARGV[1] key prefix, ARGV[2] now (ms), ARGV[3] max requests in flight per host,
# ARGV[4] default host interval (ms), ARGV[5] recovery (see POP), then ARGV[6] the
# number a of acknowledgements, ARGV[7 .. 6 + a] the leases acknowledged, ARGV[7 + a ..]
# the landings, each its end time and its lease ('+' first: the host answered; see
# _SETTLE). An acknowledged lease is forgotten, lands, and counts as a page done in
# ``acked:recent``; a landed lease stays leased but no longer counts against its host's
# in-flight limit.
# Returns how many acknowledged leases were still held. Both are idempotent: an
# unknown, expired or already landed lease is a no-op.
ACK = (
    _K
    + _HELPERS
    + _SETTLE
    + r"""
max_flight = tonumber(ARGV[3])
default_interval = ARGV[4]
recovery = tonumber(ARGV[5])
return settle(ARGV[1], 6, tonumber(ARGV[2]))
"""
)


# PROMOTE: move submitted URLs that are queued already to the head of their hosts' back
# queues (a submission jumps the queue: crawler/frontier/submit.py).
#
# ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] forget promotions older than this (ms)
# ARGV[4] max requests in flight per host (0: no limit)   ARGV[5] default host interval (ms)
# ARGV[6..] one value per URL: host SEP payload (the payload begins with the URL and SEP,
#           or is the URL: codec.py's plain forms)
# A queued URL sits in a front queue, a back queue or the delayed set, where finding it
# would mean reading the queue; instead a copy of it goes to the head of its host's back
# queue and the URL into 'promoted' (URL -> now): POP hands out whichever copy comes up
# first and drops the other. A URL in flight (a lease holds it), or whose promoted copy was
# handed out, is not promoted again; one promoted and not yet handed out is at the head of
# its queue already.
# Returns one status per URL: 1 promoted, 0 not (in flight).
# Promotions older than ARGV[3] are forgotten (a URL promoted when it was queued nowhere:
# a page whose record the caller did not find, fetched by another worker meanwhile).
PROMOTE = (
    _K
    + _HELPERS
    + r"""
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local promoted = prefix .. K.promoted
max_flight = tonumber(ARGV[4])
default_interval = ARGV[5]
local horizon = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', promoted, '(' .. -horizon, '(' .. horizon)
local flying = {}
for _, member in ipairs(redis.call('ZRANGE', prefix .. K.leases, 0, -1)) do
    local payload = split(member, 4)[4]
    flying[split(payload, 2)[1]] = true
end
local out, added = {}, 0
for i = 6, #ARGV do
    local parts = split(ARGV[i], 2)
    local host, payload = parts[1], parts[2]
    local url = split(payload, 2)[1]
    local at = redis.call('ZSCORE', promoted, url)
    if flying[url] or (at and tonumber(at) < 0) then  -- in flight, or just handed out
        out[#out + 1] = 0
    elseif at then  -- promoted already, at the head of its queue
        out[#out + 1] = 1
    else
        redis.call('ZADD', promoted, now, url)
        redis.call('LPUSH', prefix .. K.back .. host, payload)
        make_ready(prefix, host, now)
        rush(prefix, host)
        added = added + 1
        out[#out + 1] = 1
    end
end
if added > 0 then redis.call('HINCRBY', prefix .. K.counters, 'queued', added) end
return out
"""
)


# HOLD: the operator pauses or resumes the crawl, or one host (``scrapy frontier pause``),
# or drops a host (``scrapy frontier drop``).
#
# ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] 'pause', 'resume' or 'drop' (a host only)
# ARGV[4] a host (politeness key), or '' for the whole crawl
# ARGV[5] max requests in flight per host (0: no limit)   ARGV[6] default host interval (ms)
# The crawl paused: the key 'paused' holds the time, and POP hands out nothing while it
# exists (acknowledgements, landings and expired leases go on). A host paused: 'hpaused'
# holds it with the time, it leaves the ready heap, and add_ready keeps it out (every
# script that would bring it back asks there); resumed, it rejoins the heap at its hnext
# time when it has URLs queued. What was handed out before goes on: leases are renewed,
# pages are stored and acknowledged. A host dropped: 'hdropped' holds it (``<ms>:operator``),
# it leaves the heap (and the paused ones), and its back queue and delayed retries go to
# 'drops' (as every URL of it that comes up later: see held), to be recorded as not fetched;
# resumed, a dropped (or given up) host is crawled again from its next URL.
# Returns 1 if the state changed, 0 if it was so already.
HOLD = (
    _K
    + _HELPERS
    + r"""
local prefix, now, verb, host = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
max_flight = tonumber(ARGV[5])
default_interval = ARGV[6]
if host == '' then
    if verb == 'pause' then return redis.call('SETNX', prefix .. K.paused, now) end
    return redis.call('DEL', prefix .. K.paused)
end
if verb == 'drop' then
    if redis.call('HSETNX', prefix .. K.hdropped, host, now .. ':operator') == 0 then return 0 end
    redis.call('HDEL', prefix .. K.hpaused, host)
    unready(prefix, host)
    drop_queued(prefix, host, DROP.operator, true)
    return 1
end
if verb == 'pause' then
    if redis.call('HSETNX', prefix .. K.hpaused, host, now) == 0 then return 0 end
    unready(prefix, host)
    return 1
end
local resumed = redis.call('HDEL', prefix .. K.hpaused, host) + redis.call('HDEL', prefix .. K.hdropped, host)
if resumed == 0 then return 0 end
redis.call('HDEL', prefix .. K.hdown, host)
if has_queue(prefix, host) then make_ready(prefix, host, now) end
return 1
"""
)


# CREDIT: FRONTIER_ORDER importance: URLs linked again by a fetched page, each gaining its share
# of the page's importance (OPIC) where it waits in its host's ranked queue (a URL no longer
# there, handed out or never ranked, gains nothing). ARGV[1] key prefix, ARGV[2..] one value a
# URL: host SEP URL SEP cash. Returns how many were waiting.
CREDIT = (
    _K
    + _HELPERS
    + r"""
local prefix = ARGV[1]
local waiting = 0
for i = 2, #ARGV do
    local parts = split(ARGV[i], 3)
    if redis.call('ZADD', prefix .. K.ranked .. parts[1], 'XX', 'INCR', -tonumber(parts[3]), parts[2]) then
        waiting = waiting + 1
    end
end
return waiting
"""
)
