"""Archive pipeline: every fetched page's raw response goes into a WARC batch; the page's
lease is acknowledged only once the object holding its record is stored.

Data before metadata (Secor): the page's record is written to the batch's local spool
file (by one writer thread), the item gets its archive pointer (``archive``: key,
offset, length) and moves on at once, marked as still being stored
(``crawler.items.storing``: a Deferred that fires when its batch is stored). The
UrlStore pipeline writes the page's record without the pointer and adds the pointer
once the batch is stored; the lease middleware acknowledges the page after both. So a
UrlStore row never points to an object that is not there, a page whose batch was never
stored was never acknowledged (its lease brings it back), and no page's response waits
in Scrapy for its batch: a page waiting for its batch costs a Deferred, not its body.
A batch is stored at ARCHIVE_MAX_BYTES (compressed) or ARCHIVE_MAX_SECONDS, whichever
comes first. Spool files a dead worker left (``CRAWL_DIR/CRAWL_NAME/archive-spool``)
are trimmed to their last complete record and stored when a worker of the crawl opens.

Storage errors are retried with back-off (storage.py) while the pages wait; nothing is
lost (each retry is counted: ``archive/retries``). A store that refuses the uploads for a
reason no retry mends (wrong credentials, no such bucket: StorageRefused) closes the
worker with ``archive_refused`` (exit code 1) and one error line: its waiting pages go
back to the frontier and its spool files stay for the next run. A page without a response (a failed
fetch) leaves no record. An exact copy of a page seen before and a 304 Not Modified to a
recrawl leave a revisit record (warc.py) instead of their body: the copy's archive
pointer names its revisit record (and its UrlStore record's canonical_url the original),
while a 304 keeps the UrlStore's pointer on the stored capture it refers to. Each batch
opens with a warcinfo record (ARCHIVE_OPERATOR, the robots policy, the user agent) and
is stored with its CDXJ index beside it (the WARC's key, ``.cdxj``); a leftover spool
file's index is built again from its records (cdxj-indexer).

A batch is also stored at once when no more pages are coming soon
(``frontier_waiting``: a small crawl does not wait ARCHIVE_MAX_SECONDS for its last
pages) and when the worker starts closing. A closing worker waits at most
WORKER_STOP_TIMEOUT seconds for its uploads: then the uploads stop, the pages still
waiting fail with StoreUnavailable (their leases are given back, so they are fetched
again), and their spool files stay on disk for the next worker of the crawl to store.
Uploads run in daemon threads, so a stuck one never keeps the process alive.

Records are written (WARC headers, digests, gzip) by one writer thread, in the order the
pages came: hashing and compression release the GIL, so most of a page's archiving runs
beside the reactor instead of in it. A batch is closed by the same thread after its
last record, then stored by another (an upload may wait out an outage).

Why pages do not wait in the pipeline for their batch: Scrapy stops fetching while the
responses its scraper holds add up to more than SCRAPER_SLOT_MAX_ACTIVE_SIZE, so pages
held for their batch stopped a one-worker crawl for 1 to 3 s every few seconds (a third
of its time at 60 pages/s), and held every body in memory for up to a batch's age.
"""

from __future__ import annotations

import contextlib
import http
import logging
import os
import socket
import threading
import time
from importlib.metadata import version

import scrapy
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task, threads
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from crawler import __version__
from crawler.archive import cdxj
from crawler.archive.storage import StorageRefused, StorageStopped, s3_reason, storage_from_settings
from crawler.archive.uploads import UploadPool
from crawler.archive.warc import (
    IDENTICAL_PAYLOAD,
    NOT_MODIFIED,
    RawPage,
    Refers,
    WarcBatch,
    index_key,
    object_key,
    payload_digest,
    recover,
)
from crawler.exceptions import StoreUnavailable
from crawler.observe.trouble import ARCHIVE
from crawler.scrapy_private import engine_closing
from crawler.services import services
from crawler.signals import frontier_waiting
from crawler.stopping import WorkerStop

logger = logging.getLogger(__name__)

ARCHIVE_REFUSED = "archive_refused"  # a worker's close reason: the archive refused its uploads (exit code 1)


class ArchivePipeline:
    def __init__(
        self, crawler, storage, spool_dir: str, max_bytes: int, max_seconds: float, prefix: str, level: int = 6
    ):
        self.crawler = crawler
        self.stats = crawler.stats
        self.pages = services(crawler).pages  # (each page's storing, for its lease)
        self.trouble = services(crawler).trouble  # (what the worker waits for, said while it waits)
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
        self._uploads = UploadPool(crawler.settings.getint("ARCHIVE_UPLOADS"))  # (at most these at once)
        self.stop_timeout = crawler.settings.getfloat("WORKER_STOP_TIMEOUT")
        self._stop = threading.Event()  # set: uploads give up (the worker is stopping)
        self._closing_since: float | None = None
        self._refused: str | None = None  # why the store refused an upload: none is tried again
        self.worker_stop = WorkerStop(crawler)  # closes the worker when the store refuses (_refuse)
        self._seen_running = False  # the engine runs only once every component has opened
        self._watch = task.LoopingCall(self._watch_close)
        self.info = warcinfo(crawler.settings)  # the fields of each batch's warcinfo record

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("ARCHIVE_ENABLED"):
            raise NotConfigured
        spool = os.path.join(s.get("CRAWL_DIR"), s.get("CRAWL_NAME"), "archive-spool")
        pipeline = cls(
            crawler,
            storage_from_settings(s),
            spool,
            s.getint("ARCHIVE_MAX_BYTES"),
            s.getfloat("ARCHIVE_MAX_SECONDS"),
            s.get("ARCHIVE_PREFIX"),
            s.getint("ARCHIVE_GZIP_LEVEL"),
        )
        crawler.signals.connect(pipeline._frontier_waiting, signal=frontier_waiting)
        # an upload tried again (after a storage error) is counted, and its failure kept, in
        # the reactor thread
        pipeline.storage.on_retry = lambda exc: _reactor().callFromThread(pipeline._retried, s3_reason(exc))
        return pipeline

    # -- lifecycle ---------------------------------------------------------------------

    async def open_spider(self, spider=None):
        self._writer.start()
        # a forced shutdown (a second Ctrl-C) stops the reactor without close_spider: the
        # writer's thread, not a daemon, would keep the process alive for ever
        _reactor().addSystemEventTrigger("during", "shutdown", self._stop_writer)
        logger.info(
            "Archiving raw pages to %s (WARC batches of %d MB or %.0f s)",
            self.storage.describe(),
            self.max_bytes // 2**20,
            self.max_seconds,
        )
        self._watch.start(0.5, now=False)
        leftovers = self._leftover_spools()
        if leftovers:  # stored beside the crawl; a closing worker waits for them too
            logger.info("Storing %d WARC spool files left by an earlier worker", len(leftovers))
            for path, key in leftovers:
                d = self._uploads.submit(self._store_leftover, path, key)
                self._storing.append(d)
                d.addBoth(self._leftover_stored, d, path)

    async def close_spider(self, spider=None):
        self._closing()
        while self._storing and not self._stop.is_set():  # bounded: _watch_close gives up
            await maybe_deferred_to_future(task.deferLater(_reactor(), 0.1, lambda: None))
        if self._watch.running:
            self._watch.stop()
        self._stop_writer()

    def _stop_writer(self) -> None:
        if self._writer.started:
            self._writer.stop()

    def _frontier_waiting(self) -> None:
        if self.batch is not None and self._waiters.get(self.batch.key):
            self._close_batch()

    def _watch_close(self) -> None:
        engine = self.crawler.engine
        self._seen_running = self._seen_running or engine.running
        if (self._seen_running and not engine.running) or engine_closing(engine):
            self._closing()
        if self._closing_since is not None and time.monotonic() - self._closing_since > self.stop_timeout:
            self._give_up()

    def _closing(self) -> None:
        """The worker is closing: store the open batch now, and give up uploads that
        are not done within WORKER_STOP_TIMEOUT."""
        if self._closing_since is None:
            self._closing_since = time.monotonic()
            if self._storing:
                logger.info("Closing: waiting up to %.0f s for %d WARC uploads", self.stop_timeout, len(self._storing))
        self._close_batch()

    def _give_up(self) -> None:
        if self._stop.is_set() or not self._storing:
            return
        self._stop.set()
        logger.error(
            "WARC uploads not done %.0f s after the worker began closing: stopping them; their pages go "
            "back to the frontier and their spool files stay in %s for the next run",
            self.stop_timeout,
            self.spool_dir,
        )
        for key in list(self._waiters):
            if self.batch is None or key != self.batch.key:
                for w in self._waiters.pop(key):
                    w.errback(StoreUnavailable(f"WARC batch {key} not stored before the worker stopped"))

    def _leftover_spools(self) -> list[tuple[str, str]]:
        """Spool files of workers that are gone: a file of a worker still running on this
        machine (another worker of the crawl, started earlier) is its own to store."""
        out = []
        for dirpath, _, files in os.walk(self.spool_dir):
            for name in files:
                if name.endswith(".warc.gz") and not _worker_alive(name):
                    path = os.path.join(dirpath, name)
                    out.append((path, os.path.relpath(path, self.spool_dir)))
        return out

    def _store_leftover(self, path: str, key: str) -> None:
        if self._refused:
            raise StorageRefused(self._refused)
        kept = recover(path)
        index = index_key(path)
        if kept:
            cdxj.rebuild(path, key, index)
            self.storage.put(key, path, stop=self._stop)
            self.storage.put(index_key(key), index, stop=self._stop)
            logger.info("Stored the spool file %s left by an earlier worker: %d whole records", path, kept)
        else:
            logger.info("Discarded the spool file %s left by an earlier worker: no whole record in it", path)
        os.remove(path)
        if os.path.exists(index):
            os.remove(index)
        self.stats.inc_value("archive/recovered_records", kept)

    def _leftover_stored(self, result, d: Deferred, path: str):
        self._storing.remove(d)
        if isinstance(result, Failure) and result.check(StorageRefused):
            self._refuse(result.value)
        elif isinstance(result, Failure):
            logger.warning("Spool file %s not stored (%s); kept for the next run", path, result.getErrorMessage())

    # -- pages -------------------------------------------------------------------------

    async def process_item(self, item, spider=None):
        status = item.get("status")
        if status is None or not isinstance(status, int):
            return item  # no answer: no record
        try:
            if self.batch is None:
                self._open_batch()
        except OSError as exc:  # (the spool file cannot be made: a full or read-only disk)
            self.batch = None
            raise self._spool_failed(exc) from exc
        batch = self.batch
        waiter: Deferred = Deferred()
        self._waiters[batch.key].append(waiter)
        try:
            raw = _raw_page(item)
            offset, length = await maybe_deferred_to_future(self._in_writer(batch.add, raw))
        except Exception as exc:  # the spool file could not be written: the page is not acknowledged
            waiters = self._waiters.get(batch.key, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if batch is self.batch:  # nothing more after a torn record (close trims it)
                self._close_batch()
            if isinstance(exc, OSError):
                raise self._spool_failed(exc) from exc
            raise
        if status != 304:  # (a 304's UrlStore pointer stays on the capture it refers to)
            item["archive"] = {"key": batch.key, "offset": offset, "length": length, "bucket": self.storage.bucket}
        self.pages.set_storing(item, waiter)  # the lease waits for the batch; the item moves on
        self.stats.inc_value("archive/records")
        if raw.refers is not None:
            self.stats.inc_value("archive/revisits")
        if batch is self.batch and batch.size >= self.max_bytes:
            self._close_batch()
        return item

    def _spool_failed(self, exc: OSError) -> StoreUnavailable:
        """A page the spool could not take (a full or read-only disk): dropped as the
        UrlStore drops one it cannot store, its lease given back (crawler/middlewares/lease.py),
        so that it is fetched and archived again later; counted."""
        self.stats.inc_value("archive/spool_errors")
        return StoreUnavailable(f"Page not archived: the spool in {self.spool_dir} could not take it ({exc})")

    def _in_writer(self, fn, *args) -> Deferred:
        from twisted.internet import reactor

        return threads.deferToThreadPool(reactor, self._writer, fn, *args)

    def _open_batch(self) -> None:
        from twisted.internet import reactor

        self.seq += 1
        key = object_key(self.crawl, self.worker, self.seq, self.prefix)
        self.batch = WarcBatch(os.path.join(self.spool_dir, key), key, self.level, self.info)
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
        d.addCallback(lambda _: self._uploads.submit(self._store, batch))
        self._storing.append(d)
        d.addBoth(self._stored, batch, d)

    def _store(self, batch: WarcBatch) -> int:
        if self._refused:  # the store refused this worker: the spool file stays
            raise StorageRefused(self._refused)
        size = os.path.getsize(batch.path)
        self.storage.put(batch.key, batch.path, stop=self._stop)  # retries until it succeeds, or stops
        self.storage.put(index_key(batch.key), batch.index_path, stop=self._stop)  # its index, after it
        os.remove(batch.path)
        os.remove(batch.index_path)
        return size

    def _stored(self, result, batch: WarcBatch, d: Deferred):
        self._storing.remove(d)
        waiters = self._waiters.pop(batch.key, [])
        if isinstance(result, Failure):
            if result.check(StorageStopped):  # given up at close (_give_up); the spool file stays
                for w in waiters:
                    w.errback(StoreUnavailable(f"WARC batch {batch.key} not stored before the worker stopped"))
                return None
            if result.check(StorageRefused):  # a setting to fix; the spool file stays
                self._refuse(result.value)
                for w in waiters:
                    w.errback(StoreUnavailable(f"WARC batch {batch.key} not stored: the archive refused it"))
                return None
            logger.error(
                "WARC batch %s not stored (%s); its %d pages are not acknowledged (fetched again), and its spool "
                "file is deleted",
                batch.key,
                result.getErrorMessage(),
                len(waiters),
            )
            # (kept, it was never tried again in this run, and the next start stored it
            # beside the pages' later captures: a copy a failure, unbounded)
            for path in (batch.path, batch.index_path):
                with contextlib.suppress(OSError):
                    os.remove(path)
            for w in waiters:
                w.errback(StoreUnavailable(f"WARC batch {batch.key} not stored: {result.getErrorMessage()}"))
            return None
        self.stats.inc_value("archive/objects")
        self.stats.inc_value("archive/bytes", result)
        self.trouble.stored(ARCHIVE)
        for w in waiters:
            w.callback(None)
        return None

    def _retried(self, why: str) -> None:
        self.stats.inc_value("archive/retries")
        self.trouble.failed(ARCHIVE, why, time.time())

    def _refuse(self, exc: BaseException) -> None:
        """The store refused an upload for good (credentials, bucket): say so once and close
        the worker; later batches are not tried (their spool files stay for the next run)."""
        if self._refused:
            return
        self._refused = str(exc)
        logger.error(
            "The archive refused this worker's uploads (%s): check ARCHIVE_S3_BUCKET and the S3 credentials "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); closing; the pages waiting go back to the frontier "
            "and the spool files stay in %s for the next run",
            exc,
            self.spool_dir,
        )
        self.stats.set_value("archive/error", ARCHIVE_REFUSED)
        self.worker_stop.close(ARCHIVE_REFUSED)  # (a spool file left over may be refused while the worker opens)


def _reactor():
    from twisted.internet import reactor

    return reactor


def _worker_alive(spool_name: str) -> bool:
    """Whether the worker that named a spool file (``<host>-<pid>-<start>-<seq>.warc.gz``)
    still runs on this machine. A pid reused since is taken for alive: its file waits for
    a later worker rather than being taken from a live one."""
    parts = spool_name.rsplit("-", 3)
    if len(parts) != 4 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False  # (this worker has no spool file yet when it looks)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def warcinfo(settings) -> dict:
    """The fields of a batch's warcinfo record."""
    return {
        "software": f"crawler/{__version__} (Scrapy {scrapy.__version__}, warcio {version('warcio')})",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "isPartOf": settings.get("CRAWL_NAME"),
        "operator": settings.get("ARCHIVE_OPERATOR"),
        "robots": "obey" if settings.getbool("ROBOTSTXT_OBEY") else "ignore",
        "http-header-user-agent": settings.get("USER_AGENT"),
        "hostname": socket.gethostname(),
    }


def _digest(value) -> str | None:
    """A stored content digest (``sha1:<hex>``) as a WARC payload digest; None if it is not one."""
    try:
        return payload_digest(value) if value else None
    except ValueError:
        return None


def _refers(item) -> Refers | None:
    """The capture a revisit record of this page stands for; None: a response record."""
    if item.get("duplicate_of"):
        return Refers(
            IDENTICAL_PAYLOAD,
            item["duplicate_of"],
            item.get("duplicate_fetched_at"),
            _digest(item.get("content_digest")),
        )
    if item["status"] == 304:
        stored = item.get("recrawl") or {}
        url = item.get("final_url") or item["url"]
        return Refers(NOT_MODIFIED, url, stored.get("fetched_at"), _digest(stored.get("digest")))
    return None


def _raw_page(item) -> RawPage:
    status = item["status"]
    refers = _refers(item)
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
        body=item.get("body") or b"",  # (a revisit record keeps its length only)
        method=item.get("method") or "GET",
        request_headers=request_headers,
        ip_address=item.get("ip_address"),
        fetched_at=item.get("fetched_at"),
        outlinks=[link["url"] for link in item.get("outlinks") or ()],
        fetch_ms=None if item.get("fetch_latency") is None else int(item["fetch_latency"] * 1000),
        refers=refers,
        payload_digest=_digest(item.get("content_digest")) if refers is None else None,
    )
