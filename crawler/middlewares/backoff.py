"""Host back-off: a 429 or 503 answer (or its Retry-After) keeps every worker away from
the host for a while, and the page is retried later, not lost.

The delay is the server's Retry-After (seconds or an HTTP date, capped at
HOST_BACKOFF_MAX) or else an exponential back-off with jitter from HOST_BACKOFF_MIN to
HOST_BACKOFF_MAX, forgiven after HOST_BACKOFF_QUIET seconds without one; it is kept in
the frontier (the host's next fetch time), so it holds for every worker. The page goes
back to its host's queue as a retry of the same lease; after HOST_BACKOFF_MAX_RETRIES
back-offs the answer is kept as the page's result. Runs before Scrapy's
RetryMiddleware, which would otherwise retry at once.
"""

from __future__ import annotations

import logging
import random
import time
from email.utils import parsedate_to_datetime

import redis
from scrapy.exceptions import NotConfigured

from crawler.frontier.connection import frontier_from_settings
from crawler.frontier.frontier import politeness_key

logger = logging.getLogger(__name__)

JITTER = 0.25  # a back-off is stretched by up to this fraction, at random
DONT_BACK_OFF = "dont_back_off"  # meta: the sender judges this request's 429/503 itself


def retry_after_seconds(value: bytes | None, now: float | None = None) -> float:
    """Seconds a Retry-After header value asks for (0 when absent or unreadable)."""
    if not value:
        return 0.0
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0
    return max(when - (time.time() if now is None else now), 0.0)


class HostBackoffMiddleware:
    def __init__(self, crawler, frontier, codes, minimum, maximum, quiet, max_retries):
        self.stats = crawler.stats
        self.frontier = frontier
        self.codes = set(codes)
        self.minimum, self.maximum, self.quiet = minimum, maximum, quiet
        self.max_retries = max_retries

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("HOST_BACKOFF_ENABLED"):
            raise NotConfigured
        return cls(
            crawler,
            frontier_from_settings(s),
            [int(code) for code in s.getlist("HOST_BACKOFF_HTTP_CODES")],
            s.getfloat("HOST_BACKOFF_MIN"),
            s.getfloat("HOST_BACKOFF_MAX"),
            s.getfloat("HOST_BACKOFF_QUIET"),
            s.getint("HOST_BACKOFF_MAX_RETRIES"),
        )

    def process_response(self, request, response, spider=None):
        if response.status not in self.codes or request.meta.get(DONT_BACK_OFF):
            return response
        retries = request.meta.get("backoff_retries", 0)
        if retries >= self.max_retries:
            self.stats.inc_value("backoff/gave_up")
            return response
        host = politeness_key(request.url, self.frontier.politeness)
        try:
            delay = self.frontier.back_off(
                host,
                minimum=self.minimum,
                maximum=self.maximum,
                quiet=self.quiet,
                retry_after=retry_after_seconds(response.headers.get(b"Retry-After")),
                jitter=1 + random.random() * JITTER,
            )
        except redis.RedisError as exc:  # cannot tell the other workers: keep the answer
            logger.warning("Could not back off %s (%s); keeping its %d answer", host, exc, response.status)
            return response
        self.stats.inc_value(f"backoff/{response.status}")
        logger.info(
            "%s answered %d: every worker leaves %s alone for %.0f s", request.url, response.status, host, delay
        )
        retry = request.replace(dont_filter=True)
        retry.meta["backoff_retries"] = retries + 1
        return retry
