"""Scrapy scheduler backed by the Redis frontier: a Scrapy adapter over the worker's
FrontierClient (crawler/frontier/client.py: what it offers, the leases it holds,
acknowledges, lands and renews, its outbox while Redis is away), which the links pipeline
reaches too (``services(crawler).frontier_client``). Here: requests in and out (the payload
codec) and the engine's signals; how much may be leased now is ``pacing.py``'s, when to look
and wake the engine ``cadence.py``'s, the fetch policy's look-ups ``policy_checks.py``'s,
when the worker stops ``closing.py``'s.

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
from crawler.frontier.verbs import FrontierVerbs
from crawler.scheduler.cadence import Cadence
from crawler.scheduler.closing import Closing
from crawler.scheduler.leased_pages import LeasedPages
from crawler.scheduler.pacing import Pacing
from crawler.scheduler.policy_checks import PolicyChecks
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
        self.prefetch = max(s.getint("FRONTIER_PREFETCH"), 1)
        self.url_options = url_options(s)
        self.pacing = Pacing.from_settings(s, self.stats, services(crawler).trouble)
        self.cadence = Cadence.from_settings(s, self.clock, lambda: wake_engine(self.crawler.engine))
        self.lookahead = self.cadence.lookahead
        self.client = FrontierClient.from_settings(
            s,
            frontier,
            self.stats,
            self.clock,
            on_added=self.cadence.look_now,
            on_landing_due=self._land,
            on_up=self.cadence.look_again,
            on_refused=self._refused,
        )
        self.closing = Closing(crawler, self.client, wake=self.cadence.wake_in, look_at=self.cadence.look_at)
        self.checks: PolicyChecks | None = None  # the fetch policy's (from_crawler), None when off
        self.spider = None
        self._buffer: list = []  # leased requests popped but not yet handed to the engine
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
        self.checks = None if policy is None else PolicyChecks(policy, self.client, self.in_thread, then=self._checked)

    # -- lifecycle ---------------------------------------------------------------------

    def open(self, spider):
        self.spider = spider
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
        self._buffer.clear()

    # -- engine interface --------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        # (or what the last pop saw: _spider_idle looks again before anything is closed)
        return bool(self._buffer or self._checking or self.client.pending or self.client.down or self.cadence.pending())

    @property
    def _checking(self) -> bool:
        """A pop's requests wait for the fetch policy's look-up (leased, not yet downloading)."""
        return self.checks is not None and self.checks.running > 0

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
        if not self._buffer:
            now = self.clock.seconds()
            began = self.pacing.waiting_since is None
            if self.pacing.unstored_full(now):  # the stores are behind: nothing new (pacing.py)
                if began:  # the open archive batch is stored now, not at its age: the bound waits for it
                    self.crawler.signals.send_catch_log(frontier_waiting)
                return None
            capped = self.pacing.full
            until = max(self.cadence.next_poll, self.pacing.hold_until)
            if capped or now < until:
                if self._take_urgent(now):
                    return self._buffer.pop(0)
                if capped:  # pages read more slowly than they come: lease no more until some are read
                    self.pacing.capped = True
                    self.stats.inc_value("frontier/unread_full")
                else:  # (a wake-up may fire a little early by this clock: look again then)
                    self.cadence.wake_in(until - now)
                return None
            if self.checks is not None and self.checks.behind:  # the look-ups' end wakes it
                return None
            if not self.cadence.take_turn():  # one pop a reactor turn (cadence.py)
                return None
            self._pop(self.prefetch, now)
            if not self._buffer:
                return None
        return self._buffer.pop(0)

    def _take_urgent(self, now: float) -> bool:
        """Between pops, lease due hosts' submissions (``pacing.py``); not while Redis is
        away. Whether one is in the buffer now."""
        room = 0 if self.client.down else self.pacing.urgent_room(now)
        if not room:
            return False
        self._pop(room, now, urgent_only=True)
        return bool(self._buffer)

    def _pop(self, n: int, now: float, urgent_only: bool = False) -> None:
        """Lease up to ``n`` requests into the buffer (the acks and landings owed ride
        along); when none is due, note when the next one is and wake the engine then.
        ``urgent_only``: only submissions (see Frontier.get), and no next due time."""
        taken = self.client.take(n, int(self.lookahead * 1000), urgent_only)
        if taken is None:  # Redis away: look again after the outbox's wait
            self.cadence.poll_in(self.client.outbox.backoff, now)
            return
        leases, next_due = taken
        leases, requests = self._decoded(leases, int(now * 1000))
        if self.checks is not None and leases:  # looked up off the reactor; buffered then
            self.checks.check(leases, requests, urgent_only)
        else:
            self._buffered(requests, urgent_only)
        if urgent_only:  # (it says nothing of the other hosts)
            return
        if n and len(leases) == n:  # more may be due: look again at the engine's next call
            self.cadence.more_due(now)
            if not self._buffer:  # (every one skipped by the fetch policy: that call is now)
                self.cadence.wake_in(0)
            return
        # fewer than asked for: the frontier said when the next host is due
        wait = self.cadence.nothing_due_for(next_due, now)
        quiet = not (self._buffer or self._checking or self.crawler.engine.downloader.active)
        if not leases and (next_due is None or wait > QUIET_AFTER) and quiet:
            # no more pages coming soon: let batches waiting for more (WARC) go
            self.crawler.signals.send_catch_log(frontier_waiting)

    def _checked(self, kept: list, urgent: bool) -> None:
        """The fetch policy looked a pop's requests up (policy_checks.py): these go to the engine."""
        self._buffered(kept, urgent)
        self.cadence.wake_in(0)

    def _buffered(self, requests: list, urgent: bool) -> None:
        """Leased requests for the engine (``urgent``: submissions taken between pops)."""
        self._buffer.extend(requests)
        if urgent and requests:
            self.pacing.urgent.update(request.meta[meta.LEASE] for request in requests)
            self.stats.inc_value("frontier/leased_urgent", len(requests))

    def _decoded(self, leases, now_ms: int) -> tuple[list, list]:
        """The leases whose payload is a request of this crawler, and those requests; any
        other payload (written into Redis by something else) is acknowledged unread:
        counted, one error line, never run."""
        kept, requests = [], []
        for lease in leases:
            try:
                requests.append(codec.leased_request(lease, self.spider, now_ms))
            except codec.UndecodablePayload as exc:
                self.stats.inc_value("frontier/undecodable")
                logger.error("Queued payload dropped unread: %s", exc)
                self.client.ack(lease.id)
                continue
            kept.append(lease)
        return kept, requests

    # -- what becomes of a leased request (leased_pages.py) ---------------------------------

    def _downloaded(self, response, request, **kwargs) -> None:
        lease = request.meta.get(meta.LEASE)
        if lease:
            self.pages.downloaded(lease, len(response.body), response.status)

    def landed(self, request, **kwargs) -> None:
        """The download of this request ended: its host may take another request."""
        lease = request.meta.get(meta.LEASE)
        if lease:
            self.pages.landed(lease)

    def _read(self, item=None, response=None, **kwargs) -> None:
        """An item of a leased page left the item pipelines (its lease may still wait for
        its archive batch)."""
        request = getattr(response, "request", None)
        if request is not None:
            self.pages.read(request.meta.get(meta.LEASE))

    def ack(self, request, **kwargs) -> None:
        """The page of this request has been handled: release its lease for good."""
        lease = request.meta.get(meta.LEASE)
        if lease:
            self.pages.ack(lease)

    def give_back(self, request, **kwargs) -> None:
        """The page of this request could not be stored: its URL goes back to its queue
        now, and the worker holds for a while (``pacing.py``)."""
        lease = request.meta.get(meta.LEASE)
        if lease:
            self.pages.give_back(lease)

    def _renew(self) -> None:
        try:
            if not self.closing.frontier_there():
                return
        except redis.RedisError as exc:
            self.client.outbox.redis_down(exc)
            return
        self.pages.renew()

    def _land(self) -> None:
        """A landing must reach the frontier now (its host is due again): with a pop that
        may lease the host's next URL, or alone while pages wait to be read."""
        # (while the outbox holds pushes and acks, a pop still carries the landings: a host's
        # next turn needs its landing, not its page's links, and the pop of a sharded
        # frontier goes on with the servers that answer)
        if not self.client.owes_landings:
            return
        if self.pacing.full or self.pacing.unstored_full(self.clock.seconds()):  # no room: the landing alone
            self.client.flush_acks()
            return
        self._pop(max(self.prefetch - len(self._buffer), 0), self.clock.seconds())
        if self._buffer:
            self.cadence.wake_in(0)

    # -- closing ----------------------------------------------------------------------------

    def _spider_idle(self, spider):
        self.closing.idle(busy=bool(self._buffer or self.client.pending))

    def _refused(self, exc) -> None:
        self.closing.refused(exc)
