"""Back-pressure on big response bodies: the bytes of big bodies a worker holds at once
are bounded (BODY_BUDGET_BYTES), by making a big page's download wait before its body
is read rather than letting memory grow.

Scrapy stops fetching while the responses its scraper holds add up to more than
SCRAPER_SLOT_MAX_ACTIVE_SIZE, but only new requests: the downloads already under way
(up to CONCURRENT_REQUESTS) all finish, whatever their size. With one page process
reading pages in turn (1.5 s of CPU for a 10 MB page), big pages then pile up in the
worker: a loopback crawl of eight hosts serving 10 MB pages held eleven of them at once
(110 MB, the worker at 232 MB). Here a response whose Content-Length is at least
BODY_BUDGET_MIN_SIZE waits, once its headers are in and before its body is read, until
the big bodies already held leave room for it; the first one always goes in (one page
larger than the budget still passes, alone). Twisted leaves the connection paused until
the body is asked for, so a waiting page costs its headers, not its body, and the time it
waits does not count towards its DOWNLOAD_TIMEOUT. Waiting pages go in in the order they
came; one waits at most BODY_BUDGET_MAX_WAIT seconds, then goes in anyway (counted as
``bodybudget/waited_out``: a body held for longer than expected).

A body is held from the moment its download is let in until its response is gone (the
scraper is done with it: every item it produced left the pipelines); a body whose length
was not announced (chunked), or one that grew when decompressed, is counted once it is
there. Stats: ``bodybudget/waited`` (pages that waited), ``bodybudget/wait_ms``.

The download handler that asks it (crawler/handlers/budgeted.py) is Scrapy's HTTP/1.1
handler with the one step between a response's headers and its body made to wait.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque

from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)


class Charge:
    """Bytes of the budget held by one body; released once (by ``release`` or when the
    object it is tied to is gone)."""

    __slots__ = ("__weakref__", "_budget", "size")

    def __init__(self, budget: BodyBudget, size: int):
        self._budget: BodyBudget | None = budget
        self.size = size

    def release(self) -> None:
        budget, self._budget = self._budget, None
        if budget is not None:
            budget._release(self.size)

    def tie(self, obj) -> None:
        """Release when ``obj`` (the response holding the body) is garbage."""
        weakref.finalize(obj, self.release)


class BodyBudget:
    """The bytes of big bodies (``min_size`` or more) held at once: at most ``max_bytes``,
    or one body alone. ``max_bytes`` 0: no bound."""

    def __init__(self, max_bytes: int, min_size: int, max_wait: float, stats=None, clock=None):
        self.clock = clock  # for callLater; None: the reactor
        self._thread = threading.get_ident()  # the reactor's, where the budget is made and used
        self.max_bytes = max_bytes
        self.min_size = min_size
        self.max_wait = max_wait
        self.stats = stats
        self.held = 0  # bytes
        self._waiting: deque[tuple[int, Deferred, float]] = deque()
        self._tied: weakref.WeakSet = weakref.WeakSet()  # responses holding a charge

    def big(self, size: int) -> bool:
        return self.max_bytes > 0 and size >= self.min_size

    def reserve(self, size: int) -> Deferred:
        """A Deferred that fires with a Charge of ``size`` bytes once they fit (at once
        when nothing waits before and they fit, or nothing is held; else in turn, or after
        max_wait). Cancelling it gives up the place."""
        if not self._waiting and self._fits(size):
            d: Deferred = Deferred()
            d.callback(self.charge(size))
            return d
        d = Deferred(lambda d: self._give_up(d))
        self._waiting.append((size, d, time.monotonic()))
        if self.stats is not None:
            self.stats.inc_value("bodybudget/waited")
        clock = self.clock
        if clock is None:
            from twisted.internet import reactor as clock
        timer = clock.callLater(self.max_wait, self._wait_over, d)
        d.addBoth(_cancel_timer, timer)
        return d

    def charge(self, size: int) -> Charge:
        """Hold ``size`` bytes now, without waiting."""
        self.held += size
        return Charge(self, size)

    def hold(self, response, charge: Charge | None = None) -> None:
        """The response holds its body: ``charge`` (or a new one, when its body is big)
        until the response is gone. A response already holding one is left as it is."""
        if response in self._tied:
            if charge is not None:
                charge.release()
            return
        if charge is None:
            size = len(response.body)
            if not self.big(size):
                return
            charge = self.charge(size)
        self._tied.add(response)
        charge.tie(response)

    def response_received(self, response, request=None, spider=None) -> None:
        """The response the engine got (after the downloader middlewares: decompressed,
        perhaps a new object): its body held until it is gone."""
        self.hold(response)

    def _fits(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.max_bytes

    def _release(self, size: int) -> None:
        if threading.get_ident() != self._thread:  # a response the garbage collector freed in another thread
            from twisted.internet import reactor

            reactor.callFromThread(self._release, size)
            return
        self.held -= size
        self._admit()

    def _admit(self) -> None:
        while self._waiting and self._fits(self._waiting[0][0]):
            self._let_in(*self._waiting.popleft())

    def _let_in(self, size: int, d: Deferred, since: float) -> None:
        if self.stats is not None:
            self.stats.inc_value("bodybudget/wait_ms", round(1000 * (time.monotonic() - since)))
        d.callback(self.charge(size))

    def _wait_over(self, d: Deferred) -> None:
        for entry in self._waiting:
            if entry[1] is d:
                self._waiting.remove(entry)
                if self.stats is not None:
                    self.stats.inc_value("bodybudget/waited_out")
                self._let_in(*entry)
                return

    def _give_up(self, d: Deferred) -> None:
        for entry in self._waiting:
            if entry[1] is d:
                self._waiting.remove(entry)
                break
        self._admit()


def _cancel_timer(result, timer):
    if timer.active():
        timer.cancel()
    return result
