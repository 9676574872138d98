"""The crawl's live numbers in Redis: what every worker publishes, and the reader a
dashboard or an HTTP API calls (``activity``).

``LiveStats`` (an extension, every LIVE_STATS_INTERVAL seconds and once more when the
spider closes) writes in one pipeline, on the crawl's Redis (the first server of
REDIS_URLS, the first shard of a cluster, where the ``submit`` list is):

``tally`` (hash)
    HINCRBY of what this worker's stats counters that matter (``TALLIED``: pages by fate,
    responses by status, download errors, robots.txt refusals, copies, trap refusals,
    the archive's and the UrlStore's counts, back-offs...) gained since its last flush:
    each field is the sum over the crawl's workers, past and present.
``tally:<t>`` (hash, expires after BUCKET_TTL)
    pages by fate that the workers recorded in the 10-second bucket starting at ``t``
    (UNIX seconds): a page counts in the bucket of the time it was recorded, whenever
    the flush that carries it comes.
``recent`` (list, newest first, at most RECENT entries)
    the last pages recorded, as compact JSON ``{"url", "status", "fate", "title", "at"}``.
``workers`` (zset)
    this worker's heartbeat (worker id -> time of its last flush, ms); a closing worker
    takes itself out.
``published`` (hash)
    the settings the workers run with that shape what a viewer shows (``PUBLISHED``):
    ``scrapy frontier`` and the dashboard show the workers' interval, not their own.

A flush that fails (Redis away) logs one warning line and keeps what it carried: the
deltas are taken against what was last written, the buckets and the recent pages stay
pending (the recent pages bounded to RECENT), and the next try (no sooner than
``connection.outage_wait`` of the outage so far) writes them all: no count is lost or
written twice.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections import deque

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from crawler.frontier.connection import outage_wait
from crawler.frontier.keys import Keys
from crawler.items import Page
from crawler.services import services
from crawler.urlstore.record import worker_fate

logger = logging.getLogger(__name__)

BUCKET = 10  # seconds a bucket of the series spans
BUCKET_TTL = 2 * 3600  # seconds a bucket is kept
MAX_MINUTES = BUCKET_TTL // 60  # the longest series the buckets can give
RECENT = 50  # pages in the recent list (and pending in a worker between flushes)
TITLE_CHARS = 200  # of a recent page's title
LIVE_SECONDS = 30.0  # a worker whose last heartbeat is younger is live
WORKERS_KEPT = 86400  # seconds a heartbeat stays in the zset (a worker that died without closing)

# The settings a worker publishes (``published``), by their name in the hash.
PUBLISHED = {
    "host_interval": "FRONTIER_HOST_INTERVAL",
    "host_max_in_flight": "FRONTIER_HOST_MAX_IN_FLIGHT",
    "max_wait": "FRONTIER_MAX_WAIT",
    "close_when_idle": "FRONTIER_CLOSE_WHEN_IDLE",
    "politeness_key": "FRONTIER_POLITENESS_KEY",
    "profile": "SETTINGS_PROFILE",
}


def published_settings(settings) -> dict[str, str]:
    """What a worker publishes: PUBLISHED's settings, as text."""
    return {name: str(settings.get(setting)) for name, setting in PUBLISHED.items()}


def live_workers(client, keys: Keys, now: float, live_seconds: float = LIVE_SECONDS) -> int:
    """Workers with a heartbeat in the last ``live_seconds``."""
    return int(client.zcount(keys.workers, int((now - live_seconds) * 1000), "+inf"))


def read_published(client, keys: Keys) -> dict:
    """The workers' published settings, typed (empty: no worker published yet)."""
    raw = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
           for k, v in (client.hgetall(keys.published) or {}).items()}  # fmt: skip
    out: dict = dict(raw)
    for name in ("host_interval", "max_wait"):
        if name in raw:
            out[name] = float(raw[name])
    if "host_max_in_flight" in raw:
        out["host_max_in_flight"] = int(float(raw["host_max_in_flight"]))
    if "close_when_idle" in raw:
        out["close_when_idle"] = raw["close_when_idle"] in ("True", "true", "1")
    return out


# The stats counters that go into the tally: a name ending in "/" is a prefix (every
# counter under it), any other an exact name.
TALLIED = (
    "pages/fate/",
    "downloader/response_status_count/",
    "downloader/response_bytes",
    "downloader/exception_type_count/",
    "robotstxt/disallowed",
    "contentseen/exact",
    "contentseen/near",
    "frontier/trap/",
    "frontier/host_full",
    "archive/objects",
    "archive/bytes",
    "archive/records",
    "archive/retries",
    "archive/recovered_records",
    "frontier/lease/given_back",
    "urlstore/written/",
    "urlstore/failed",
    "ratelimit/handed_back",
    "backoff/",
)


def tallied(name: str) -> bool:
    """Whether the stats counter ``name`` goes into the tally."""
    return any(name.startswith(p) and len(name) > len(p) if p.endswith("/") else name == p for p in TALLIED)


def bucket_of(t: float) -> int:
    """The start (UNIX seconds) of the bucket holding time ``t``."""
    return int(t // BUCKET) * BUCKET


def buckets(now: float, minutes: int) -> list[int]:
    """The starts of the buckets of the last ``minutes`` minutes, oldest first, the last
    one holding ``now``."""
    last = bucket_of(now)
    count = max(1, minutes * 60 // BUCKET)
    return [last - BUCKET * (count - 1 - i) for i in range(count)]


def recent_entry(page, fate: str, at: float) -> dict:
    """What the recent list shows of a page."""
    status = page.get("status")
    title = (page.get("metadata") or {}).get("title")
    return {
        "url": page.get("url"),
        "status": status if isinstance(status, int) and not isinstance(status, bool) else None,
        "fate": fate,
        "title": title[:TITLE_CHARS] if isinstance(title, str) and title else None,
        "at": round(at, 3),
    }


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def activity(client, keys, now: float, minutes: int = 30, live_seconds: float = LIVE_SECONDS) -> dict:
    """The crawl's live numbers (one pipeline on ``client``, the Redis of the crawl's
    first shard; ``keys``: its Keys, or the crawl's name), as ``scrapy serve``'s
    ``activity`` endpoint gives them::

        {"bucket_seconds": 10,
         "series": [{"t": <bucket start>, "fates": {"fetched": n, ...}}, ...],
         "totals": {"<stats key>": n, ...},
         "recent": [{"url", "status", "fate", "title", "at"}, ...],
         "workers": n}

    ``series``: every bucket of the last ``minutes`` minutes (clamped to 1..MAX_MINUTES),
    oldest first, the last holding ``now``, an empty one with ``{}``; ``totals``: the
    tally; ``recent``: newest first; ``workers``: those with a heartbeat in the last
    ``live_seconds``."""
    if not isinstance(keys, Keys):
        keys = Keys(str(keys))
    minutes = min(max(int(minutes), 1), MAX_MINUTES)
    starts = buckets(now, minutes)
    p = client.pipeline(transaction=False)
    for t in starts:
        p.hgetall(keys.tally_bucket(t))
    p.hgetall(keys.tally)
    p.lrange(keys.recent, 0, RECENT - 1)
    p.zcount(keys.workers, int((now - live_seconds) * 1000), "+inf")
    *series, tally, recent, live = p.execute()
    pages = []
    for raw in recent:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            pages.append(entry)
    return {
        "bucket_seconds": BUCKET,
        "series": [
            {"t": t, "fates": {_text(k): int(v) for k, v in sorted(fates.items())}}
            for t, fates in zip(starts, series, strict=True)
        ],
        "totals": {_text(k): int(v) for k, v in sorted(tally.items())},
        "recent": pages,
        "workers": int(live),
    }


class LiveStats:
    """The extension: this worker's numbers into the crawl's ``tally``, ``tally:<t>``,
    ``recent`` and ``workers`` keys (see the module's docstring)."""

    def __init__(self, crawler, interval: float, clock=time.time):
        self.crawler = crawler
        self.interval = interval
        self.clock = clock  # UNIX time (a test's own clock)
        self.worker = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.task: task.LoopingCall | None = None
        self._target = None  # (client, keys) of the crawl's first shard
        self._written: dict[str, int] = {}  # the tallied counters as last written
        self._buckets: dict[tuple[int, str], int] = {}  # (bucket, fate) -> pages not written yet
        self._recent: deque[dict] = deque(maxlen=RECENT)  # pages not written yet, oldest first
        self._down_since: float | None = None  # monotonic time of the first failed flush of an outage
        self._next_try = 0.0  # monotonic time before which a tick does not try again
        self.published = published_settings(crawler.settings)

    @classmethod
    def from_crawler(cls, crawler):
        interval = crawler.settings.getfloat("LIVE_STATS_INTERVAL")
        if not interval:
            raise NotConfigured
        ext = cls(crawler, interval)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.item_scraped, signal=signals.item_scraped)
        return ext

    def spider_opened(self, spider=None):
        self.task = task.LoopingCall(self.tick)
        self.task.start(self.interval, now=False)

    def spider_closed(self, spider=None, reason=None):
        if self.task is not None and self.task.running:
            self.task.stop()
        self.flush(closing=True)

    def item_scraped(self, item, **kwargs):
        if not isinstance(item, Page):
            return
        at = self.clock()
        fate = worker_fate(item)
        key = (bucket_of(at), fate)
        self._buckets[key] = self._buckets.get(key, 0) + 1
        self._recent.append(recent_entry(item, fate, at))

    def tick(self) -> None:
        """The periodic flush; after a failure, not before the outage's wait is over."""
        if time.monotonic() >= self._next_try:
            self.flush()

    def _counters(self) -> dict[str, int]:
        stats = self.crawler.stats.get_stats()
        return {k: v for k, v in list(stats.items()) if isinstance(v, int) and not isinstance(v, bool) and tallied(k)}

    def flush(self, closing: bool = False) -> bool:
        """Write what is new since the last flush (``closing``: and take this worker out of
        the live ones); True when it was written, False when it is kept for the next try."""
        now = self.clock()
        counters = self._counters()
        deltas = {k: v - self._written.get(k, 0) for k, v in counters.items()}
        deltas = {k: d for k, d in deltas.items() if d}
        # buckets past their lifetime would expire at once: dropped
        self._buckets = {key: n for key, n in self._buckets.items() if key[0] > now - BUCKET_TTL}
        by_bucket: dict[int, dict[str, int]] = {}
        for (t, fate), n in self._buckets.items():
            by_bucket.setdefault(t, {})[fate] = n
        recent = list(self._recent)
        try:
            if self._target is None:
                frontier = services(self.crawler).frontier
                self._target = (frontier.redis, frontier.keys)
            client, keys = self._target
            p = client.pipeline(transaction=False)
            for name, delta in deltas.items():
                p.hincrby(keys.tally, name, delta)
            for t, fates in sorted(by_bucket.items()):
                for fate, n in fates.items():
                    p.hincrby(keys.tally_bucket(t), fate, n)
                p.expire(keys.tally_bucket(t), BUCKET_TTL)
            if recent:
                p.lpush(keys.recent, *(json.dumps(e, separators=(",", ":")) for e in recent))
                p.ltrim(keys.recent, 0, RECENT - 1)
            now_ms = int(now * 1000)
            if closing:
                p.zrem(keys.workers, self.worker)
            else:
                p.zadd(keys.workers, {self.worker: now_ms})
                p.hset(keys.published, mapping=self.published)
            p.zremrangebyscore(keys.workers, "-inf", now_ms - WORKERS_KEPT * 1000)
            p.execute()
        except Exception as exc:  # Redis away (or refusing): kept for the next try
            self._failed(exc, closing)
            return False
        self._written.update(counters)
        self._buckets.clear()  # (item_scraped runs in this thread: nothing came meanwhile)
        self._recent.clear()
        if self._down_since is not None:
            logger.info("Live stats published again after %.0f s", time.monotonic() - self._down_since)
        self._down_since, self._next_try = None, 0.0
        return True

    def _failed(self, exc: Exception, closing: bool) -> None:
        mono = time.monotonic()
        first = self._down_since is None
        if first:
            self._down_since = mono
        self._next_try = mono + outage_wait(mono - self._down_since)
        if closing:
            logger.warning("Live stats not published at close (%s: %s)", type(exc).__name__, exc)
        elif first:
            logger.warning(
                "Live stats not published (%s: %s); kept, and tried again until Redis answers",
                type(exc).__name__,
                exc,
            )
        else:
            logger.debug("Live stats still not published: %s", exc)
