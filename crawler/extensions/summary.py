"""Frontier progress in the log, the frontier's numbers in the crawl stats, and the
closing summary (pages by fate, what the crawl left and why)."""

from __future__ import annotations

import logging
import time

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from crawler.freshness.policy import SKIPPED
from crawler.frontier.words import FINISHED
from crawler.items import Page
from crawler.observe.report import FATE, KEPT, deferred_lines, pages_text, status_line
from crawler.services import services
from crawler.urlstore.record import worker_fate

logger = logging.getLogger(__name__)

NOT_ERRORS = {
    *KEPT,  # (a 304's not_modified among them: the page kept)
    "robots_disallowed",
    "dropped",
    "given_up",
    "over_quota",
}  # fates that are no failure


class FrontierStats:
    """Every FRONTIER_STATS_INTERVAL seconds: one log line with the frontier's queue
    sizes, hosts, leases, URL-seen fill and pages of the last minute (all workers), and
    this worker's pages/s, pages and errors (pages recorded with a failure: by fate,
    the commonest first) since it started. At close, the same
    numbers go into the stats under ``frontier_state/``, and a summary is logged: the
    pages this worker recorded by fate (``pages/fate/<fate>`` in the stats), whether the
    crawl is finished, and what it left for later by reason (robots.txt unreachable,
    host down, URL retry pending...) with the earliest time one is due."""

    def __init__(self, crawler, interval: float):
        self.crawler = crawler
        self.interval = interval
        self.max_wait = crawler.settings.getfloat("FRONTIER_MAX_WAIT")
        self.task = None
        self._last = (time.time(), 0)

    @classmethod
    def from_crawler(cls, crawler):
        interval = crawler.settings.getfloat("FRONTIER_STATS_INTERVAL")
        if not interval:
            raise NotConfigured
        ext = cls(crawler, interval)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.item_scraped, signal=signals.item_scraped)
        return ext

    def _frontier(self):
        found = services(self.crawler)
        return found.frontier if found.frontier_scheduled else None

    def spider_opened(self, spider):
        self.task = task.LoopingCall(self.log)
        self.task.start(self.interval, now=False)

    def log(self):
        frontier = self._frontier()
        if frontier is None:
            return
        try:
            s = frontier.stats()
        except Exception as exc:  # Redis away: say so, keep crawling
            logger.warning("Frontier stats unavailable: %s", exc)
            return
        fates = self._fates()
        now, pages = time.time(), sum(fates.values())
        rate = (pages - self._last[1]) / max(now - self._last[0], 1e-9)
        self._last = (now, pages)
        errors = sorted(((n, f) for f, n in fates.items() if f not in NOT_ERRORS), reverse=True)
        logger.info(
            "Frontier: %d queued (%d hosts ready, %d due), %d leased, %d seen (filter fill %.1f%%, "
            "est. false positives %.1e), %d pages in the last minute; this worker: %.1f pages/s, "
            "%d pages, %d errors%s",
            s["queued"],
            s["hosts_queued"],
            s["hosts_due"],
            s["leased"],
            s["seen"]["urls"],
            100 * max(s["seen"]["fill"] or [0]),
            s["seen"]["false_positive_rate"],
            s["acked_last_minute"],
            rate,
            pages,
            sum(n for n, _ in errors),
            " (" + ", ".join(f"{f} {n}" for n, f in errors[:3]) + ")" if errors else "",
        )

    def _fates(self) -> dict[str, int]:
        """This worker's pages so far by fate (``pages/fate/<fate>`` in the stats)."""
        stats = self.crawler.stats.get_stats()
        return {k[len(FATE) :]: v for k, v in list(stats.items()) if k.startswith(FATE)}

    def item_scraped(self, item, **kwargs):
        if isinstance(item, Page):
            self.crawler.stats.inc_value(f"{FATE}{worker_fate(item)}")

    def spider_closed(self, spider, reason):
        if self.task is not None and self.task.running:
            self.task.stop()
        frontier = self._frontier()
        if frontier is None:
            return
        try:
            s = frontier.stats()
            outlook = frontier.outlook(self.max_wait)
            deferred = frontier.deferred() if outlook["state"] != FINISHED else {}
        except Exception as exc:
            logger.warning("Frontier unavailable at close (%s): no summary", exc)
            return
        stats = self.crawler.stats
        for key in ("queued", "hosts_queued", "leased", "pushed", "popped", "acked", "expired", "abandoned"):
            stats.set_value(f"frontier_state/{key}", s[key])
        stats.set_value("frontier_state/seen_urls", s["seen"]["urls"])
        stats.set_value("frontier_state/seen_false_positive_rate", s["seen"]["false_positive_rate"])
        for r, d in deferred.items():
            stats.set_value(f"frontier_state/deferred/{r}/hosts", d["hosts"])
            stats.set_value(f"frontier_state/deferred/{r}/urls", d["urls"])
        logger.info("%s", self.summary(reason, outlook, deferred))

    def summary(self, reason: str, outlook: dict, deferred: dict) -> str:
        """What this worker did, and what the crawl left for later (and why)."""
        stats = self.crawler.stats.get_stats()
        fates = self._fates()
        lines = [
            f"Crawl summary ({reason}): this worker recorded {pages_text(fates, stats.get('contentseen/near', 0))}",
            f"Frontier: {status_line(outlook, deferred)}",
        ]
        lines += [f"  {line}" for line in deferred_lines(deferred)]
        skipped = stats.get(SKIPPED, 0)
        if skipped and not fates.get("fetched", 0):
            age = self.crawler.settings.getfloat("FETCH_POLICY_MAX_AGE")
            lines.append(
                f"Nothing fetched: the UrlStore says the {skipped} URL{'s' if skipped != 1 else ''} handed out "
                f"{'were' if skipped != 1 else 'was'} fetched within FETCH_POLICY_MAX_AGE ({age:g} s), so "
                "nothing was read and nothing below discovered; to fetch again: -s FETCH_POLICY_MAX_AGE=0, "
                f"scrapy submit --force URL, or {fresh_start(self.crawler.settings)}"
            )
        if outlook["state"] != FINISHED:
            lines.append("Run the same command again to resume (what is deferred is fetched once due).")
        return "\n".join(lines)


def fresh_start(settings) -> str:
    """How to start a crawl afresh, frontier and UrlStore both, on the UrlStore in use:
    an SQLite one is the crawl's own (``frontier clear --store``); a Cassandra keyspace is
    shared by every crawl of it, so a crawl starts afresh in a keyspace of its own."""
    if settings.get("URLSTORE_BACKEND").lower() == "sqlite":
        return "scrapy frontier clear --store --yes (the frontier and the UrlStore both)"
    keyspace = settings.get("CASSANDRA_KEYSPACE")
    return (
        "scrapy frontier clear --yes, then crawl with -s CASSANDRA_KEYSPACE=<a new keyspace> "
        f"(the UrlStore in keyspace {keyspace} is shared by every crawl of it, and kept)"
    )
