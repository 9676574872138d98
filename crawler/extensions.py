"""Frontier progress in the log, and the frontier's numbers in the crawl stats."""

from __future__ import annotations

import logging
import time

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

logger = logging.getLogger(__name__)


class FrontierStats:
    """Every FRONTIER_STATS_INTERVAL seconds: one log line with the frontier's queue
    sizes, hosts, leases, URL-seen fill and this worker's pages/s. At close, the same
    numbers go into the stats under ``frontier_state/``."""

    def __init__(self, crawler, interval: float):
        self.crawler = crawler
        self.interval = interval
        self.task = None
        self._last = (time.time(), 0)

    @classmethod
    def from_crawler(cls, crawler):
        interval = crawler.settings.getfloat("FRONTIER_STATS_INTERVAL")
        if not interval:
            raise NotConfigured
        ext = cls(crawler, interval)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def _frontier(self):
        return getattr(self.crawler.engine._slot.scheduler, "frontier", None)

    def spider_opened(self, spider):
        self.task = task.LoopingCall(self.log)
        self.task.start(self.interval, now=False)

    def log(self):
        frontier = self._frontier()
        if frontier is None:
            return
        try:
            s = frontier.stats()
        except Exception as exc:  # Redis away: say so, keep crawling
            logger.warning("Frontier stats unavailable: %s", exc)
            return
        now, pages = time.time(), self.crawler.stats.get_value("response_received_count", 0)
        rate = (pages - self._last[1]) / max(now - self._last[0], 1e-9)
        self._last = (now, pages)
        logger.info(
            "Frontier: %d queued (%d hosts, %d due), %d leased, %d seen (filter fill %.1f%%, "
            "est. false positives %.1e); this worker %.1f pages/s",
            s["queued"],
            s["hosts_queued"],
            s["hosts_due"],
            s["leased"],
            s["seen"]["urls"],
            100 * max(s["seen"]["fill"] or [0]),
            s["seen"]["false_positive_rate"],
            rate,
        )

    def spider_closed(self, spider, reason):
        if self.task is not None and self.task.running:
            self.task.stop()
        frontier = self._frontier()
        if frontier is None:
            return
        try:
            s = frontier.stats()
        except Exception:
            return
        stats = self.crawler.stats
        for key in ("queued", "hosts_queued", "leased", "pushed", "popped", "acked", "expired", "abandoned"):
            stats.set_value(f"frontier_state/{key}", s[key])
        stats.set_value("frontier_state/seen_urls", s["seen"]["urls"])
        stats.set_value("frontier_state/seen_false_positive_rate", s["seen"]["false_positive_rate"])
