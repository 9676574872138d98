"""Scrapy scheduler backed by the Redis frontier.

Contract with the engine (scrapy.core.scheduler.BaseScheduler):

``enqueue_request(request)``
    Normalizes the URL and offers it to the frontier. Returns False for an invalid URL;
    every other request is taken, and sent with the other requests of the same reactor
    turn in one round trip (a page's 100 links: one PUSH call, not 100). Whether each
    was added, already seen, or refused by a trap guard or the per-host limit is
    counted under ``frontier/...`` in the stats. A request that carries a
    lease (a retry or a redirect of a leased page) is a follow-up: it goes straight to
    its host's back queue and takes over the lease of the page it came from, in one
    atomic step, so the page is never lost between the two.
``next_request()``
    Returns a leased request from a host that is due, or None when no host is due.
    While FRONTIER_MAX_UNREAD of this worker's pages are downloaded (or downloading) but
    not yet through the item pipelines, it returns None (a crash costs those pages, and
    they hold memory); the engine is woken when one is read. A pop leases up to
    FRONTIER_PREFETCH due hosts at once; the extra requests wait here for the engine's
    next call (a leased host counts as in flight, so prefetching never sends two
    requests to one host, nor one before its time). A host due within
    FRONTIER_LOOKAHEAD is handed out already, its request carrying the due time
    (``meta.DUE``), and the rate limiter holds it until then: when the host is due, its
    request has been popped, decoded and through the middlewares, and only has to leave.
    When it returns None, it arranges for the engine to be woken when the next host
    is due, less the lookahead (at most FRONTIER_POLL_INTERVAL later), so a crawl of
    few hosts does not wait for the engine's 5-second heartbeat.
``has_pending_requests()``
    True while requests are buffered here, or the last look at the frontier found a URL
    due within FRONTIER_MAX_WAIT. When it is False and the downloader and the pipelines
    are idle, the engine sends ``spider_idle``, and the local profile
    (FRONTIER_CLOSE_WHEN_IDLE) closes the worker once nothing is leased by any worker
    and nothing is due within FRONTIER_MAX_WAIT, for FRONTIER_IDLE_SECONDS: what is
    still queued (hosts backed off, robots.txt unreachable, URL retries later) stays in
    the frontier for the next run, which resumes it once due. The distributed profile
    keeps waiting.

Store outages: a page a store did not take (``page_not_stored``: the UrlStore or the
archive refused its write after their retries) gives its lease back, and the worker
leases no more for a while (half the outage so far, from 0.5 s to 30 s), then tries
again; the first page stored ends the hold.

Redis outages: a failed pop is retried with back-off (half the outage so far, from 0.5 s
to 30 s) and the worker stays open; pushes and acks that fail wait in an in-process outbox and are
delivered in order once Redis answers again (a page's links before its ack), so nothing
the worker learned is lost while it lives; a worker killed during an outage loses only
unacknowledged work, which its expired leases bring back.

Acknowledgements travel with the worker's next pop (one round trip for both), or
after ACK_DELAY when no pop comes. A landing (a leased request left the downloader,
with a response or a failure) carries the time the download ended, and its host is due
again exactly its interval after that (FRONTIER_HOST_MAX_IN_FLIGHT: it may take its
next request while the page itself is still being handled). The landing rides on the
next pop, and at the latest on a pop sent when the host is due, less the lookahead:
that pop leases the host's next URL as it lands (one round trip for both, where an
immediate landing would cost one more per page).

Submissions (crawler/frontier/submit.py): every FRONTIER_SUBMIT_INTERVAL the worker takes
up to FRONTIER_SUBMIT_BATCH URLs from the crawl's submission list and puts them (to the
head of their hosts' queues), and reads the ``submitted`` counter, in one round trip; when
the counter moved (``scrapy submit`` added URLs) or it put some itself, it looks for due
hosts at once instead of at its next idle poll.

The recrawl (crawler/freshness/recrawl.py), when RECRAWL_CHECK_INTERVAL is set: every so often the
worker holding the crawl's recrawl lock puts the URLs the UrlStore says are due back.

The fetch policy (crawler/freshness/policy.py): the requests of each pop are looked up in the
UrlStore at once (one batch read); those fetched within FETCH_POLICY_MAX_AGE are not handed
to the engine, and their leases are acknowledged.

Leases: popped URLs are leased to this worker; the worker renews the leases it holds
every FRONTIER_LEASE_SECONDS / 3 until they are acknowledged (``ack``, called when the
page and everything it produced has been handled) or FRONTIER_LEASE_MAX_HOLD passes.
A worker that dies stops renewing; its leases expire and their URLs are handed out
again. On a clean close, leases not yet acknowledged are given back at once.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque

import redis
from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import reactor, task

from crawler import meta
from crawler.freshness.policy import FetchPolicy
from crawler.freshness.recrawl import RecrawlTimer
from crawler.frontier import codec, submit
from crawler.frontier.connection import FRONTIER_LOST, REDIS_REFUSED, outage_wait, refused
from crawler.frontier.frontier import ADDED, FINISHED, RUNNING, SEEN, Entry
from crawler.frontier.verbs import FrontierVerbs
from crawler.observe.report import when
from crawler.services import services
from crawler.signals import frontier_waiting, page_handled, page_not_stored
from crawler.urls import InvalidURL, normalize_url, url_options

logger = logging.getLogger(__name__)

ACK_DELAY = 0.25  # seconds an acknowledgement may wait for a pop to carry it
PUSH_CHUNK = 256  # entries a PUSH call takes (Redis runs a call of 256 links in some 5 ms)
QUIET_AFTER = 5.0  # seconds: nothing due this soon and nothing downloading: open batches are stored


class FrontierScheduler:
    uses_frontier = True  # (services(crawler).frontier_scheduled)

    def __init__(self, crawler, frontier: FrontierVerbs):
        self.crawler = crawler
        self.frontier = frontier
        self.stats = crawler.stats
        s = crawler.settings
        self.prefetch = max(s.getint("FRONTIER_PREFETCH"), 1)
        self.max_unread = max(s.getint("FRONTIER_MAX_UNREAD"), 1)
        self._unread: set[bytes] = set()  # leases whose pages have not yet left the item pipelines
        self._capped = False  # next_request refused for FRONTIER_MAX_UNREAD: wake the engine below it
        # hosts due this soon are handed out now; the rate limiter holds each request until
        # its host is due (without the limiter, nothing would hold it: no lookahead)
        self.lookahead = s.getfloat("FRONTIER_LOOKAHEAD") if s.getbool("RATE_LIMITER_ENABLED") else 0.0
        self.known_max = s.getint("FRONTIER_SEEN_CACHE")
        self._known: dict[str, None] = {}  # URLs pushed and found added or seen (insertion order)
        self.poll_interval = s.getfloat("FRONTIER_POLL_INTERVAL")
        self.submit_interval = s.getfloat("FRONTIER_SUBMIT_INTERVAL")
        self.submit_batch = s.getint("FRONTIER_SUBMIT_BATCH")
        self.policy: FetchPolicy | None = None  # the fetch policy (from_crawler), None when off
        self.recrawl = (
            None  # due URLs put back every RECRAWL_CHECK_INTERVAL (crawler/freshness/recrawl.py), None when off
        )
        self.lease_max_hold = s.getfloat("FRONTIER_LEASE_MAX_HOLD")
        self.close_when_idle = s.getbool("FRONTIER_CLOSE_WHEN_IDLE")
        self.idle_seconds = s.getfloat("FRONTIER_IDLE_SECONDS")
        self.max_wait = s.getfloat("FRONTIER_MAX_WAIT")
        # answers that are failures (failures.py): they do not bring a slowed host back
        self.failure_codes = {int(c) for n in ("URL_RETRY_HTTP_CODES", "HOST_BACKOFF_HTTP_CODES") for c in s.getlist(n)}
        self.url_options = url_options(s)
        self.spider = None
        self._buffer: list = []  # leased requests popped but not yet handed to the engine
        self._held: dict[bytes, tuple[float, float]] = {}  # lease -> (time it was popped, its host's interval in s)
        self._next_poll = 0.0
        self._wakeup = None
        self._wake_at = 0.0  # when _wakeup fires
        self._idle_since: float | None = None
        self._next_due: float | None = 0.0  # when the last pop said the next URL is due (s; None: nothing queued)
        self._answered: set[bytes] = set()  # leases whose hosts answered (see landed)
        self._renewer = task.LoopingCall(self._renew)
        self._submissions = task.LoopingCall(self._take_submissions)
        self._submitted: int | None = None  # the submitted counter as last read
        # While Redis is unreachable, pushes and acks wait here, in order (a page's links
        # are pushed before its lease is acknowledged), and are retried with back-off.
        self._outbox: deque = deque()
        # Pushes of this reactor turn, sent together; always before the next ack or pop.
        self._pushes: list[Entry] = []
        self._push_call = None
        # Acknowledgements ride on the next pop; a timer sends them if no pop comes soon.
        self._acks: list[bytes] = []
        self._landed: list[tuple[bytes, int]] = []  # (lease, ms) of downloads that ended, to tell the frontier
        self._ack_call = None
        self._land_call = None
        self._land_at = 0.0  # when _land_call fires
        self._backoff = 0.0
        self._down_since: float | None = None
        # pages given back because a store did not take them: lease no more until then
        self._store_down_since: float | None = None
        self._hold_until = 0.0
        self._next_warning = 0.0
        self._retry_call = None
        self._closing_for: str | None = None  # the close reason, once this worker must stop
        self._epoch: int | None = None  # the crawl's epoch as this worker first saw it (Frontier.epoch)

    @classmethod
    def from_crawler(cls, crawler):
        scheduler = cls(crawler, services(crawler).frontier)
        scheduler.policy = FetchPolicy.from_crawler(crawler)
        s = crawler.settings
        if s.getfloat("RECRAWL_CHECK_INTERVAL") > 0 and s.getbool("URLSTORE_ENABLED"):
            scheduler.recrawl = RecrawlTimer(crawler, services(crawler).urlstore, scheduler.frontier)
        crawler.signals.connect(scheduler._spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(scheduler.ack, signal=page_handled)
        crawler.signals.connect(scheduler.give_back, signal=page_not_stored)
        crawler.signals.connect(scheduler.landed, signal=signals.request_left_downloader)
        crawler.signals.connect(scheduler._downloaded, signal=signals.response_downloaded)
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(scheduler._read, signal=signal)
        return scheduler

    # -- lifecycle ---------------------------------------------------------------------

    def open(self, spider):
        self.spider = spider
        s = self.crawler.settings
        short = [
            n
            for n in ("ROBOTSTXT_RETRY_MAX", "HOST_BACKOFF_MAX", "URL_RETRY_DELAY_MAX")
            if s.getfloat(n) <= self.max_wait
        ]
        if self.close_when_idle and short:
            logger.warning(
                "%s at most FRONTIER_MAX_WAIT (%.0f s): a host that keeps failing is always due again "
                "within it, and this worker may never close",
                ", ".join(short),
                self.max_wait,
            )
        self._renewer.start(max(self.frontier.lease_ms / 3000, 0.05), now=False)
        if self.submit_interval > 0:
            self._submissions.start(self.submit_interval, now=False)
        if self.recrawl is not None:
            self.recrawl.start()
        try:
            self._epoch = self.frontier.epoch(create=True)
            stats = self.frontier.stats()
        except redis.RedisError as exc:
            if refused(exc):
                self._refused(exc)
            else:
                logger.warning("Redis unreachable at start (%s); the worker waits for it", exc)
            return
        logger.info(
            "Frontier %r: %d URLs queued over %d hosts, %d leased, %d seen",
            self.frontier.keys.crawl_name,
            stats["queued"],
            stats["hosts_queued"],
            stats["leased"],
            stats["seen"]["urls"],
        )

    def close(self, reason):
        for loop in (self._renewer, self._submissions):
            if loop.running:
                loop.stop()
        if self.recrawl is not None:
            self.recrawl.stop()
        for call in (self._wakeup, self._retry_call, self._ack_call, self._push_call, self._land_call):
            if call is not None and call.active():
                call.cancel()
        self._flush_acks()  # pushes first
        if self._outbox and not self._drain():
            logger.error(
                "Redis unreachable at close: %d pushes/acks not delivered; their pages' leases "
                "expire and the pages are fetched again",
                len(self._outbox),
            )
        # Pages handled were acknowledged already; what is still held (buffered, or cut
        # off mid-download by the close) goes back to the frontier now, not at expiry.
        unfinished = list(self._held)
        if unfinished:
            try:
                self.frontier.give_back(unfinished)
                logger.info("Gave back %d leased URLs not handled", len(unfinished))
            except redis.RedisError as exc:
                logger.warning("Could not give back %d leases (they expire instead): %s", len(unfinished), exc)
        self._held.clear()
        self._unread.clear()
        self._buffer.clear()

    # -- engine interface --------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        if self._buffer or self._outbox or self._pushes or self._down_since is not None:
            return True
        # what the last pop saw (pops come at least every FRONTIER_POLL_INTERVAL);
        # _spider_idle looks again before anything is closed
        return self._next_due is not None and self._next_due <= time.time() + self.max_wait

    def enqueue_request(self, request) -> bool:
        lease = request.meta.get(meta.LEASE, "")
        try:
            url = normalize_url(request.url, **self.url_options)
        except InvalidURL:
            self._inc("frontier/invalid")
            if lease:
                self.ack(request)
            return False
        not_before = request.meta.pop(meta.NOT_BEFORE, 0)
        try:
            payload = codec.encode(request, self.spider)
        except codec.UnencodableRequest as exc:
            self._inc("frontier/unencodable")
            logger.error("Request not queued: %s", exc)
            if lease:
                self.ack(request)
            return False
        entry = Entry(
            url=url,
            payload=payload,
            priority=request.priority,
            depth=request.meta.get(meta.DEPTH, 0),
            dont_filter=request.dont_filter,
            follow_up=bool(lease),
            replaces_lease=lease,
            not_before=not_before if lease else 0,
        )
        if lease:
            self._forget(lease)  # (its follow-up is leased again)
        self._offer([entry])
        return True

    def enqueue_links(self, urls: list[str], depth: int, referer: str) -> None:
        """Offer a page's followed links: normalized http(s) URLs, each what
        ``enqueue_request`` would push for a plain request of the spider's default
        callback at ``depth`` with ``referer``, without building a Request for each (a
        page's hundreds of links cost most of a worker's time that way)."""
        entries = []
        for url in urls:
            if not url.startswith(("http://", "https://")):
                self._inc("frontier/invalid")
                continue
            entries.append(Entry(url=url, payload=codec.encode_link(url, depth, referer), depth=depth))
        self._offer(entries)

    def _offer(self, entries: list[Entry]) -> None:
        """Queue entries for the push sent at the end of this reactor turn (or for the
        outbox while Redis is away)."""
        if self._outbox:
            for entry in entries:
                self._defer(("push", entry))
            return
        self._pushes.extend(entries)
        self._push_later()

    def _push_later(self) -> None:
        if self._push_call is None or not self._push_call.active():
            self._push_call = reactor.callLater(0, self._flush_pushes, False)

    def _flush_pushes(self, everything: bool = True) -> None:
        """Send the pushes waiting, PUSH_CHUNK entries a call; unless ``everything``, one
        call now and the rest in the next reactor turns, so that a page of thousands of
        links does not hold up the reactor (and the hosts due) for tens of ms."""
        while self._pushes:
            entries, self._pushes = self._pushes[:PUSH_CHUNK], self._pushes[PUSH_CHUNK:]
            self._push(entries)
            if self._pushes and not everything:
                self._push_later()
                return

    def _push(self, entries: list[Entry]) -> None:
        """Push entries in one call. URLs this worker has pushed before are seen for good
        (the URL-seen filter never forgets): they are counted as seen here and not sent
        again (a site's menu links, on every page)."""
        known = self._known
        fresh = [e for e in entries if e.url not in known or e.dont_filter or e.follow_up]
        if len(fresh) < len(entries):
            self._inc("frontier/seen", len(entries) - len(fresh))
        entries = fresh
        if not entries:
            return
        if self._outbox:
            for entry in entries:
                self._defer(("push", entry))
            return
        try:
            statuses = self.frontier.put(entries)
        except redis.RedisError as exc:  # pushes are idempotent: send them all again later
            self._redis_down(exc)
            for entry in entries:
                self._defer(("push", entry))
            return
        for entry, status in zip(entries, statuses, strict=True):
            self._count_push(status)
            if status in (ADDED, SEEN) and not entry.dont_filter and self.known_max > 0:
                known[entry.url] = None
        if ADDED in statuses and self._next_poll:
            # a host whose queue was empty may be due now (or at its landing's interval):
            # look again at once rather than at the next poll
            self._next_poll = 0.0
            self._wake_engine_in(0)
        if len(known) > self.known_max:  # forget the older half
            for url in list(itertools.islice(known, len(known) // 2)):
                del known[url]

    def _count_push(self, status: str) -> None:
        if status == ADDED:
            self._inc("frontier/enqueued")
        else:
            self._inc(f"frontier/{status.replace(':', '/')}")

    def next_request(self):
        if len(self._unread) >= self.max_unread and not self._buffer:
            # pages read more slowly than they come: lease no more until some are read
            # (a crash refetches what is held unread, and it holds memory)
            self._capped = True
            self._inc("frontier/unread_full")
            return None
        if not self._buffer:
            now = time.time()
            until = max(self._next_poll, self._hold_until)
            if now < until:
                # (a wake-up may fire a little early by this clock: look again then)
                self._wake_engine_in(until - now)
                return None
            self._pop(self.prefetch, now)
            if not self._buffer:
                return None
        return self._buffer.pop(0)

    def _pop(self, n: int, now: float) -> None:
        """Lease up to ``n`` requests into the buffer, carrying the acks and landings
        waiting; when none is due, note when the next one is and wake the engine then."""
        # what this worker offered goes first (a chunk of it: all of it when acks ride on
        # the pop, since a page's links must reach the frontier before its ack)
        self._flush_pushes(everything=bool(self._acks))
        acks, self._acks = self._acks, []
        landed, self._landed = self._landed, []
        try:
            leases, next_due = self.frontier.get(n, ack=acks, landed=landed, lookahead=int(self.lookahead * 1000))
        except redis.RedisError as exc:
            self._acks[:0] = acks  # acks and landings are idempotent: send them again later
            self._landed[:0] = landed
            self._redis_down(exc)
            self._next_poll = now + self._backoff
            self._wake_engine_in(self._backoff)
            return
        if self._down_since is not None and not self._outbox:
            self._redis_up()
        if self.frontier.last_acked:
            self._inc("frontier/acked", self.frontier.last_acked)
        leases, requests = self._decoded(leases)
        skipped = self.policy.skip(requests) if self.policy is not None and leases else ()
        for i, (lease, request) in enumerate(zip(leases, requests, strict=True)):
            if i in skipped:  # fetched recently: done with it (its ack lands it)
                self._acks.append(lease.id)
                self._schedule_flush()
                continue
            request.meta[meta.LEASE] = lease.id
            self._unread.add(lease.id)
            if lease.due > now * 1000:
                request.meta[meta.DUE] = lease.due
            self._held[lease.id] = (now, lease.interval / 1000)
            self._buffer.append(request)
        if leases:
            self._inc("frontier/leased", len(leases))
        if n and len(leases) == n:  # more may be due: look again at the engine's next call
            self._next_due = now
            self._next_poll = 0.0
            if not self._buffer:  # (every one skipped by the fetch policy: that call is now)
                self._wake_engine_in(0)
            return
        # fewer than asked for: the frontier said when the next host is due
        self._next_due = None if next_due is None else next_due / 1000
        wait = self.poll_interval if next_due is None else max(next_due / 1000 - self.lookahead - now, 0.001)
        if not leases and (next_due is None or wait > QUIET_AFTER) and not self.crawler.engine.downloader.active:
            # no more pages coming soon: let batches waiting for more (WARC) go
            self.crawler.signals.send_catch_log(frontier_waiting)
        wait = min(wait, self.poll_interval)
        self._next_poll = now + wait
        self._wake_engine_in(wait)

    # -- submissions ---------------------------------------------------------------------

    def _take_submissions(self) -> None:
        """Take what programs pushed onto the submission list and put it, and look for
        due hosts at once when ``scrapy submit`` added URLs since the last look."""
        if self._outbox or self._closing_for is not None:
            return
        try:
            values, counter = submit.take(self.frontier, self.submit_batch)
        except redis.RedisError as exc:  # the pops notice the outage too; look again next time
            self._redis_down(exc)
            return
        moved = self._submitted is not None and counter != self._submitted
        self._submitted = counter
        entries = []
        for value in values:
            try:
                entries.append(submit.entry(submit.parse(value), self.url_options))
            except (ValueError, InvalidURL):
                self._inc("submit/invalid")
        if entries:
            self._inc("submit/taken", len(entries))
            self._offer(entries)
            self._flush_pushes()  # now: what was taken is in the frontier before anything else
        if moved and self._next_poll:
            self._next_poll = 0.0
            self._wake_engine_in(0)

    # -- leases ------------------------------------------------------------------------

    def _decoded(self, leases) -> tuple[list, list]:
        """The leases whose payload is a request of this crawler, and those requests; any
        other payload (written into Redis by something else) is acknowledged unread:
        counted, one error line, never run."""
        kept, requests = [], []
        for lease in leases:
            try:
                requests.append(codec.decode(lease.payload, self.spider))
            except codec.UndecodablePayload as exc:
                self._inc("frontier/undecodable")
                logger.error("Queued payload dropped unread: %s", exc)
                self._acks.append(lease.id)
                self._schedule_flush()
                continue
            kept.append(lease)
        return kept, requests

    def _read(self, item=None, response=None, **kwargs) -> None:
        """An item of a leased page left the item pipelines: the page no longer counts as
        unread (its lease may still wait for its archive batch)."""
        request = getattr(response, "request", None)
        if request is not None:
            self._done_reading(request.meta.get(meta.LEASE))

    def _forget(self, lease) -> None:
        """The lease is no longer this worker's to renew or give back (acknowledged, given
        back, taken over by a follow-up, or lost track of); its page is no longer unread."""
        self._held.pop(lease, None)
        self._done_reading(lease)

    def _done_reading(self, lease) -> None:
        if lease in self._unread:
            self._unread.discard(lease)
            if self._capped and len(self._unread) < self.max_unread:
                self._capped = False
                self._wake_engine_in(0)

    def ack(self, request, **kwargs) -> None:
        """The page of this request has been handled: release its lease for good."""
        lease = request.meta.get(meta.LEASE)
        if not lease:
            return
        self._forget(lease)
        if self._store_down_since is not None:
            self._store_up()
        self._flush_pushes()  # the page's links before its ack
        if self._outbox:
            self._defer(("ack", lease))
            return
        self._acks.append(lease)
        self._schedule_flush()

    def give_back(self, request, **kwargs) -> None:
        """The page of this request could not be stored: its URL goes back to its queue
        now (handed out again at its host's next turn), not at the lease's expiry, and
        the worker holds (``_store_down``)."""
        lease = request.meta.get(meta.LEASE)
        if not lease:
            return
        self._forget(lease)
        self._inc("frontier/lease/given_back")
        self._store_down()
        try:
            self.frontier.give_back([lease])
        except redis.RedisError as exc:  # then it expires and comes back all the same
            self._redis_down(exc)

    def _store_down(self) -> None:
        """A store (the UrlStore, the archive) did not take a page: lease no more for a
        while, as during a Redis outage (half the outage so far, from 0.5 s to 30 s), so
        that pages are not fetched only to be dropped; the pages the worker holds go on.
        The first page stored again ends the hold (``_store_up``)."""
        now = time.time()
        if self._store_down_since is None:
            self._store_down_since = now
        wait = outage_wait(now - self._store_down_since)
        if self._hold_until <= now:
            logger.warning(
                "Pages not stored for %.0f s (a store did not take them; their leases are given back): "
                "this worker leases no more for %.1f s",
                now - self._store_down_since,
                wait,
            )
            self._inc("frontier/store_holds")
        self._hold_until = max(self._hold_until, now + wait)

    def _store_up(self) -> None:
        logger.info("Pages stored again after %.0f s", time.time() - self._store_down_since)
        self._store_down_since = None
        if self._hold_until > time.time():
            self._hold_until = 0.0
            self._wake_engine_in(0)

    def _downloaded(self, response, request, **kwargs) -> None:
        # an HTTP answer that is not a failure (5xx, 429, 408): the host is well (landed)
        lease = request.meta.get(meta.LEASE)
        if lease and response.status < 500 and response.status not in self.failure_codes:
            self._answered.add(lease)

    def landed(self, request, **kwargs) -> None:
        """The download of this request ended: its host may take another request (and
        gets back some of its rate if it was slowed and answered)."""
        lease = request.meta.get(meta.LEASE)
        answered = lease in self._answered
        if answered:
            self._answered.discard(lease)
        if lease and lease in self._held and (self.frontier.max_in_flight or answered):
            # the host's next turn counts from now, the end of the download, not from
            # when the landing reaches the frontier
            ended = time.time()
            self._landed.append((b"+" + lease if answered else lease, int(ended * 1000)))
            # the host is due again one interval from now: the frontier must know by then
            # (less the lookahead, so that the pop that carries the landing can lease the
            # host's next URL too); any pop before carries it
            self._land_by(ended + self._held[lease][1] - self.lookahead)

    def _land_by(self, at: float) -> None:
        call = self._land_call
        if call is not None and call.active():
            if self._land_at <= at:
                return
            call.cancel()
        self._land_at = at
        self._land_call = reactor.callLater(max(at - time.time(), 0), self._land)

    def _land(self) -> None:
        if not self._landed or self._outbox:
            return
        if len(self._unread) >= self.max_unread:  # no room for more pages: the landing alone
            self._flush_acks()
            return
        self._pop(max(self.prefetch - len(self._buffer), 0), time.time())
        if self._buffer:
            self._wake_engine_in(0)

    def _schedule_flush(self) -> None:
        if self._ack_call is None or not self._ack_call.active():
            self._ack_call = reactor.callLater(ACK_DELAY, self._flush_acks)

    def _flush_acks(self) -> None:
        self._flush_pushes()
        acks, self._acks = self._acks, []
        landed, self._landed = self._landed, []
        if not acks and not landed:
            return
        if self._outbox:  # a landing not delivered is harmless: the lease's ack lands it
            for lease in acks:
                self._defer(("ack", lease))
            return
        try:
            self._inc("frontier/acked", self.frontier.ack(*acks, landed=landed))
        except redis.RedisError as exc:
            self._redis_down(exc)
            for lease in acks:
                self._defer(("ack", lease))

    # -- Redis outages ---------------------------------------------------------------------

    def _frontier_there(self) -> bool:
        """Whether the crawl's keys are still the ones this worker opened on; when they
        vanished (a Redis restarted without persistence, the crawl cleared), say so loudly
        and close: what was queued, seen and leased is gone, and is no finished crawl."""
        epoch = self.frontier.epoch(create=self._epoch is None)
        if self._epoch is None:
            self._epoch = epoch
        if epoch == self._epoch:
            return True
        self._close_for(
            FRONTIER_LOST,
            "The frontier of crawl %r vanished from Redis (restarted without persistence, or the crawl was "
            "cleared): its queues, URL-seen filter and leases are gone. This worker stops; %d pages it holds "
            "cannot be acknowledged. Seed the crawl again, or restore Redis from its persistence.",
            self.frontier.keys.crawl_name,
            len(self._held),
        )
        return False

    def _refused(self, exc) -> None:
        """Redis refused the credentials or TLS: a setting to fix, not an outage to wait out."""
        self._close_for(
            REDIS_REFUSED,
            "Redis refused this worker (%s: %s): check the password, or the TLS CA file, in REDIS_URL or "
            "REDIS_PARAMS; closing",
            type(exc).__name__,
            exc,
        )

    def _close_for(self, reason: str, message: str, *args) -> None:
        """Log why (once) and close the worker with ``reason`` (an exit code 1 reason)."""
        if self._closing_for is not None:
            return
        self._closing_for = reason
        logger.error(message, *args)
        self.crawler.stats.set_value("frontier/error", reason)
        deferred_from_coro(self.crawler.engine.close_spider_async(reason=reason))

    def _redis_down(self, exc) -> None:
        # The wait between retries grows with the length of the outage (half of it,
        # from 0.5 s to 30 s), however many calls fail meanwhile.
        if refused(exc):
            self._refused(exc)
        now = time.time()
        if self._down_since is None:
            self._down_since = now
        self._backoff = outage_wait(now - self._down_since)
        self._inc("frontier/redis_errors")
        if now >= self._next_warning:
            self._next_warning = now + self._backoff
            logger.warning(
                "Redis unreachable for %.0f s (%s: %s); %d operations waiting, retrying in %.1f s",
                now - self._down_since,
                type(exc).__name__,
                exc,
                len(self._outbox),
                self._backoff,
            )

    def _redis_up(self) -> None:
        if self._down_since is None:
            return
        logger.info("Redis reachable again after %.0f s", time.time() - self._down_since)
        self._down_since = None
        self._backoff = self._next_warning = self._next_poll = 0.0
        self._wake_engine_in(0)

    def _defer(self, op) -> None:
        self._outbox.append(op)
        self._inc("frontier/deferred")
        if self._retry_call is None or not self._retry_call.active():
            self._retry_call = reactor.callLater(max(self._backoff, 0.5), self._retry)

    def _retry(self) -> None:
        if not self._drain():
            self._retry_call = reactor.callLater(self._backoff, self._retry)

    def _drain(self) -> bool:
        """Deliver waiting pushes and acks in order. True when the outbox is empty."""
        while self._outbox:
            kind, value = self._outbox[0]
            try:
                if kind == "push":
                    self._count_push(self.frontier.put([value])[0])
                elif self.frontier.ack(value):
                    self._inc("frontier/acked")
            except redis.RedisError as exc:
                self._redis_down(exc)
                return False
            self._outbox.popleft()
        self._redis_up()
        return True

    def _renew(self):
        try:
            if not self._frontier_there():
                return
        except redis.RedisError as exc:
            self._redis_down(exc)
            return
        if not self._held:
            return
        cutoff = time.time() - self.lease_max_hold
        for lease, (since, _) in list(self._held.items()):
            if since < cutoff:  # lost track of it: let it expire and be retried
                self._forget(lease)
                self._inc("frontier/lease/given_up")
        try:
            self.frontier.renew(list(self._held))
        except redis.RedisError as exc:  # the next renewal comes well before expiry
            self._redis_down(exc)

    # -- idling ------------------------------------------------------------------------

    def _wake_engine_in(self, seconds: float) -> None:
        """Have the engine ask for a request ``seconds`` from now (or sooner, if a
        wake-up is already due sooner)."""
        at = time.time() + seconds
        if self._wakeup is not None and self._wakeup.active():
            if self._wake_at <= at:
                return
            self._wakeup.cancel()
        self._wake_at = at
        self._wakeup = reactor.callLater(seconds, self._wake_engine)

    def _wake_engine(self):
        # The engine asks the scheduler again after each download and on a 5 s heartbeat;
        # when a host becomes due sooner than that, ask it to look now.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _spider_idle(self, spider):
        if not self.close_when_idle:
            raise DontCloseSpider
        self._flush_acks()
        try:
            outlook = self.frontier.outlook(self.max_wait)
        except redis.RedisError as exc:  # pause, do not close, while Redis is away
            self._redis_down(exc)
            raise DontCloseSpider from None
        now = time.time()
        if outlook["state"] == RUNNING or self._buffer or self._outbox or self._pushes:
            self._idle_since = None
            if outlook["next_due"] is not None:  # something is due soon: look for it then
                self._next_due = outlook["next_due"] / 1000
                self._next_poll = 0.0
                self._wake_engine_in(max(self._next_due - now, 0.0))
            raise DontCloseSpider
        if self._idle_since is None:
            self._idle_since = now
        if now - self._idle_since < self.idle_seconds:
            self._wake_engine_in(self._idle_since + self.idle_seconds - now)
            raise DontCloseSpider
        if outlook["state"] == FINISHED:
            try:
                if not self._frontier_there():  # vanished, not finished
                    raise DontCloseSpider
            except redis.RedisError as exc:
                self._redis_down(exc)
                raise DontCloseSpider from None
            logger.info("Frontier empty: closing")
        else:
            logger.info(
                "Nothing due within %.0f s (%d URLs queued, the first due at %s): closing; "
                "run the same command again to resume",
                self.max_wait,
                outlook["queued"],
                when(outlook["next_due"]),
            )

    # -- helpers -------------------------------------------------------------------------

    def _inc(self, key: str, count: int = 1) -> None:
        self.stats.inc_value(key, count)
