"""Redis outages, for the scheduler (a mixin of FrontierScheduler): a failed pop is retried
with back-off (half the outage so far, from 0.5 s to 30 s) and the worker stays open;
pushes and acks that fail wait in an in-process outbox and are delivered in order once
Redis answers again (a page's links before its ack), so nothing the worker learned is
lost while it lives; a worker killed during an outage loses only unacknowledged work,
which its expired leases bring back. A Redis that refuses the worker's credentials, or
whose crawl keys vanished (another epoch), closes the worker instead.
"""

from __future__ import annotations

import logging
import time

import redis
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import reactor

from crawler.frontier.connection import FRONTIER_LOST, REDIS_REFUSED, outage_wait, refused

logger = logging.getLogger(__name__)


class RedisOutages:
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
