"""Due URLs back into the frontier: the UrlStore's ``due`` query, then ``put``.

A URL whose ``next_fetch_at`` has passed (crawler/freshness/schedule.py set it) is put back
into the frontier as a recrawl (``codec.encode_recrawl``): past URL-seen
(``dont_filter``) and the fetch policy, carrying what its schedule compares with (its
interval, content digest and fetch time) and its stored ETag and Last-Modified, which
the request sends back as If-None-Match / If-Modified-Since. Each URL read is held first
(``UrlStore.reschedule`` to now + RECRAWL_HOLD, past the pass's horizon, and its put time
noted), then put, so that neither this pass nor the next round puts it again while it waits
in its host's queue, nor a pass by fetch time (``--older-than``, which reads URLs due or not)
until it is fetched or its hold ends; its fetch writes its real next due time. A round that
fails between the two (Redis or the store away, the worker gone) delays a URL by the hold,
and never puts it twice; a URL the frontier refuses (out of scope, a trap, its host's
quota) waits the hold too, not at the head of every round; one deferred (a server of
several away) is delivered once it is back.

Two ways in, one ``Recrawl.round``:

``scrapy recrawl`` (crawler/commands/recrawl.py)
    once, every due URL (or a host's, or those fetched more than N seconds ago), with a
    progress line.
a running crawl (``RecrawlTimer``, started by the scheduler when RECRAWL_CHECK_INTERVAL
    is set; the distributed profile sets it)
    every RECRAWL_CHECK_INTERVAL seconds the worker that takes the crawl's recrawl lock
    (keys.py ``recrawl_lock``, SET NX with an expiry of the interval: one worker a round,
    and a dead worker's lock goes by itself; renewed after each step of a round, which
    stops if another worker took it) puts up to RECRAWL_BATCH due URLs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass, field

from twisted.internet import task, threads

from crawler.frontier import codec
from crawler.frontier.frontier import SEED_CASH, Entry
from crawler.frontier.words import ADDED

logger = logging.getLogger(__name__)

PAGE = 500  # URLs read from the UrlStore and put per step


@dataclass
class RecrawlReport:
    read: int = 0  # due URLs read from the UrlStore
    statuses: dict[str, int] = field(default_factory=dict)  # what put said of them: added, trap:..., host_full
    started: float = field(default_factory=time.monotonic)

    @property
    def added(self) -> int:
        return self.statuses.get(ADDED, 0)

    def progress_text(self) -> str:
        seconds = max(time.monotonic() - self.started, 1e-6)
        return f"{self.read} due URLs read, {self.added} put back ({self.read / seconds:.0f} URLs/s)"

    def summary(self) -> str:
        parts = ", ".join(f"{n} {status}" for status, n in sorted(self.statuses.items(), key=lambda kv: -kv[1]))
        return f"{self.read} due URLs read" + (f": {parts}" if parts else "")


def recrawl_entry(row: dict) -> Entry:
    """The frontier entry of a due URL (a row of ``UrlStore.due``)."""
    info = {
        "interval": row.get("fetch_interval"),
        "digest": row.get("content_digest"),
        "fetched_at": row.get("fetched_at"),
        "etag": row.get("etag"),
        "last_modified": row.get("last_modified"),
    }
    info = {k: v for k, v in info.items() if v is not None}
    return Entry(url=row["url"], payload=codec.encode_recrawl(row["url"], info), dont_filter=True, cash=SEED_CASH)


class Recrawl:
    def __init__(self, store, frontier, hold: float, page: int = PAGE):
        self.store = store
        self.frontier = frontier
        self.hold = hold
        self.page = page

    def round(
        self,
        limit: int | None = None,
        *,
        now: float | None = None,
        host: str | None = None,
        older_than: float | None = None,
        ahead: float = 0.0,
        progress=None,
    ) -> RecrawlReport:
        """Put back up to ``limit`` (None: all) URLs due at ``now`` or within ``ahead``
        seconds of it (``older_than``: those fetched more than that many seconds ago, due
        or not; ``host``: only its URLs). ``progress(report)`` is called after each step."""
        now = time.time() if now is None else now
        report = RecrawlReport()
        fetched_before = None if older_than is None else now - older_than
        cursor = None
        while limit is None or report.read < limit:
            size = self.page if limit is None else min(self.page, limit - report.read)
            rows, cursor = self.store.due(
                now + ahead, size, cursor, host=host, fetched_before=fetched_before, put_since=now - self.hold
            )
            if rows:
                self._put(rows, now, now + ahead + self.hold, report)
            if progress is not None:
                progress(report)
            if cursor is None:
                break
        return report

    def _put(self, rows: list[dict], now: float, until: float, report: RecrawlReport) -> None:
        """Hold ``rows`` (their due time moved to ``until``, and put at ``now``: a pass by
        fetch time leaves them out until they are fetched or the hold ends), then put them;
        if the put fails, give them their due times and put times back (best effort: else
        they wait the hold)."""
        self._reschedule([(row["url"], until, now) for row in rows])
        entries = [recrawl_entry(row) for row in rows]
        try:
            statuses = self.frontier.put(entries)
        except Exception:
            with contextlib.suppress(Exception):
                self._reschedule([(row["url"], row["next_fetch_at"], row.get("put_at") or 0.0) for row in rows])
            raise
        for status in statuses:
            report.statuses[status] = report.statuses.get(status, 0) + 1
        report.read += len(rows)

    def _reschedule(self, times: list[tuple[str, float | None, float]]) -> None:
        for future in [self.store.reschedule(url, at, put_at=put) for url, at, put in times]:
            future.result(timeout=60)


def take_lock(frontier, owner: str, seconds: float) -> bool:
    """Whether ``owner`` holds the crawl's recrawl lock for the next ``seconds`` (taken
    now, or already its own)."""
    key = frontier.keys.recrawl_lock
    ms = max(int(seconds * 1000), 1)
    if frontier.redis.set(key, owner, nx=True, px=ms):
        return True
    current = frontier.redis.get(key)
    if current is not None and current.decode() == owner:
        frontier.redis.pexpire(key, ms)
        return True
    return False


class RecrawlTimer:
    """The periodic round of a running crawl (in a thread of the reactor's pool)."""

    def __init__(self, crawler, store, frontier):
        s = crawler.settings
        self.stats = crawler.stats
        self.interval = s.getfloat("RECRAWL_CHECK_INTERVAL")
        self.batch = s.getint("RECRAWL_BATCH")
        self.recrawl = Recrawl(store, frontier, s.getfloat("RECRAWL_HOLD"))
        self.frontier = frontier
        self.owner = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self._loop = None
        self._running = False

    def start(self) -> None:
        self._loop = task.LoopingCall(self._tick)
        self._loop.start(self.interval, now=True)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def _tick(self) -> None:
        if self._running:
            return
        self._running = True
        d = threads.deferToThread(self.run_once)
        d.addCallbacks(self._done, self._failed)

    def run_once(self) -> RecrawlReport | None:
        """One round if this worker takes the lock (None when another worker holds it)."""
        # held for two intervals, renewed at each tick and after each step of a round: the
        # owner keeps it from one round to the next, late ticks and long rounds included,
        # and another worker takes over two intervals after it stops
        if not take_lock(self.frontier, self.owner, 2 * self.interval):
            return None
        return self.recrawl.round(self.batch, progress=self._still_mine)

    def _still_mine(self, report: RecrawlReport) -> None:
        """Renew the lock after a step; stop the round (LockLost) if another worker took it
        meanwhile (this round outlived it)."""
        if not take_lock(self.frontier, self.owner, 2 * self.interval):
            raise LockLost(f"the recrawl lock passed to another worker after {report.read} due URLs read")

    def _done(self, report: RecrawlReport | None) -> None:
        self._running = False
        if report is None:
            return
        self.stats.inc_value("recrawl/rounds")
        self.stats.inc_value("recrawl/put", report.added)
        if report.read:
            logger.info("Recrawl: %s", report.summary())

    def _failed(self, failure) -> None:
        self._running = False
        if failure.check(LockLost):
            logger.info("Recrawl round stopped: %s", failure.getErrorMessage())
            return
        self.stats.inc_value("recrawl/failed")
        logger.warning("Recrawl round failed: %s", failure.getErrorMessage())


class LockLost(Exception):
    """The recrawl lock passed to another worker while this one's round ran."""
