"""The fetch policy: a URL fetched recently is not fetched again (SpiderDuck's crawl decider).

Before the requests of a pop are handed to the engine, the scheduler asks ``skip`` which
of them not to fetch: one batch lookup in the UrlStore (``UrlStore.last_fetched``, a
read beside the SQLite writer, or one prepared read per URL sent at once to Cassandra)
for the URLs the frontier just leased. A URL whose last fetch with an answer is younger
than FETCH_POLICY_MAX_AGE (7 days; 0 turns the policy off) is skipped: the scheduler
acknowledges its lease and the engine never sees it. Each decision is counted in the
crawl stats and logged at debug level:

``fetchpolicy/skipped_recent``  not fetched: fetched within FETCH_POLICY_MAX_AGE
``fetchpolicy/forced``          fetched whatever its age: a submission with ``--force``
                                (``meta.FORCE``)
``fetchpolicy/recrawl``         fetched whatever its age: a due URL put back by the
                                recrawl (``meta.RECRAWL``; crawler/freshness/recrawl.py)
``fetchpolicy/lookup_failed``   the UrlStore did not answer: fetched (the policy saves
                                work; it never loses a page)

The two rules agree: the policy stops a URL found again (a link, a seed, a submission)
from being fetched before its age; the recrawl puts a URL back when its own schedule
says it is due (``next_fetch_at``, crawler/freshness/schedule.py), which may be sooner than
FETCH_POLICY_MAX_AGE for a page that changes often, so its requests pass.

Follow-ups (a redirect's next hop, a retry) are not looked up again: their URL's fetch is
already under way. With the archive on, a page counts as fetched only once its archive
pointer is recorded (``last_fetched(archived=True)``): a page whose worker died before its
WARC batch was stored comes back when its lease expires, and must be fetched again. The policy needs the UrlStore (URLSTORE_ENABLED); without it, it is off.
"""

from __future__ import annotations

import logging
import time

from crawler import meta
from crawler.services import services
from crawler.urlstore.backends import urlstore_from_settings

logger = logging.getLogger(__name__)

SKIPPED, FORCED, LOOKUP_FAILED = "fetchpolicy/skipped_recent", "fetchpolicy/forced", "fetchpolicy/lookup_failed"
RECRAWL = "fetchpolicy/recrawl"
_FOLLOW_UP_META = ("redirect_urls", meta.ATTEMPT, "backoff_retries")
WARN_EVERY = 60.0  # seconds between two warnings about a failed lookup


class FetchPolicy:
    def __init__(self, store, max_age: float, stats=None, archived: bool = True):
        self.store = store
        self.max_age = max_age
        self.stats = stats
        self.archived = archived  # a page counts as fetched once its archive pointer is there
        self._next_warning = 0.0

    @classmethod
    def from_crawler(cls, crawler) -> FetchPolicy | None:
        """The crawl's policy, or None when it is off (FETCH_POLICY_MAX_AGE 0, or no UrlStore)."""
        s = crawler.settings
        max_age = s.getfloat("FETCH_POLICY_MAX_AGE")
        if max_age <= 0 or not s.getbool("URLSTORE_ENABLED"):
            return None
        return cls(services(crawler).urlstore, max_age, crawler.stats, s.getbool("ARCHIVE_ENABLED"))

    @classmethod
    def reader(cls, settings) -> FetchPolicy | None:
        """The crawl's policy over its UrlStore opened read-only, for a program beside the
        workers (``scrapy submit``); None when it is off or the store cannot be read (no
        store yet: nothing known fetched). ``close`` it."""
        max_age = settings.getfloat("FETCH_POLICY_MAX_AGE")
        if max_age <= 0 or not settings.getbool("URLSTORE_ENABLED"):
            return None
        try:
            store = urlstore_from_settings(settings, readonly=True)
        except Exception:
            return None
        return cls(store, max_age, None, settings.getbool("ARCHIVE_ENABLED"))

    def close(self) -> None:
        self.store.close()

    def skip(self, requests, now: float | None = None) -> set[int]:
        """The positions in ``requests`` of those not to fetch (fetched within max_age)."""
        asked: dict[int, str] = {}
        for i, request in enumerate(requests):
            info = request.meta
            if info.get(meta.FORCE):
                self._inc(FORCED)
                logger.debug("Fetch policy: %s forced", request.url)
            elif meta.RECRAWL in info:
                self._inc(RECRAWL)
                logger.debug("Fetch policy: %s due for a recrawl", request.url)
            elif not any(key in info for key in _FOLLOW_UP_META):
                asked[i] = request.url
        if not asked:
            return set()
        try:
            young = self._young(list(asked.values()), now)
        except Exception as exc:  # the store is away: fetch, as without the policy
            self._inc(LOOKUP_FAILED, len(asked))
            now_m = time.monotonic()
            if now_m >= self._next_warning:
                self._next_warning = now_m + WARN_EVERY
                logger.warning("Fetch policy: UrlStore lookup failed (%s: %s); fetching", type(exc).__name__, exc)
            return set()
        skipped = set()
        for i, url in asked.items():
            if url in young:
                skipped.add(i)
                self._inc(SKIPPED)
                logger.debug("Fetch policy: %s not fetched: fetched %.0f s ago", url, young[url])
        return skipped

    def recent(self, urls: list[str], now: float | None = None) -> set[str]:
        """Those of ``urls`` fetched within max_age (none when the store does not answer):
        a submission of one of the others, seen by the crawl, is still queued."""
        try:
            return set(self._young(urls, now))
        except Exception:
            return set()

    def _young(self, urls: list[str], now: float | None) -> dict[str, float]:
        """Those of ``urls`` fetched within max_age, with how long ago (seconds): one
        UrlStore look-up; its error raised."""
        fetched = self.store.last_fetched(urls, archived=self.archived)
        now = time.time() if now is None else now
        return {url: now - at for url in urls if (at := fetched.get(url)) is not None and now - at < self.max_age}

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, count)
