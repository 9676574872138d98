"""How long the reactor is held up (an extension): every REACTOR_PROBE_INTERVAL seconds a
call is scheduled on the reactor, and how late it runs is the stall, the time no other
event (a download's bytes, a host due, a landing) could be served. The largest stall
and the 99th percentile of the last REACTOR_PROBE_WINDOW probes are kept in the stats
(``reactor/stall_max_ms``, ``reactor/stall_p99_ms``, ``reactor/stalls_over_100ms``), which
the Prometheus endpoint and the crawl's summary show, and the benchmarks read. A worker
whose reactor waits on a store (a UrlStore read, a synchronous Redis call) shows it here.
"""

from __future__ import annotations

from collections import deque

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import reactor as default_reactor

WINDOW = 1000  # probes the p99 is taken over
OVER_MS = 100.0  # a stall counted in reactor/stalls_over_100ms


class ReactorStalls:
    def __init__(self, stats, interval: float, clock=None):
        self.stats = stats
        self.interval = interval
        self.clock = clock if clock is not None else default_reactor
        self.recent: deque[float] = deque(maxlen=WINDOW)  # ms late, the last WINDOW probes
        self.worst = 0.0
        self._call = None
        self._due = 0.0

    @classmethod
    def from_crawler(cls, crawler):
        interval = crawler.settings.getfloat("REACTOR_PROBE_INTERVAL")
        if interval <= 0:
            raise NotConfigured
        ext = cls(crawler.stats, interval)
        crawler.signals.connect(ext.start, signal=signals.engine_started)
        crawler.signals.connect(ext.stop, signal=signals.engine_stopped)
        return ext

    def start(self) -> None:
        self._schedule()

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def _schedule(self) -> None:
        self._due = self.clock.seconds() + self.interval
        self._call = self.clock.callLater(self.interval, self._probe)

    def _probe(self) -> None:
        late = max(self.clock.seconds() - self._due, 0.0) * 1000
        self.recent.append(late)
        if late > self.worst:
            self.worst = late
            self.stats.set_value("reactor/stall_max_ms", round(late, 1))
        if late > OVER_MS:
            self.stats.inc_value("reactor/stalls_over_100ms")
        if len(self.recent) % 50 == 0 or late > OVER_MS:
            self.stats.set_value("reactor/stall_p99_ms", round(self.p99(), 1))
        self._schedule()

    def p99(self) -> float:
        ordered = sorted(self.recent)
        return ordered[min(int(0.99 * len(ordered)), len(ordered) - 1)] if ordered else 0.0
