"""What a failed fetch costs: the URL's, or the host's.

The policy of Googlebot, Heritrix, Nutch and StormCrawler, shared by every worker
through the frontier:

- **429, or any 5xx answer with Retry-After**: the host is held back for every worker
  (the server's Retry-After, capped at HOST_BACKOFF_MAX, else HOST_BACKOFF_MIN doubling
  up to HOST_BACKOFF_MAX; the doubling is forgiven after HOST_BACKOFF_QUIET). The page
  goes back to the head of its host's queue; after HOST_BACKOFF_MAX_RETRIES back-offs
  its answer is kept.
- **A 5xx (URL_RETRY_HTTP_CODES) or a timeout of one URL**: that URL is retried on its
  own schedule, URL_RETRY_DELAY after the first try, doubling with jitter (the delayed
  set of the frontier), URL_RETRY_ATTEMPTS tries in all; the last failure is kept as the
  page's result (recorded with its fate and next_fetch_at). The host's other URLs go on,
  but the host is slowed: its interval is multiplied by HOST_SLOWDOWN_FACTOR (at most
  HOST_SLOWDOWN_MAX) and comes back as it answers again (each answer adds
  HOST_SLOWDOWN_RECOVERY of its base rate back: AIMD).
- **A host that is down**: connection refused or DNS failure, or HOST_DOWN_AFTER
  distinct URLs failing in a row with no answer between. The host is backed off (as
  for 429) and probed again with one request when the back-off ends; the URL that
  failed is retried on its own schedule like any other; the host's other queued URLs
  wait and are not each tried.

robots.txt requests are not handled here (the robots middleware has its own rule:
unreachable, fetch nothing else, try again later). Every decision is counted
(``backoff/throttled``, ``backoff/slowed``, ``backoff/host_down``, ``retry/scheduled``,
``retry/gave_up``, ``retry/reason/<why>``) and logged once per host and
FAILURE_LOG_PERIOD, not once per URL.

Scrapy's RetryMiddleware, which retries at once, is replaced by this one.
"""

from __future__ import annotations

import logging
import random
import time
from email.utils import parsedate_to_datetime

import redis
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotConfigured,
    ResponseDataLossError,
)
from twisted.internet import defer
from twisted.internet.error import ConnectError, ConnectionDone, ConnectionLost, DNSLookupError, TimeoutError
from twisted.web.client import ResponseFailed, ResponseNeverReceived

from crawler import meta
from crawler.frontier.hosts import backoff_settings
from crawler.frontier.words import DOWN, THROTTLED, now_ms
from crawler.services import services

logger = logging.getLogger(__name__)

JITTER = 0.25  # a delay is stretched by up to this fraction, at random

# the host is unreachable: nothing of it can be fetched now
HOST_DOWN_ERRORS = (DownloadConnectionRefusedError, CannotResolveHostError, ConnectError, DNSLookupError)
# this URL's fetch failed (the host may be fine)
URL_ERRORS = (
    DownloadTimeoutError,
    DownloadFailedError,
    ResponseDataLossError,
    TimeoutError,
    defer.TimeoutError,
    ConnectionDone,
    ConnectionLost,
    ResponseFailed,
    ResponseNeverReceived,
    OSError,
)


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


def retry_delay(attempt: int, first: float, largest: float, jitter: float = 1.0) -> float:
    """Seconds before try ``attempt + 1`` of a URL whose try ``attempt`` failed:
    ``first`` doubling per try, times ``jitter``, at most ``largest``."""
    return min(first * 2 ** (attempt - 1), largest) * jitter


class FailureMiddleware:
    def __init__(self, crawler, frontier):
        s = crawler.settings
        self.stats = crawler.stats
        self.frontier = frontier
        self.throttle_codes = {int(c) for c in s.getlist("HOST_BACKOFF_HTTP_CODES")}
        self.retry_codes = {int(c) for c in s.getlist("URL_RETRY_HTTP_CODES")}
        self.attempts = max(s.getint("URL_RETRY_ATTEMPTS"), 1)
        self.retry_first = s.getfloat("URL_RETRY_DELAY")
        self.retry_max = s.getfloat("URL_RETRY_DELAY_MAX")
        self.backoff = backoff_settings(s)
        self.max_backoffs = s.getint("HOST_BACKOFF_MAX_RETRIES")
        self.slowdown = {
            "factor": s.getfloat("HOST_SLOWDOWN_FACTOR"),
            "max_factor": s.getfloat("HOST_SLOWDOWN_MAX"),
            "down_after": s.getint("HOST_DOWN_AFTER"),
        }
        self.log_period = s.getfloat("FAILURE_LOG_PERIOD")
        self._logged: dict[tuple[str, str], list] = {}  # (host, decision) -> [next log time, events since]

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("HOST_BACKOFF_ENABLED"):
            raise NotConfigured
        return cls(crawler, services(crawler).frontier)

    # -- answers -----------------------------------------------------------------------

    def process_response(self, request, response, spider=None):
        if request.meta.get(meta.DONT_BACK_OFF):
            return response
        status = response.status
        retry_after = retry_after_seconds(response.headers.get(b"Retry-After"))
        if status in self.throttle_codes or (status >= 500 and retry_after):
            return self._throttled(request, response, retry_after)
        if status in self.retry_codes:
            return self._failed(request, "url", f"http_{status}", response)
        return response

    def process_exception(self, request, exception, spider=None):
        if request.meta.get(meta.DONT_BACK_OFF) or isinstance(exception, IgnoreRequest):
            return None
        if isinstance(exception, HOST_DOWN_ERRORS):
            return self._failed(request, DOWN, type(exception).__name__, None)
        if isinstance(exception, URL_ERRORS):
            return self._failed(request, "url", type(exception).__name__, None)
        return None

    # -- decisions ---------------------------------------------------------------------

    def _throttled(self, request, response, retry_after: float):
        """429 or Retry-After: every worker leaves the host alone for a while (also after
        the page's last back-off: the host asked it of the crawl, not of the page)."""
        retries = request.meta.get(meta.BACKOFF_RETRIES, 0)
        host = self.frontier.politeness_key(request.url)
        try:
            delay = self.frontier.block_until(
                host, retry_after=retry_after, jitter=1 + random.random() * JITTER, reason=THROTTLED, **self.backoff
            )
        except redis.RedisError as exc:  # cannot tell the other workers: keep the answer
            logger.warning("Could not back off %s (%s); keeping its %d answer", host, exc, response.status)
            return response
        if retries >= self.max_backoffs:  # the page's answer is kept; its host waits all the same
            self.stats.inc_value("backoff/gave_up")
            return response
        self.stats.inc_value("backoff/throttled")
        self.stats.inc_value(f"backoff/throttled/{response.status}")
        self._log(
            host,
            THROTTLED,
            "%s answered %d%s: every worker leaves %s alone for %.0f s",
            request.url,
            response.status,
            f" (Retry-After {retry_after:.0f} s)" if retry_after else "",
            host,
            delay,
        )
        retry = request.replace(dont_filter=True)
        retry.meta[meta.BACKOFF_RETRIES] = retries + 1
        return retry

    def _failed(self, request, kind: str, why: str, response):
        """A 5xx or a timeout (kind 'url'), or the host unreachable (kind 'down'): judge
        the host, then retry the URL on its own schedule or keep the failure."""
        host = self.frontier.politeness_key(request.url)
        attempt = request.meta.get(meta.ATTEMPT, 1)
        self.stats.inc_value(f"retry/reason/{why}")
        if request.meta.get(meta.LEASE):
            self._judge_host(host, kind, request.url, why)
        if attempt >= self.attempts:
            self.stats.inc_value("retry/gave_up")
            self._log(host, "gave_up", "%s failed %d times (last: %s); recorded as failed", request.url, attempt, why)
            return response  # None for an exception: the errback records it
        delay = retry_delay(attempt, self.retry_first, self.retry_max, 1 + random.random() * JITTER)
        self.stats.inc_value("retry/scheduled")
        self._log(
            host,
            "retry",
            "%s failed (%s, try %d of %d): tried again in %.0f s",
            *(request.url, why, attempt, self.attempts, delay),
        )
        retry = request.replace(dont_filter=True)
        retry.meta[meta.ATTEMPT] = attempt + 1
        retry.meta[meta.NOT_BEFORE] = now_ms() + int(delay * 1000)
        return retry

    def _judge_host(self, host: str, kind: str, url: str, why: str) -> None:
        try:
            down, delay, factor = self.frontier.fail(
                host, kind, url, jitter=1 + random.random() * JITTER, **self.slowdown, **self.backoff
            )
        except redis.RedisError as exc:
            logger.warning("Could not record a failure of %s (%s)", host, exc)
            return
        if down:
            self.stats.inc_value("backoff/host_down")
            self._log(host, DOWN, "%s looks down (%s): every worker waits %.0f s, then probes it", host, why, delay)
        elif factor > 1:
            self.stats.inc_value("backoff/slowed")
            self._log(host, "slowed", "%s failing (%s): its interval is now x%.2f for every worker", host, why, factor)

    def _log(self, host: str, decision: str, msg: str, *args) -> None:
        """Log one line per host and decision per FAILURE_LOG_PERIOD; the next line
        says how many more there were meanwhile."""
        now = time.monotonic()
        entry = self._logged.get((host, decision))
        if entry is not None and now < entry[0]:
            entry[1] += 1
            return
        more = entry[1] if entry else 0
        if more:
            msg += " (and %d more like it in the last %.0f s)"
            args = (*args, more, self.log_period)
        logger.info(msg, *args)
        if len(self._logged) > 10_000:
            self._logged = {k: v for k, v in self._logged.items() if v[0] > now}
        self._logged[(host, decision)] = [now + self.log_period, 0]
