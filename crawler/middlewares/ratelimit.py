"""Per-host rate limiter shared by every worker (Aragog's limiter, in Redis).

Just before a request leaves a worker, one atomic script takes its host's next slot,
max(now, last + interval), where the interval is the operator's
override (intervals.py), else robots.txt Crawl-delay (hdelay), else
FRONTIER_HOST_INTERVAL, times the host's slow-down factor (failures.py), and ``last``
is when the last response from the host ended: politeness counts from the end of each
response, so a slow answer, a late arrival or a loaded machine never brings two
requests closer than the interval at the site. Responses to requests the frontier
hands out end when their leases land (the frontier's hand-outs count from there); the
others (robots.txt and its redirect hops) are recorded here when they end (END).
A slot at most RATE_LIMITER_MAX_WAIT seconds away is waited for without blocking
the reactor; a slot further away is not taken: the host is pushed back to it in the
frontier and the request goes back to the frontier as a retry of its lease (neither
dropped nor counted as an error). Requests the frontier did not hand out (robots.txt) always wait for their
slot. Every request to a host counts: robots.txt, redirect hops and retries included.

With FRONTIER_ADDRESS_POLITENESS the slot is also its address class's (the class's interval
after its last slot or response), and a request the frontier handed out waits for it at most
the class's interval: longer, and it would hold one of its address's places in flight while
it waits for its host (whose robots.txt just took its turn, say); it goes back instead.

The frontier hands a host out when it is due, or up to FRONTIER_LOOKAHEAD before, with
its due time (``meta.DUE``): the limiter holds such a request until then, so that it
leaves the moment its host is due, already popped and through the other middlewares.
The limiter is also the final guard for everything else that reaches a host (robots.txt
fetches, several workers' retries, clocks).

Stats: ``ratelimit/waits`` and ``ratelimit/wait_ms`` (requests that waited for their
slot, and how long in all), ``ratelimit/waited`` (held past the turn the frontier gave
them), ``ratelimit/handed_back``.
"""

from __future__ import annotations

import logging

import redis
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor, task

from crawler import meta
from crawler.frontier.words import now_ms
from crawler.services import services

logger = logging.getLogger(__name__)


class RateLimiterMiddleware:
    def __init__(self, stats, frontier, max_wait: float):
        self.stats = stats
        self.frontier = frontier
        self.max_wait = max_wait
        # FRONTIER_ADDRESS_POLITENESS: a leased request waits past its turn at most its
        # class's interval (the default's); one whose host is due later (robots.txt took its
        # turn) goes back to the frontier rather than hold one of its address's places
        self.class_wait = max(frontier.address_interval_ms, 0) / 1000 if frontier.by_address else None

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("RATE_LIMITER_ENABLED"):
            raise NotConfigured
        return cls(
            crawler.stats,
            services(crawler).frontier,
            s.getfloat("RATE_LIMITER_MAX_WAIT"),
        )

    async def process_request(self, request, spider=None):
        host = self.frontier.politeness_key(request.url)
        from_frontier = bool(request.meta.get(meta.LEASE))
        due = request.meta.pop(meta.DUE, 0)  # handed out ahead of its host's turn (FRONTIER_LOOKAHEAD)
        now = now_ms()
        max_wait = self.max_wait
        if self.class_wait is not None and from_frontier:  # (its turn may be a lookahead away)
            max_wait = min(max_wait, self.class_wait + max(due - now, 0) / 1000)
        try:
            slot = self.frontier.slot(host, max_wait if from_frontier else 1e9, now=now, not_before=due)
        except redis.RedisError as exc:  # the frontier spaced it already: let it go at its turn
            logger.warning("Rate limiter unavailable (%s); %s goes unchecked", exc, request.url)
            slot = max(now, due)
        wait = (slot - now) / 1000
        if wait > max_wait and from_frontier:
            self.stats.inc_value("ratelimit/handed_back")
            return request.replace(dont_filter=True)  # back to its host's queue, due at the slot
        if wait > 0:
            self.stats.inc_value("ratelimit/waits")
            self.stats.inc_value("ratelimit/wait_ms", round(wait * 1000))
            await maybe_deferred_to_future(task.deferLater(reactor, wait, lambda: None))
        if slot > max(now, due):  # held back beyond its turn (robots.txt or a retry took the slot)
            self.stats.inc_value("ratelimit/waited")
            # the host may have been backed off (429/503) while this request waited
            try:
                backed_off = self.frontier.blocked_until(host) > now_ms()
            except redis.RedisError:
                backed_off = False
            if backed_off and from_frontier:
                self.stats.inc_value("ratelimit/handed_back")
                return request.replace(dont_filter=True)
        return None

    def process_response(self, request, response, spider=None):
        self._ended(request)
        return response

    def process_exception(self, request, exception, spider=None):
        if not isinstance(exception, IgnoreRequest):  # refused before it left: nothing ended
            self._ended(request)

    def _ended(self, request) -> None:
        """A request the frontier does not track (robots.txt, its redirect hops) ended:
        the host's next request counts from now. A leased one's end is its landing."""
        if request.meta.get(meta.LEASE):
            return
        try:
            self.frontier.end(self.frontier.politeness_key(request.url))
        except redis.RedisError as exc:
            logger.warning("Rate limiter unavailable (%s); the end of %s not recorded", exc, request.url)
