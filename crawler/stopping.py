"""A worker closed for an error (a close reason of exit code 1 or 2: Redis refused it, the
archive refused its uploads, its seeds failed...): at once when the engine has opened it,
else as soon as it has. A close begun while the engine still opens the worker races the opening:
a part opened after it (a pipeline, the archive's writer thread) is never closed, and the
worker may exit 0 or not at all. Scrapy's way for a part that cannot start is to raise
CloseSpider from ``spider_opened``: every part opens, then every part closes.

Each part that may close the worker for such a reason holds a ``WorkerStop`` (built in its
``from_crawler``), which keeps that part's first reason; the engine closes the worker with
the first reason it is given."""

from __future__ import annotations

from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.utils.defer import deferred_from_coro


class WorkerStop:
    def __init__(self, crawler):
        self.crawler = crawler
        self.reason: str | None = None  # the reason given, once the worker must close
        self.engine_open = False  # the engine has opened every part of the worker (spider_opened)
        crawler.signals.connect(self.opened, signal=signals.spider_opened)

    def close(self, reason: str) -> bool:
        """Close the worker with ``reason``: now, or at ``spider_opened`` while the engine
        is still opening it. False (and nothing done) if this part gave a reason before."""
        if self.reason is not None:
            return False
        self.reason = reason
        if self.engine_open:
            deferred_from_coro(self.crawler.engine.close_spider_async(reason=reason))
        return True

    def opened(self) -> None:
        """At ``spider_opened``: a reason given while the worker opened closes it now that
        everything it opened can be closed."""
        self.engine_open = True
        if self.reason is not None:
            raise CloseSpider(self.reason)
