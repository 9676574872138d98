-- The host back-off, shared by BACKOFF and FAIL. hback holds host ->
-- ``level:time:until:reason`` (ms) of its last back-off; the level doubles the delay
-- until a quiet period passes; the host may not be handed out before ``until``: its
-- hnext time and, if it is in the ready heap, its score move there (never earlier).
-- A host backed off as down or for its robots.txt keeps the time of its first such back-off
-- since it last answered (hdown); once that is ``give_up`` ms (HOST_GIVE_UP_AFTER; each
-- script sets it, 0: never) ago, the host is given up: dropped (hdropped, reason 'down'),
-- its URLs to 'drops', to be recorded as not fetched (a chunk now, the rest a chunk at
-- each POP: see drop_queued).
local give_up = 0
local function back_off(prefix, host, now, lo, hi, quiet, retry_after, jitter, reason)
    if reason == 'down' or reason == 'robots' then
        redis.call('HSETNX', prefix .. K.hdown, host, now)
        present[K.hdown] = true
        local since = tonumber(redis.call('HGET', prefix .. K.hdown, host))
        local due_up = give_up > 0 and now - since >= give_up
        if due_up and redis.call('HSETNX', prefix .. K.hdropped, host, now .. ':down') == 1 then
            present[K.hdropped] = true
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
