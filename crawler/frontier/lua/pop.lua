-- POP: lease up to n URLs from hosts that are due (and acknowledge earlier leases).
--
-- ARGV[1] key prefix   ARGV[2] now (ms)   ARGV[3] n   ARGV[4] lease time (ms)
-- ARGV[5] default host interval (ms)      ARGV[6] max front-queue entries moved per call
-- ARGV[7] comma list of front queue weights, level 0 first
-- ARGV[8] max attempts of one URL whose leases keep expiring (0: no limit)
-- ARGV[9] max requests in flight per host (0: no limit)
-- ARGV[10] recovery: the share of its base rate an answering host gets back (AIMD)
-- ARGV[11] lookahead (ms): a host due within it is handed out now, with its due time, so
--           that the worker has its request ready when the host is due (the caller makes
--           it wait until then: the rate limiter)
-- ARGV[12] the crawl's page budget (CRAWL_MAX_PAGES; 0: none): pages handled (``done``)
--           plus leases held never exceed it
-- ARGV[13] '1': submissions only: step 2 looks at the due hosts with submissions waiting
--           (rush) and nothing else, steps 2a and 3 are skipped, and next_due is -1 (a
--           worker that holds as many unread pages as it may still takes a submission)
-- ARGV[14] the host window (FRONTIER_HOST_WINDOW; 0: no spill)
-- ARGV[15] hosts with a window at most (FRONTIER_ACTIVE_HOSTS; 0: no limit)
-- ARGV[16] politeness per address (FRONTIER_ADDRESS_POLITENESS): the default interval (ms)
--          of an address class, -1 when off   ARGV[17] its default cap of leases in flight
--          (0: none)
-- ARGV[18] '1': FRONTIER_ORDER importance (hosts may have ranked queues), else ''
-- ARGV[19..] acknowledgements and landings, as ACK takes them (see ACK), so that a
--           worker's acks ride on its next pop instead of costing a round trip each
-- Steps, all in one atomic call:
--   0. acknowledge and land the given leases (as ACK does);
--   while the crawl is paused (the key 'paused', HOLD) or its budget is spent, steps 2
--   and 3 hand out nothing (and next_due is -1); a paused or dropped host is out of the
--   ready heap (add_ready) and none of its front queue entries is handed out;
--   2a. URLs to be recorded as not fetched ('drops': a dropped host's, a quota's) are handed
--      out first, at most n, each due -code (1 dropped, 2 given up, 3 over quota), the lease's
--      attempt -code (given back or expired, it goes back to 'drops'; acknowledged, it is no
--      page of the budget): the worker records them without a request;
--   1. expired leases (up to 100) go back to the head of their host's back queue (with
--      their attempt and cash: helpers, requeued_entry), or are
--      abandoned (counted) after max attempts; a lease whose expiry is 0 was given back
--      by its worker (release) and does not count as an attempt; retries that are due
--      (up to 100) move from the delayed set (and their host's index of it, dq:<host>) to
--      the head of their host's back queue; a drop under way ('dropping', see HOLD) moves
--      its next chunk (at most DROP_CHUNK entries; not in a call for submissions only);
--   2. hand out one URL from each of the first n hosts due by now + lookahead: those with
--      submissions waiting (rush) first, then (with a window, fifo) those whose next URL is
--      of a higher priority level than the default (keen), then the others of the ready
--      heap, the longest due first (a host without politeness, its interval 0 and no
--      in-flight limit, up to its share of the pop; in a crawl without politeness, up to
--      SHARE URLs from each of the first n / SHARE hosts, then one look more while short);
--   3. while fewer than n were handed out, refill from the front queues (weighted round
--      robin over the levels, so a higher level is preferred but a lower one is never
--      starved; at most ARGV[6] entries): an entry whose host has no back queue and is
--      due (hnext <= now + lookahead) is handed out at once; any other entry joins its
--      host's back queue, and a host new to the heap is due at its hnext time;
--   with a window (ARGV[14] > 0), a host's window that a hand-out leaves at half its size
--   or less is topped up (helpers: spill): from its buffer, or it is marked for a worker to
--   load its oldest chunk ('refill'); a host whose window is empty leaves the heap until
--   then;
--   a URL promoted by a submission (PROMOTE) is queued twice: the first of its copies to
--   come up in steps 2 and 3 is handed out, the second is dropped (the host keeps its
--   turn; counted out of 'queued');
--   every lease added or removed is counted in the index of leases by URL ('leased');
--   every URL handed out is leased until now + lease time and is in flight until it
--   lands; it is due at max(now, its host's due time); its host's next time becomes
--   that + its interval (hdelay or the default); a
--   host whose back queue is empty, or that reached its in-flight limit, leaves the
--   heap but keeps its hnext time (the landing of one of its leases brings it back).
-- Returns {next_due, acked, work, due1, interval1, cash1, lease1, address1, due2, ...} (a
-- lease ends with its payload; its due time, ms, is when its request may leave; its host's
-- interval, ms, is how long after its download ends the host is due again; its cash, the
-- importance it carries, OPIC's, to share among its links: 0 but from a ranked queue, or
-- back from a lease that carried it; its address, by address, else ''); when
-- fewer than n URLs were handed out, next_due is the earliest time (ms) any host in the
-- heap or any delayed retry is due (now when the refill stopped at its limit with front
-- queue entries left, or URLs wait in the inbox; a host waiting for its chunk to be loaded
-- or a buffer waiting to be written out counts, at the time it may be, a load a worker
-- claimed at most LOADING_MS from now, not at its claim's expiry; -1: nothing is
-- queued but in front queues, i.e. nothing at all);
-- otherwise it is -1 (not looked up); with a window, when fewer than n were handed out,
-- work is what a spill round may find now, the sum of 1: buffers due to be written out or
-- URLs in the inbox, 2:
-- hosts waiting on disk (dormant), 4: chunks to load (hosts in 'refill' due, or dormant
-- while there is room for one more window), read as Frontier.spill_due reads it (so that a
-- worker's round after a short pop needs no round trip of its own); -1 not looked up.
--- @include "helpers"
--- @include "settle"
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
local max_pages = tonumber(ARGV[12])
local urgent_only = ARGV[13] == '1'
window = tonumber(ARGV[14])
active_hosts = tonumber(ARGV[15])
local address_interval = tonumber(ARGV[16])
local by_address = address_interval >= 0
local address_cap = tonumber(ARGV[17])
ranked_order = ARGV[18] == '1'
local ready = prefix .. K.ready
local counters = prefix .. K.counters
local leases = prefix .. K.leases
local delayed = prefix .. K.delayed
local promoted = prefix .. K.promoted

local out = {-1, 0, -1}  -- next_due, acked, the spill's work, then five values a lease handed out
local popped = 0  -- leases handed out
local dropped = 0  -- second copies of promoted URLs dropped

-- a URL back in the frontier: queued again, and counted as an expired lease
local function requeued()
    redis.call('HINCRBY', counters, 'queued', 1)
    redis.call('HINCRBY', counters, 'expired', 1)
end

-- step 1: expired leases (up to 100) land and go back to the head of their host's back
-- queue, or are abandoned after max attempts; a drop's goes back to 'drops'
local function requeue_expired()
    local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 100)
    for x = 1, #expired, 2 do
        local member = expired[x]
        redis.call('ZREM', leases, member)
        leased(prefix, member, -1)
        land(prefix, member, now, false)
        local parts = split(member, 4)  -- seq, attempt[:cash], host, payload
        local attempt, cash = attempt_of(parts[2])
        if attempt < 0 then  -- a drop's (attempt -code): back to 'drops', to be recorded
            redis.call('RPUSH', prefix .. K.drops, -attempt .. SEP .. parts[3] .. SEP .. parts[4])
            promoted_back(prefix, parts[4], now)
            requeued()
        else
            -- score 0 marks a lease given back by its worker (release), not a failed attempt
            if tonumber(expired[x + 1]) > 0 then attempt = attempt + 1 end
            if max_attempts > 0 and attempt > max_attempts then
                redis.call('HINCRBY', counters, 'abandoned', 1)
            else
                redis.call('LPUSH', prefix .. K.back .. parts[3], requeued_entry(attempt, cash, parts[4]))
                promoted_back(prefix, parts[4], now)
                make_ready(prefix, parts[3], now)
                requeued()
            end
        end
    end
end

-- step 1: URL retries that are due (up to 100) move to the head of their host's back queue
local function release_due_retries()
    for _, entry in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 100)) do
        redis.call('ZREM', delayed, entry)
        local parts = split(entry, 3)  -- seq, host, payload
        redis.call('ZREM', prefix .. K.host_delayed .. parts[2], parts[1] .. SEP .. parts[3])
        redis.call('LPUSH', prefix .. K.back .. parts[2], parts[3])
        make_ready(prefix, parts[2], now)
    end
end

-- how many more leases the page budget allows (pages handled and leases held)
local function budget_left()
    if max_pages <= 0 then return n end
    local used = tonumber(redis.call('HGET', counters, 'done') or '0') + redis.call('ZCARD', leases)
    return math.max(max_pages - used, 0)
end

-- a promoted URL (PROMOTE) is queued twice: the first copy to come up is handed out (its
-- time in 'promoted' negated), the second is dropped (true: drop this one)
local any_promoted = nil
local function stale(payload)
    if any_promoted == nil then any_promoted = redis.call('ZCARD', promoted) > 0 end
    if not any_promoted then return false end
    local url = url_of((unattempted(payload)))
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

-- lease a URL: due at `due` (a drop's: -code), in flight until it lands unless `untracked`;
-- returns its seq
local function lease(host, payload, due, interval, untracked, cash, address)
    local attempt = 1
    if due < 0 then attempt = due end  -- a drop's: -code, so that it goes back to 'drops' if given back
    local field
    payload, field = unattempted(payload)
    if field then  -- back from a lease: its attempt, and its cash
        local kept
        attempt, kept = attempt_of(field)
        if (cash or 0) <= 0 then cash = kept end
    end
    local seq = redis.call('INCR', prefix .. K.lease_seq)
    local member = seq .. SEP .. lease_field(attempt, cash) .. SEP .. host .. SEP .. payload
    redis.call('ZADD', leases, now + lease_ms, member)
    leased(prefix, member, 1)
    if not untracked then
        redis.call('SADD', prefix .. K.flying, seq)
        redis.call('HINCRBY', prefix .. K.hflight, host, '1')
    end
    out[#out + 1] = due
    out[#out + 1] = interval
    out[#out + 1] = string.format('%.9g', cash or 0)
    out[#out + 1] = member
    out[#out + 1] = address or ''
    popped = popped + 1
    return seq
end

-- lease the host's next URL, due at `due`; the host's next time is one interval later, and
-- its address class's (``class``, by address) one class interval later
local function hand_out(host, payload, due, cash, class, address)
    local interval = interval_of(prefix, host)
    redis.call('HSET', prefix .. K.hnext, host, due + interval)
    local seq = lease(host, payload, due, interval, false, cash, address)
    if class then
        local every = class_interval(prefix, class, address_interval)
        redis.call('HSET', prefix .. K.anext, class, due + every)
        redis.call('HINCRBY', prefix .. K.aflight, class, 1)
        redis.call('HINCRBY', prefix .. K.ahanded, class, 1)
        redis.call('HSET', prefix .. K.lclass, seq, class .. SEP .. every)
        present[K.lclass] = true
        wake_class_at(prefix, class, due + every)  -- (its other hosts, if any wait)
    end
    return due + interval
end

-- by address: the host's class, its address and the time its URL may leave; nil when the
-- host waits out of the heap: for its address (unknown: a worker resolves it, RESOLVE, and
-- puts the host back), or for its class (parked until the class is free: wake_classes)
local function address_gate(host, due)
    local record = redis.call('HGET', prefix .. K.haddr, host)
    if not record then
        unready(prefix, host)
        redis.call('ZADD', prefix .. K.resolve, 'NX', now, host)
        return nil
    end
    local parts = split(record, 3)  -- class, address, expiry
    local class = parts[1]
    if tonumber(parts[3]) <= now then  -- expired: refreshed by a worker, used meanwhile
        redis.call('ZADD', prefix .. K.refresh, 'NX', now, host)
    end
    local at = tonumber(redis.call('HGET', prefix .. K.anext, class) or '0')
    local full = class_room(prefix, class, address_cap) <= 0
    if at > horizon or full then
        unready(prefix, host)
        redis.call('ZADD', prefix .. K.apark .. class, 'NX', now, host)
        if not full then redis.call('ZADD', prefix .. K.aready, at, class) end  -- (else a landing)
        return nil
    end
    return class, parts[2], math.max(due, at)
end

-- the hosts leave the set ``key`` (a class's parked hosts, 'resolve') for the ready heap,
-- those with URLs queued; returns how many it moved
local function to_heap(key, hosts)
    for _, host in ipairs(hosts) do
        redis.call('ZREM', key, host)
        if has_queue(prefix, host) then add_ready(prefix, host, now) end
    end
    return #hosts
end

-- by address: the classes free again by the horizon (at most `want`) put their longest
-- parked hosts back in the heap, as many as the class may take in flight (16 at most); the
-- class waits again for the others. A class at its cap wakes none: a landing sets it again.
local function wake_classes(want)
    local aready = prefix .. K.aready
    for _, class in ipairs(redis.call('ZRANGEBYSCORE', aready, '-inf', horizon, 'LIMIT', 0, want)) do
        redis.call('ZREM', aready, class)
        local room = class_room(prefix, class, address_cap)
        if room > 0 then
            local park = prefix .. K.apark .. class
            local wake = room == math.huge and 1 or math.min(room, 16)  -- (no cap: the interval lets one by)
            to_heap(park, redis.call('ZRANGE', park, 0, wake - 1))
            local at = tonumber(redis.call('HGET', prefix .. K.anext, class) or '0')
            wake_class_at(prefix, class, math.max(at, now))
        end
    end
end

-- without politeness per address (a crawl that had it, run on without): the hosts it left
-- waiting for their class or their first address go back to the heap, 100 a call
local function unpark_all()
    local left = 100
    local aready, resolve = prefix .. K.aready, prefix .. K.resolve
    for _, class in ipairs(redis.call('ZRANGE', aready, 0, 9)) do
        local park = prefix .. K.apark .. class
        left = left - to_heap(park, redis.call('ZRANGE', park, 0, left - 1))
        if redis.call('EXISTS', park) == 0 then redis.call('ZREM', aready, class) end
        if left <= 0 then return end
    end
    to_heap(resolve, redis.call('ZRANGE', resolve, 0, left - 1))
end

-- step 2a: URLs to be recorded as not fetched, at most n (no download: not in flight)
local function hand_out_drops()
    for _, d in ipairs(redis.call('LPOP', prefix .. K.drops, n) or {}) do
        local parts = split(d, 3)  -- code, host, payload
        if not stale(parts[3]) then lease(parts[2], parts[3], -tonumber(parts[1]), 0, true) end
    end
end

-- step 2: up to `want` hosts due by the horizon, {host, due, host, due...}: those with
-- submissions waiting (rush) first, then those of a higher level (keen), then the others,
-- each in the order they fell due
local function due_hosts(want)
    local found, taken, room = {}, {}, want
    local function take(key)  -- (the hosts taken before may be among the first `want`)
        if room <= 0 then return end
        local hosts = redis.call('ZRANGEBYSCORE', key, '-inf', horizon, 'WITHSCORES', 'LIMIT', 0, want)
        for i = 1, #hosts, 2 do
            if room > 0 and not taken[hosts[i]] then
                taken[hosts[i]] = true
                found[#found + 1] = hosts[i]
                found[#found + 1] = hosts[i + 1]
                room = room - 1
            end
        end
    end
    if exists_once(prefix, K.hrush) then take(prefix .. K.rush) end
    if not urgent_only then
        if exists_once(prefix, K.hkeen) then take(prefix .. K.keen) end
        take(ready)
    end
    return found
end

-- step 2: the next URL of each of these hosts (its back queue first, then its ranked
-- queue); the host stays in the heap at its next time, leaves it at its in-flight limit,
-- or leaves it for good with its queue empty
-- the host's next URL (its back queue first, then its ranked queue): payload, cash; nil
local function next_of(host)
    local bq = prefix .. K.back .. host
    local payload = redis.call('LPOP', bq)
    if payload then payload = unlevelled(payload) end
    while payload and stale(payload) do
        payload = redis.call('LPOP', bq)
        if payload then payload = unlevelled(payload) end
    end
    if payload then
        unkeen(prefix, host)
        return payload, 0
    end
    local cash
    payload, cash = take_ranked(prefix, host)
    while payload and stale(payload) do payload, cash = take_ranked(prefix, host) end
    return payload, cash
end

-- the host's window topped up after a hand-out: whether it has URLs queued (looked up but
-- when the top-up saw its window hold some: a window's size counts its ranked queue only in
-- a crawl by importance, and a crawl's order may have changed since a host's URLs came)
local function queued_after(host)
    return top_up(prefix, host, now) or has_queue(prefix, host)
end

-- whether a host may be held by politeness: a default interval, a host's own (hdelay), an
-- in-flight limit, an address class. Without any, step 2 looks first at as many due hosts
-- as give the pop SHARE URLs each, then, while the pop is short, at the others it needs:
-- fewer hosts a pop, each through the heap (ZADD), its window's top-up and its landing once
-- for up to SHARE URLs
local SHARE = 4
local function policed()
    return tonumber(default_interval) > 0 or max_flight > 0 or by_address or exists_once(prefix, K.hdelay)
        or exists_once(prefix, K.hlimit)
end

local function hand_out_due(hosts)
    -- a host without politeness (its interval 0, no in-flight limit) gives up to its share
    -- of the pop, not one URL: as the front queues' hand-outs do (step 3)
    local share = math.max(math.floor((n - popped) / math.max(#hosts / 2, 1)), 1)
    for i = 1, #hosts, 2 do
        local host, due = hosts[i], math.max(tonumber(hosts[i + 1]), now)
        local class, address, gated
        if by_address then class, address, gated = address_gate(host, due) end
        if gated then due = gated end
        local payload, cash
        if class or not by_address then payload, cash = next_of(host) end
        if class and not payload then  -- (nothing after all: the host keeps no place)
            if not queued_after(host) then emptied(prefix, host) end
        elseif payload then
            local nxt = hand_out(host, payload, due, cash, class, address)
            if nxt == due and max_flight <= 0 and not by_address and share > 1 then
                -- (its interval 0: the rest of its share at the same time, its next time
                -- unchanged; from its back queue in one call, then its ranked queue)
                local bq = prefix .. K.back .. host
                local taken = redis.call('LPOP', bq, share - 1) or {}
                for _, e in ipairs(taken) do
                    e = unlevelled(e)
                    if not stale(e) then lease(host, e, due, 0, false, 0) end
                end
                if #taken > 0 then unkeen(prefix, host) end
                for _ = #taken + 2, share do
                    payload, cash = next_of(host)
                    if not payload then break end
                    lease(host, payload, due, 0, false, cash)
                end
            end
            rushed(prefix, host)
            if not queued_after(host) then
                emptied(prefix, host)
            elseif at_limit(prefix, host) then
                unready(prefix, host)
            else
                ready_at(prefix, host, nxt)
            end
        elseif not by_address then
            if not queued_after(host) then emptied(prefix, host) end
        end
    end
end

-- the front queue weights (ARGV[7]), level 0 first, and their sum
local function front_weights()
    local weights, total = {}, 0
    for w in string.gmatch(ARGV[7], '%d+') do
        weights[#weights + 1] = tonumber(w)
        total = total + tonumber(w)
    end
    return weights, total
end

-- the next front queue entry by weighted round robin (the counter 'turn'); when its level
-- is empty, the highest non-empty one's; nil when every front queue is empty
local function next_front_entry(weights, total, turn)
    local slot, level = turn % total, 1
    while slot >= weights[level] do
        slot = slot - weights[level]
        level = level + 1
    end
    local entry = redis.call('LPOP', prefix .. K.front .. (level - 1))
    if entry then return entry end
    for l = 1, #weights do
        if l ~= level then
            entry = redis.call('LPOP', prefix .. K.front .. (l - 1))
            if entry then return entry end
        end
    end
    return nil
end

-- step 3: while fewer than n were handed out, take entries from the front queues (at most
-- refill_max): an entry of a host with no queue that is due is handed out at once, any
-- other joins its host's back queue (and a host new to the heap is due at max(now, hnext))
local function refill()
    local weights, total = front_weights()
    local turn = tonumber(redis.call('HGET', counters, 'turn') or '0')
    local moved = 0
    while popped < n and moved < refill_max do
        turn = turn + 1
        local entry = next_front_entry(weights, total, turn)
        if not entry then break end
        moved = moved + 1
        local parts = split(entry, 2)
        local host, payload = parts[1], parts[2]
        local bq = prefix .. K.back .. host
        if has_queue(prefix, host) then  -- in the heap already, or at its limit
            redis.call('RPUSH', bq, payload)
        elseif not stale(payload) then  -- (a stale copy is dropped: the host keeps its turn)
            local nxt = tonumber(redis.call('HGET', prefix .. K.hnext, host) or '0')
            if nxt <= horizon and not by_address and not at_limit(prefix, host) and not held(prefix, host) then
                hand_out(host, payload, math.max(nxt, now), 0)
            else
                redis.call('RPUSH', bq, payload)
                if by_address and redis.call('HEXISTS', prefix .. K.haddr, host) == 0 then
                    redis.call('ZADD', prefix .. K.resolve, 'NX', now, host)  -- (see address_gate)
                else
                    add_ready(prefix, host, now)
                end
            end
        end
    end
    redis.call('HSET', counters, 'turn', turn % total)
    if popped < n and moved >= refill_max then out[1] = now end  -- front queues not done
end

-- the score (ms) of a sorted set's first member (false: it is empty), read once a call
local firsts = {}
local function first_at(key)
    if firsts[key] == nil then
        local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        firsts[key] = first[2] and tonumber(first[2]) or false
    end
    return firsts[key]
end

-- whether new URLs wait in the inbox (with a window), read once a call
local inbox_held = nil
local function inbox_waits()
    if inbox_held == nil then inbox_held = window > 0 and redis.call('EXISTS', prefix .. K.inbox) == 1 end
    return inbox_held
end

-- when the next host or delayed retry is due (ms), -1 when neither is (URLs in the inbox:
-- now, the next spill round's; a load claimed: LOADING_MS from now at most, as its worker
-- loads it, where 'refill' holds the host at its claim's expiry, for another worker)
local LOADING_MS = 50
local function next_due()
    if inbox_waits() then return now end
    local at = -1
    local keys = {ready, delayed, prefix .. K.refill, prefix .. K.dormant, prefix .. K.spill, prefix .. K.aready,
                  prefix .. K.resolve}
    for _, key in ipairs(keys) do
        local first = first_at(key)
        if first and (at < 0 or first < at) then at = first end
    end
    if window > 0 and (at < 0 or at > now + LOADING_MS) and redis.call('HLEN', prefix .. K.load_claims) > 0 then
        at = now + LOADING_MS
    end
    return at
end

-- what a spill round may find now (see Returns): the tests of Frontier.spill_due
local function spill_work()
    local work = 0
    local buffers, dormant = first_at(prefix .. K.spill), first_at(prefix .. K.dormant)
    local loads = first_at(prefix .. K.refill)
    if (buffers and buffers <= now) or inbox_waits() then work = work + 1 end
    if dormant and dormant <= now then work = work + 2 end
    if (loads and loads <= now) or (dormant and dormant <= now and room_for_host(prefix)) then work = work + 4 end
    return work
end

-- the steps
out[2] = settle(prefix, 19, now)  -- 0. acknowledgements and landings
requeue_expired()  -- 1.
release_due_retries()
if not urgent_only then next_drop_chunk(prefix, nil) end
if n == 0 or redis.call('EXISTS', prefix .. K.paused) == 1 then return out end  -- the operator's pause
local budget = budget_left()  -- (a drop is no page: handed out before the budget)
if not urgent_only then hand_out_drops() end  -- 2a.
n = popped + math.min(n - popped, budget)
if popped < n and by_address and not urgent_only then wake_classes(n - popped) end
if not by_address and redis.call('EXISTS', prefix .. K.aready, prefix .. K.resolve) > 0 then unpark_all() end
if popped < n then  -- 2.
    if policed() then
        hand_out_due(due_hosts(n - popped))
    else  -- (a first look at fewer hosts, SHARE URLs each, a second while the pop is short)
        hand_out_due(due_hosts(math.ceil((n - popped) / SHARE)))
        if popped < n then hand_out_due(due_hosts(n - popped)) end
    end
end
if popped < n and not urgent_only then refill() end  -- 3.
if popped + dropped > 0 then
    redis.call('HINCRBY', counters, 'queued', -(popped + dropped))
end
if popped < n and out[1] < 0 and not urgent_only then out[1] = next_due() end
if popped < n and window > 0 and not urgent_only then out[3] = spill_work() end
return out
