"""When a worker stops, for the scheduler: at ``spider_idle`` the local profile
(FRONTIER_CLOSE_WHEN_IDLE) closes the worker once nothing is leased by any worker and
nothing is due within FRONTIER_MAX_WAIT, for FRONTIER_IDLE_SECONDS, saying what it leaves;
the distributed profile keeps waiting (but for a spent page budget); a crawl the operator
paused waits for its resume, whatever the profile. A Redis that refuses the worker's
credentials, or whose crawl keys vanished (another epoch), closes the worker with an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from scrapy.exceptions import DontCloseSpider

from crawler.frontier.connection import FRONTIER_LOST, REDIS_REFUSED, refused
from crawler.frontier.spill import bind_spill
from crawler.frontier.words import FINISHED, PAUSED, RUNNING
from crawler.observe.report import when
from crawler.stopping import WorkerStop

logger = logging.getLogger(__name__)


class Closing:
    """``idle`` at every ``spider_idle``: raises DontCloseSpider unless the worker is to
    close (and says why it closes); ``close_for`` closes it with an error reason."""

    def __init__(self, crawler, client, wake: Callable[[float], None], look_at: Callable[[float], None]):
        s = crawler.settings
        self.crawler = crawler
        self.client = client
        self.frontier = client.frontier
        self.wake = wake  # have the engine look again this many seconds from now
        self.look_at = look_at  # something is due at this time (s): look for it then
        self.close_when_idle = s.getbool("FRONTIER_CLOSE_WHEN_IDLE")
        self.idle_seconds = s.getfloat("FRONTIER_IDLE_SECONDS")
        self.max_wait = s.getfloat("FRONTIER_MAX_WAIT")
        self.poll_interval = s.getfloat("FRONTIER_POLL_INTERVAL")
        self.idle_since: float | None = None
        self.paused_said = False  # the worker said the crawl is paused (it says so once)
        self.worker_stop = WorkerStop(crawler)  # closes the worker for an error (close_for)
        self.epoch: int | None = None  # the crawl's epoch as this worker first saw it

    def open(self) -> None:
        """At the worker's start: the spill store checked against the crawl's, the crawl's
        epoch (whose change later means its frontier was lost), what the frontier holds, and
        a warning when a setting keeps a failing host due within FRONTIER_MAX_WAIT (the
        worker would never close)."""
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
        try:
            # a spill store that is not the crawl's, or none on a crawl that spills (or one on
            # a crawl that keeps all in Redis), is refused before anything is fetched
            # (StoreRefused: the crawl does not start, exit 2); with Redis away, the spill's
            # first round checks it and a refusal stops the worker (spill_refused)
            bind_spill(self.frontier, self.client.spill)
            self.epoch = self.frontier.epoch(create=True)
            stats = self.frontier.stats()
        except redis.RedisError as exc:
            if refused(exc):
                self.refused(exc)
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

    def idle(self, busy: bool) -> None:
        """The engine is idle (``busy``: the scheduler still has requests or offers of its
        own). Raises DontCloseSpider to keep the worker open; returns to let it close,
        having said why."""
        if not self.close_when_idle and not self.frontier.max_pages:
            raise DontCloseSpider
        self.client.flush_acks()
        try:
            outlook = self.frontier.outlook(self.max_wait)
        except redis.RedisError as exc:  # pause, do not close, while Redis is away
            self.client.outbox.redis_down(exc)
            raise DontCloseSpider from None
        now = self.client.now()
        if outlook["state"] == PAUSED:  # by the operator: wait for the resume, whatever the profile
            if not self.paused_said:
                logger.info("The crawl is paused (scrapy frontier pause): waiting for scrapy frontier resume")
                self.paused_said = True
            self.idle_since = None
            self.wake(self.poll_interval)
            raise DontCloseSpider
        if self.paused_said:
            logger.info("The crawl is resumed")
            self.paused_said = False
        spent = outlook["state"] == FINISHED and outlook["budget_spent"]
        if not self.close_when_idle and not spent:
            raise DontCloseSpider
        if outlook["state"] == RUNNING or busy:
            self.idle_since = None
            if outlook["next_due"] is not None:  # something is due soon: look for it then
                self.look_at(outlook["next_due"] / 1000)
            raise DontCloseSpider
        if self.idle_since is None:
            self.idle_since = now
        if now - self.idle_since < self.idle_seconds:
            self.wake(self.idle_since + self.idle_seconds - now)
            raise DontCloseSpider
        self._say_why(outlook, spent)

    def _say_why(self, outlook: dict, spent: bool) -> None:
        if outlook["state"] == FINISHED:
            try:
                if not self.frontier_there():  # vanished, not finished
                    raise DontCloseSpider
            except redis.RedisError as exc:
                self.client.outbox.redis_down(exc)
                raise DontCloseSpider from None
            if spent:
                self.crawler.stats.set_value("frontier/budget_spent", outlook["max_pages"])
                logger.info(
                    "The page budget is spent (CRAWL_MAX_PAGES = %d): closing; %d URLs left queued",
                    outlook["max_pages"],
                    outlook["queued"],
                )
            else:
                logger.info("Frontier empty: closing")
        elif outlook["next_due"] is None:  # (queued, none in the heap: hosts the operator paused)
            logger.info(
                "Nothing due (%d URLs queued wait for paused hosts: scrapy frontier resume --host H): closing; "
                "run the same command again to resume",
                outlook["queued"],
            )
        else:
            logger.info(
                "Nothing due within %.0f s (%d URLs queued, the first due at %s): closing; "
                "run the same command again to resume",
                self.max_wait,
                outlook["queued"],
                when(outlook["next_due"]),
            )

    def frontier_there(self) -> bool:
        """Whether the crawl's keys are still the ones this worker opened on; when they
        vanished (a Redis restarted without persistence, the crawl cleared), say so loudly
        and close: what was queued, seen and leased is gone, and is no finished crawl."""
        epoch = self.frontier.epoch(create=self.epoch is None)
        if self.epoch is None:
            self.epoch = epoch
        if epoch == self.epoch:
            return True
        self.close_for(
            FRONTIER_LOST,
            "The frontier of crawl %r vanished from Redis (restarted without persistence, or the crawl was "
            "cleared): its queues, URL-seen filter and leases are gone. This worker stops; %d pages it holds "
            "cannot be acknowledged. Seed the crawl again, or restore Redis from its persistence.",
            self.frontier.keys.crawl_name,
            len(self.client.held),
        )
        return False

    def refused(self, exc) -> None:
        """Redis refused the credentials or TLS: a setting to fix, not an outage to wait out."""
        self.close_for(
            REDIS_REFUSED,
            "Redis refused this worker (%s: %s): check the password, or the TLS CA file, in REDIS_URL or "
            "REDIS_PARAMS; closing",
            type(exc).__name__,
            exc,
        )

    def close_for(self, reason: str, message: str, *args) -> None:
        """Log why (once) and close the worker with ``reason`` (an exit code 1 reason): now, or
        once the engine has opened it (crawler/stopping.py)."""
        if self.worker_stop.close(reason):
            logger.error(message, *args)
            self.crawler.stats.set_value("frontier/error", reason)
