"""Content seen: is this page's content one the crawl already has, whichever worker
fetched it? The first pipeline.

- **Exact copies:** the SHA-1 of the body, in a Redis hash shared by all workers
  (digest -> the first URL seen with it). An exact copy gets ``duplicate_of`` (that URL,
  which becomes its canonical_url in the UrlStore); it is not archived again and its links
  are not followed again.
- **Near copies:** pages whose main text is mostly the same (crawler/contentseen/fingerprints.py:
  the words of the text without the site's frame, stop words left out, in a MinHash
  sketch). An LSH index in Redis proposes the pages that share a band of the sketch; a
  candidate is a near copy only if the two sketches give a resemblance (the share of
  words in common) of at least CONTENT_SEEN_RESEMBLANCE (0.9). A near copy gets ``near_duplicate_of`` (the
  indexed page it resembles most) and ``resemblance``; it is archived like any page (its
  bytes differ), and its links are followed unless CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES
  is off.

On one Redis, both checks and the recording of a new page are one atomic script
(CONTENT_SEEN), one round trip per page. In a sharded crawl (REDIS_URLS, a Redis Cluster)
the index is spread over the shards by the frontier's ring (``ShardedContentIndex``): a
digest on its digest's shard, a bucket on its bucket's, a page's sketch once, on its page
number's; a check asks each shard its part (a few calls per page, each one script or
command on one shard). Only successful (2xx) HTML pages are looked at. Pages of fewer
than CONTENT_SEEN_MIN_WORDS words of main text are checked for exact copies only: a few
changed words are a large share of a short text, and a short sketch is a noisy one.
Buckets hold at most CONTENT_SEEN_BUCKET_SIZE entries each; a lookup compares at most
MAX_CANDIDATES indexed pages.

The page's fingerprints (digest, main text, sketch) come with the Page when the broad
spider read it (crawler/page/reader.py); any other page is read here, in a page worker
process (crawler/page/workers.py). A page that kills its worker is checked for exact
copies only (``contentseen/unreadable``).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import redis
from redis.exceptions import RedisClusterException
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

from crawler.contentseen.fingerprints import (
    Fingerprints,
    body_digest,
    digest_only,
    matches_for,
    page_fingerprints,
)
from crawler.contentseen.index import ContentIndex, ShardedContentIndex, Verdict
from crawler.frontier.shards import ShardedFrontier
from crawler.items import Page
from crawler.page.headers import header
from crawler.page.workers import PageWorkerCrashed
from crawler.services import services

logger = logging.getLogger(__name__)

_HTML_TYPES = (b"text/html", b"application/xhtml")


# -- a sharded crawl (ShardedContentIndex): one shard's part of a check in each script ----


class ContentSeenPipeline:
    def __init__(self, crawler, frontier, resemblance: float, bucket_size: int, min_words: int = 100):
        self.stats = crawler.stats
        self.pages = services(crawler).pages  # (the spider's reading of a page)
        need = matches_for(resemblance)
        if isinstance(frontier, ShardedFrontier) and len(frontier.shards) > 1:
            self.index = ShardedContentIndex(frontier, need, bucket_size)
        else:  # one Redis (or one shard): one atomic script
            self.index = ContentIndex(frontier.redis, frontier.keys, need, bucket_size)
        self.redis, self.keys = frontier.redis, frontier.keys  # (the first shard's, when sharded)
        self.min_words = min_words
        self.workers = services(crawler).page_workers

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("CONTENT_SEEN_ENABLED"):
            raise NotConfigured
        return cls(
            crawler,
            services(crawler).frontier,
            s.getfloat("CONTENT_SEEN_RESEMBLANCE"),
            s.getint("CONTENT_SEEN_BUCKET_SIZE"),
            s.getint("CONTENT_SEEN_MIN_WORDS"),
        )

    def open_spider(self, spider=None):
        self.workers.start()

    def _read_by_spider(self, item) -> Fingerprints | None:
        """The fingerprints the broad spider's reading of the page brought (crawler/page/reader.py)."""
        reading = self.pages.reading(item)
        return None if reading is None else reading.prints

    async def process_item(self, item, spider=None):
        if not isinstance(item, Page) or not _is_html_page(item):
            return item
        body = item["body"]
        prints = self._read_by_spider(item)
        if prints is None:
            try:  # parsing and hashing in a page worker (crawler/page/workers.py)
                prints = await maybe_deferred_to_future(self.workers.run(page_fingerprints, body, self.min_words))
            except PageWorkerCrashed:  # the page killed its worker: exact copies only
                self.stats.inc_value("contentseen/unreadable")
                prints = digest_only(body_digest(body))
        # the Redis round trips wait in a thread; the item and the stats are touched here
        fetched_ms = int((item.get("fetched_at") or 0) * 1000)
        seen = await maybe_deferred_to_future(threads.deferToThread(self.examine, prints, item["url"], fetched_ms))
        return self._mark(item, seen)

    def process_now(self, item):
        """``process_item`` in the calling thread (tests, benchmarks)."""
        if not isinstance(item, Page) or not _is_html_page(item):
            return item
        prints = self._read_by_spider(item) or page_fingerprints(item["body"], self.min_words)
        return self._mark(item, self.examine(prints, item["url"], int((item.get("fetched_at") or 0) * 1000)))

    def examine(self, prints: Fingerprints, url: str, fetched_ms: int = 0) -> Seen:
        """The verdict on a page's fingerprints (no stats, no item: safe in any thread)."""
        try:
            verdict = self.check(prints, url, fetched_ms=fetched_ms)
        except (redis.RedisError, RedisClusterException) as exc:
            return Seen(prints, None, exc)
        return Seen(prints, verdict)

    def check(self, prints: Fingerprints, url: str, client=None, fetched_ms: int = 0) -> Verdict:
        """("exact", first URL, 1.0, its fetch time in ms or None) or ("near", URL,
        resemblance, None) for a copy, None for new content (now recorded, as fetched at
        ``fetched_ms``). Raises redis.RedisError. With ``client`` (a pipeline; one Redis
        only), the call is only queued there and None returned."""
        return self.index.check(prints, url, client, fetched_ms)

    def _mark(self, item, seen: Seen):
        item["content_digest"] = f"sha1:{seen.prints.digest}"
        item["simhash"] = seen.prints.simhash
        if seen.error is not None:  # Redis away: the page is kept as new, counted
            self.stats.inc_value("contentseen/redis_errors")
            logger.warning("Content-seen check of %s skipped: Redis unavailable (%s)", item["url"], seen.error)
        elif seen.verdict is None:
            self.stats.inc_value("contentseen/new")
        elif seen.verdict[0] == "exact":
            item["duplicate_of"] = seen.verdict[1]
            if seen.verdict[3]:
                item["duplicate_fetched_at"] = seen.verdict[3] / 1000
            self.stats.inc_value("contentseen/exact")
            logger.debug("%s is a copy of %s", item["url"], seen.verdict[1])
        else:
            _, first, similar, _ = seen.verdict
            item["near_duplicate_of"] = first
            item["resemblance"] = round(similar, 3)
            self.stats.inc_value("contentseen/near")
            logger.debug("%s is a near copy of %s (resemblance %.3f)", item["url"], first, similar)
        return item


class Seen(NamedTuple):
    prints: Fingerprints
    verdict: Verdict
    error: Exception | None = None  # the Redis error that left the page unchecked


def _is_html_page(item) -> bool:
    status = item.get("status")
    if not isinstance(status, int) or not 200 <= status < 300 or not item.get("body"):
        return False
    ctype = (header(item.get("headers"), "Content-Type") or "").encode().lower()
    return any(t in ctype for t in _HTML_TYPES) if ctype else item["body"].lstrip()[:1] == b"<"
