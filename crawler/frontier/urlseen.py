"""Sizing of the URL-seen filter and the hashes of a URL (no I/O here).

URL-seen remembers every URL the crawl admitted, in Redis, at a bounded false-positive
rate. It is a filter of 4-byte fingerprints, split into buckets (a quotient filter's
idea), not a Bloom filter: a Bloom filter is allocated at its capacity (3.6 bytes per URL
when full at 1e-6, so 7.2 when half full and ~2x that after each growth), while this one
costs the same ~4.5 bytes per URL whatever its fill, because a bucket grows with the URLs
it holds.

A bucket is a Redis set of integers (``SETS``): Redis keeps a set of 32-bit integers of
at most ``set-max-intset-entries`` members (512 unless configured) as a sorted array of
4-byte integers (an intset), so that PUSH adds a fingerprint and learns whether it was
there with one SADD, and looks an older generation up with one SISMEMBER, its binary
search in Redis, where a string bucket (``STRINGS``, the crawls that recorded their layout
before) is read whole into the script, searched there and written back whole. A set's
bucket holds SET_BUCKET_MOST fingerprints on average when its generation is full (so that
chance does not take one past 512, which would make it a hash table, ten times larger);
a server configured for fewer keeps string buckets (``kind_for``).

A URL's two 32-bit hashes are pybloom-live's (``make_hashfuncs(2, 2**32)``: the two
64-bit halves of a salted XXH3-128 digest of its UTF-8 bytes, each mod 2**32), computed
here in one call (tests/unit/test_urlseen.py holds the two equal): ``h``
picks the bucket, ``f`` is the fingerprint kept in it (PUSH is sent each generation's
bucket number and ``f - 2**31``, a signed 32-bit number: the one an intset keeps in 4
bytes; ``hashes_text``). Generation ``i`` takes
``capacity * growth**i`` URLs in ``buckets_i`` buckets (``seen:<i>:<h mod buckets_i>``);
when it has taken its capacity, generation ``i+1`` starts, and a URL is seen if any
generation's bucket for it holds its fingerprint. An unseen URL is wrongly taken for seen
in generation ``i`` when its bucket there holds its fingerprint by chance: at most
``per_bucket / 2**32``, with ``per_bucket = capacity_i / buckets_i`` (the bucket's URLs
when the generation is full). The error budget is shared so that the sum over all
generations stays below the configured rate: the first ``PLANNED`` generations (those
that hold up to 100x the capacity) get equal shares, later ones halve theirs each time.
Equal shares keep the buckets of every planned generation equally large, so the
per-bucket cost of a Redis key (~50 bytes) and of its allocation (~8%) stays small.
A bucket holds at least one URL's share, so no generation's bound is below 1 / 2**32:
far past the planned generations (thousands of times the capacity), or at an error rate
below ~1e-8, the bound is that floor, and small buckets cost more bytes per URL.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import xxhash

FINGERPRINT_BYTES = 4
HASH_SPACE = 1 << 32  # both hashes are 32-bit
PLANNED_GROWTH = 100  # the generations holding up to this many times the capacity share the budget equally
SETS, STRINGS = "sets", "strings"  # a layout's kind of bucket (see above)
INTSET_MOST = 512  # Redis's set-max-intset-entries unless configured
SET_BUCKET_MOST = 384  # fingerprints a set's bucket holds on average when its generation is full (6 sigma under 512)
SIGNED = 1 << 31  # PUSH is sent f - SIGNED

# pybloom-live's first hash function is XXH3-128 fed this salt (the digest of
# struct.pack("I", 0)) and then the key: the digest of salt + key
_SALT = xxhash.xxh128(struct.pack("I", 0)).digest()
_digest = xxhash.xxh128_digest
_halves = struct.Struct("QQ").unpack  # (native order, as pybloom-live unpacks them)
_LOW = HASH_SPACE - 1


def url_hashes(url: str) -> tuple[int, int]:
    """``(h, f)``: the bucket hash and the fingerprint of ``url`` (two 32-bit numbers)."""
    a, b = _halves(_digest(_SALT + url.encode()))
    return a & _LOW, b & _LOW


def hashes_text(url: str, buckets: tuple[int, ...]) -> str:
    """``url_hashes(url)`` as PUSH reads them, for generations with ``buckets`` buckets each
    (0 first): ``"b0,b1,... s"``, the URL's bucket in each generation (``h mod buckets_i``)
    and the fingerprint as a signed 32-bit number (``s = f - 2**31``), all decimal. The
    script builds each bucket's key from its number as sent (in the script, a number's
    decimal text would cost Lua 5.1 a ``sprintf`` a URL)."""
    a, b = _halves(_digest(_SALT + url.encode()))
    h = a & _LOW
    if len(buckets) == 1:
        return f"{h % buckets[0]} {(b & _LOW) - SIGNED}"
    return ",".join([str(h % n) for n in buckets]) + f" {(b & _LOW) - SIGNED}"


def kind_for(intset_most: int | None) -> str:
    """The kind of bucket a new crawl's URL-seen takes on a server that keeps sets of
    ``intset_most`` integers as intsets (``set-max-intset-entries``; None: not known, the
    default): sets when its full buckets fit, else strings."""
    return SETS if intset_most is None or intset_most >= INTSET_MOST else STRINGS


@dataclass(frozen=True)
class Generation:
    capacity: int  # URLs it takes before the next generation starts
    buckets: int
    error_rate: float  # its share of the error budget (the bound when it is full)

    def fill(self, count: int) -> float:
        return count / self.capacity

    def false_positive_rate(self, count: int) -> float:
        """The chance that an unseen URL is taken for seen here, with ``count`` URLs in."""
        return min(1.0, count / self.buckets / HASH_SPACE)


def planned_generations(growth: int) -> int:
    """Generations whose capacities add up to PLANNED_GROWTH x the first one's."""
    total, n = 0, 0
    while total < PLANNED_GROWTH:
        total += growth**n
        n += 1
    return n


def generation(capacity: int, error_rate: float, index: int, growth: int = 4, kind: str = SETS) -> Generation:
    """The shape of generation ``index`` (of sets: buckets enough that, full, they hold
    SET_BUCKET_MOST fingerprints on average or fewer)."""
    if capacity < 1 or not 0 < error_rate < 1 or growth < 2:
        raise ValueError("URL-seen capacity must be >= 1, error rate in (0, 1) and growth >= 2")
    planned = planned_generations(growth)
    share = error_rate / (planned + 1)
    if index >= planned:
        share /= 2 ** (index - planned + 1)
    cap = capacity * growth**index
    per_bucket = max(share * HASH_SPACE, 1.0)
    if kind == SETS:
        per_bucket = min(per_bucket, SET_BUCKET_MOST)
    return Generation(capacity=cap, buckets=math.ceil(cap / per_bucket), error_rate=share)


class SeenLayout:
    """The generations of one URL-seen filter (capacity, error rate, growth)."""

    def __init__(self, capacity: int, error_rate: float, growth: int = 4, kind: str = SETS):
        if kind not in (SETS, STRINGS):
            raise ValueError(f"URL-seen buckets are {SETS} or {STRINGS}, not {kind!r}")
        self.capacity, self.error_rate, self.growth, self.kind = capacity, error_rate, growth, kind
        self._generations: list[Generation] = []

    def spelled(self) -> str:
        """How the crawl records it (seen:meta's ``layout``): ``capacity error_rate growth``
        and the kind of its buckets (nothing for strings: as crawls recorded it before sets)."""
        text = f"{self.capacity} {self.error_rate!r} {self.growth}"
        return text if self.kind == STRINGS else f"{text} {self.kind}"

    @classmethod
    def parse(cls, text: str) -> SeenLayout:
        capacity, error_rate, growth, *kind = text.split()
        return cls(int(capacity), float(error_rate), int(growth), kind[0] if kind else STRINGS)

    def of_kind(self, kind: str) -> SeenLayout:
        """This layout with buckets of ``kind``."""
        return self if kind == self.kind else SeenLayout(self.capacity, self.error_rate, self.growth, kind)

    def generation(self, index: int) -> Generation:
        while len(self._generations) <= index:
            i = len(self._generations)
            self._generations.append(generation(self.capacity, self.error_rate, i, self.growth, self.kind))
        return self._generations[index]

    def generations(self, count: int) -> list[Generation]:
        return [self.generation(i) for i in range(count)]

    def report(self, counts: list[int]) -> dict:
        """Fill and estimated false-positive rate of the generations holding ``counts``;
        ``bytes``: the fingerprints' bytes (Redis adds ~10% for keys and allocation);
        ``kind``: its buckets' (SETS or STRINGS)."""
        gens = self.generations(len(counts))
        miss = 1.0
        for g, n in zip(gens, counts):
            miss *= 1.0 - g.false_positive_rate(n)
        return {
            "generations": len(gens),
            "urls": sum(counts),
            "bytes": FINGERPRINT_BYTES * sum(counts),
            "fill": [round(g.fill(n), 6) for g, n in zip(gens, counts)],
            "false_positive_rate": 1.0 - miss,
            "kind": self.kind,
        }
