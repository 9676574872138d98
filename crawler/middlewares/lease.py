"""Acknowledge a page's frontier lease once the page has been handled.

A page is handled when the spider's callback has finished and every item it produced
has left the item pipelines (``item_scraped``, ``item_dropped`` or ``item_error``):
with the storage pipelines that is after the store write. A callback that raises
counts as handled too (failed for good, counted as ``frontier/lease/spider_error``).
Items an errback produces for a failed download (which Scrapy does not pass through
spider middlewares) acknowledge the lease when they leave the pipelines.
Requests without a lease (robots.txt, start requests) are not tracked.

An item whose data is still being stored when it leaves the pipelines (its ``storing``,
``services(crawler).pages``: its WARC batch, then its archive pointer, kept by the page's
URL and fetch time, so that a copy of the item keeps it) counts as handled once that is
done.

A page one of whose items was dropped or failed with StoreUnavailable (the UrlStore could
not take it, or its WARC batch was not stored) is not acknowledged: ``page_not_stored`` gives its
lease back instead, so that the page is fetched again later rather than acknowledged
without its record.
"""

from __future__ import annotations

from scrapy import Request, signals

from crawler import meta
from crawler.exceptions import StoreUnavailable
from crawler.services import services
from crawler.signals import page_handled, page_not_stored


class LeaseMiddleware:
    def __init__(self, crawler):
        self.crawler = crawler
        self.pages = services(crawler).pages  # (what of a page is still being stored)
        # lease -> [items not yet out of the pipelines, callback finished, not stored]
        self._open: dict[str, list] = {}

    @classmethod
    def from_crawler(cls, crawler):
        mw = cls(crawler)
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(mw._item_done, signal=signal)
        return mw

    def _ack(self, request, stored: bool = True):
        signal = page_handled if stored else page_not_stored
        self.crawler.signals.send_catch_log(signal, request=request)

    async def process_spider_output(self, response, result):
        request = response.request
        lease = request.meta.get(meta.LEASE) if request is not None else None
        if not lease:
            async for out in result:
                yield out
            return
        state = self._open[lease] = [0, False, False]
        try:
            async for out in result:
                if not isinstance(out, Request):
                    state[0] += 1
                yield out
        except Exception:
            self.crawler.stats.inc_value("frontier/lease/spider_error")
            raise
        finally:
            state[1] = True
            if state[0] <= 0:
                del self._open[lease]
                self._ack(request, not state[2])

    def _item_done(self, item, response=None, failure=None, exception=None, **kwargs):
        request = getattr(response, "request", None)
        lease = request.meta.get(meta.LEASE) if request is not None else None
        # dropped with StoreUnavailable (item_dropped's exception), or failed with it
        stored = not isinstance(exception, StoreUnavailable) and (
            failure is None or not failure.check(StoreUnavailable)
        )
        pending = self.pages.take(item)
        if pending is not None and lease and stored:  # handled once its data is stored
            pending.addCallbacks(
                lambda _: self._handled(request, lease, True),
                lambda _: self._handled(request, lease, False),
            )
            return
        if pending is not None:  # nothing waits for it: a failure of it is no error
            pending.addErrback(lambda _: None)
        if lease:
            self._handled(request, lease, stored)

    def _handled(self, request, lease: str, stored: bool) -> None:
        """One item of the leased page ``request`` is handled (its data ``stored``, or not)."""
        state = self._open.get(lease)
        if state is None:  # an errback's item: nothing else is pending
            self._ack(request, stored)
            return
        state[0] -= 1
        state[2] = state[2] or not stored
        if state[1] and state[0] <= 0:
            del self._open[lease]
            self._ack(request, not state[2])
