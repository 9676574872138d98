-- CREDIT: FRONTIER_ORDER importance: URLs linked again by a fetched page, each gaining its share
-- of the page's importance (OPIC) where it waits in its host's ranked queue (a URL no longer
-- there, handed out or never ranked, gains nothing); while its host has URLs spilled or
-- buffered (FRONTIER_HOST_WINDOW), one not in the window gains it when it gets there (helpers:
-- credit). ARGV[1] key prefix, ARGV[2..] one value a URL: host SEP URL SEP cash. Returns how
-- many were waiting (or may be, on disk).
--- @include "helpers"
local prefix = ARGV[1]
local waiting = 0
for i = 2, #ARGV do
    local parts = split(ARGV[i], 3)
    if credit(prefix, parts[1], parts[2], tonumber(parts[3])) then
        waiting = waiting + 1
    end
end
return waiting
