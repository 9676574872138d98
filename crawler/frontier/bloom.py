"""Sizing and bit positions of the scalable URL-seen Bloom filter (no I/O here).

The bits live in Redis (one string per filter, ``seen:<i>``); this module only says
how big each filter is and which bits a URL maps to. Positions come from
pybloom-live's hashing (``make_hashfuncs``), the same layout as its BloomFilter:
``k`` slices of ``m`` bits each, one bit per slice.

The filter grows the way pybloom-live's ScalableBloomFilter does: when filter ``i``
has taken its capacity, filter ``i+1`` is started, ``growth`` times larger. Unlike
pybloom-live's default (each new filter at 0.9 x the previous error, which compounds
to about 10 x the configured rate), filter ``i`` gets ``error * (1 - r) * r**i`` with
``r = 0.25``, so the sum over all filters stays below the configured error rate while
the first filter, which holds most URLs, gets 3/4 of the budget. Each URL sets
k = 0.7 x the optimal number of bits (15 instead of 21 at 7.5e-7): every bit is work
for Redis, and the filter grows only ~3% (30.3 bits, 3.79 bytes per URL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from operator import add

from pybloom_live.pybloom import make_hashfuncs

TIGHTENING = 0.25
MAX_FILTER_BITS = 1 << 32  # a Redis string holds at most 2**32 bits


@dataclass(frozen=True)
class FilterShape:
    capacity: int
    error_rate: float
    k: int  # slices (bits set per URL)
    m: int  # bits per slice

    @property
    def bits(self) -> int:
        return self.k * self.m

    @cached_property
    def _hashes(self):
        return make_hashfuncs(self.k, self.m)[0]

    @cached_property
    def _offsets(self) -> list[int]:
        return [i * self.m for i in range(self.k)]

    def positions(self, url: str) -> list[int]:
        """Bit offsets of ``url``: one in each of the k slices."""
        return list(map(add, self._offsets, self._hashes(url)))

    def fill(self, count: int) -> float:
        """Expected fraction of bits set after ``count`` URLs."""
        return 1.0 - math.exp(-count / self.m)

    def false_positive_rate(self, count: int) -> float:
        return self.fill(count) ** self.k


def filter_shape(capacity: int, error_rate: float, index: int, growth: int = 2) -> FilterShape:
    """The shape of filter ``index`` of a scalable filter."""
    if capacity < 1 or not 0 < error_rate < 1:
        raise ValueError("Bloom capacity must be >= 1 and error rate in (0, 1)")
    err = error_rate * (1 - TIGHTENING) * TIGHTENING**index
    cap = capacity * growth**index
    # Fewer bits per URL than the optimum log2(1/err): each bit is work for Redis, and
    # 0.7 x the optimum costs only ~3% more memory (m from the exact formula).
    k = math.ceil(0.7 * math.log2(1 / err))
    m = math.ceil(-cap / math.log(1 - err ** (1 / k)))  # bits per slice: k*m bits in all
    if k * m > MAX_FILTER_BITS:  # keep one filter within one Redis string
        m = MAX_FILTER_BITS // k
        cap = int(-m * math.log(1 - err ** (1 / k)))
    return FilterShape(capacity=cap, error_rate=err, k=k, m=m)


class ScalableLayout:
    """The shapes of filters 0, 1, 2 ... for one capacity and error rate."""

    def __init__(self, capacity: int, error_rate: float, growth: int = 2):
        self.capacity, self.error_rate, self.growth = capacity, error_rate, growth
        self._shapes: list[FilterShape] = []

    def shape(self, index: int) -> FilterShape:
        while len(self._shapes) <= index:
            self._shapes.append(filter_shape(self.capacity, self.error_rate, len(self._shapes), self.growth))
        return self._shapes[index]

    def shapes(self, generation: int) -> list[FilterShape]:
        return [self.shape(i) for i in range(generation)]

    def positions(self, url: str, generation: int) -> list[int]:
        """Bit offsets of ``url`` in filters 0..generation-1, concatenated."""
        if generation == 1:
            return self.shape(0).positions(url)
        out: list[int] = []
        for i in range(generation):
            out.extend(self.shape(i).positions(url))
        return out

    def report(self, counts: list[int]) -> dict:
        """Fill and estimated false-positive rate of the filters holding ``counts``."""
        shapes = self.shapes(len(counts))
        miss = 1.0
        for shape, n in zip(shapes, counts):
            miss *= 1.0 - shape.false_positive_rate(n)
        bits = sum(s.bits for s in shapes)
        return {
            "filters": len(shapes),
            "urls": sum(counts),
            "bytes": bits // 8,
            "fill": [round(s.fill(n), 6) for s, n in zip(shapes, counts)],
            "false_positive_rate": 1.0 - miss,
        }
