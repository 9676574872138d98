"""The Metrics extension: a worker's Prometheus endpoint on METRICS_ADDRESS:METRICS_PORT
(crawler/observe/metrics.py says what it serves)."""

from __future__ import annotations

import logging

from scrapy import signals
from scrapy.downloadermiddlewares.stats import get_header_size, get_status_size
from scrapy.exceptions import NotConfigured

from crawler.config.values import metrics_ports
from crawler.observe.metrics import BYTES_BY_STATUS, CrawlCollector, FrontierSnapshot, worker_id
from crawler.services import services

logger = logging.getLogger(__name__)


class Metrics:
    """The extension: the endpoint's life (spider opened to spider closed), and the
    bytes of the responses by status."""

    def __init__(self, crawler, ports: list[int], address: str):
        self.crawler = crawler
        self.ports = ports
        self.address = address
        s = crawler.settings
        self.frontier_every = s.getfloat("METRICS_FRONTIER_INTERVAL")
        self.frontier_timeout = s.getfloat("METRICS_FRONTIER_TIMEOUT")
        self.labels = {"crawl": s.get("CRAWL_NAME"), "worker": worker_id()}
        self.registry = None
        self.server = None
        self.url: str | None = None

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        try:
            ports = metrics_ports(s.get("METRICS_PORT"))
        except ValueError:
            ports = None  # (validation names the setting before any crawl starts)
        if not ports:
            raise NotConfigured
        ext = cls(crawler, ports, s.get("METRICS_ADDRESS") or "127.0.0.1")
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.response_downloaded, signal=signals.response_downloaded)
        return ext

    def response_downloaded(self, response, request, spider=None):
        size = len(response.body) + get_header_size(response.headers) + get_status_size(response.status) + 4
        self.crawler.stats.inc_value(f"{BYTES_BY_STATUS}{response.status}", size)

    def spider_opened(self, spider):
        from prometheus_client import CollectorRegistry, ProcessCollector

        snapshot = None
        if services(self.crawler).frontier_scheduled:
            # the crawler's frontier (built by the scheduler already): its client and pool
            frontier = services(self.crawler).frontier
            snapshot = FrontierSnapshot(frontier, self.frontier_every, self.frontier_timeout)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CrawlCollector(self.crawler.stats, self.labels, snapshot))
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes...
        try:
            self.server = self._serve()
        except OSError as exc:  # the crawl goes on without its endpoint
            logger.error("Metrics not served: cannot listen on %s port %s: %s", self.address, self._ports_text(), exc)
            self.crawler.stats.set_value("metrics/error", str(exc))
            return
        host, port = self.server.server_address[:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
        self.crawler.stats.set_value("metrics/port", port)
        logger.info("Metrics on %s", self.url)

    def _serve(self):
        from prometheus_client import start_http_server

        error: OSError | None = None
        for port in self.ports:
            try:
                server, _thread = start_http_server(port, self.address, registry=self.registry)
                return server
            except OSError as exc:  # taken: the next of the range
                error = exc
        raise error  # type: ignore[misc]

    def _ports_text(self) -> str:
        if self.ports == [0]:
            return "auto"
        return str(self.ports[0]) if len(self.ports) == 1 else f"{self.ports[0]}-{self.ports[-1]}"

    def spider_closed(self, spider, reason):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
            logger.info("Metrics endpoint %s closed", self.url)
