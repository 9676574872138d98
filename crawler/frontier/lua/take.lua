-- TAKE: a worker takes submissions from the head of the submission list ('submit'), so that
-- a take sent again (a client's retry after the reply was lost, or the worker's next try
-- after the call failed) gets what the first took, not the values after them.
--
-- ARGV[1] key prefix   ARGV[2] the worker's token (unique per worker)
-- ARGV[3] the take's number (the worker's count of the takes it got a reply to)
-- ARGV[4] values at most   ARGV[5] ms the values taken are kept for a take sent again
-- The worker's last take is kept in stake:<token>: its number, then its values. When that
-- number is ARGV[3], its values are returned again; otherwise (the worker got the reply of
-- that take, and put its values) they are forgotten, up to ARGV[4] values leave the head
-- of 'submit' and are kept under ARGV[3] for ARGV[5] ms. A worker that dies before it puts
-- what it took loses those values (at most once), as before.
-- Returns {the values taken (oldest first), the counter 'submitted' ('0' when unset)}.
local prefix, token, number = ARGV[1], ARGV[2], ARGV[3]
local most, keep = tonumber(ARGV[4]), tonumber(ARGV[5])
local taken = prefix .. K.submit_taken .. token
local counter = redis.call('GET', prefix .. K.submitted) or '0'
local last = redis.call('LRANGE', taken, 0, -1)
if last[1] == number then
    table.remove(last, 1)
    return {last, counter}
end
redis.call('DEL', taken)
local values = redis.call('LPOP', prefix .. K.submit, most) or {}
if #values > 0 then
    redis.call('RPUSH', taken, number, unpack(values))
    redis.call('PEXPIRE', taken, keep)
end
return {values, counter}
