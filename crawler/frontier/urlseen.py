"""Sizing of the URL-seen filter and the hashes of a URL (no I/O here).

URL-seen remembers every URL the crawl admitted, in Redis, at a bounded false-positive
rate. It is a filter of 4-byte fingerprints, split into buckets (a quotient filter's
idea, stored as Redis strings), not a Bloom filter: a Bloom filter is allocated at its
capacity (3.6 bytes per URL when full at 1e-6, so 7.2 when half full and ~2x that after
each growth), while this one costs the same ~4.5 bytes per URL whatever its fill, because
a bucket's string grows with the URLs it holds.

A URL's two 32-bit hashes are pybloom-live's (``make_hashfuncs(2, 2**32)``: the two
64-bit halves of a salted XXH3-128 digest of its UTF-8 bytes, each mod 2**32), computed
here in one call (tests/unit/test_urlseen.py holds the two equal): ``h``
picks the bucket, ``f`` is the fingerprint kept in it. Generation ``i`` takes
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


def hashes_text(url: str) -> str:
    """``url_hashes(url)`` as PUSH reads them: ``"h f"``, two decimal numbers."""
    a, b = _halves(_digest(_SALT + url.encode()))
    return f"{a & _LOW} {b & _LOW}"


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


def generation(capacity: int, error_rate: float, index: int, growth: int = 4) -> Generation:
    """The shape of generation ``index``."""
    if capacity < 1 or not 0 < error_rate < 1 or growth < 2:
        raise ValueError("URL-seen capacity must be >= 1, error rate in (0, 1) and growth >= 2")
    planned = planned_generations(growth)
    share = error_rate / (planned + 1)
    if index >= planned:
        share /= 2 ** (index - planned + 1)
    cap = capacity * growth**index
    per_bucket = max(share * HASH_SPACE, 1.0)
    return Generation(capacity=cap, buckets=math.ceil(cap / per_bucket), error_rate=share)


class SeenLayout:
    """The generations of one URL-seen filter (capacity, error rate, growth)."""

    def __init__(self, capacity: int, error_rate: float, growth: int = 4):
        self.capacity, self.error_rate, self.growth = capacity, error_rate, growth
        self._generations: list[Generation] = []

    def spelled(self) -> str:
        """How the crawl records it (seen:meta's ``layout``): ``capacity error_rate growth``."""
        return f"{self.capacity} {self.error_rate!r} {self.growth}"

    @classmethod
    def parse(cls, text: str) -> SeenLayout:
        capacity, error_rate, growth = text.split()
        return cls(int(capacity), float(error_rate), int(growth))

    def generation(self, index: int) -> Generation:
        while len(self._generations) <= index:
            i = len(self._generations)
            self._generations.append(generation(self.capacity, self.error_rate, i, self.growth))
        return self._generations[index]

    def generations(self, count: int) -> list[Generation]:
        return [self.generation(i) for i in range(count)]

    def report(self, counts: list[int]) -> dict:
        """Fill and estimated false-positive rate of the generations holding ``counts``;
        ``bytes``: the fingerprints' bytes (Redis adds ~10% for keys and allocation)."""
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
        }
