"""robots.txt for every worker at once (RFC 9309), parsed with Protego.

Replaces Scrapy's RobotsTxtMiddleware, which fetches robots.txt once per process and
treats a 5xx answer as "allow all".

Sharing. A site's robots.txt (per origin: scheme, host and port) is fetched once per
ROBOTSTXT_CACHE_SECONDS for all workers together: the fetching worker stores the raw
body (zlib-compressed, at most ROBOTSTXT_MAX_BYTES), the status and the fetch time in
Redis (key ``robots:<origin>``); every worker keeps parsed rules for up to
ROBOTSTXT_CACHE_ENTRIES origins in memory, and no more than ROBOTSTXT_CACHE_BYTES of them
(Protego's parsed rules take some 24 bytes per character of robots.txt: 36 KB for a file
of fifty rules, so 10,000 sites would hold 350 MB); the least recently used go first, and
are read from Redis again when needed. One worker fetches while the others wait
for its result: the fetch is claimed with a lock key (``robots:lock:<origin>``, it
expires if the fetching worker dies), and within a process the requests of one origin
share one load.

RFC 9309, per answer:

- 2xx: the first ROBOTSTXT_MAX_BYTES (500 KiB) are parsed; the download stops there.
- redirects are followed (REDIRECT_MAX_TIMES, 5); more than that is "unavailable".
- 4xx (not 429), or too many redirects: unavailable, everything is allowed.
- 5xx, 429 or a network error: unreachable. Nothing else is fetched from the host:
  its requests go back to the frontier (deferred, never dropped) and the host is
  backed off, for all workers, until robots.txt is tried again (ROBOTSTXT_RETRY_MIN,
  doubling up to ROBOTSTXT_RETRY_MAX, or the answer's Retry-After). A copy fetched
  earlier is used instead while it is less than ROBOTSTXT_STALE_SECONDS past its
  lifetime. A site unreachable for longer than ROBOTSTXT_UNREACHABLE_ALLOW_AFTER (30
  days, the RFC's example) counts as unavailable: everything is allowed, and its pages
  succeed or fail (and are recorded) on their own.

Rules match the crawler's product token, ROBOTSTXT_USER_AGENT (default: USER_AGENT up
to its first "/"). A disallowed URL is never fetched: it is counted
(``robotstxt/disallowed``) and its errback gets ``RobotsDisallowed``, which the broad
spider records as a Page with status "robots_disallowed".

After a fresh fetch, the fetching worker also sets the host's interval from
Crawl-delay (capped at ROBOTSTXT_MAX_CRAWL_DELAY; an operator override in
FRONTIER_HOST_INTERVALS_FILE comes first) and queues the ``Sitemap:`` URLs in the
frontier for the spider's ``parse_sitemap`` callback.

The robots.txt request itself goes through the other downloader middlewares: the
network guard checks it and the rate limiter gives it a slot like any other request.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field

import redis
from protego import Protego
from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import task
from twisted.internet.defer import Deferred

from crawler import meta
from crawler.exceptions import AddressRefused, RobotsDisallowed
from crawler.frontier.frontier import DOWN, ROBOTS
from crawler.middlewares.failures import HOST_DOWN_ERRORS, retry_after_seconds
from crawler.robots.rules import FRESH, GIVEN_UP, STALE, UNREACHABLE, freshness, retry_delay
from crawler.services import services
from crawler.urls import InvalidURL, normalize_url, url_options

logger = logging.getLogger(__name__)

CLAIM_USE, CLAIM_FETCH = 0, 1  # ROBOTS_CLAIM states (2: another worker fetches)
KEEP = object()  # _share: leave the host's interval as it is
ROBOTS_PRIORITY = 1000
POLL_SECONDS = 0.2  # how often a worker waiting for another's fetch looks again
HOST_DOWN_NAMES = {cls.__name__ for cls in HOST_DOWN_ERRORS}

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


RULES_BYTES_PER_CHAR = 24  # Protego's parsed rules per character of robots.txt (measured: 23-25)
RULES_BYTES_MIN = 512  # a Rules without a parser, or an empty file


@dataclass
class Rules:
    """What one origin's robots.txt says, as used in this process."""

    origin: str
    valid_until: float  # time.time() after which it is looked up again
    parser: Protego | None = None  # None: everything allowed (or unreachable)
    unreachable: bool = False  # 5xx, 429 or network error, and no usable copy
    retry_at: float = 0.0  # when robots.txt is tried again (unreachable)
    down: bool = False  # unreachable because the host is (connection refused, DNS)
    sitemaps: list = field(default_factory=list)
    size: int = RULES_BYTES_MIN  # bytes the rules take in memory, about (RULES_BYTES_PER_CHAR)

    def allowed(self, url: str, token: str) -> bool:
        return self.parser is None or self.parser.can_fetch(url, token)


def product_token(settings) -> str:
    token = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "*"
    return token.split("/", 1)[0].split()[0]


class RobotsMiddleware:
    def __init__(self, crawler, frontier):
        s = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.frontier = frontier
        self.redis = frontier.redis  # the scripts' first client; each site's calls go to its host's shard
        self.token = product_token(s)
        self.lifetime = s.getfloat("ROBOTSTXT_CACHE_SECONDS")
        self.stale = s.getfloat("ROBOTSTXT_STALE_SECONDS")
        self.max_bytes = s.getint("ROBOTSTXT_MAX_BYTES")
        self.retry_min = s.getfloat("ROBOTSTXT_RETRY_MIN")
        self.retry_max = s.getfloat("ROBOTSTXT_RETRY_MAX")
        self.allow_after = s.getfloat("ROBOTSTXT_UNREACHABLE_ALLOW_AFTER")
        self.lock_seconds = s.getfloat("ROBOTSTXT_FETCH_TIMEOUT")
        self.max_crawl_delay = s.getfloat("ROBOTSTXT_MAX_CRAWL_DELAY")
        self.follow_sitemaps = s.getbool("ROBOTSTXT_SITEMAPS")
        self.max_sitemaps = s.getint("ROBOTSTXT_MAX_SITEMAPS")
        self.cache_entries = s.getint("ROBOTSTXT_CACHE_ENTRIES")
        self.cache_bytes = s.getint("ROBOTSTXT_CACHE_BYTES")
        self._cache_size = 0  # the sizes of the rules in _cache
        self.url_options = url_options(s)
        self.backoff_limits = {
            "minimum": s.getfloat("HOST_BACKOFF_MIN"),
            "maximum": max(s.getfloat("HOST_BACKOFF_MAX"), self.retry_max),
            "quiet": s.getfloat("HOST_BACKOFF_QUIET"),
        }
        self._claim = self.redis.register_script(ROBOTS_CLAIM)
        self._unlock = self.redis.register_script(UNLOCK)
        self._renew = self.redis.register_script(RENEW)
        self._cache: OrderedDict[str, Rules] = OrderedDict()
        self._loading: dict[str, list[Deferred]] = {}

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        mw = cls(crawler, services(crawler).frontier)
        crawler.signals.connect(mw._bytes_received, signal=signals.bytes_received)
        return mw

    # -- the check -----------------------------------------------------------------

    async def process_request(self, request, spider=None):
        info = request.meta
        if info.get(meta.ROBOTS) or info.get(meta.DONT_OBEY_ROBOTSTXT):
            return None
        url = urlparse_cached(request)
        if url.scheme not in ("http", "https"):
            return None
        rules = await self.rules(f"{url.scheme}://{url.netloc}")
        if rules.unreachable:
            return self._defer(request, rules)
        if not rules.allowed(request.url, self.token):
            self.stats.inc_value("robotstxt/disallowed")
            logger.debug("Disallowed by robots.txt: %s", request.url)
            raise RobotsDisallowed(f"robots.txt of {rules.origin} disallows {request.url}")
        return None

    def _defer(self, request, rules: Rules):
        """robots.txt is unreachable: nothing is fetched from the host until it is tried
        again; the request goes back to the frontier, due then."""
        self.stats.inc_value("robotstxt/deferred")
        if not request.meta.get(meta.LEASE):
            raise IgnoreRequest(f"robots.txt of {rules.origin} unreachable; try again later")
        host = self.frontier.politeness_key(request.url)
        try:
            self.frontier.block_until(
                host,
                retry_after=max(rules.retry_at - time.time(), 1.0),
                reason=DOWN if rules.down else ROBOTS,
                **self.backoff_limits,
            )
        except redis.RedisError as exc:
            logger.warning("Could not back off %s (%s)", host, exc)
        return request.replace(dont_filter=True)

    # -- the rules of an origin ----------------------------------------------------------

    async def rules(self, origin: str) -> Rules:
        """The rules of ``origin``: from this process's cache, from Redis, or fetched
        (one load per origin at a time in this process; other requests wait for it)."""
        rules = self._cache.get(origin)
        if rules is not None and time.time() < rules.valid_until:
            self._cache.move_to_end(origin)
            return rules
        waiters = self._loading.get(origin)
        if waiters is not None:
            d: Deferred = Deferred()
            waiters.append(d)
            return await maybe_deferred_to_future(d)
        self._loading[origin] = []
        try:
            rules = await self._load(origin)
        except Exception:  # never leave the waiters hanging
            logger.exception("robots.txt of %s could not be loaded; allowing for now", origin)
            rules = Rules(origin, time.time() + 60)
        waiters = self._loading.pop(origin)
        self._keep(origin, rules)
        for d in waiters:
            d.callback(rules)
        return rules

    def _keep(self, origin: str, rules: Rules) -> None:
        """Cache ``rules``; the least recently used go while there are more than
        ROBOTSTXT_CACHE_ENTRIES, or more than ROBOTSTXT_CACHE_BYTES of them."""
        old = self._cache.pop(origin, None)
        if old is not None:
            self._cache_size -= old.size
        self._cache[origin] = rules
        self._cache_size += rules.size
        while len(self._cache) > 1 and (len(self._cache) > self.cache_entries or self._cache_size > self.cache_bytes):
            self._cache_size -= self._cache.popitem(last=False)[1].size
        self.stats.set_value("robotstxt/cache_bytes", self._cache_size)

    def _shard(self, origin: str):
        """The frontier (shard) of the site's host: its Redis and its keys hold the site's
        robots.txt record (with REDIS_URLS or a cluster; else the crawl's one frontier)."""
        return self.frontier.shard_for(self.frontier.politeness_key(origin + "/"))

    def _redis_for(self, origin: str):
        return self._shard(origin).redis

    async def _load(self, origin: str) -> Rules:
        key, lock = self._shard(origin).keys.robots(origin), self._shard(origin).keys.robots_lock(origin)
        client = self._redis_for(origin)
        token = uuid.uuid4().hex
        while True:
            now = time.time()
            try:
                state, flat = self._claim(
                    keys=[key, lock],
                    args=[int(now * 1000), int(self.lifetime * 1000), token, int(self.lock_seconds * 1000)],
                    client=client,
                )
            except redis.RedisError as exc:
                logger.warning("Redis unavailable for robots.txt of %s (%s); fetching it here", origin, exc)
                return await self._fetch(origin, {}, None)
            record = dict(zip(flat[::2], flat[1::2], strict=True))
            if state == CLAIM_USE:
                return self._from_record(origin, record, now) or Rules(origin, now + POLL_SECONDS)
            if state == CLAIM_FETCH:
                # the claim is short and renewed while the fetch lasts, so that the
                # others take over soon when this worker dies
                renewer = task.LoopingCall(self._renew_claim, origin, token)
                renewer.start(self.lock_seconds / 3, now=False)
                try:
                    return await self._fetch(origin, record, token)
                except BaseException:
                    self._release(origin, token)
                    raise
                finally:
                    if renewer.running:
                        renewer.stop()
            self.stats.inc_value("robotstxt/waited_for_other_worker")
            await _sleep(POLL_SECONDS)

    def _renew_claim(self, origin: str, token: str) -> None:
        lock = self._shard(origin).keys.robots_lock(origin)
        try:
            self._renew(keys=[lock], args=[token, int(self.lock_seconds * 1000)], client=self._redis_for(origin))
        except redis.RedisError:
            pass  # it expires, and another worker fetches

    def _release(self, origin: str, token: str) -> None:
        try:
            self._unlock(
                keys=[self._shard(origin).keys.robots_lock(origin)], args=[token], client=self._redis_for(origin)
            )
        except redis.RedisError:
            pass  # it expires

    def _from_record(self, origin: str, record: dict, now: float) -> Rules | None:
        """Rules from the shared record, or None when robots.txt is to be fetched
        (crawler/robots/rules.py; ROBOTS_CLAIM makes the same test)."""
        if not record:
            return None
        status = int(record.get(b"status", 0))
        fetched = int(record.get(b"fetched", 0)) / 1000
        state, until = freshness(
            now,
            status=status,
            fetched=fetched,
            retry_at=int(record.get(b"retry", 0)) / 1000,
            since=int(record.get(b"since", 0)) / 1000,
            lifetime=self.lifetime,
            stale=self.stale,
            allow_after=self.allow_after,
        )
        if state == FRESH:
            self.stats.inc_value("robotstxt/shared")
            return self._parse(origin, status, record.get(b"body", b""), until)
        if state == STALE:
            self.stats.inc_value("robotstxt/stale_used")
            return self._parse(origin, status, record.get(b"body", b""), until)
        if state == GIVEN_UP:
            self.stats.inc_value("robotstxt/unreachable_allowed")
            return Rules(origin, until)
        if state == UNREACHABLE:
            error = record.get(b"error", b"").split(b":", 1)[0].decode("latin-1")
            return Rules(origin, until, unreachable=True, retry_at=until, down=error in HOST_DOWN_NAMES)
        return None

    def _parse(self, origin: str, status: int, stored: bytes, valid_until: float) -> Rules:
        if not 200 <= status < 300:
            return Rules(origin, valid_until)  # unavailable: everything allowed
        try:
            text = zlib.decompress(stored).decode("utf-8", errors="replace").lstrip("\ufeff")
            parser = Protego.parse(text)
        except Exception as exc:  # garbage: RFC 9309 parsers keep what they can; we allow
            self.stats.inc_value("robotstxt/unparsable")
            logger.warning("robots.txt of %s could not be parsed (%s); everything allowed", origin, exc)
            return Rules(origin, valid_until)
        size = RULES_BYTES_MIN + RULES_BYTES_PER_CHAR * len(text)
        return Rules(origin, valid_until, parser=parser, sitemaps=list(parser.sitemaps), size=size)

    # -- fetching ------------------------------------------------------------------------

    async def _fetch(self, origin: str, record: dict, token: str | None) -> Rules:
        """Fetch robots.txt; share the answer (``token``: the claim on the fetch; None
        when Redis is away and nothing is shared)."""
        request = Request(
            origin + "/robots.txt",
            priority=ROBOTS_PRIORITY,
            dont_filter=True,
            callback=NO_CALLBACK,
            meta={meta.ROBOTS: True, meta.DONT_BACK_OFF: True, meta.DONT_RETRY: True},
        )
        now = time.time()
        try:
            response = await self.crawler.engine.download_async(request)
        except AddressRefused:
            # the guard refuses the host's pages as well, and records each of them
            if token:
                self._release(origin, token)
            return Rules(origin, now + self.lifetime)
        except IgnoreRequest as exc:
            if "redirect" in str(exc):  # more redirects than allowed: unavailable
                return self._answered(origin, 310, b"", now, token)
            return self._failed(origin, record, f"{type(exc).__name__}: {exc}", 0.0, token)
        except Exception as exc:  # DNS, connection, timeout
            return self._failed(origin, record, f"{type(exc).__name__}: {exc}", 0.0, token)
        status = response.status
        self.stats.inc_value(f"robotstxt/status/{status}")
        if status == 429 or status >= 500 or status < 200:
            retry_after = retry_after_seconds(response.headers.get(b"Retry-After"))
            return self._failed(origin, record, f"HTTP {status}", retry_after, token)
        return self._answered(origin, status, response.body[: self.max_bytes], now, token)

    def _answered(self, origin: str, status: int, body: bytes, now: float, token: str | None) -> Rules:
        """robots.txt answered (2xx, 4xx, too many redirects): share it; set the host's
        interval from Crawl-delay; queue its sitemaps."""
        self.stats.inc_value("robotstxt/fetched")
        stored = zlib.compress(body) if 200 <= status < 300 else b""
        rules = self._parse(origin, status, stored, now + self.lifetime)
        logger.debug("robots.txt of %s: HTTP %d, %d bytes", origin, status, len(body))
        host = self.frontier.politeness_key(origin + "/")
        interval = KEEP
        if self.frontier.intervals.lookup(host) is None:  # an operator override comes first
            delay = rules.parser.crawl_delay(self.token) if rules.parser is not None else None
            interval = min(float(delay), self.max_crawl_delay) if delay else None
            if delay:
                self.stats.inc_value("robotstxt/crawl_delay")
        record = {"status": status, "fetched": int(now * 1000), "body": stored, "fails": 0}
        self._share(origin, host, record, ("retry", "error", "since"), interval, token)
        if self.follow_sitemaps and rules.sitemaps:
            self._queue_sitemaps(rules.sitemaps[: self.max_sitemaps])
        return rules

    def _failed(self, origin: str, record: dict, error: str, retry_after: float, token: str | None) -> Rules:
        """robots.txt unreachable (5xx, 429, network): share when to try again."""
        self.stats.inc_value("robotstxt/unreachable")
        fails = int(record.get(b"fails", 0)) + 1
        delay = retry_delay(fails, retry_after, minimum=self.retry_min, maximum=self.retry_max, jitter=random.random())
        now = time.time()
        retry_at = now + delay
        logger.info(
            "robots.txt of %s unreachable (%s, %d in a row): its host waits %.0f s", origin, error, fails, delay
        )
        host = self.frontier.politeness_key(origin + "/")
        since = record.get(b"since") if fails > 1 else None  # the first failure of this run
        since = since or str(int(now * 1000)).encode()
        failure = {"fails": fails, "retry": int(retry_at * 1000), "error": error[:300], "since": since}
        self._share(origin, host, failure, (), KEEP, token)
        record = {**record, b"retry": str(int(retry_at * 1000)).encode(), b"since": since}
        record[b"error"] = error.encode("latin-1", "replace")
        return self._from_record(origin, record, now) or Rules(origin, retry_at, unreachable=True, retry_at=retry_at)

    def _share(self, origin: str, host: str, fields: dict, drop: tuple, interval, token: str | None) -> None:
        """The site's record and the host's interval (unless KEEP) in one transaction; then
        the host's next slot counted from now (the fetch just ended), and the claim
        released (scripts are not run inside a transaction: a Redis Cluster refuses that)."""
        if token is None:
            return
        key = self._shard(origin).keys.robots(origin)
        client = self._redis_for(origin)
        try:
            p = client.pipeline(transaction=True)
            p.hset(key, mapping=fields)
            if drop:
                p.hdel(key, *drop)
            p.expire(key, int(self.lifetime + self.stale) + 1)
            if interval is not KEEP:
                self.frontier.set_delay(host, interval, client=p)
            p.execute()
            self.frontier.end(host)
            self._unlock(keys=[self._shard(origin).keys.robots_lock(origin)], args=[token], client=client)
        except redis.RedisError as exc:
            logger.warning("Could not share robots.txt of %s (%s); the other workers fetch it too", origin, exc)

    def _queue_sitemaps(self, urls) -> None:
        spider = self.crawler.spider
        callback = getattr(spider, "parse_sitemap", None)
        if callback is None:
            return
        in_scope = getattr(spider, "in_scope", lambda url: True)
        for url in urls:
            try:
                url = normalize_url(url, **self.url_options)
            except InvalidURL:
                self.stats.inc_value("robotstxt/sitemap_invalid")
                continue
            if not in_scope(url):
                continue
            self.stats.inc_value("robotstxt/sitemaps")
            self.crawler.engine.crawl(
                Request(url, callback=callback, errback=getattr(spider, "errback", None), meta={meta.SITEMAP: True})
            )

    def _bytes_received(self, data, request, spider=None):
        # RFC 9309: parse at least the first 500 KiB; stop the download there
        if request.meta.get(meta.ROBOTS):
            received = request.meta.get(meta.ROBOTS_BYTES, 0) + len(data)
            request.meta[meta.ROBOTS_BYTES] = received
            if received > self.max_bytes:
                raise StopDownload(fail=False)


async def _sleep(seconds: float) -> None:
    # imported here: the spider imports this module before Scrapy installs its reactor
    from twisted.internet import reactor, task

    await maybe_deferred_to_future(task.deferLater(reactor, seconds, lambda: None))
