"""The crawl's content-seen index in Redis, shared by every worker: a page's body digest
(exact copies) and its MinHash sketch under LSH band keys (near copies), with the scripts
that look a page up and record it in one step: CONTENT_SEEN on one Redis
(``ContentIndex``), CONTENT_LOOKUP and CONTENT_RECORD spread over the shards of a sharded
crawl (``ShardedContentIndex``), whose verdicts are CONTENT_SEEN's (``near_verdict``).
The content-seen pipeline (crawler/pipelines/contentseen.py) asks it.
"""

from __future__ import annotations

import numpy as np

from crawler.contentseen.fingerprints import (
    Fingerprints,
    resemblance_of_matches,
)
from crawler.frontier.keys import NAMES

MAX_CANDIDATES = 64  # indexed pages compared per lookup, at most


# CONTENT_SEEN: has a page with this content been seen, by any worker? KEYS[1] the
# digest hash (``cdigest``: body digest -> first URL), KEYS[2] the sketches of indexed
# pages (``ndpage``: 4-byte page number -> sketch .. URL), KEYS[3] the page number
# counter (``ndseq``), KEYS[4..] the LSH bucket of each band of the page, in band order
# (``ndidx:<top 16 bits of the band key>``: 8-byte entries, the band key's next 32 bits
# and a page number). ARGV[1] body digest, ARGV[2] URL, ARGV[3] the page's sketch ('' for
# none: exact copies only), ARGV[4] the fewest agreeing sketch bytes of a near copy,
# ARGV[5] bucket capacity (entries), ARGV[6] the band tags (4 bytes per band, in band
# order), ARGV[7] the most candidates compared, ARGV[8] the page's capture (URL .. ' ' ..
# its fetch time in ms), what the digest hash keeps.
# Returns {1, first capture} for an exact copy (the capture of the first URL seen with
# the digest: ``URL ms``, or the URL alone as kept by older versions); else the page is recorded (its digest, its
# sketch and, in every bucket not yet full, its entries) and the script returns {2, URL,
# agreeing bytes} for a near copy (the indexed page whose sketch agrees most, if enough)
# or {0} for new content. A near copy is indexed too, so that a later copy of it finds
# it even when it is not near enough to the page it resembles; its digest names itself
# (its bytes are archived: exact copies of it point to it). A page seen again under its own
# URL (a recrawl) whose text did not change is not indexed again, and is compared only
# with the pages indexed before it (page numbers grow), so that it keeps its first
# verdict. A page is indexed only if one of its buckets has room (past about 16 million
# pages at the default cap, new pages are checked but no longer indexed).
# Atomic: of two workers with the same content, one is first.
# The buckets are scanned with a plain string.find for each tag (C speed), keeping
# matches at entry boundaries.
CONTENT_SEEN = r"""
local first = redis.call('HGET', KEYS[1], ARGV[1])
if first and first ~= ARGV[2] and string.sub(first, 1, #ARGV[2] + 1) ~= ARGV[2] .. ' ' then return {1, first} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[8])
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


# CONTENT_LOOKUP: one shard's part of the lookup. KEYS[1] the shard's digest hash
# (``cdigest``), KEYS[2..] the page's LSH buckets that live on this shard (``ndidx:``), in
# band order. ARGV[1] the body digest ('' when it lives on another shard), ARGV[2] URL,
# ARGV[3] the band tags of KEYS[2..] (4 bytes each, in KEYS order), ARGV[4] the most
# page numbers returned, ARGV[5] the page's capture (as CONTENT_SEEN's ARGV[8]).
# Returns {first capture} for an exact copy (the digest is here, first seen under another
# URL: nothing else is read); else the digest, if given, is recorded for this capture and the
# script returns {'', then for each bucket in KEYS order: its length (bytes), the page
# numbers of its entries with the band's tag (4 bytes each, concatenated; distinct over
# the call, at most ARGV[4] in all, scanned as in CONTENT_SEEN)}.
# Atomic on its shard: of two workers with the same digest, one is first.
CONTENT_LOOKUP = r"""
if ARGV[1] ~= '' then
    local first = redis.call('HGET', KEYS[1], ARGV[1])
    if first and first ~= ARGV[2] and string.sub(first, 1, #ARGV[2] + 1) ~= ARGV[2] .. ' ' then return {first} end
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
end
local tags, limit = ARGV[3], tonumber(ARGV[4])
local out, seen, found = {''}, {}, 0
for i = 2, #KEYS do
    local s = redis.call('GET', KEYS[i])
    local tag = string.sub(tags, (i - 2) * 4 + 1, (i - 2) * 4 + 4)
    local ids, at = {}, 1
    while s and found < limit do
        local j = string.find(s, tag, at, true)
        if not j then break end
        if (j - 1) % 8 == 0 then
            local id = string.sub(s, j + 4, j + 7)
            if not seen[id] then
                seen[id] = true
                found = found + 1
                ids[#ids + 1] = id
            end
            at = j + 8
        else
            at = j + 1
        end
    end
    out[#out + 1] = s and #s or 0
    out[#out + 1] = table.concat(ids)
end
return out
"""


# CONTENT_RECORD: one shard's part of indexing a page. KEYS[1] the page number counter
# (``ndseq``; drawn from on the first shard only), KEYS[2] the shard's page records
# (``ndpage``), KEYS[3..] the page's buckets that live on this shard. ARGV[1] the page
# number (4 bytes), or '' to draw the next one from KEYS[1], ARGV[2] the page's record
# (sketch .. URL) if it lives on this shard, else '', ARGV[3] bucket capacity (entries),
# ARGV[4] the band tags of KEYS[3..] (4 bytes each), ARGV[5] the page's entries already
# appended on other shards.
# Appends the page's entry (tag .. number) to each of KEYS[3..] that has room (as
# CONTENT_SEEN: room is judged before any append), then stores the record only if the
# page has an entry somewhere (here, or ARGV[5] > 0): a page in no bucket could never be
# found. Returns {page number, entries appended here}. Atomic on its shard.
CONTENT_RECORD = r"""
local id = ARGV[1]
if id == '' then id = struct.pack('>I4', redis.call('INCR', KEYS[1]) % 4294967296) end
local cap, tags = 8 * tonumber(ARGV[3]), ARGV[4]
local room = {}
for i = 3, #KEYS do
    if redis.call('STRLEN', KEYS[i]) < cap then room[#room + 1] = i end
end
for _, i in ipairs(room) do
    redis.call('APPEND', KEYS[i], string.sub(tags, (i - 3) * 4 + 1, (i - 3) * 4 + 4) .. id)
end
if ARGV[2] ~= '' and #room + tonumber(ARGV[5]) > 0 then redis.call('HSET', KEYS[2], id, ARGV[2]) end
return {id, #room}
"""


# ("exact" | "near", URL, resemblance, the first capture's fetch time in ms (exact copies;
# None when unknown)), None: new content
Verdict = tuple[str, str, float, int | None] | None


def capture(url: str, fetched_ms: int) -> str:
    """What the digest hash keeps of a page: its URL and fetch time (``exact`` reads it)."""
    return f"{url} {fetched_ms}"


def exact(first: bytes) -> Verdict:
    """The verdict of an exact copy from the digest hash's value (``URL ms`` or a URL)."""
    url, _, ms = first.decode().partition(" ")
    return "exact", url, 1.0, int(ms) if ms.isdigit() else None


class ContentIndex:
    """The index on one Redis (or one shard): CONTENT_SEEN, one round trip per page."""

    def __init__(self, redis_client, keys, need: int, bucket_size: int):
        self.redis, self.keys = redis_client, keys
        self.need, self.bucket_size = need, bucket_size
        self._script = redis_client.register_script(CONTENT_SEEN)

    def check(self, prints: Fingerprints, url: str, client=None, fetched_ms: int = 0) -> Verdict:
        """See ``ContentSeenPipeline.check``. With ``client`` (a pipeline), the call is
        only queued there and None returned."""
        if prints.sketch is None:
            buckets, sketch, tags = [], b"", b""
        else:
            buckets = [self.keys.near_bucket(key) for key in prints.bands]
            sketch, tags = prints.sketch, _tags(prints.bands)
        keys = [self.keys.content_digests, self.keys.near_pages, self.keys.near_seq, *buckets]
        args = [prints.digest, url, sketch, self.need, self.bucket_size, tags, MAX_CANDIDATES, capture(url, fetched_ms)]
        out = self._script(keys=keys, args=args, client=client)
        if client is not None:
            return None
        if out[0] == 1:
            return exact(out[1])
        if out[0] == 2:
            return "near", out[1].decode(), resemblance_of_matches(int(out[2])), None
        return None


class ShardedContentIndex:
    """The index spread over the shards of a sharded crawl (crawler/frontier/shards.py),
    placed by the frontier's ring, so that its memory and its work spread as the hosts'
    do: a body digest on its digest's shard, an LSH bucket on its bucket's, a page's
    record (sketch and URL) once, on its page number's shard; the page number counter on
    the first shard, so that numbers grow over the whole crawl. A check takes up to three
    steps, each one call (one script or command) on each shard concerned, through the
    frontier's down-shard guard:

    1. look up (CONTENT_LOOKUP): the digest's shard first (an exact copy ends the check
       there), then each other shard holding one of the page's buckets: the page numbers
       of the candidates and the buckets' lengths;
    2. fetch the candidates' records, grouped by shard, and compare the sketches here by
       CONTENT_SEEN's rule (``near_verdict``: the same candidates, at most
       MAX_CANDIDATES, the same resemblance, the recrawl rule);
    3. index a new page (CONTENT_RECORD): its number drawn on the first shard, its
       entries appended to its buckets that have room, its record stored last, on its
       number's shard, once an entry of it exists.

    A page's verdicts are CONTENT_SEEN's when the pages before it were checked before it
    began. Each step is atomic on its shard, the whole is not: of two workers with the
    same digest one is first, but two near copies checked at the same moment may both
    find nothing and both be indexed as new (a missed near copy). A mark never points the
    wrong way: a page's number is drawn after its lookup, and every entry its lookup found
    was appended after that page's number was drawn, so a page is only ever marked near a
    page with a lower number, and two pages are never marked near each other. A shard
    that fails (or is down: the guard answers at once) fails the check: the caller keeps
    the page as new. The ring places records as it places hosts: adding a server moves
    about 1/N of them, which are then not found (missed copies, not wrong ones).
    """

    def __init__(self, frontier, need: int, bucket_size: int):
        self.frontier = frontier
        self.need, self.bucket_size = need, bucket_size
        self._lookup_script = frontier.redis.register_script(CONTENT_LOOKUP)
        self._record_script = frontier.redis.register_script(CONTENT_RECORD)
        self._bucket_shards: dict[int, int] = {}

    # where each record lives: its name on the ring
    def digest_shard(self, digest: str) -> int:
        return self.frontier.content_shard(f"{NAMES['content_digests']}:{digest}")

    def bucket_shard(self, band_key: int) -> int:
        bucket = band_key >> 48  # the bucket of Keys.near_bucket
        s = self._bucket_shards.get(bucket)
        if s is None:
            s = self._bucket_shards[bucket] = self.frontier.content_shard(f"{NAMES['near_bucket']}{bucket:04x}")
        return s

    def page_shard(self, number: bytes) -> int:
        return self.frontier.content_shard(f"{NAMES['near_pages']}:{int.from_bytes(number, 'big')}")

    def check(self, prints: Fingerprints, url: str, client=None, fetched_ms: int = 0) -> Verdict:
        """See ``ContentSeenPipeline.check`` (no pipeline: a check calls several shards)."""
        if client is not None:
            raise TypeError("a sharded content-seen check cannot be queued on a pipeline")
        home = self.digest_shard(prints.digest)
        mine_at = capture(url, fetched_ms)
        if prints.sketch is None:
            first = self._lookup(home, prints.digest, url, [], mine_at)[0]
            return exact(first) if first else None
        bands: dict[int, list[int]] = {}  # shard -> the bands whose buckets it holds
        for b, key in enumerate(prints.bands):
            bands.setdefault(self.bucket_shard(key), []).append(b)
        lengths, found = [0] * len(prints.bands), [b""] * len(prints.bands)
        for s in [home, *(s for s in bands if s != home)]:
            mine = bands.get(s, [])
            out = self._lookup(s, prints.digest if s == home else "", url, [prints.bands[b] for b in mine], mine_at)
            if out[0]:
                return exact(out[0])
            for k, b in enumerate(mine):
                lengths[b], found[b] = int(out[1 + 2 * k]), out[2 + 2 * k]
        # the candidates in band order, distinct, at most MAX_CANDIDATES (as CONTENT_SEEN
        # takes them: each shard returned its first MAX_CANDIDATES, enough for that)
        numbers = list(dict.fromkeys(ids[i : i + 4] for ids in found for i in range(0, len(ids), 4)))
        own, best = near_verdict(self._candidates(numbers[:MAX_CANDIDATES], prints.sketch), url, self.need)
        if own is None and any(n < 8 * self.bucket_size for n in lengths):
            self._index(prints, url, bands)
        return None if best is None else ("near", best[1], resemblance_of_matches(best[0]), None)

    def _lookup(self, s: int, digest: str, url: str, band_keys: list[int], at: str) -> list:
        shard = self.frontier.shards[s]
        keys = [shard.keys.content_digests, *(shard.keys.near_bucket(k) for k in band_keys)]
        args = [digest, url, _tags(band_keys), MAX_CANDIDATES, at]
        return self.frontier.on_shard(s, lambda: self._lookup_script(keys=keys, args=args, client=shard.redis))

    def _candidates(self, numbers: list[bytes], sketch: bytes) -> list[tuple[int, int, str]]:
        """(page number, agreeing sketch bytes, URL) of each of ``numbers`` that has a
        record, in their order."""
        by_shard: dict[int, list[bytes]] = {}
        for n in numbers:
            by_shard.setdefault(self.page_shard(n), []).append(n)
        records: dict[bytes, bytes | None] = {}
        for s, ns in by_shard.items():
            shard = self.frontier.shards[s]
            got = self.frontier.on_shard(s, lambda shard=shard, ns=ns: shard.redis.hmget(shard.keys.near_pages, ns))
            records.update(zip(ns, got, strict=True))
        mine = np.frombuffer(sketch, dtype=np.uint8)
        out = []
        for n in numbers:
            record = records[n]
            if record is not None:
                agree = int(np.count_nonzero(np.frombuffer(record, dtype=np.uint8, count=len(sketch)) == mine))
                out.append((int.from_bytes(n, "big"), agree, record[len(sketch) :].decode()))
        return out

    def _index(self, prints: Fingerprints, url: str, bands: dict[int, list[int]]) -> None:
        # the number first, on the first shard (with its entries), then the entries of the
        # other shards, then the record on its number's shard, once an entry of it exists
        number, appended = self._record(0, b"", b"", [prints.bands[b] for b in bands.get(0, [])], 0)
        home = self.page_shard(number)
        for s, mine in bands.items():
            if s not in (0, home):
                appended += self._record(s, number, b"", [prints.bands[b] for b in mine], appended)[1]
        rest = [] if home == 0 else [prints.bands[b] for b in bands.get(home, [])]
        self._record(home, number, prints.sketch + url.encode(), rest, appended)

    def _record(self, s: int, number: bytes, record: bytes, band_keys: list[int], appended: int) -> tuple[bytes, int]:
        shard = self.frontier.shards[s]
        k = shard.keys
        keys = [k.near_seq, k.near_pages, *(k.near_bucket(key) for key in band_keys)]
        args = [number, record, self.bucket_size, _tags(band_keys), appended]
        out = self.frontier.on_shard(s, lambda: self._record_script(keys=keys, args=args, client=shard.redis))
        return out[0], int(out[1])


def near_verdict(candidates, url: str, need: int) -> tuple[int | None, tuple[int, str] | None]:
    """CONTENT_SEEN's rule on ``candidates`` ((page number, agreeing sketch bytes, URL),
    in the order found): (own, best). ``own``: the lowest number of a candidate with this
    URL that agrees in at least ``need`` bytes (the page indexed at its first visit: a
    recrawl, not indexed again), else None. ``best``: (agreeing bytes, URL) of the
    candidate of another URL that agrees most (the first found, on a tie), among those
    numbered below ``own`` when there is one, if it agrees in at least ``need`` bytes;
    else None."""
    own = None
    for number, agree, other in candidates:
        if other == url and agree >= need and (own is None or number < own):
            own = number
    best = None
    for number, agree, other in candidates:
        if other != url and (own is None or number < own) and (best is None or agree > best[0]):
            best = (agree, other)
    return own, (best if best is not None and best[0] >= need else None)


def _tags(band_keys) -> bytes:
    """The tag of each band key in its bucket's entries (its bits below the bucket's)."""
    return b"".join(((key >> 16) & 0xFFFFFFFF).to_bytes(4, "big") for key in band_keys)
