"""Giving freed memory back to the system (glibc's malloc; a no-op elsewhere).

glibc keeps the C heap at its largest size once grown: lxml's trees in a page process,
response bodies and page records in a worker. A page process trims after each page, a
worker every TRIM_EVERY seconds (extensions.GarbageCollection): bench/memory.py measured
the page process at 195 MB steady before and 99 MB after, the worker at 244 and 198 MB,
with no change in pages/s; a trim of a worker's heap took 0.3-4.7 ms.

Both also ``configure`` malloc when they start, for a process that frees large blocks all
the time (bodies, their copies, decoded pages): an allocation of MMAP_THRESHOLD or more
is a mapping of its own, unmapped when freed, where glibc's default raises that threshold
to 32 MB after the first large block freed, and large blocks then come from the heap,
where they leave holes; and the threads of a worker (the reactor's pool, the WARC writer,
the page processes' feeders) share ARENAS heaps instead of one each, up to 8 per core,
each a heap of its own to fragment. bench/memory.py: the worker 199 -> 184 MB steady,
the same pages/s.
"""

from __future__ import annotations

import ctypes
import ctypes.util

TRIM_EVERY = 10.0  # seconds between a worker's trims
MMAP_THRESHOLD = 256 * 1024  # bytes: an allocation this large or larger is a mapping of its own
ARENAS = 2  # malloc heaps shared by a process's threads

_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8  # mallopt parameters (malloc.h)


def _load(name: str):
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):  # not glibc
        return None


_malloc_trim = _load("malloc_trim")
_mallopt = _load("mallopt")


def configure() -> None:
    """Set malloc for a long-running process that frees large blocks all the time (see
    the module docstring); before its threads start, where it can."""
    if _mallopt is not None:
        _mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        _mallopt(_M_ARENA_MAX, ARENAS)


def trim() -> None:
    """Hand the C heap's free memory back to the system, where the C library can."""
    if _malloc_trim is not None:
        _malloc_trim(0)
