"""Figures of a test or benchmark: a quantile by nearest rank."""

from __future__ import annotations


def percentile(values, q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank (NaN for none): the one the
    tests and benchmarks report."""
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")
