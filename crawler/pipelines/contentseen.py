"""Content seen: is this page's content one the crawl already has, whichever worker
fetched it? The first pipeline.

- Exact duplicates: the SHA-1 of the body, in a Redis hash shared by all workers
  (digest -> the first URL seen with it).
- Near duplicates: a 64-bit SimHash of the page's visible text (every word votes;
  fingerprints.text_simhash), looked up in a Redis index with the block scheme of simhash's SimhashIndex
  (crawler/fingerprints.py): any earlier page within Hamming distance
  CONTENT_SEEN_DISTANCE (3) shares one of the k + 1 blocks, so one script call finds it.

Both tests and the recording of a new page are one atomic script (scripts.CONTENT_SEEN),
one round trip per page. A duplicate gets ``duplicate_of`` (the first URL, which becomes
its canonical_url in the UrlStore) and ``duplicate_kind`` ("exact" or "near"); later
pipelines do not archive it again. Only successful (2xx) HTML pages are looked at.
Pages of fewer than CONTENT_SEEN_MIN_WORDS words are checked for exact duplicates only:
on a short page a few words of boilerplate decide the SimHash, and unrelated short pages
would pass for near duplicates. Index buckets hold at most CONTENT_SEEN_BUCKET_SIZE entries each (a block value shared
by very many pages stops being indexed rather than making every lookup slow).

The page is read (digest, visible text, SimHash) in a page worker process
(crawler/pageworkers.py); a page that kills its worker is checked for exact copies only
(``contentseen/unreadable``).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import redis
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

from crawler.fingerprints import block_keys, body_digest, page_fingerprints
from crawler.frontier.connection import frontier_from_settings
from crawler.frontier.scripts import CONTENT_SEEN
from crawler.items import Page
from crawler.pageworkers import PageWorkerCrashed, PageWorkers

logger = logging.getLogger(__name__)

_HTML_TYPES = (b"text/html", b"application/xhtml")


class ContentSeenPipeline:
    def __init__(self, crawler, redis_client, keys, distance: int, bucket_size: int, min_words: int = 50):
        self.stats = crawler.stats
        self.redis = redis_client
        self.keys = keys
        self.k = distance
        self.bucket_size = bucket_size
        self.min_words = min_words
        self._script = redis_client.register_script(CONTENT_SEEN)
        self.workers = PageWorkers.from_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("CONTENT_SEEN_ENABLED"):
            raise NotConfigured
        frontier = frontier_from_settings(s)
        return cls(
            crawler,
            frontier.redis,
            frontier.keys,
            s.getint("CONTENT_SEEN_DISTANCE"),
            s.getint("CONTENT_SEEN_BUCKET_SIZE"),
            s.getint("CONTENT_SEEN_MIN_WORDS"),
        )

    def open_spider(self, spider=None):
        self.workers.start()

    async def process_item(self, item, spider=None):
        if not isinstance(item, Page) or not _is_html_page(item):
            return item
        body = item["body"]
        try:  # parsing and hashing in a page worker (crawler/pageworkers.py)
            digest, value = await maybe_deferred_to_future(self.workers.run(page_fingerprints, body, self.min_words))
        except PageWorkerCrashed:  # the page killed its worker: exact copies only
            self.stats.inc_value("contentseen/unreadable")
            digest, value = body_digest(body), None
        # the Redis round trip waits in a thread; the item and the stats are touched here
        seen = await maybe_deferred_to_future(threads.deferToThread(self.examine, digest, item["url"], value))
        return self._mark(item, seen)

    def process_now(self, item):
        """``process_item`` in the calling thread (tests, benchmarks)."""
        if not isinstance(item, Page) or not _is_html_page(item):
            return item
        digest, value = page_fingerprints(item["body"], self.min_words)
        return self._mark(item, self.examine(digest, item["url"], value))

    def examine(self, digest: str, url: str, value: int | None) -> Seen:
        """The verdict on a page's digest and SimHash (no stats, no item: safe in any thread)."""
        try:
            verdict = self.check(digest, url, value)
        except redis.RedisError as exc:
            return Seen(digest, value, None, exc)
        return Seen(digest, value, verdict)

    def check(self, digest: str, url: str, value: int | None) -> tuple[str, str, int] | None:
        """("exact" | "near", first URL, distance) for a duplicate, None for new content
        (now recorded). Raises redis.RedisError."""
        buckets = [self.keys.simhash_bucket(key) for key in block_keys(value, self.k)] if value is not None else []
        packed = value.to_bytes(8, "big") if value is not None else b""
        args = [digest, url, packed, self.k, self.bucket_size]
        out = self._script(keys=[self.keys.content_digests, self.keys.simhash_owners, *buckets], args=args)
        if out[0] == 1:
            return "exact", out[1].decode(), 0
        if out[0] == 2:
            return "near", out[1].decode(), int(out[2])
        return None

    def _mark(self, item, seen: Seen):
        item["content_digest"] = f"sha1:{seen.digest}"
        item["simhash"] = seen.simhash
        if seen.error is not None:  # Redis away: the page is kept as new, counted
            self.stats.inc_value("contentseen/redis_errors")
            logger.warning("Content-seen check of %s skipped: Redis unavailable (%s)", item["url"], seen.error)
        elif seen.verdict is not None:
            kind, first, dist = seen.verdict
            item["duplicate_of"] = first
            item["duplicate_kind"] = kind
            self.stats.inc_value(f"contentseen/{kind}")
            logger.debug("%s duplicates %s (%s, distance %d)", item["url"], first, kind, dist)
        else:
            self.stats.inc_value("contentseen/new")
        return item


class Seen(NamedTuple):
    digest: str  # hex SHA-1 of the body
    simhash: int | None
    verdict: tuple[str, str, int] | None  # ("exact" | "near", first URL, distance), None: new
    error: Exception | None = None  # the Redis error that left the page unchecked


def _is_html_page(item) -> bool:
    status = item.get("status")
    if not isinstance(status, int) or not 200 <= status < 300 or not item.get("body"):
        return False
    ctype = ",".join((item.get("headers") or {}).get("Content-Type", [])).encode().lower()
    return any(t in ctype for t in _HTML_TYPES) if ctype else item["body"].lstrip()[:1] == b"<"
