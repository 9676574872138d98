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

import redis
from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import task
from twisted.internet.defer import Deferred

from crawler import meta
from crawler.exceptions import AddressRefused, RobotsDisallowed
from crawler.frontier.words import DOWN, ROBOTS
from crawler.middlewares.failures import HOST_DOWN_ERRORS, retry_after_seconds
from crawler.robots.parsed import Rules, Unparsable, parse_rules, product_token, record_state
from crawler.robots.rules import FRESH, GIVEN_UP, STALE, UNREACHABLE, retry_delay
from crawler.robots.shared import CLAIM_FETCH, CLAIM_USE, KEEP, SharedRobots
from crawler.services import services
from crawler.urls import InvalidURL, normalize_url, url_options

logger = logging.getLogger(__name__)

ROBOTS_PRIORITY = 1000
POLL_SECONDS = 0.2  # how often a worker waiting for another's fetch looks again
HOST_DOWN_NAMES = {cls.__name__ for cls in HOST_DOWN_ERRORS}


class RobotsMiddleware:
    def __init__(self, crawler, frontier):
        s = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.frontier = frontier
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
        self.shared = SharedRobots(frontier, lifetime=self.lifetime, stale=self.stale, lock_seconds=self.lock_seconds)
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

    async def _load(self, origin: str) -> Rules:
        token = uuid.uuid4().hex
        while True:
            now = time.time()
            try:
                state, record = self.shared.claim(origin, token, now)
            except redis.RedisError as exc:
                logger.warning("Redis unavailable for robots.txt of %s (%s); fetching it here", origin, exc)
                return await self._fetch(origin, {}, None)
            if state == CLAIM_USE:
                return self._from_record(origin, record, now) or Rules(origin, now + POLL_SECONDS)
            if state == CLAIM_FETCH:
                # the claim is short and renewed while the fetch lasts, so that the
                # others take over soon when this worker dies
                renewer = task.LoopingCall(self.shared.renew, origin, token)
                renewer.start(self.lock_seconds / 3, now=False)
                try:
                    return await self._fetch(origin, record, token)
                except BaseException:
                    self.shared.release(origin, token)
                    raise
                finally:
                    if renewer.running:
                        renewer.stop()
            self.stats.inc_value("robotstxt/waited_for_other_worker")
            await _sleep(POLL_SECONDS)

    def _from_record(self, origin: str, record: dict, now: float) -> Rules | None:
        """Rules from the shared record, or None when robots.txt is to be fetched
        (crawler/robots/rules.py; ROBOTS_CLAIM makes the same test)."""
        state, until = record_state(record, now, lifetime=self.lifetime, stale=self.stale, allow_after=self.allow_after)
        status = int(record.get(b"status", 0)) if record else 0
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
        try:
            return parse_rules(origin, status, stored, valid_until)
        except Unparsable as exc:
            self.stats.inc_value("robotstxt/unparsable")
            logger.warning("robots.txt of %s could not be parsed (%s); everything allowed", origin, exc)
            return Rules(origin, valid_until)

    # -- fetching ------------------------------------------------------------------------

    async def _fetch(self, origin: str, record: dict, token: str | None) -> Rules:
        """Fetch robots.txt; share the answer (``token``: the claim on the fetch; None
        when Redis is away and nothing is shared)."""
        request = Request(
            origin + "/robots.txt",
            priority=ROBOTS_PRIORITY,
            dont_filter=True,
            callback=NO_CALLBACK,
            # (no size limit of its own: _bytes_received stops it at ROBOTSTXT_MAX_BYTES, which
            # are parsed; one announcing more than DOWNLOAD_MAXSIZE was cancelled unread, and
            # its host taken for unreachable)
            meta={
                meta.ROBOTS: True,
                meta.DONT_BACK_OFF: True,
                meta.DONT_RETRY: True,
                "download_maxsize": 0,
                "download_warnsize": 0,
            },
        )
        now = time.time()
        try:
            response = await self.crawler.engine.download_async(request)
        except AddressRefused:
            # the guard refuses the host's pages as well, and records each of them
            if token:
                self.shared.release(origin, token)
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
        if self.frontier.interval_override(host) is None:  # an operator override comes first
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
        """The record for the other workers (crawler/robots/shared.py); nothing when Redis
        was away at the claim (``token`` None)."""
        if token is None:
            return
        try:
            self.shared.share(origin, host, fields, drop, interval, token)
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
