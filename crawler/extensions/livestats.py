"""The LiveStats extension: every LIVE_STATS_INTERVAL seconds, and once more when the
spider closes, a worker writes its live numbers into the crawl's Redis
(crawler/observe/livestats.py says what is written where)."""

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
from crawler.items import Page
from crawler.observe.livestats import (
    BUCKET_TTL,
    LIVE_SECONDS,
    RECENT,
    WORKERS_KEPT,
    bucket_of,
    published_settings,
    read_tally,
    recent_entry,
    tallied,
)
from crawler.observe.report import totals_text
from crawler.services import services
from crawler.urlstore.record import worker_fate

logger = logging.getLogger(__name__)


class LiveStats:
    """The extension: this worker's numbers into the crawl's ``tally``, ``tally:<t>``,
    ``recent`` and ``workers`` keys (see the module's docstring)."""

    def __init__(self, crawler, interval: float, clock=time.time):
        self.crawler = crawler
        self.interval = interval
        self.clock = clock  # UNIX time (a test's own clock)
        self.worker = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.task: task.LoopingCall | None = None
        self._target = None  # (frontier, client, keys): the crawl's first shard's
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
                self._target = (frontier, frontier.redis, frontier.keys)
            frontier, client, keys = self._target
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
            pacing = services(self.crawler).pacing
            waiting = pacing.waiting() if pacing is not None and not closing else None
            if waiting is not None:  # (crawler/scheduler/pacing.py: the stores are behind)
                p.hset(keys.waiting, self.worker, json.dumps(waiting, separators=(",", ":")))
            else:
                p.hdel(keys.waiting, self.worker)
            if closing:  # out of the live ones; the crawl's totals, for the last worker to end
                p.zrem(keys.workers, self.worker)
                p.zcount(keys.workers, now_ms - int(LIVE_SECONDS * 1000), "+inf")
                p.hgetall(keys.tally)
            else:
                p.zadd(keys.workers, {self.worker: now_ms})
                p.hset(keys.published, mapping=self.published)
            p.zremrangebyscore(keys.workers, "-inf", now_ms - WORKERS_KEPT * 1000)
            written = frontier.on_shard(0, p.execute)  # (sharded: through its down-server guard)
        except Exception as exc:  # Redis away (or refusing): kept for the next try
            self._failed(exc, closing)
            return False
        if closing and not written[-3]:  # no other worker alive: this one says the crawl's totals
            logger.info("Crawl totals (all workers): %s", totals_text(read_tally(written[-2])))
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
