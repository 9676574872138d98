"""Content seen: is this page's content one the crawl already has, whichever worker
fetched it? The first pipeline.

- **Exact copies:** the SHA-1 of the body, in a Redis hash shared by all workers
  (digest -> the first URL seen with it). An exact copy gets ``duplicate_of`` (that URL,
  which becomes its canonical_url in the UrlStore); it is not archived again and its links
  are not followed again.
- **Near copies:** pages whose main text is mostly the same (crawler/fingerprints.py:
  the words of the text without the site's frame, stop words left out, in a MinHash
  sketch). An LSH index in Redis proposes the pages that share a band of the sketch; a
  candidate is a near copy only if the two sketches give a resemblance (the share of
  words in common) of at least CONTENT_SEEN_RESEMBLANCE (0.9). A near copy gets ``near_duplicate_of`` (the
  indexed page it resembles most) and ``resemblance``; it is archived like any page (its
  bytes differ), and its links are followed unless CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES
  is off.

Both checks and the recording of a new page are one atomic script (scripts.CONTENT_SEEN),
one round trip per page. Only successful (2xx) HTML pages are looked at. Pages of fewer
than CONTENT_SEEN_MIN_WORDS words of main text are checked for exact copies only: a few
changed words are a large share of a short text, and a short sketch is a noisy one.
Buckets hold at most CONTENT_SEEN_BUCKET_SIZE entries each; a lookup compares at most
MAX_CANDIDATES indexed pages.

The page is read (digest, main text, sketch) in a page worker process
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

from crawler.fingerprints import Fingerprints, body_digest, matches_for, page_fingerprints, resemblance_of_matches
from crawler.frontier.connection import crawler_frontier
from crawler.frontier.scripts import CONTENT_SEEN
from crawler.items import Page
from crawler.pageworkers import PageWorkerCrashed, PageWorkers

logger = logging.getLogger(__name__)

_HTML_TYPES = (b"text/html", b"application/xhtml")
MAX_CANDIDATES = 64  # indexed pages compared per lookup, at most


class ContentSeenPipeline:
    def __init__(self, crawler, redis_client, keys, resemblance: float, bucket_size: int, min_words: int = 100):
        self.stats = crawler.stats
        self.redis = redis_client
        self.keys = keys
        self.need = matches_for(resemblance)
        self.bucket_size = bucket_size
        self.min_words = min_words
        self._script = redis_client.register_script(CONTENT_SEEN)
        self.workers = PageWorkers.from_crawler(crawler)

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("CONTENT_SEEN_ENABLED"):
            raise NotConfigured
        frontier = crawler_frontier(crawler)
        return cls(
            crawler,
            frontier.redis,
            frontier.keys,
            s.getfloat("CONTENT_SEEN_RESEMBLANCE"),
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
            prints = await maybe_deferred_to_future(self.workers.run(page_fingerprints, body, self.min_words))
        except PageWorkerCrashed:  # the page killed its worker: exact copies only
            self.stats.inc_value("contentseen/unreadable")
            prints = Fingerprints(body_digest(body), 0, None, None, None)
        # the Redis round trip waits in a thread; the item and the stats are touched here
        seen = await maybe_deferred_to_future(threads.deferToThread(self.examine, prints, item["url"]))
        return self._mark(item, seen)

    def process_now(self, item):
        """``process_item`` in the calling thread (tests, benchmarks)."""
        if not isinstance(item, Page) or not _is_html_page(item):
            return item
        prints = page_fingerprints(item["body"], self.min_words)
        return self._mark(item, self.examine(prints, item["url"]))

    def examine(self, prints: Fingerprints, url: str) -> Seen:
        """The verdict on a page's fingerprints (no stats, no item: safe in any thread)."""
        try:
            verdict = self.check(prints, url)
        except redis.RedisError as exc:
            return Seen(prints, None, exc)
        return Seen(prints, verdict)

    def check(self, prints: Fingerprints, url: str, client=None) -> tuple[str, str, float] | None:
        """("exact", first URL, 1.0) or ("near", URL, resemblance) for a copy, None for
        new content (now recorded). Raises redis.RedisError. With ``client`` (a
        pipeline), the call is only queued there and None returned."""
        if prints.sketch is None:
            buckets, sketch, tags = [], b"", b""
        else:
            buckets = [self.keys.near_bucket(key) for key in prints.bands]
            sketch = prints.sketch
            tags = b"".join(((key >> 16) & 0xFFFFFFFF).to_bytes(4, "big") for key in prints.bands)
        keys = [self.keys.content_digests, self.keys.near_pages, self.keys.near_seq, *buckets]
        args = [prints.digest, url, sketch, self.need, self.bucket_size, tags, MAX_CANDIDATES]
        out = self._script(keys=keys, args=args, client=client)
        if client is not None:
            return None
        if out[0] == 1:
            return "exact", out[1].decode(), 1.0
        if out[0] == 2:
            return "near", out[1].decode(), resemblance_of_matches(int(out[2]))
        return None

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
            self.stats.inc_value("contentseen/exact")
            logger.debug("%s is a copy of %s", item["url"], seen.verdict[1])
        else:
            _, first, similar = seen.verdict
            item["near_duplicate_of"] = first
            item["resemblance"] = round(similar, 3)
            self.stats.inc_value("contentseen/near")
            logger.debug("%s is a near copy of %s (resemblance %.3f)", item["url"], first, similar)
        return item


class Seen(NamedTuple):
    prints: Fingerprints
    verdict: tuple[str, str, float] | None  # ("exact" | "near", URL, resemblance), None: new
    error: Exception | None = None  # the Redis error that left the page unchecked


def _is_html_page(item) -> bool:
    status = item.get("status")
    if not isinstance(status, int) or not 200 <= status < 300 or not item.get("body"):
        return False
    ctype = ",".join((item.get("headers") or {}).get("Content-Type", [])).encode().lower()
    return any(t in ctype for t in _HTML_TYPES) if ctype else item["body"].lstrip()[:1] == b"<"
