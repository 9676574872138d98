"""The outbox of a worker's frontier calls while Redis is away (a part of its FrontierClient,
crawler/frontier/client.py).

A failed call is retried with back-off (half the outage so far, from 0.5 s to 30 s) and
the worker stays open; pushes and acks that fail wait here, in order, and are delivered
once Redis answers again (a page's links before its ack), so nothing the worker learned
is lost while it lives; a worker killed during an outage loses only unacknowledged work,
which its expired leases bring back. A Redis that refuses the worker's credentials is no
outage: ``on_refused`` closes the worker.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable

import redis

from crawler.frontier.connection import outage_wait, refused
from crawler.frontier.words import put_stat

logger = logging.getLogger(__name__)

PUSH, ACK = "push", "ack"
BATCH = 500  # operations of one kind delivered in one call


class Outbox:
    def __init__(self, frontier, stats, clock, on_up: Callable[[], None], on_refused: Callable[[Exception], None]):
        self.frontier = frontier
        self.stats = stats
        self.clock = clock  # IReactorTime: the client's
        self.on_up = on_up  # Redis answers again
        self.on_refused = on_refused  # Redis refused the credentials or TLS
        self.ops: deque[tuple[str, object]] = deque()  # (PUSH, Entry) or (ACK, lease id)
        self.backoff = 0.0  # seconds to wait before the next try
        self.down_since: float | None = None  # when the outage began; None while Redis answers
        self._next_warning = 0.0
        self._retry_call = None

    def __len__(self) -> int:
        return len(self.ops)

    def redis_down(self, exc) -> None:
        """A call failed: the wait between retries grows with the length of the outage
        (half of it, from 0.5 s to 30 s), however many calls fail meanwhile; a warning at
        most once a wait."""
        if refused(exc):
            self.on_refused(exc)
        now = self.clock.seconds()
        if self.down_since is None:
            self.down_since = now
        self.backoff = outage_wait(now - self.down_since)
        self.stats.inc_value("frontier/redis_errors")
        if now >= self._next_warning:
            self._next_warning = now + self.backoff
            logger.warning(
                "Redis unreachable for %.0f s (%s: %s); %d operations waiting, retrying in %.1f s",
                now - self.down_since,
                type(exc).__name__,
                exc,
                len(self.ops),
                self.backoff,
            )

    def redis_up(self) -> None:
        """A call succeeded: the outage, if any, is over."""
        if self.down_since is None:
            return
        logger.info("Redis reachable again after %.0f s", self.clock.seconds() - self.down_since)
        self.down_since = None
        self.backoff = self._next_warning = 0.0
        self.on_up()

    def defer(self, kind: str, value) -> None:
        """Keep a push (an Entry) or an ack (a lease id) for delivery once Redis answers."""
        self.ops.append((kind, value))
        self.stats.inc_value("frontier/deferred")
        if self._retry_call is None or not self._retry_call.active():
            self._retry_call = self.clock.callLater(max(self.backoff, 0.5), self._retry)

    def retry_soon(self) -> None:
        """Redis answered another call (a take): what waits here goes at the next reactor
        turn, not at the end of its back-off (up to 30 s after a long outage)."""
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.reset(0)

    def _retry(self) -> None:
        if not self.drain():
            self._retry_call = self.clock.callLater(self.backoff, self._retry)

    def drain(self) -> bool:
        """Deliver waiting pushes and acks in order, a run of one kind (at most BATCH) a
        call. True when the outbox is empty."""
        while self.ops:
            kind = self.ops[0][0]
            run = list(itertools.islice(itertools.takewhile(lambda op, kind=kind: op[0] == kind, self.ops), BATCH))
            values = [value for _, value in run]
            try:
                now = int(self.clock.seconds() * 1000)
                if kind == PUSH:
                    for status in self.frontier.put(values, now=now):
                        self.stats.inc_value(put_stat(status))
                else:
                    acked = self.frontier.ack(*values, now=now)
                    if acked:
                        self.stats.inc_value("frontier/acked", acked)
            except redis.RedisError as exc:
                self.redis_down(exc)
                return False
            for _ in run:
                self.ops.popleft()
        self.redis_up()
        return True

    def stop(self) -> None:
        """No more retries on the clock (the worker closes; ``drain`` may still be called)."""
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
