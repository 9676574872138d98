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
    While FRONTIER_MAX_UNREAD of this worker's pages are downloaded but not yet through
    the item pipelines, it returns None: when the CPU, not politeness, bounds the crawl,
    more pages leased would only wait longer to be read (a submitted page's record with
    them), a crash would cost them, and they would hold memory; the engine is woken when
    one is read (the downloads in flight are bounded by CONCURRENT_REQUESTS). A due
    host's submission is leased all the same (it is read first; at most
    FRONTIER_MAX_UNREAD such pages unread), and so it is while the scheduler waits for
    the next host to be due. A pop leases up to
    FRONTIER_PREFETCH due hosts at once, and there is one pop a reactor turn (the engine
    asks in a loop until its downloader is full: a turn would lease CONCURRENT_REQUESTS
    at once while every other event waited); the extra requests wait here for the engine's
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

Its parts: what it offers the frontier (admission.py), the leases it holds, acknowledges,
lands and renews (leases.py), when it wakes the engine and when it stops (idle.py): three
mixins over the one state of a worker's frontier calls, since they share its round trips
(acks and landings ride on the pop, a page's links go before its ack); and an object of
its own, the outbox of calls that wait while Redis is away (outages.py).

The submissions (crawler/extensions/submissions.py) and the recrawl's rounds
(crawler/extensions/recrawl.py) in a running crawl are extensions of their own; the first
sends ``frontier_grew`` when it added URLs, and the scheduler looks for due hosts then.

The fetch policy (crawler/freshness/policy.py): the requests of each pop are looked up in the
UrlStore at once (one batch read); those fetched within FETCH_POLICY_MAX_AGE are not handed
to the engine, and their leases are acknowledged.
"""

from __future__ import annotations

import logging
import time

import redis
from scrapy import signals
from twisted.internet import reactor, task

from crawler import meta
from crawler.freshness.policy import FetchPolicy
from crawler.frontier import codec
from crawler.frontier.connection import refused
from crawler.frontier.frontier import Entry
from crawler.frontier.verbs import FrontierVerbs
from crawler.scheduler.admission import Admission
from crawler.scheduler.idle import Idling
from crawler.scheduler.leases import LeaseKeeping
from crawler.scheduler.outages import Outbox
from crawler.services import services
from crawler.signals import frontier_grew, frontier_waiting, page_handled, page_not_stored
from crawler.urls import InvalidURL, normalize_url, url_options

logger = logging.getLogger(__name__)

QUIET_AFTER = 5.0  # seconds: nothing due this soon and nothing downloading: open batches are stored
URGENT_LOOK_EVERY = 0.02  # seconds: between pops, how often a worker looks for a submission


class FrontierScheduler(LeaseKeeping, Admission, Idling):
    uses_frontier = True  # (services(crawler).frontier_scheduled)

    def __init__(self, crawler, frontier: FrontierVerbs):
        self.crawler = crawler
        self.frontier = frontier
        self.stats = crawler.stats
        s = crawler.settings
        self.prefetch = max(s.getint("FRONTIER_PREFETCH"), 1)
        self.max_unread = max(s.getint("FRONTIER_MAX_UNREAD"), 1)
        self._unread: set[bytes] = set()  # leases whose pages are downloaded but not yet through the item pipelines
        self._capped = False  # next_request refused for FRONTIER_MAX_UNREAD: wake the engine below it
        self._urgent_look_at = 0.0  # between pops: when to look for a submission next
        self._turn_popped = False  # a pop was made in this reactor turn
        self._urgent: set[bytes] = set()  # leases taken between pops whose pages are not yet read
        # hosts due this soon are handed out now; the rate limiter holds each request until
        # its host is due (without the limiter, nothing would hold it: no lookahead)
        self.lookahead = s.getfloat("FRONTIER_LOOKAHEAD") if s.getbool("RATE_LIMITER_ENABLED") else 0.0
        self.known_max = s.getint("FRONTIER_SEEN_CACHE")
        self._known: dict[str, None] = {}  # URLs pushed and found added or seen (insertion order)
        self.poll_interval = s.getfloat("FRONTIER_POLL_INTERVAL")
        self.policy: FetchPolicy | None = None  # the fetch policy (from_crawler), None when off
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
        self._paused_said = False  # the worker said the crawl is paused (it says so once)
        self._next_due: float | None = 0.0  # when the last pop said the next URL is due (s; None: nothing queued)
        self._answered: set[bytes] = set()  # leases whose hosts answered (see landed)
        self._renewer = task.LoopingCall(self._renew)
        # While Redis is unreachable, pushes and acks wait in the outbox, in order (a page's
        # links are pushed before its lease is acknowledged), and are retried with back-off.
        self.outbox = Outbox(frontier, self.stats, on_up=self._redis_back, on_refused=self._refused)
        # Pushes of this reactor turn, sent together; always before the next ack or pop.
        self._pushes: list[Entry] = []
        self._credits: list[tuple[str, float]] = []  # FRONTIER_ORDER importance: sent with the pushes
        self._push_call = None
        # Acknowledgements ride on the next pop; a timer sends them if no pop comes soon.
        self._acks: list[bytes] = []
        self._landed: list[tuple[bytes, int]] = []  # (lease, ms) of downloads that ended, to tell the frontier
        self._ack_call = None
        self._land_call = None
        self._land_at = 0.0  # when _land_call fires
        # pages given back because a store did not take them: lease no more until then
        self._store_down_since: float | None = None
        self._hold_until = 0.0
        self._closing_for: str | None = None  # the close reason, once this worker must stop
        self._epoch: int | None = None  # the crawl's epoch as this worker first saw it (Frontier.epoch)

    @classmethod
    def from_crawler(cls, crawler):
        scheduler = cls(crawler, services(crawler).frontier)
        scheduler.policy = FetchPolicy.from_crawler(crawler)
        crawler.signals.connect(scheduler._spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(scheduler.ack, signal=page_handled)
        crawler.signals.connect(scheduler.give_back, signal=page_not_stored)
        crawler.signals.connect(scheduler.landed, signal=signals.request_left_downloader)
        crawler.signals.connect(scheduler._downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(scheduler.look_now, signal=frontier_grew)
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
        if self._renewer.running:
            self._renewer.stop()
        self.outbox.stop()
        for call in (self._wakeup, self._ack_call, self._push_call, self._land_call):
            if call is not None and call.active():
                call.cancel()
        self._flush_acks()  # pushes first
        if self.outbox and not self.outbox.drain():
            logger.error(
                "Redis unreachable at close: %d pushes/acks not delivered; their pages' leases "
                "expire and the pages are fetched again",
                len(self.outbox),
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
        self._urgent.clear()
        self._buffer.clear()

    # -- engine interface --------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        if self._buffer or self.outbox or self._pushes or self.outbox.down_since is not None:
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

    def enqueue_links(self, urls: list[str], depth: int, referer: str, cash: float = 0.0) -> None:
        """Offer a page's followed links: normalized http(s) URLs, each what
        ``enqueue_request`` would push for a plain request of the spider's default
        callback at ``depth`` with ``referer``, without building a Request for each (a
        page's hundreds of links cost most of a worker's time that way). ``cash``: the
        page's importance (FRONTIER_ORDER importance), shared equally among them."""
        valid = [url for url in urls if url.startswith(("http://", "https://"))]
        if len(valid) < len(urls):
            self._inc("frontier/invalid", len(urls) - len(valid))
        share = cash / len(valid) if valid else 0.0
        entries, credits = [], []
        known = self._known if share > 0 and self.frontier.ranked else ()
        for url in valid:
            if url in known:  # sent before: only its share of importance goes (credit)
                credits.append((url, share))
                continue
            entries.append(Entry(url=url, payload=codec.encode_link(url, depth, referer), depth=depth, cash=share))
        self._offer(entries)
        if credits:
            self._inc("frontier/seen", len(credits))
            self._credits += credits
            self._push_later()

    def next_request(self):
        if not self._buffer:
            now = time.time()
            capped = len(self._unread) >= self.max_unread
            until = max(self._next_poll, self._hold_until)
            if capped or now < until:
                if self._take_urgent(now):
                    return self._buffer.pop(0)
                if capped:
                    # pages read more slowly than they come: lease no more until some are read
                    # (a crash refetches what is held unread, and it holds memory)
                    self._capped = True
                    self._inc("frontier/unread_full")
                else:  # (a wake-up may fire a little early by this clock: look again then)
                    self._wake_engine_in(until - now)
                return None
            if self._turn_popped:
                # one pop a reactor turn: the engine's loop would lease up to
                # CONCURRENT_REQUESTS at once, every other event (a submission's) waiting
                self._wake_engine_in(0)
                return None
            if reactor.running:
                self._turn_popped = True
                reactor.callLater(0, self._new_turn)
            self._pop(self.prefetch, now)
            if not self._buffer:
                return None
        return self._buffer.pop(0)

    def _new_turn(self) -> None:
        self._turn_popped = False

    def _take_urgent(self, now: float) -> bool:
        """Between pops (at FRONTIER_MAX_UNREAD, or before the next host is due), lease a
        due host's submission all the same (it is read before the pages waiting,
        crawler/page/workers.py), while fewer than FRONTIER_MAX_UNREAD so leased are
        unread, looking at most every URGENT_LOOK_EVERY; not while Redis is away or the
        stores are. Whether one is in the buffer now."""
        if (
            len(self._urgent) >= self.max_unread
            or now < max(self._urgent_look_at, self._hold_until)
            or self.outbox.down_since is not None
        ):
            return False
        self._urgent_look_at = now + URGENT_LOOK_EVERY
        self._pop(self.max_unread - len(self._urgent), now, urgent_only=True)
        if self._buffer:
            self._urgent.update(request.meta[meta.LEASE] for request in self._buffer)
            self._inc("frontier/leased_urgent", len(self._buffer))
        return bool(self._buffer)

    def _pop(self, n: int, now: float, urgent_only: bool = False) -> None:
        """Lease up to ``n`` requests into the buffer, carrying the acks and landings
        waiting; when none is due, note when the next one is and wake the engine then.
        ``urgent_only``: only submissions (see Frontier.get), and no next due time."""
        if urgent_only:  # (acks and landings wait for a pop that may lease their hosts' next URLs)
            acks, landed = [], []
        else:
            # what this worker offered goes first (a chunk of it: all of it when acks ride on
            # the pop, since a page's links must reach the frontier before its ack)
            self._flush_pushes(everything=bool(self._acks))
            acks, self._acks = self._acks, []
            landed, self._landed = self._landed, []
        try:
            leases, next_due = self.frontier.get(
                n, ack=acks, landed=landed, lookahead=int(self.lookahead * 1000), urgent_only=urgent_only
            )
        except redis.RedisError as exc:
            self._acks[:0] = acks  # acks and landings are idempotent: send them again later
            self._landed[:0] = landed
            self.outbox.redis_down(exc)
            self._next_poll = now + self.outbox.backoff
            self._wake_engine_in(self.outbox.backoff)
            return
        if self.outbox.down_since is not None and not self.outbox:
            self.outbox.redis_up()
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
            if lease.due < 0:  # to be recorded as not fetched (steering.py): no request leaves
                request.meta[meta.NOT_FETCHED] = -lease.due
            if lease.cash > 0:  # (FRONTIER_ORDER importance: its links share it)
                request.meta[meta.IMPORTANCE] = lease.cash
            if lease.due > now * 1000:
                request.meta[meta.DUE] = lease.due
            self._held[lease.id] = (now, lease.interval / 1000)
            self._buffer.append(request)
        if leases:
            self._inc("frontier/leased", len(leases))
        if urgent_only:  # (it says nothing of the other hosts)
            return
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

    def look_now(self) -> None:
        """URLs were added to the frontier by another part of the worker (submissions) or
        by ``scrapy submit``: look for due hosts at once rather than at the next poll."""
        if self._next_poll:
            self._next_poll = 0.0
            self._wake_engine_in(0)

    def _redis_back(self) -> None:
        """Redis answers again: look for due hosts at once."""
        self._next_poll = 0.0
        self._wake_engine_in(0)

    # -- helpers -------------------------------------------------------------------------

    def _inc(self, key: str, count: int = 1) -> None:
        self.stats.inc_value(key, count)
