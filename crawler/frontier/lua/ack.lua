-- ACK: leases whose pages have been handled (stored, or failed for good), and leases
-- whose downloads ended (landed) while their pages are still being handled.
-- ARGV[1] key prefix, ARGV[2] now (ms), ARGV[3] max requests in flight per host,
-- ARGV[4] default host interval (ms), ARGV[5] recovery (see POP), then ARGV[6] the
-- number a of acknowledgements, ARGV[7 .. 6 + a] the leases acknowledged, ARGV[7 + a ..]
-- the landings, each its end time and its lease ('+' first: the host answered; see
-- includes/settle.lua). An acknowledged lease is forgotten, lands, and counts as a page done in
-- ``acked:recent``; a landed lease stays leased but no longer counts against its host's
-- in-flight limit.
-- Returns how many acknowledged leases were still held. Both are idempotent: an
-- unknown, expired or already landed lease is a no-op.
--- @include "helpers"
--- @include "settle"
max_flight = tonumber(ARGV[3])
default_interval = ARGV[4]
recovery = tonumber(ARGV[5])
return settle(ARGV[1], 6, tonumber(ARGV[2]))
