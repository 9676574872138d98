"""Scrapy scheduler backed by the Redis frontier: a Scrapy adapter over the worker's
FrontierClient (crawler/frontier/client.py: what it offers, the leases it holds,
acknowledges, lands and renews, its outbox while Redis is away), which the links pipeline
reaches too (``services(crawler).frontier_client``). Here: requests in and out (the payload
codec) and the engine's signals; how much may be leased now is ``pacing.py``'s, when to look
and wake the engine ``cadence.py``'s, what a pop leased on its way to the engine
``leased_requests.py``'s, what becomes of a leased page ``leased_pages.py``'s, when the
worker stops ``closing.py``'s.

Contract with the engine (scrapy.core.scheduler.BaseScheduler):

``enqueue_request(request)``
    Normalizes the URL and offers it to the frontier (the offers of a reactor turn go in one
    round trip); False for an invalid URL. A request that carries a lease (a retry or a
    redirect of a leased page) is a follow-up: it goes to its host's back queue and takes
    over the page's lease in one atomic step, so the page is never lost between the two.
``next_request()``
    A leased request from a host that is due; None when none is due or the worker may lease
    no more now. A pop leases up to FRONTIER_PREFETCH due hosts, one pop a reactor turn; the
    extra requests wait here for the engine's next call (a leased host counts as in flight,
    so prefetching never sends two requests to one host, nor one before its time). A host
    due within FRONTIER_LOOKAHEAD is handed out already, its request carrying the due time
    (``meta.DUE``), and the rate limiter holds it until then.
``has_pending_requests()``
    True while requests are buffered here or the last look found a URL due within
    FRONTIER_MAX_WAIT. When it is False and the engine is idle, ``spider_idle`` comes, and
    the local profile (FRONTIER_CLOSE_WHEN_IDLE) closes the worker once nothing is leased by
    any worker and nothing is due within FRONTIER_MAX_WAIT, for FRONTIER_IDLE_SECONDS (what
    is still queued stays for the next run). The distributed profile keeps waiting.
"""

from __future__ import annotations

import logging

import redis
from scrapy import signals
from twisted.internet import reactor, task, threads

from crawler import meta
from crawler.freshness.policy import FetchPolicy
from crawler.frontier import codec
from crawler.frontier.client import FrontierClient
from crawler.frontier.spill import SPILL_REFUSED
from crawler.frontier.verbs import FrontierVerbs
from crawler.scheduler.cadence import Cadence
from crawler.scheduler.closing import Closing
from crawler.scheduler.leased_pages import LeasedPages
from crawler.scheduler.leased_requests import LeasedRequests
from crawler.scheduler.pacing import Pacing
from crawler.scope.scope import CrawlScope
from crawler.scrapy_private import wake_engine
from crawler.services import services
from crawler.signals import frontier_grew, frontier_waiting, page_handled, page_not_stored
from crawler.urls import InvalidURL, url_options

logger = logging.getLogger(__name__)

QUIET_AFTER = 5.0  # seconds: nothing due this soon and nothing downloading: open batches are stored


class FrontierScheduler:
    uses_frontier = True  # (services(crawler).frontier_scheduled)

    def __init__(self, crawler, frontier: FrontierVerbs, clock=None, in_thread=None):
        self.crawler = crawler
        # how a store is read off the reactor (the fetch policy's look-ups): Twisted's
        # thread pool; a test's own (run now) with a test's clock
        self.in_thread = in_thread or threads.deferToThread
        self.stats = crawler.stats
        s = crawler.settings
        self.clock = clock if clock is not None else reactor
        self.url_options = url_options(s)
        self.pacing = Pacing.from_settings(s, self.stats, services(crawler).trouble)
        self.cadence = Cadence.from_settings(s, self.clock, lambda: wake_engine(self.crawler.engine))
        self.client = FrontierClient.from_settings(
            s,
            frontier,
            self.stats,
            self.clock,
            spill=services(crawler).spill,
            addresses=services(crawler).addresses,
            in_thread=self.in_thread,
            on_added=self.cadence.look_now,
            on_landing_due=lambda: self.leased.land(self.clock.seconds()),
            on_up=self.cadence.look_again,
            on_refused=self._refused,
            on_store_refused=self._store_refused,
        )
        self.closing = Closing(crawler, self.client, wake=self.cadence.wake_in, look_at=self.cadence.look_at)
        prefetch = max(s.getint("FRONTIER_PREFETCH"), 1)
        self.leased = LeasedRequests(
            self.client, self.pacing, self.cadence, self.stats, prefetch, self._quiet, self._waiting
        )
        self.spider = None
        self.pages = LeasedPages.from_settings(s, self.client, self.pacing, self.clock, self.cadence.wake_in)
        self._renewer = task.LoopingCall(self._renew)
        self._renewer.clock = self.clock

    @property
    def frontier(self) -> FrontierVerbs:
        return self.client.frontier

    @classmethod
    def from_crawler(cls, crawler, clock=None, in_thread=None):
        """The scheduler of ``crawler`` on its frontier (``clock``: a test's IReactorTime;
        ``in_thread``: how to run a store's read off the reactor, deferToThread's way)."""
        scheduler = cls(crawler, services(crawler).frontier, clock, in_thread)
        services(crawler).frontier_client = scheduler.client  # (the links pipeline's way in)
        services(crawler).pacing = scheduler.pacing  # (what it waits for: the live stats publish it)
        scheduler.use_policy(FetchPolicy.from_crawler(crawler))
        crawler.signals.connect(scheduler._spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(scheduler.ack, signal=page_handled)
        crawler.signals.connect(scheduler.give_back, signal=page_not_stored)
        crawler.signals.connect(scheduler.landed, signal=signals.request_left_downloader)
        crawler.signals.connect(scheduler._downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(scheduler.cadence.look_now, signal=frontier_grew)
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(scheduler._read, signal=signal)
        return scheduler

    def use_policy(self, policy: FetchPolicy | None) -> None:
        """Check each pop's requests against this fetch policy (None: no policy)."""
        self.leased.use_policy(policy, self.in_thread)

    # -- lifecycle ---------------------------------------------------------------------

    def open(self, spider):
        self.spider = self.leased.spider = spider
        if isinstance(getattr(spider, "scope", None), CrawlScope):  # what is offered is held to it
            self.frontier.use_scope(spider.scope)
        self._renewer.start(max(self.frontier.lease_ms / 3000, 0.05), now=False)
        self.closing.open()

    def close(self, reason):
        if self._renewer.running:
            self._renewer.stop()
        self.cadence.stop()
        # Pages handled were acknowledged already; what is still held (buffered, or cut
        # off mid-download by the close) goes back to the frontier now, not at expiry.
        self.client.close()
        self.pacing.clear()
        self.leased.buffer.clear()

    # -- engine interface --------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        # (or what the last pop saw: _spider_idle looks again before anything is closed)
        busy = self.leased.buffer or self.leased.checking or self.client.pending or self.client.down
        return bool(busy or self.cadence.pending())

    def enqueue_request(self, request) -> bool:
        lease = request.meta.get(meta.LEASE, "")
        try:
            entry = codec.queued_entry(request, self.spider, self.url_options)
        except (InvalidURL, codec.UnencodableRequest) as exc:
            invalid = isinstance(exc, InvalidURL)
            self.stats.inc_value("frontier/invalid" if invalid else "frontier/unencodable")
            if not invalid:
                logger.error("Request not queued: %s", exc)
            if lease:  # (a follow-up that cannot be queued: its page is done with)
                self.ack(request)
            return False
        if lease:
            self.pages.forget(lease)  # (its follow-up is leased again)
        self.client.offer([entry])
        return True

    def next_request(self):
        return self.leased.next(self.clock.seconds())

    def _quiet(self, wait: float | None) -> None:
        """A pop leased nothing, and the next host is ``wait`` seconds away (None: none is
        queued): with nothing downloading, no more pages come soon, so batches waiting for
        more (WARC) go."""
        if (wait is None or wait > QUIET_AFTER) and not self.crawler.engine.downloader.active:
            self._waiting()

    def _waiting(self) -> None:
        self.crawler.signals.send_catch_log(frontier_waiting)

    # -- what becomes of a leased request (leased_pages.py) ---------------------------------

    def _downloaded(self, response, request, **kwargs) -> None:
        if lease := request.meta.get(meta.LEASE):
            self.pages.downloaded(lease, len(response.body), response.status)

    def landed(self, request, **kwargs) -> None:
        """The download of this request ended: its host may take another request."""
        if lease := request.meta.get(meta.LEASE):
            self.pages.landed(lease)

    def _read(self, item=None, response=None, **kwargs) -> None:
        """An item of a leased page left the item pipelines (its lease may still wait for
        its archive batch)."""
        if (request := getattr(response, "request", None)) is not None:
            self.pages.read(request.meta.get(meta.LEASE))

    def ack(self, request, **kwargs) -> None:
        """The page of this request has been handled: release its lease for good."""
        if lease := request.meta.get(meta.LEASE):
            self.pages.ack(lease)

    def give_back(self, request, **kwargs) -> None:
        """The page of this request could not be stored: its URL goes back to its queue
        now, and the worker holds for a while (``pacing.py``)."""
        if lease := request.meta.get(meta.LEASE):
            self.pages.give_back(lease)

    def _renew(self) -> None:
        try:
            if not self.closing.frontier_there():
                return
        except redis.RedisError as exc:
            # no proof that the crawl's keys are gone: with REDIS_URLS, a server away (since
            # the start, its epoch never read) holds back only its hosts, and the leases
            # held on the others are renewed all the same
            self.client.outbox.redis_down(exc)
        self.pages.renew()

    # -- closing ----------------------------------------------------------------------------

    def _spider_idle(self, spider):
        self.closing.idle(busy=bool(self.leased.buffer or self.client.pending))

    def _refused(self, exc) -> None:
        self.closing.refused(exc)

    def _store_refused(self, exc) -> None:
        self.closing.close_for(SPILL_REFUSED, "This worker stops: %s", exc)
