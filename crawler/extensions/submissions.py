"""Submissions in a running crawl (an extension): every FRONTIER_SUBMIT_INTERVAL a worker
takes up to FRONTIER_SUBMIT_BATCH values from the crawl's submission list and puts them
into the frontier (crawler/frontier/submit.py: each to the head of its host's queue, or
through the front queues with a priority; one the crawl has queued already jumps to the
head of its host's queue, unless the UrlStore says it was fetched within
FETCH_POLICY_MAX_AGE: asked in a thread, never on the reactor). They are counted as the scheduler counts its pushes
(``frontier/enqueued``, ``frontier/seen``, ``frontier/promoted``...), and under
``submit/taken`` and ``submit/invalid``; a value outside the crawl's scope (the frontier's
``current_scope()``: the spider's allowed domains and prefixes, the crawl rules, the trap
guards, an address the network guard refuses) is counted under ``submit/refused/<reason>``
(crawler/scope/reasons.py) and logged, not put. At its first
look, and whenever the crawl rules change, it publishes that scope in the crawl's Redis
(crawler/frontier/submit.py), which ``scrapy submit`` holds URLs to. When it added or
promoted a URL, or
``scrapy submit`` moved the crawl's
``submitted`` counter since its last look, it sends ``frontier_grew``, and the scheduler
looks for due hosts at once, not at its next poll.

A take whose reply is lost is sent again under the same number and gets the same values
(TAKE). While Redis is away a put that failed keeps its entries here and is tried again at the
next look (a worker killed meanwhile loses them, as the list's contract says: at most
once); after a failure the looks wait as the scheduler's calls do (half the outage so far,
from 0.5 s to 30 s), and on a sharded frontier they go through its down-shard guard, so
that a server that refuses costs no seconds of retries in the reactor each time; the
scheduler notices and reports the outage itself. Off with FRONTIER_SUBMIT_INTERVAL 0,
or with another scheduler than the frontier's.
"""

from __future__ import annotations

import logging
import time
import uuid
from functools import cached_property

import redis
from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task, threads

from crawler.freshness.policy import FetchPolicy
from crawler.frontier import submit
from crawler.frontier.connection import outage_wait
from crawler.frontier.frontier import Entry
from crawler.frontier.words import ADDED, PROMOTED, put_stat
from crawler.scope import reasons
from crawler.scope.scope import CrawlScope
from crawler.services import services
from crawler.signals import frontier_grew
from crawler.urls import InvalidURL, url_options

logger = logging.getLogger(__name__)


class Submissions:
    def __init__(self, crawler, interval: float, batch: int, in_thread=None):
        self.crawler = crawler
        self.in_thread = in_thread or threads.deferToThread  # (how the UrlStore is read: off the reactor)
        self.stats = crawler.stats
        self.interval = interval
        self.batch = batch
        self.url_options = url_options(crawler.settings)
        self.pending: list[Entry] = []  # taken, not yet put (Redis away)
        self.counter: int | None = None  # the submitted counter as last read
        self.down_since: float | None = None  # the first failure of the outage, if any
        self.next_look = 0.0  # (time.monotonic) no look before then
        self.loop = task.LoopingCall(self.look)
        self.published: CrawlScope | None = None  # the scope as last published
        self.token = uuid.uuid4().hex  # this worker's, for its takes of the list (TAKE)
        self.takes = 0  # takes whose reply came: a take that failed is sent again under its number

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        interval = s.getfloat("FRONTIER_SUBMIT_INTERVAL")
        if interval <= 0 or not services(crawler).frontier_scheduled:
            raise NotConfigured
        ext = cls(crawler, interval, s.getint("FRONTIER_SUBMIT_BATCH"))
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider=None):
        self.loop.start(self.interval, now=True)  # (the first look publishes the crawl's scope)

    def spider_closed(self, spider=None, reason=None):
        if self.loop.running:
            self.loop.stop()
        if self.pending:
            logger.error(
                "Closing with %d submitted URLs taken from the submission list and not put (Redis away): "
                "submit them again",
                len(self.pending),
            )

    def look(self) -> None:
        """Put what waits here, then take from the list and put that; tell the scheduler
        when the frontier grew."""
        now = time.monotonic()
        if now < self.next_look:
            return
        frontier = services(self.crawler).frontier
        scope = frontier.current_scope()  # (the spider's, with the crawl rules as they stand)
        try:
            if scope != self.published:
                _on_list_shard(frontier, lambda: submit.publish_scope(frontier.redis, frontier.keys, scope))
                self.published = scope
            grew = self.put(frontier, self.pending)
            self.pending = []
            values, counter = _on_list_shard(
                frontier, lambda: submit.take(frontier, self.batch, self.token, self.takes)
            )
            self.takes += 1
        except redis.RedisError as exc:
            self.down_since = self.down_since or now
            self.next_look = now + outage_wait(now - self.down_since)
            logger.debug("Submission list not read: %s", exc)
            return
        self.down_since = None
        moved = self.counter is not None and counter != self.counter
        self.counter = counter
        entries = []
        for value in values:
            try:
                entry = submit.entry(submit.parse(value), self.url_options)
            except (ValueError, InvalidURL):
                self.stats.inc_value("submit/invalid")
                continue
            refusal = scope.refusal(entry.url)
            if refusal is not None:
                self.stats.inc_value(reasons.stat("submit/refused", refusal.reason))
                logger.warning("Submission refused, %s: %s (%s)", refusal.words, entry.url, refusal)
                continue
            entries.append(entry)
        if entries:
            self.stats.inc_value("submit/taken", len(entries))
            try:
                grew = self.put(frontier, entries) or grew
            except redis.RedisError as exc:
                self.pending = entries
                self.down_since = now
                self.next_look = now + outage_wait(0)
                logger.warning("%d submitted URLs not put yet (%s); tried again at the next look", len(entries), exc)
        if grew or moved:
            self.crawler.signals.send_catch_log(frontier_grew)

    @cached_property
    def policy(self) -> FetchPolicy | None:
        """The fetch policy (None: off), made at the first put (it opens the UrlStore)."""
        return FetchPolicy.from_crawler(self.crawler)

    def put(self, frontier, entries: list[Entry]) -> bool:
        """Put entries into the frontier (those queued already promoted), counting what
        became of each; whether any was added or promoted. Whether a URL seen already was
        fetched recently is the UrlStore's to say, asked in a thread (``in_thread``), never
        on the reactor: those entries are promoted (or not) and counted once it answers."""
        if not entries:
            return False
        statuses = frontier.put(entries)
        seen = submit.seen_urgent(entries, statuses)
        policy = self.policy
        if seen and policy is not None:
            d = self.in_thread(policy.recent, [entries[i].url for i in seen])
            d.addCallback(self._promote, frontier, entries, statuses, seen)
            d.addErrback(lambda f: logger.warning("Submitted URLs not promoted: %s", f.getErrorMessage()))
            asked = set(seen)
            self._count([s for i, s in enumerate(statuses) if i not in asked])
            return ADDED in statuses
        self._count(submit.promote_queued(frontier, entries, statuses, seen, set()))
        return ADDED in statuses or PROMOTED in statuses

    def _promote(self, recent: set[str], frontier, entries: list[Entry], statuses: list[str], seen: list[int]):
        """The UrlStore answered: the seen entries not fetched recently are promoted."""
        statuses = submit.promote_queued(frontier, entries, statuses, seen, recent)
        self._count([statuses[i] for i in seen])
        if any(statuses[i] == PROMOTED for i in seen):
            self.crawler.signals.send_catch_log(frontier_grew)

    def _count(self, statuses: list[str]) -> None:
        for status in statuses:
            self.stats.inc_value(put_stat(status))


def _on_list_shard(frontier, call):
    """``call()`` on the server holding the submission list: the first shard, through the
    sharded frontier's down-shard guard when there is one."""
    on_shard = getattr(frontier, "on_shard", None)
    return on_shard(0, call) if on_shard is not None else call()
