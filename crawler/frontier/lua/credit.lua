-- CREDIT: FRONTIER_ORDER importance: URLs linked again by a fetched page, each gaining its share
-- of the page's importance (OPIC) where it waits in its host's ranked queue (a URL no longer
-- there, handed out or never ranked, gains nothing). ARGV[1] key prefix, ARGV[2..] one value a
-- URL: host SEP URL SEP cash. Returns how many were waiting.
--- @include "helpers"
local prefix = ARGV[1]
local waiting = 0
for i = 2, #ARGV do
    local parts = split(ARGV[i], 3)
    if redis.call('ZADD', prefix .. K.ranked .. parts[1], 'XX', 'INCR', -tonumber(parts[3]), parts[2]) then
        waiting = waiting + 1
    end
end
return waiting
