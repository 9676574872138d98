"""Prometheus metrics of one worker, served on METRICS_ADDRESS:METRICS_PORT.

Off unless METRICS_PORT is set: a port, a range ``9410-9419`` (the first free one: several
workers on one machine) or ``auto`` (any free port). The address the endpoint is bound to
is logged (``Metrics on http://127.0.0.1:9410/metrics``). It is served by
prometheus-client's own HTTP server, in threads of its own, from the spider's opening to
its closing.

Nothing is counted twice: a scrape reads the crawl stats (Scrapy's stats collector, where
every component counts under its prefix: ``downloader/``, ``robotstxt/``,
``contentseen/``, ``frontier/trap/``, ``archive/``, ``urlstore/``, ``ratelimit/`` ...)
through a custom collector (``FAMILIES`` maps them to metric names), so the numbers are
those of the closing stats dump. What the stats lack is counted here: the bytes of the
responses by status (``downloader/response_bytes_by_status/<status>``, as Scrapy counts
``downloader/response_bytes``).

The frontier's numbers (queued, leased, hosts ready and due, the pages of the last
minute: crawl-wide, the same from every worker) come from ``frontier.stats()``, read at
most every METRICS_FRONTIER_INTERVAL seconds in a thread of their own: a scrape waits
METRICS_FRONTIER_TIMEOUT at most for a fresh read, then serves the last one with its age
(``crawler_frontier_snapshot_age_seconds``; ``crawler_frontier_up`` 0 when the last read
failed), so a Redis that hangs never hangs a scrape.

Every sample carries the labels ``crawl`` (CRAWL_NAME) and ``worker`` (host name and
process id); each crawler has a registry of its own (several crawlers in one process do
not mix).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

logger = logging.getLogger(__name__)

BYTES_BY_STATUS = "downloader/response_bytes_by_status/"


@dataclass(frozen=True)
class Family:
    """A counter family read from the crawl stats. ``source``: a stats key (one sample),
    or, with ``label``, stats key prefixes ending in ``/`` (the rest of each key is the
    label's value) and (label value, stats key) pairs. ``scale`` multiplies the values
    (milliseconds to seconds)."""

    name: str
    help: str
    source: str | tuple
    label: str = ""
    scale: float = 1.0


FAMILIES = (
    Family(
        "crawler_pages_fetched",
        "Responses received (pages, robots.txt, sitemaps), by HTTP status",
        ("downloader/response_status_count/",),
        "status",
    ),
    Family(
        "crawler_bytes_fetched",
        "Bytes of those responses (status line, headers and body as received), by HTTP status",
        (BYTES_BY_STATUS,),
        "status",
    ),
    Family("crawler_requests", "Requests sent", "downloader/request_count"),
    Family(
        "crawler_download_errors",
        "Requests that got no response, by exception",
        ("downloader/exception_type_count/",),
        "error",
    ),
    Family(
        "crawler_pages_recorded",
        "Pages recorded by this worker, by fate (fetched, duplicate, robots_disallowed, timeout...)",
        ("pages/fate/",),
        "fate",
    ),
    Family("crawler_politeness_waits", "Requests that waited for their host's slot", "ratelimit/waits"),
    Family(
        "crawler_politeness_wait_seconds",
        "Seconds requests waited for their hosts' slots",
        "ratelimit/wait_ms",
        scale=0.001,
    ),
    Family(
        "crawler_politeness_held",
        "Requests held past their turn (robots.txt or a retry took the host's slot)",
        "ratelimit/waited",
    ),
    Family(
        "crawler_politeness_handed_back",
        "Requests handed back to the frontier: their host's slot was too far away",
        "ratelimit/handed_back",
    ),
    Family("crawler_robots_denied", "URLs robots.txt disallowed (never fetched)", "robotstxt/disallowed"),
    Family(
        "crawler_robots_fetched",
        "robots.txt fetched by this worker, by HTTP status",
        ("robotstxt/status/",),
        "status",
    ),
    Family(
        "crawler_robots_deferred",
        "URLs put off because their robots.txt is unreachable",
        "robotstxt/deferred",
    ),
    Family(
        "crawler_duplicates",
        "Pages found to be copies of a page seen before: exact (same body) or near (same text, mostly)",
        (("exact", "contentseen/exact"), ("near", "contentseen/near")),
        "kind",
    ),
    Family(
        "crawler_trap_refusals",
        "URLs the frontier refused, by guard (depth, url_length, repeated_segments, ..., host_full)",
        ("frontier/trap/", ("host_full", "frontier/host_full")),
        "guard",
    ),
    Family("crawler_urls_enqueued", "URLs this worker added to the frontier", "frontier/enqueued"),
    Family("crawler_urls_already_seen", "URLs this worker offered that the frontier had seen", "frontier/seen"),
    Family("crawler_leases", "URLs the frontier handed to this worker", "frontier/leased"),
    Family("crawler_acks", "Leases this worker acknowledged (pages handled)", "frontier/acked"),
    Family(
        "crawler_url_retries",
        "URL retries scheduled, by reason",
        ("retry/reason/",),
        "reason",
    ),
    Family(
        "crawler_host_backoffs",
        "Hosts held back: throttled (429, Retry-After), host_down, slowed (5xx, timeouts)",
        (("throttled", "backoff/throttled"), ("host_down", "backoff/host_down"), ("slowed", "backoff/slowed")),
        "kind",
    ),
    Family("crawler_archive_records", "WARC records written", "archive/records"),
    Family("crawler_archive_objects", "WARC objects (batches) stored", "archive/objects"),
    Family("crawler_archive_bytes", "Bytes of WARC objects stored", "archive/bytes"),
    Family("crawler_archive_retries", "WARC uploads tried again after a failure", "archive/retries"),
    Family(
        "crawler_store_writes",
        "UrlStore records written, by fate",
        ("urlstore/written/",),
        "fate",
    ),
    Family("crawler_store_pointer_writes", "Archive pointers added to UrlStore records", "urlstore/archive_pointers"),
    Family("crawler_store_failures", "UrlStore writes that failed for good", "urlstore/failed"),
    Family(
        "crawler_pages_not_stored",
        "Pages whose archive or UrlStore write failed: their leases went back, to be fetched again",
        "frontier/lease/given_back",
    ),
)

# this worker's stats key -> (gauge name, help): values that are not counts
WORKER_GAUGES = {
    "reactor/stall_max_ms": ("crawler_reactor_stall_max_ms", "The longest the reactor was held up, in ms (stalls.py)"),
    "reactor/stall_p99_ms": (
        "crawler_reactor_stall_p99_ms",
        "The 99th percentile of the reactor's recent stalls, in ms",
    ),
}

# frontier.stats() field -> (gauge name, help); crawl-wide: every worker reports the same
FRONTIER_GAUGES = {
    "queued": ("crawler_frontier_queued", "URLs queued in the frontier"),
    "leased": ("crawler_frontier_leased", "URLs leased to workers"),
    "in_flight": ("crawler_frontier_in_flight", "Leased URLs whose downloads have not ended"),
    "hosts_queued": ("crawler_frontier_hosts_ready", "Hosts with URLs queued and below their in-flight limit"),
    "hosts_due": ("crawler_frontier_hosts_due", "Of those, hosts due now"),
    "retries_delayed": ("crawler_frontier_retries_delayed", "URLs waiting for their own retry time"),
    "hosts_slowed": ("crawler_frontier_hosts_slowed", "Hosts whose interval failures have stretched"),
    "acked_last_minute": ("crawler_frontier_pages_last_minute", "Pages acknowledged in the last minute"),
    "done": ("crawler_frontier_pages_handled", "Pages handled (acknowledged): what CRAWL_MAX_PAGES counts"),
    "paused": ("crawler_frontier_paused", "1 while the operator has paused the crawl (scrapy frontier pause)"),
    "hosts_paused": ("crawler_frontier_hosts_paused", "Hosts the operator has paused"),
    "oldest_lease_age": (
        "crawler_frontier_oldest_lease_age_seconds",
        "Seconds since the oldest lease was taken or renewed",
    ),
}


def worker_id() -> str:
    """This worker: its host's name and its process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


class FrontierSnapshot:
    """``frontier.stats()`` at most every ``every`` seconds, read in a thread of its own.
    ``get()`` waits ``timeout`` seconds at most for a fresh read; a read that hangs (Redis
    away) keeps the last values, and no second read starts while it lasts."""

    def __init__(self, frontier, every: float, timeout: float):
        self.frontier = frontier
        self.every = every
        self.timeout = timeout
        self._lock = threading.Lock()
        self._value: dict | None = None
        self._value_at = 0.0  # monotonic time of the last good read
        self._tried_at: float | None = None  # monotonic time the last read started
        self._ok = False
        self._reading: threading.Thread | None = None

    def get(self) -> tuple[dict | None, float | None, bool]:
        """(the last frontier.stats(), its age in seconds, whether the last read worked
        and none has been hanging for longer than ``timeout``)."""
        with self._lock:
            now = time.monotonic()
            if self._reading is None and (self._tried_at is None or now - self._tried_at >= self.every):
                self._tried_at = now
                self._reading = threading.Thread(target=self._read, name="metrics-frontier", daemon=True)
                self._reading.start()
            reading = self._reading
        if reading is not None:
            reading.join(self.timeout)
        with self._lock:
            age = time.monotonic() - self._value_at if self._value is not None else None
            hanging = self._reading is not None and time.monotonic() - self._tried_at >= self.timeout
            return self._value, age, self._ok and not hanging

    def _read(self) -> None:
        try:
            value = self.frontier.stats()
        except Exception as exc:  # Redis away: the last values stay, with their age
            logger.debug("Frontier numbers unavailable for the metrics: %s", exc)
            value = None
        with self._lock:
            self._ok = value is not None
            if value is not None:
                self._value, self._value_at = value, time.monotonic()
            self._reading = None


class CrawlCollector:
    """The families of FAMILIES from the crawl stats, and the frontier's gauges, read
    at each scrape (a prometheus-client custom collector)."""

    def __init__(self, stats, labels: dict[str, str], frontier: FrontierSnapshot | None):
        self.stats = stats
        self.names = list(labels)
        self.values = list(labels.values())
        self.frontier = frontier

    def describe(self):
        return []  # families and samples are known at collection only

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stats = dict(self.stats.get_stats())  # a copy: the reactor thread goes on counting
        for family in FAMILIES:
            names = [*self.names, family.label] if family.label else self.names
            metric = CounterMetricFamily(family.name, family.help, labels=names)
            for label, value in _samples(family, stats):
                metric.add_metric([*self.values, label] if family.label else self.values, value * family.scale)
            yield metric
        for key, (name, help_text) in WORKER_GAUGES.items():  # this worker's own, as they stand
            metric = GaugeMetricFamily(name, help_text, labels=self.names)
            metric.add_metric(self.values, float(stats.get(key, 0)))
            yield metric
        if self.frontier is None:
            return
        snapshot, age, ok = self.frontier.get()
        up = GaugeMetricFamily(
            "crawler_frontier_up", "1 when the last read of the frontier worked, and none hangs", labels=self.names
        )
        up.add_metric(self.values, 1.0 if ok else 0.0)
        yield up
        if snapshot is None:
            return
        metric = GaugeMetricFamily(
            "crawler_frontier_snapshot_age_seconds", "Age of the frontier numbers served", labels=self.names
        )
        metric.add_metric(self.values, age)
        yield metric
        for field, (name, help_text) in FRONTIER_GAUGES.items():
            value = snapshot.get(field)
            metric = GaugeMetricFamily(name, help_text + " (crawl-wide)", labels=self.names)
            if value is not None:
                metric.add_metric(self.values, float(value))
            yield metric
        metric = GaugeMetricFamily(
            "crawler_frontier_seen_urls", "URLs in the URL-seen filter (crawl-wide)", labels=self.names
        )
        metric.add_metric(self.values, float(snapshot["seen"]["urls"]))
        yield metric


def _samples(family: Family, stats: dict):
    """(label value, value) of each stats key ``family`` reads (label value '' when the
    family has no label); a key named in FAMILIES is 0 until counted."""
    if isinstance(family.source, str):
        yield "", stats.get(family.source, 0)
        return
    for part in family.source:
        if isinstance(part, str):
            for key, value in stats.items():
                if key.startswith(part) and len(key) > len(part) and isinstance(value, int | float):
                    yield key[len(part) :], value
        else:
            label, key = part
            yield label, stats.get(key, 0)
