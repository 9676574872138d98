"""The recrawl in a running crawl (an extension): with RECRAWL_CHECK_INTERVAL set, every so
often the worker holding the crawl's recrawl lock puts the URLs the UrlStore says are due
back into the frontier (crawler/freshness/recrawl.py ``RecrawlTimer``), from the spider's
opening to its closing. Off without a UrlStore, or with another scheduler than the
frontier's."""

from __future__ import annotations

from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.freshness.recrawl import RecrawlTimer
from crawler.services import services


class RecrawlRounds:
    def __init__(self, crawler):
        self.crawler = crawler
        self.timer: RecrawlTimer | None = None

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if s.getfloat("RECRAWL_CHECK_INTERVAL") <= 0 or not s.getbool("URLSTORE_ENABLED"):
            raise NotConfigured
        if not services(crawler).frontier_scheduled:
            raise NotConfigured
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider=None):
        found = services(self.crawler)
        self.timer = RecrawlTimer(self.crawler, found.urlstore, found.frontier)
        self.timer.start()

    def spider_closed(self, spider=None, reason=None):
        if self.timer is not None:
            self.timer.stop()
