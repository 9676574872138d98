"""UrlStore pipeline: the last stage. Every Page becomes its URL's record in the UrlStore
(crawler/urlstore/), failures included (each with its fate), and the page's lease is
acknowledged only once that write has succeeded. A write that fails for good (the
store unavailable after its retries) raises StoreUnavailable: the lease is given back
and the page is fetched again later, never acknowledged without its record.

The record is written as soon as the page has been read, so that what the crawl learned
is readable at once; a page whose WARC record is still waiting for its batch
(``crawler.items.storing``) is written without its archive pointer, which is added once
the batch is stored (data before metadata): the page's lease waits for that too.

Each record says when the URL is due again (``next_fetch_at``): RECRAWL_INTERVAL after
an answer (2xx-4xx, duplicates too), RECRAWL_RETRY_INTERVAL after a failure (5xx, DNS,
timeout, connection, robots-disallowed), never for an address the network guard
refused. A recrawl policy reads it back with ``UrlStore.fetch_status``.
"""

from __future__ import annotations

import logging
import time

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task
from twisted.internet.defer import Deferred

from crawler.exceptions import StoreUnavailable
from crawler.items import Page, storing
from crawler.urlstore.store import ArchivePointer, FetchRecord, crawler_urlstore

logger = logging.getLogger(__name__)

CLOSE_MARGIN = 10.0  # seconds past WORKER_STOP_TIMEOUT a closing worker waits for pointer writes

# error class name (Page.error starts with it) -> fate
_FATES = {
    "AddressRefused": "refused",
    "RobotsDisallowed": "robots_disallowed",
    "DNSLookupError": "dns_error",
    "RefusedResolution": "refused",
    "TimeoutError": "timeout",
    "TCPTimedOutError": "timeout",
    "UserTimeoutError": "timeout",
    "ConnectionRefusedError": "connection_error",
    "ConnectError": "connection_error",
    "ConnectionLost": "connection_error",
    "ConnectionDone": "connection_error",
    "ResponseNeverReceived": "connection_error",
    "ResponseFailed": "connection_error",
    "DownloadFailedError": "connection_error",
    "DownloadConnectionRefusedError": "connection_error",
    "ResponseDataLossError": "connection_error",
    "CannotResolveHostError": "dns_error",
    "DownloadTimeoutError": "timeout",
}


def page_fate(page) -> str:
    """What became of a Page's URL: ``fetched``, ``duplicate``, ``robots_disallowed``,
    ``refused``, ``dns_error``, ``timeout``, ``connection_error`` or ``error``."""
    status = page.get("status")
    if status == "robots_disallowed":
        return "robots_disallowed"
    if isinstance(status, int):
        return "duplicate" if page.get("duplicate_of") else "fetched"
    return _FATES.get((page.get("error") or "").split(":", 1)[0].strip(), "error")


def fetch_record(page, recrawl: float = 0, retry: float = 0) -> FetchRecord:
    """The UrlStore record of a Page item; its next fetch is due ``recrawl`` seconds after
    an answer, ``retry`` seconds after a failure (0: no due time)."""
    status = page.get("status")
    error = page.get("error")
    fate = page_fate(page)
    if fate == "robots_disallowed":
        status = None
    archive = page.get("archive")
    answered = isinstance(status, int) and status < 500
    after = 0 if fate == "refused" else recrawl if answered else retry
    fetched_at = page.get("fetched_at")
    return FetchRecord(
        url=page["url"],
        fate=fate,
        fetched_at=fetched_at,
        status=status,
        error=error,
        final_url=page.get("final_url"),
        redirect_chain=list(page.get("redirect_chain") or []),
        canonical_url=page.get("duplicate_of") or page.get("canonical_url"),
        near_duplicate_of=page.get("near_duplicate_of"),
        resemblance=page.get("resemblance"),
        content_digest=page.get("content_digest"),
        simhash=page.get("simhash"),
        metadata=dict(page.get("metadata") or {}),
        archive=ArchivePointer(archive["key"], archive["offset"], archive["length"]) if archive else None,
        outlinks=list(page.get("outlinks") or []),
        next_fetch_at=fetched_at + after if after and fetched_at is not None else None,
    )


class UrlStorePipeline:
    def __init__(self, crawler, store):
        self.stats = crawler.stats
        self.store = store
        self.recrawl = crawler.settings.getfloat("RECRAWL_INTERVAL")
        self.retry = crawler.settings.getfloat("RECRAWL_RETRY_INTERVAL")
        self.stop_timeout = crawler.settings.getfloat("WORKER_STOP_TIMEOUT")
        self._pointers: set[Deferred] = set()  # pages whose archive pointer is not written yet

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("URLSTORE_ENABLED"):
            raise NotConfigured
        pipeline = cls(crawler, crawler_urlstore(crawler))
        crawler.signals.connect(pipeline._closed, signal=signals.spider_closed)
        return pipeline

    def _closed(self, spider=None, reason=None):
        self.store.close()

    async def close_spider(self, spider=None):
        """Wait for the archive pointers still to be written (their batches are being
        stored: the archive pipeline gives up on them after WORKER_STOP_TIMEOUT), so that
        their pages are acknowledged before the scheduler closes."""
        from twisted.internet import reactor

        deadline = time.monotonic() + self.stop_timeout + CLOSE_MARGIN
        while self._pointers and time.monotonic() < deadline:
            await maybe_deferred_to_future(task.deferLater(reactor, 0.1, lambda: None))

    async def process_item(self, item, spider=None):
        if not isinstance(item, Page):
            return item
        record = fetch_record(item, self.recrawl, self.retry)
        archived = storing(item)  # its batch not stored yet: the record goes without its pointer
        pointer = record.archive if archived is not None else None
        if pointer is not None:
            record.archive = None
        try:
            await maybe_deferred_to_future(_deferred(self.store.record_fetch(record)))
        except Exception as exc:
            self.stats.inc_value("urlstore/failed")
            raise StoreUnavailable(f"UrlStore write of {record.url} failed: {type(exc).__name__}: {exc}") from exc
        self.stats.inc_value(f"urlstore/written/{record.fate}")
        if pointer is not None:
            self._pointers.add(archived)
            archived.addCallback(self._set_archive, record.url, pointer)
            archived.addBoth(self._pointer_done, archived)
        return item

    def _pointer_done(self, result, archived: Deferred):
        self._pointers.discard(archived)
        return result

    def _set_archive(self, _, url: str, pointer: ArchivePointer) -> Deferred:
        """The page's batch is stored: its record gets the pointer (the page's lease waits
        for this write, chained on the page's ``storing`` Deferred)."""

        def failed(failure):
            self.stats.inc_value("urlstore/failed")
            raise StoreUnavailable(f"UrlStore archive pointer of {url} not written: {failure.getErrorMessage()}")

        def written(_):
            self.stats.inc_value("urlstore/archive_pointers")

        return _deferred(self.store.set_archive(url, pointer)).addCallbacks(written, failed)


def _deferred(future) -> Deferred:
    """A Deferred that fires (in the reactor thread) when ``future`` is done."""
    from twisted.internet import reactor

    d: Deferred = Deferred()

    def done(f):
        exc = f.exception()
        if exc is None:
            reactor.callFromThread(d.callback, f.result())
        else:
            reactor.callFromThread(d.errback, exc)

    future.add_done_callback(done)
    return d
