"""Archive pipeline: every fetched page's raw response goes into a WARC batch, and the
page moves on (to the UrlStore) only once the object holding its record is stored.

Data before metadata (Secor): the item gets its archive pointer (``archive``: key,
offset, length) when its record is written to the batch's local spool file, and is
held until the batch is stored (closed at ARCHIVE_MAX_BYTES or ARCHIVE_MAX_SECONDS,
whichever comes first). So a UrlStore row never points to an object that is not
there, and a page whose batch was never stored was never acknowledged: its lease
brings it back. Spool files a dead worker left (``CRAWL_DIR/CRAWL_NAME/archive-spool``)
are trimmed to their last complete record and stored when a worker of the crawl opens.

Storage errors are retried with back-off (storage.py) while the pages wait; the
crawl slows down and resumes, and nothing is lost. A page without a response (a
failed fetch) or an exact duplicate of a page seen before is not archived.

Records are written (WARC headers, digests, gzip) by one writer thread, in the order the
pages came: hashing and compression release the GIL, so most of a page's archiving runs
beside the reactor instead of in it. A batch is closed by the same thread after its
last record, then stored by another (an upload may wait out an outage).

Batches hold their pages' responses in Scrapy's scraper until stored: set
SCRAPER_SLOT_MAX_ACTIVE_SIZE above ARCHIVE_MAX_BYTES (settings/base.py does).
"""

from __future__ import annotations

import http
import logging
import os
import socket
import time

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from crawler.archive.storage import storage_from_settings
from crawler.archive.warc import RawPage, WarcBatch, object_key, recover

logger = logging.getLogger(__name__)


class ArchivePipeline:
    def __init__(
        self, crawler, storage, spool_dir: str, max_bytes: int, max_seconds: float, prefix: str, level: int = 6
    ):
        self.crawler = crawler
        self.stats = crawler.stats
        self.storage = storage
        self.spool_dir = spool_dir
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.prefix = prefix
        self.level = level
        self.crawl = crawler.settings.get("CRAWL_NAME")
        self.worker = f"{socket.gethostname()}-{os.getpid()}-{int(time.time() * 1000):x}"
        self.seq = 0
        self.batch: WarcBatch | None = None
        self._waiters: dict[str, list[Deferred]] = {}
        self._timer = None
        self._storing: list[Deferred] = []
        self._writer = ThreadPool(1, 1, name="warc-writer")  # one thread: records stay in order

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("ARCHIVE_ENABLED"):
            raise NotConfigured
        spool = os.path.join(s.get("CRAWL_DIR"), s.get("CRAWL_NAME"), "archive-spool")
        return cls(
            crawler,
            storage_from_settings(s),
            spool,
            s.getint("ARCHIVE_MAX_BYTES"),
            s.getfloat("ARCHIVE_MAX_SECONDS"),
            s.get("ARCHIVE_PREFIX"),
            s.getint("ARCHIVE_GZIP_LEVEL"),
        )

    # -- lifecycle ---------------------------------------------------------------------

    async def open_spider(self, spider=None):
        self._writer.start()
        logger.info(
            "Archiving raw pages to %s (WARC batches of %d MB or %.0f s)",
            self.storage.describe(),
            self.max_bytes // 2**20,
            self.max_seconds,
        )
        leftovers = self._leftover_spools()
        if leftovers:
            logger.info("Storing %d WARC spool files left by an earlier worker", len(leftovers))
            for path, key in leftovers:
                await maybe_deferred_to_future(threads.deferToThread(self._store_leftover, path, key))

    async def close_spider(self, spider=None):
        self._close_batch()
        for d in list(self._storing):
            await maybe_deferred_to_future(d)
        if self._writer.started:
            self._writer.stop()

    def _leftover_spools(self) -> list[tuple[str, str]]:
        out = []
        for dirpath, _, files in os.walk(self.spool_dir):
            for name in files:
                if name.endswith(".warc.gz"):
                    path = os.path.join(dirpath, name)
                    out.append((path, os.path.relpath(path, self.spool_dir)))
        return out

    def _store_leftover(self, path: str, key: str) -> None:
        kept = recover(path)
        if kept:
            self.storage.put(key, path)
        os.remove(path)
        self.stats.inc_value("archive/recovered_records", kept)

    # -- pages -------------------------------------------------------------------------

    async def process_item(self, item, spider=None):
        if item.get("status") is None or not isinstance(item.get("status"), int) or item.get("duplicate_of"):
            return item
        if self.batch is None:
            self._open_batch()
        batch = self.batch
        waiter: Deferred = Deferred()
        self._waiters[batch.key].append(waiter)
        try:
            offset, length = await maybe_deferred_to_future(self._in_writer(batch.add, _raw_page(item)))
        except Exception:  # the spool file could not be written: the page is not acknowledged
            waiters = self._waiters.get(batch.key, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if batch is self.batch:  # nothing more after a torn record (close trims it)
                self._close_batch()
            raise
        item["archive"] = {"key": batch.key, "offset": offset, "length": length}
        self.stats.inc_value("archive/records")
        if batch is self.batch and batch.size >= self.max_bytes:
            self._close_batch()
        await maybe_deferred_to_future(waiter)
        return item

    def _in_writer(self, fn, *args) -> Deferred:
        from twisted.internet import reactor

        return threads.deferToThreadPool(reactor, self._writer, fn, *args)

    def _open_batch(self) -> None:
        from twisted.internet import reactor

        self.seq += 1
        key = object_key(self.crawl, self.worker, self.seq, self.prefix)
        self.batch = WarcBatch(os.path.join(self.spool_dir, key), key, self.level)
        self._waiters[key] = []
        self._timer = reactor.callLater(self.max_seconds, self._close_batch)

    def _close_batch(self) -> None:
        batch, self.batch = self.batch, None
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if batch is None:
            return
        # closed (flushed, fsynced) by the writer after the records queued before it
        d = self._in_writer(batch.close)
        d.addCallback(lambda _: threads.deferToThread(self._store, batch))
        self._storing.append(d)
        d.addBoth(self._stored, batch, d)

    def _store(self, batch: WarcBatch) -> int:
        size = os.path.getsize(batch.path)
        self.storage.put(batch.key, batch.path)  # retries until it succeeds
        os.remove(batch.path)
        return size

    def _stored(self, result, batch: WarcBatch, d: Deferred):
        self._storing.remove(d)
        waiters = self._waiters.pop(batch.key, [])
        if isinstance(result, Failure):
            logger.error(
                "WARC batch %s not stored (%s); its %d pages are not acknowledged",
                batch.key,
                result.getErrorMessage(),
                len(waiters),
            )
            for w in waiters:
                w.errback(result)
            return None
        self.stats.inc_value("archive/objects")
        self.stats.inc_value("archive/bytes", result)
        for w in waiters:
            w.callback(None)
        return None


def _raw_page(item) -> RawPage:
    status = item["status"]
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    headers = [(k, v) for k, values in (item.get("headers") or {}).items() for v in values]
    request_headers = [(k, v) for k, values in (item.get("request_headers") or {}).items() for v in values]
    return RawPage(
        url=item.get("final_url") or item["url"],
        status=status,
        reason=reason,
        protocol=item.get("protocol") or "HTTP/1.1",
        headers=headers,
        body=item.get("body") or b"",
        method=item.get("method") or "GET",
        request_headers=request_headers,
        ip_address=item.get("ip_address"),
        fetched_at=item.get("fetched_at"),
    )
