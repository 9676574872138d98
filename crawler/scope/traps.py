"""Spider-trap guards applied to a URL before it enters the frontier (no I/O here).

Each guard returns the name of the trap it found (used as the stats key
``frontier/trap/<name>``) or None. The per-host page limit needs shared state and is
enforced by the frontier's push script instead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from urllib.parse import parse_qsl


@dataclass(frozen=True)
class TrapGuard:
    max_url_length: int = 2048
    max_depth: int = 20  # 0: no limit
    max_repeated_segments: int = 3  # a path segment (or pair of them) repeated more often
    max_query_params: int = 24
    max_query_length: int = 1024
    max_param_repeats: int = 3  # one query parameter name repeated more often

    @classmethod
    def from_settings(cls, settings) -> TrapGuard:
        return cls(
            max_url_length=settings.getint("FRONTIER_MAX_URL_LENGTH"),
            max_depth=settings.getint("FRONTIER_MAX_DEPTH"),
            max_repeated_segments=settings.getint("FRONTIER_MAX_REPEATED_SEGMENTS"),
            max_query_params=settings.getint("FRONTIER_MAX_QUERY_PARAMS"),
            max_query_length=settings.getint("FRONTIER_MAX_QUERY_LENGTH"),
            max_param_repeats=settings.getint("FRONTIER_MAX_PARAM_REPEATS"),
        )

    def check(self, url: str, depth: int = 0) -> str | None:
        """The trap a normalized URL at this depth falls into, or None."""
        if self.max_url_length and len(url) > self.max_url_length:
            return "url_length"
        if self.max_depth and depth > self.max_depth:
            return "depth"
        # a normalized URL: scheme://netloc/path[?query], no fragment
        start = url.find("/", url.find("://") + 3)  # a normalized URL has a path
        if start < 0:
            return None
        q = url.find("?", start)
        end = len(url) if q < 0 else q
        limit = self.max_repeated_segments
        # a run repeated more than `limit` times needs more than `limit` segments
        if limit and url.count("/", start, end) > limit and repeats_more_than(url[start:end], limit):
            return "repeated_segments"
        if q >= 0 and q + 1 < len(url):
            query = url[q + 1 :]
            if self.max_query_length and len(query) > self.max_query_length:
                return "query_length"
            fields = query.count("&") + 1
            if fields <= min(self.max_query_params or fields, self.max_param_repeats or fields):
                return None  # too few fields to break either limit
            names = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
            if self.max_query_params and len(names) > self.max_query_params:
                return "query_params"
            if self.max_param_repeats and names and max(Counter(names).values()) > self.max_param_repeats:
                return "query_repeats"
        return None


def repeated_segments(path: str) -> int:
    """The largest number of times one run of 1 to 3 path segments repeats back to back.

    ``/a/b/a/b/a/b/c`` has the run ``a/b`` three times in a row: 3.
    ``/a/b/c`` has no repeat: 1.
    """
    segs = path.split("/")
    if len(set(segs)) == len(segs):  # no segment twice: no repeat at all
        return 1
    segs = [s for s in segs if s]
    best = 1 if segs else 0
    for width in (1, 2, 3):
        for start in range(len(segs) - width):
            run, i = 1, start
            while segs[i : i + width] == segs[i + width : i + 2 * width]:
                run += 1
                i += width
            best = max(best, run)
    return best


def repeats_more_than(path: str, limit: int) -> bool:
    """``repeated_segments(path) > limit`` (``limit`` >= 1), sooner: a run of ``width``
    segments repeated ``r`` times back to back is ``(r - 1) * width`` segments in a row each
    equal to the one ``width`` before it, so only that count is kept, and only for the
    widths that fit more than ``limit`` times."""
    segs = path.split("/")
    # each segment of a run repeated more than `limit` times is there `limit` + 1 times or
    # more: `limit` segments or more that are another's copies
    if len(segs) - len(set(segs)) < limit:
        return False
    segs = [s for s in segs if s]
    n = len(segs)
    for width in (1, 2, 3):
        need = limit * width  # segments equal to the one `width` before, in a row
        if n - width < need:
            return False
        row = 0
        for a, b in zip(segs, segs[width:]):
            if a == b:
                row += 1
                if row >= need:
                    return True
            else:
                row = 0
    return False
