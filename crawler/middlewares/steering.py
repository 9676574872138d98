"""URLs the frontier hands out to be recorded rather than fetched (scripts.POP's drops: a
host the operator dropped, a host given up after HOST_GIVE_UP_AFTER down, a URL over its
host's page quota) end here, before robots.txt and every other middleware: no request
leaves, and the spider's errback records why (fates ``dropped``, ``given_up``,
``over_quota``)."""

from __future__ import annotations

import logging

from crawler import meta
from crawler.exceptions import HostDropped, HostGivenUp, OverQuota
from crawler.frontier.words import DOWN, DROP_CODES, OPERATOR, QUOTA
from crawler.urls import url_host

logger = logging.getLogger(__name__)

WHY = {
    DROP_CODES[OPERATOR]: (HostDropped, "its host was dropped by the operator (scrapy frontier drop)"),
    DROP_CODES[DOWN]: (HostGivenUp, "its host was down, or its robots.txt unreachable, for HOST_GIVE_UP_AFTER"),
    DROP_CODES[QUOTA]: (OverQuota, "its host reached its page quota (FRONTIER_HOST_MAX_PAGES)"),
}


class NotFetchedMiddleware:
    def __init__(self, stats):
        self.stats = stats
        self._told: set[tuple[int, str]] = set()  # (code, host) said once in the log

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats)

    def process_request(self, request, spider=None):
        code = request.meta.get(meta.NOT_FETCHED)
        if not code:
            return None
        kind, why = WHY.get(code, WHY[DROP_CODES[OPERATOR]])
        self.stats.inc_value(f"frontier/not_fetched/{kind.__name__}")
        host = url_host(request.url)
        if (code, host) not in self._told and len(self._told) < 10_000:
            self._told.add((code, host))
            logger.info("Recording the URLs of %s as not fetched: %s", host, why)
        raise kind(f"not fetched: {why}")
