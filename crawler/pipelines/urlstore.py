"""UrlStore pipeline: the last stage. Every Page becomes its URL's record in the UrlStore
(crawler/urlstore/), failures included (each with its fate), and the page's lease is
acknowledged only once that write has succeeded. A write that fails for good (the
store unavailable after its retries) raises StoreUnavailable: the lease is given back
and the page is fetched again later, never acknowledged without its record.

The record is written as soon as the page has been read, so that what the crawl learned
is readable at once; a page whose WARC record is still waiting for its batch
(``crawler.items.storing``) is written without its archive pointer, which is added once
the batch is stored (data before metadata): the page's lease waits for that too.

Each record says when the URL is due again (``next_fetch_at``) and the interval it was
given (``fetch_interval``), by the adaptive schedule (crawler/freshness/schedule.py): a page
whose content digest changed since its last fetch comes back sooner, one that did not
later, within RECRAWL_MIN_INTERVAL..RECRAWL_MAX_INTERVAL; a first fetch after
RECRAWL_INTERVAL (or its sitemap's changefreq); 404/410 after RECRAWL_GONE_INTERVAL, a
redirect after RECRAWL_REDIRECT_INTERVAL, a failure (5xx, DNS, timeout, connection,
robots-disallowed) after RECRAWL_RETRY_INTERVAL; never for an address the network guard
refused (RECRAWL_INTERVAL 0: no due time after an answer). What the schedule compares
with (the previous interval, digest and fetch time) comes with a recrawl's request
(``meta.RECRAWL``, put by crawler/freshness/recrawl.py); the answer's ETag and Last-Modified
are kept for the next conditional request.

A fetch without an answer (a connection, DNS or timeout error, robots.txt's refusal, a URL
not fetched) writes its attempt alone (fate, error, times, schedule: ``record.attempt_only``):
the page its URL's last answer gave stays in the record (its digest, archive pointer, ETag,
metadata and links), for the user and for the next recrawl's comparison and conditional
request.

A 304 Not Modified to a recrawl's conditional request keeps the stored record as it is
(page, metadata, archive pointer): only fetched_at, next_fetch_at and fetch_interval are
written (``UrlStore.reschedule``), counted ``recrawl/not_modified`` (the archive pipeline
does not archive a 304). A recrawl whose page came back counts ``recrawl/changed`` or
``recrawl/unchanged`` by its digest.
"""

from __future__ import annotations

import email.utils
import logging
import time
from datetime import UTC, datetime

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task
from twisted.internet.defer import Deferred

from crawler.exceptions import StoreUnavailable
from crawler.freshness.schedule import Bounds, Schedule, outcome, schedule
from crawler.items import Page
from crawler.observe.trouble import URLSTORE
from crawler.page.headers import header
from crawler.services import services
from crawler.urlstore.record import ArchivePointer, FetchRecord, page_fate

logger = logging.getLogger(__name__)

CLOSE_MARGIN = 10.0  # seconds past WORKER_STOP_TIMEOUT a closing worker waits for pointer writes


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _w3c_date(value: str | None) -> float | None:
    """A sitemap lastmod (W3C datetime: a date, or a date and time with its zone)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def changed(page) -> bool | None:
    """Whether a recrawled page changed since its last fetch: False for a 304, else its
    content digest against the one its recrawl carried (None: nothing to compare)."""
    if page.get("status") == 304:
        return False
    before = (page.get("recrawl") or {}).get("digest")
    now = page.get("content_digest")
    return None if not before or not now else before != now


def page_schedule(page, bounds: Bounds) -> Schedule:
    """The next fetch of a Page by the adaptive schedule."""
    status = page.get("status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    info = page.get("recrawl") or {}
    hints = page.get("sitemap") or {}
    headers = page.get("headers") or {}
    modified = _http_date(header(headers, "Last-Modified") or info.get("last_modified"))
    if modified is None:
        modified = _w3c_date(hints.get("lastmod"))
    return schedule(
        page.get("fetched_at"),
        bounds,
        kind=outcome(status, redirected=bool(page.get("redirect_chain"))),
        previous=info.get("interval"),
        changed=changed(page),
        modified_at=modified,
        changefreq=hints.get("changefreq"),
        previous_fetch=info.get("fetched_at"),
    )


def schedule_bounds(settings) -> Bounds:
    """The adaptive schedule's settings (RECRAWL_*)."""
    return Bounds(
        initial=settings.getfloat("RECRAWL_INTERVAL"),
        minimum=settings.getfloat("RECRAWL_MIN_INTERVAL"),
        maximum=settings.getfloat("RECRAWL_MAX_INTERVAL"),
        error=settings.getfloat("RECRAWL_RETRY_INTERVAL"),
        gone=settings.getfloat("RECRAWL_GONE_INTERVAL"),
        redirect=settings.getfloat("RECRAWL_REDIRECT_INTERVAL"),
        inc_rate=settings.getfloat("RECRAWL_INC_RATE"),
        dec_rate=settings.getfloat("RECRAWL_DEC_RATE"),
        sync_delta_rate=settings.getfloat("RECRAWL_SYNC_DELTA_RATE"),
    )


def fetch_record(page, recrawl: float = 0, retry: float = 0, bounds: Bounds | None = None) -> FetchRecord:
    """The UrlStore record of a Page item; its next fetch is due by the adaptive schedule
    of ``bounds`` when given (and the page answered or failed; never when refused), else
    ``recrawl`` seconds after an answer, ``retry`` seconds after a failure (0: no due
    time)."""
    status = page.get("status")
    error = page.get("error")
    fate = page_fate(page)
    if fate == "robots_disallowed":
        status = None
    archive = page.get("archive")
    answered = isinstance(status, int) and status < 500
    after = 0 if fate == "refused" else recrawl if answered else retry
    fetched_at = page.get("fetched_at")
    next_fetch_at = fetched_at + after if after and fetched_at is not None else None
    interval = None
    if bounds is not None and after and fetched_at is not None:
        next_fetch_at, interval = page_schedule(page, bounds)[::-1]
    headers = page.get("headers") or {}
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
        archive=ArchivePointer(**archive) if archive else None,
        outlinks=list(page.get("outlinks") or []),
        next_fetch_at=next_fetch_at,
        fetch_interval=interval,
        etag=header(headers, "ETag"),
        last_modified=header(headers, "Last-Modified"),
    )


class UrlStorePipeline:
    def __init__(self, crawler, store):
        self.stats = crawler.stats
        self.pages = services(crawler).pages  # (each page's storing: its pointer waits for its batch)
        self.trouble = services(crawler).trouble  # (what the worker waits for, said while it waits)
        self.store = store
        self.backend = {"cassandra": "Cassandra", "sqlite": "SQLite"}.get(
            crawler.settings.get("URLSTORE_BACKEND").lower(), ""
        )
        self.recrawl = crawler.settings.getfloat("RECRAWL_INTERVAL")
        self.retry = crawler.settings.getfloat("RECRAWL_RETRY_INTERVAL")
        self.bounds = schedule_bounds(crawler.settings)
        self.stop_timeout = crawler.settings.getfloat("WORKER_STOP_TIMEOUT")
        self._pointers: set[Deferred] = set()  # pages whose archive pointer is not written yet

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("URLSTORE_ENABLED"):
            raise NotConfigured
        pipeline = cls(crawler, services(crawler).urlstore)
        return pipeline

    async def close_spider(self, spider=None):
        """Wait for the archive pointers still to be written (their batches are being
        stored: the archive pipeline gives up on them after WORKER_STOP_TIMEOUT), so that
        their pages are acknowledged before the scheduler closes."""
        from twisted.internet import reactor

        deadline = time.monotonic() + self.stop_timeout + CLOSE_MARGIN
        while self._pointers and time.monotonic() < deadline:
            await maybe_deferred_to_future(task.deferLater(reactor, 0.1, lambda: None))
        if self._pointers:
            self.stats.inc_value("urlstore/pointers_unwritten", len(self._pointers))
            logger.warning(
                "%d archive pointers not written at close (their archive batches not stored within %.0f s): "
                "their pages are not acknowledged, and will be fetched again",
                len(self._pointers),
                self.stop_timeout + CLOSE_MARGIN,
            )

    async def process_item(self, item, spider=None):
        if not isinstance(item, Page):
            return item
        if item.get("recrawl") is not None:
            if item.get("status") == 304:
                return await self._not_modified(item)
            verdict = changed(item)
            if verdict is not None:
                self.stats.inc_value("recrawl/changed" if verdict else "recrawl/unchanged")
        record = fetch_record(item, self.recrawl, self.retry, self.bounds)
        archived = self.pages.storing(item)  # its batch not stored yet: the record goes without its pointer
        pointer = record.archive if archived is not None else None
        if pointer is not None:
            record.archive = None
        try:
            await maybe_deferred_to_future(_deferred(self.store.record_fetch(record)))
        except Exception as exc:
            raise self._failed(exc, f"UrlStore write of {record.url} failed: {type(exc).__name__}: {exc}") from exc
        self.trouble.stored(URLSTORE)
        self.stats.inc_value(f"urlstore/written/{record.fate}")
        if pointer is not None:
            self._pointers.add(archived)
            archived.addCallback(self._set_archive, record.url, pointer, record.fetched_at)
            archived.addBoth(self._pointer_done, archived)
        return item

    async def _not_modified(self, item):
        """A 304 to a recrawl: the stored record stays; only its schedule moves (no due
        time with RECRAWL_INTERVAL 0)."""
        due = page_schedule(item, self.bounds)
        at, interval = (due.due, due.interval) if self.recrawl > 0 else (None, None)
        try:
            await maybe_deferred_to_future(
                _deferred(self.store.reschedule(item["url"], at, item["fetched_at"], interval))
            )
        except Exception as exc:
            raise self._failed(exc, f"UrlStore write of {item['url']} failed: {type(exc).__name__}: {exc}") from exc
        self.trouble.stored(URLSTORE)
        self.stats.inc_value("recrawl/not_modified")
        return item

    def _failed(self, exc: BaseException, message: str) -> StoreUnavailable:
        """A write failed with ``exc``: counted, kept as the UrlStore's trouble until one is
        written again; the exception (saying ``message``) that gives its page back."""
        self.stats.inc_value("urlstore/failed")
        self.trouble.failed(URLSTORE, f"{self.backend} {type(exc).__name__}", time.time())
        return StoreUnavailable(message)

    def _pointer_done(self, result, archived: Deferred):
        self._pointers.discard(archived)
        return result

    def _set_archive(self, _, url: str, pointer: ArchivePointer, fetched_at: float) -> Deferred:
        """The page's batch is stored: its record gets the pointer, unless the URL was
        fetched again since (the page's lease waits for this write, chained on the page's
        ``storing`` Deferred)."""

        def failed(failure):
            message = f"UrlStore archive pointer of {url} not written: {failure.getErrorMessage()}"
            raise self._failed(failure.value, message)

        def written(_):
            self.trouble.stored(URLSTORE)
            self.stats.inc_value("urlstore/archive_pointers")

        return _deferred(self.store.set_archive(url, pointer, fetched_at)).addCallbacks(written, failed)


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
