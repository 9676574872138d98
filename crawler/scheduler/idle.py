"""When a worker wakes its engine and when it stops (a mixin of FrontierScheduler): the engine
is woken when the next host is due, less the lookahead (at most FRONTIER_POLL_INTERVAL
later), so that a crawl of few hosts does not wait for the engine's 5-second heartbeat;
and at ``spider_idle`` the local profile (FRONTIER_CLOSE_WHEN_IDLE) closes the worker once
nothing is leased by any worker and nothing is due within FRONTIER_MAX_WAIT, for
FRONTIER_IDLE_SECONDS, saying what it leaves; the distributed profile keeps waiting. A
Redis that refuses the worker's credentials, or whose crawl keys vanished (another epoch),
closes the worker with an error.
"""

from __future__ import annotations

import logging
import time

import redis
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import reactor

from crawler.frontier.connection import FRONTIER_LOST, REDIS_REFUSED
from crawler.frontier.words import FINISHED, PAUSED, RUNNING
from crawler.observe.report import when
from crawler.scrapy_private import wake_engine

logger = logging.getLogger(__name__)


class Idling:
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
        wake_engine(self.crawler.engine)

    def _spider_idle(self, spider):
        if not self.close_when_idle and not self.frontier.max_pages:
            raise DontCloseSpider
        self._flush_acks()
        try:
            outlook = self.frontier.outlook(self.max_wait)
        except redis.RedisError as exc:  # pause, do not close, while Redis is away
            self.outbox.redis_down(exc)
            raise DontCloseSpider from None
        now = time.time()
        if outlook["state"] == PAUSED:  # by the operator: wait for the resume, whatever the profile
            if not self._paused_said:
                logger.info("The crawl is paused (scrapy frontier pause): waiting for scrapy frontier resume")
                self._paused_said = True
            self._idle_since = None
            self._wake_engine_in(self.poll_interval)
            raise DontCloseSpider
        if self._paused_said:
            logger.info("The crawl is resumed")
            self._paused_said = False
        spent = outlook["state"] == FINISHED and outlook["budget_spent"]
        if not self.close_when_idle and not spent:
            raise DontCloseSpider
        if outlook["state"] == RUNNING or self._buffer or self.outbox or self._pushes:
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
                self.outbox.redis_down(exc)
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
