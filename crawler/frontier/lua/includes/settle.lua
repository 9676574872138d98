-- Acknowledgements and landings, shared by POP and ACK: ARGV[first] is the number a of
-- acknowledged leases that follow it; the arguments after those are landings, two each:
-- the time (ms) the download ended, at most now (the worker got the response then, so
-- the site's answer had ended: the host's next turn counts from there), and the landed
-- lease, prefixed '+' when its host answered (an HTTP answer other than 5xx or 429).
-- The acknowledged leases still held are counted in the second ``now`` falls in
-- (``acked:recent``: field second mod 64, value ``<second>:<count>``, a field of an older
-- second started again), so that the last minute's pages are a read of 64 fields, and in
-- the counter ``done`` (pages handled: what CRAWL_MAX_PAGES counts, with the leases held;
-- a drop's lease, its attempt negative, is no page). An acknowledged lease held leaves the
-- index of leases by URL ('leased', see helpers).
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
    local landings = new_landings()
    for i = first + a + 1, #ARGV, 2 do
        local ended, m = math.min(tonumber(ARGV[i]), now), ARGV[i + 1]
        if string.byte(m, 1) == 43 then  -- '+': its host answered
            land(prefix, string.sub(m, 2), ended, true, landings)
        else
            land(prefix, m, ended, false, landings)
        end
    end
    local done = 0
    for i = first + 1, first + a do
        local was_held = redis.call('ZREM', prefix .. K.leases, ARGV[i])
        acked = acked + was_held
        if was_held == 1 then leased(prefix, ARGV[i], -1) end
        if was_held == 1 and not string.find(ARGV[i], '^%d+\031%-') then done = done + 1 end  -- (not a drop's)
        land(prefix, ARGV[i], now, false, landings)
    end
    ends_landed(prefix, landings)
    if acked > 0 then count_recent(prefix, now, acked) end
    if done > 0 then redis.call('HINCRBY', prefix .. K.counters, 'done', done) end
    return acked
end
