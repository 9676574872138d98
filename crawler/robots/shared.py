"""A site's robots.txt shared by every worker through Redis: the record
(``robots:<origin>`` on the shard of the site's host: status, fetch time, zlib body,
failures, next try) and the claim on its fetch (``robots:lock:<origin>``), so that one
worker fetches while the others wait for its record.
"""

from __future__ import annotations

import redis

# ROBOTS_CLAIM: read a site's shared robots.txt record and, when it has to be fetched,
# claim the fetch. KEYS[1] the record (robots:<origin>), KEYS[2] its lock; ARGV[1] now
# (ms), ARGV[2] lifetime (ms), ARGV[3] the caller's token, ARGV[4] lock time (ms).
# Returns {state, record as HGETALL gives it}: state 0 = use the record (fetched less
# than a lifetime ago, or its last fetch failed and the next try is not due), 1 = the
# caller holds the lock and fetches, 2 = another worker is fetching (look again later).
ROBOTS_CLAIM = r"""
local rec = redis.call('HGETALL', KEYS[1])
local f = {}
for i = 1, #rec, 2 do f[rec[i]] = rec[i + 1] end
local now = tonumber(ARGV[1])
if tonumber(f['status'] or '0') > 0 and tonumber(f['fetched'] or '0') + tonumber(ARGV[2]) > now then
    return {0, rec}
end
if tonumber(f['retry'] or '0') > now then return {0, rec} end
if redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[4]) then return {1, rec} end
return {2, rec}
"""

# RENEW: KEYS[1] a lock, ARGV[1] the token that took it, ARGV[2] lifetime (ms): the lock
# lives that much longer if it is still that token's. Returns 1 or 0.
RENEW = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# UNLOCK: KEYS[1] a lock, ARGV[1] the token that took it: deleted only if still that
# token's (a lock that expired and was taken by another worker stays). Returns 1 or 0.
UNLOCK = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

CLAIM_USE, CLAIM_FETCH = 0, 1  # ROBOTS_CLAIM states (2: another worker fetches)
KEEP = object()  # share: leave the host's interval as it is


class SharedRobots:
    """The record and claim of each site, on its host's shard of ``frontier``."""

    def __init__(self, frontier, *, lifetime: float, stale: float, lock_seconds: float):
        self.frontier = frontier
        self.lifetime, self.stale, self.lock_seconds = lifetime, stale, lock_seconds
        client = frontier.redis  # the scripts' first client; each site's calls go to its host's shard
        self._claim = client.register_script(ROBOTS_CLAIM)
        self._unlock = client.register_script(UNLOCK)
        self._renew = client.register_script(RENEW)

    def shard(self, origin: str):
        """The frontier (shard) of the site's host."""
        return self.frontier.shard_for(self.frontier.politeness_key(origin + "/"))

    def claim(self, origin: str, token: str, now: float) -> tuple[int, dict]:
        """(state, record): CLAIM_USE the record, CLAIM_FETCH this token fetches, 2 another
        worker does. Raises redis.RedisError."""
        shard = self.shard(origin)
        state, flat = self._claim(
            keys=[shard.keys.robots(origin), shard.keys.robots_lock(origin)],
            args=[int(now * 1000), int(self.lifetime * 1000), token, int(self.lock_seconds * 1000)],
            client=shard.redis,
        )
        return state, dict(zip(flat[::2], flat[1::2], strict=True))

    def renew(self, origin: str, token: str) -> None:
        shard = self.shard(origin)
        try:
            self._renew(
                keys=[shard.keys.robots_lock(origin)], args=[token, int(self.lock_seconds * 1000)], client=shard.redis
            )
        except redis.RedisError:
            pass  # it expires, and another worker fetches

    def release(self, origin: str, token: str) -> None:
        shard = self.shard(origin)
        try:
            self._unlock(keys=[shard.keys.robots_lock(origin)], args=[token], client=shard.redis)
        except redis.RedisError:
            pass  # it expires

    def share(self, origin: str, host: str, fields: dict, drop: tuple, interval, token: str) -> None:
        """The site's record and the host's interval (unless KEEP) in one transaction; then
        the host's next slot counted from now (the fetch just ended), and the claim
        released (scripts are not run inside a transaction: a Redis Cluster refuses that).
        Raises redis.RedisError."""
        shard = self.shard(origin)
        key, client = shard.keys.robots(origin), shard.redis
        p = client.pipeline(transaction=True)
        p.hset(key, mapping=fields)
        if drop:
            p.hdel(key, *drop)
        p.expire(key, int(self.lifetime + self.stale) + 1)
        if interval is not KEEP:
            self.frontier.set_delay(host, interval, client=p)
        p.execute()
        self.frontier.end(host)
        self._unlock(keys=[shard.keys.robots_lock(origin)], args=[token], client=client)
