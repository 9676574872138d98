"""Giving freed memory back to the system (glibc's malloc_trim; a no-op elsewhere).

glibc keeps the C heap at its largest size once grown: lxml's trees in a page process,
response bodies and page records in a worker. A page process trims after each page, a
worker every TRIM_EVERY seconds (extensions.GarbageCollection): bench/memory.py measured
the page process at 195 MB steady before and 99 MB after, the worker at 244 and 198 MB,
with no change in pages/s; a trim of a worker's heap took 0.3-4.7 ms.
"""

from __future__ import annotations

import ctypes
import ctypes.util

TRIM_EVERY = 10.0  # seconds between a worker's trims


def _load():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_malloc_trim = _load()


def trim() -> None:
    """Hand the C heap's free memory back to the system, where the C library can."""
    if _malloc_trim is not None:
        _malloc_trim(0)
