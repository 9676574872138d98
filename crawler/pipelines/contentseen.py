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

The page's fingerprints (digest, main text, sketch) come with the Page when the broad
spider read it (crawler/pagereader.py); any other page is read here, in a page worker
process (crawler/pageworkers.py). A page that kills its worker is checked for exact
copies only (``contentseen/unreadable``).
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
from crawler.items import Page
from crawler.pageworkers import PageWorkerCrashed, PageWorkers

logger = logging.getLogger(__name__)

_HTML_TYPES = (b"text/html", b"application/xhtml")
MAX_CANDIDATES = 64  # indexed pages compared per lookup, at most

# CONTENT_SEEN: has a page with this content been seen, by any worker? KEYS[1] the
# digest hash (``cdigest``: body digest -> first URL), KEYS[2] the sketches of indexed
# pages (``ndpage``: 4-byte page number -> sketch .. URL), KEYS[3] the page number
# counter (``ndseq``), KEYS[4..] the LSH bucket of each band of the page, in band order
# (``ndidx:<top 16 bits of the band key>``: 8-byte entries, the band key's next 32 bits
# and a page number). ARGV[1] body digest, ARGV[2] URL, ARGV[3] the page's sketch ('' for
# none: exact copies only), ARGV[4] the fewest agreeing sketch bytes of a near copy,
# ARGV[5] bucket capacity (entries), ARGV[6] the band tags (4 bytes per band, in band
# order), ARGV[7] the most candidates compared.
# Returns {1, first URL} for an exact copy; else the page is recorded (its digest, its
# sketch and, in every bucket not yet full, its entries) and the script returns {2, URL,
# agreeing bytes} for a near copy (the indexed page whose sketch agrees most, if enough)
# or {0} for new content. A near copy is indexed too, so that a later copy of it finds
# it even when it is not near enough to the page it resembles; its digest names itself
# (its bytes are archived: exact copies of it point to it). A page seen again under its own
# URL (a recrawl) whose text did not change is not indexed again, and is compared only
# with the pages indexed before it (page numbers grow), so that it keeps its first
# verdict. A page is indexed only if one of its buckets has room (past about 16 million
# pages per Redis at the default cap, new pages are checked but no longer indexed).
# Atomic: of two workers with the same content, one is first.
# The buckets are scanned with a plain string.find for each tag (C speed), keeping
# matches at entry boundaries.
CONTENT_SEEN = r"""
local first = redis.call('HGET', KEYS[1], ARGV[1])
if first and first ~= ARGV[2] then return {1, first} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local sketch = ARGV[3]
if sketch == '' then return {0} end
local need, cap, tags, limit = tonumber(ARGV[4]), 8 * tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local bins = #sketch
local mine = {string.byte(sketch, 1, bins)}
local function tag_of(i) return string.sub(tags, (i - 4) * 4 + 1, (i - 4) * 4 + 4) end
local compared, checked, others = {}, 0, {}
local own = nil
for i = 4, #KEYS do
    local s = redis.call('GET', KEYS[i])
    local tag = tag_of(i)
    local at = 1
    while s and checked < limit do
        local j = string.find(s, tag, at, true)
        if not j then break end
        if (j - 1) % 8 == 0 then
            local id = string.sub(s, j + 4, j + 7)
            if not compared[id] then
                compared[id] = true
                checked = checked + 1
                local page = redis.call('HGET', KEYS[2], id)
                if page then
                    local theirs = {string.byte(page, 1, bins)}
                    local m = 0
                    for b = 1, bins do
                        if theirs[b] == mine[b] then m = m + 1 end
                    end
                    local url = string.sub(page, bins + 1)
                    local n = struct.unpack('>I4', id)
                    if url ~= ARGV[2] then
                        others[#others + 1] = {n, m, url}
                    elseif m >= need and (own == nil or n < own) then
                        own = n
                    end
                end
            end
            at = j + 8
        else
            at = j + 1
        end
    end
end
local best, best_url = -1, nil
for _, c in ipairs(others) do
    -- a recrawl is compared with the pages indexed before its first visit only
    if c[2] > best and (own == nil or c[1] < own) then best, best_url = c[2], c[3] end
end
if own == nil then
    local room = {}
    for i = 4, #KEYS do
        if redis.call('STRLEN', KEYS[i]) < cap then room[#room + 1] = i end
    end
    if #room > 0 then  -- a page in no bucket could never be found: not recorded
        local id = struct.pack('>I4', redis.call('INCR', KEYS[3]) % 4294967296)
        redis.call('HSET', KEYS[2], id, sketch .. ARGV[2])
        for _, i in ipairs(room) do
            redis.call('APPEND', KEYS[i], tag_of(i) .. id)
        end
    end
end
if best >= need then return {2, best_url, best} end
return {0}
"""


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
        prints = _read_by_spider(item)
        if prints is None:
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
        prints = _read_by_spider(item) or page_fingerprints(item["body"], self.min_words)
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


def _read_by_spider(item) -> Fingerprints | None:
    """The fingerprints the broad spider's reading of the page brought (crawler/pagereader.py)."""
    reading = getattr(item, "_reading", None)
    return None if reading is None else reading.prints


def _is_html_page(item) -> bool:
    status = item.get("status")
    if not isinstance(status, int) or not 200 <= status < 300 or not item.get("body"):
        return False
    ctype = ",".join((item.get("headers") or {}).get("Content-Type", [])).encode().lower()
    return any(t in ctype for t in _HTML_TYPES) if ctype else item["body"].lstrip()[:1] == b"<"
