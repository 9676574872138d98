"""Per-host and per-domain politeness intervals chosen by the operator
(FRONTIER_HOST_INTERVALS_FILE), as Aragog's overrides for popular domains.

One entry per line, ``#`` starts a comment::

    example.com        2        # 2 seconds between two requests
    api.example.com    5qps     # 5 requests a second (0.2 s)
    slow.example.org   0.5qps   # one request every 2 seconds

An entry covers its host and every subdomain of it; the longest matching entry wins
(``api.example.com`` above, ``example.com`` for ``www.example.com``). An override comes
before robots.txt Crawl-delay and the default interval. The rate limiter applies it on
every request (scripts.SLOT stores it as the host's interval, so the frontier's
hand-outs follow it too).
"""

from __future__ import annotations

import logging
from functools import lru_cache

from crawler.scope.rules import parse_interval
from crawler.urls import authority_host

logger = logging.getLogger(__name__)


class HostIntervals:
    def __init__(self, table: dict[str, float] | None = None):
        self.table = {host.lower().strip("."): seconds for host, seconds in (table or {}).items()}

    @classmethod
    def from_file(cls, path: str) -> HostIntervals:
        """Read an intervals file; a line that is not ``HOST SECONDS`` or ``HOST Nqps``
        is skipped with a warning naming it."""
        table = {}
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                fields = line.split("#", 1)[0].split()
                if not fields:
                    continue
                try:
                    if len(fields) != 2:
                        raise ValueError
                    table[fields[0]] = parse_interval(fields[1])
                except (ValueError, ZeroDivisionError):
                    logger.warning("%s:%d: skipped, expected 'HOST SECONDS' or 'HOST Nqps': %r", path, lineno, line)
        logger.info("Loaded %d host interval overrides from %s", len(table), path)
        return cls(table)

    def lookup(self, host: str) -> float | None:
        """Seconds between two requests to ``host`` set by the longest matching entry
        (the host itself or a domain above it), or None."""
        if not self.table:
            return None
        if host in self.table:  # the key itself (host:port)
            return self.table[host]
        host = authority_host(host)
        if host.replace(".", "").isdigit() or ":" in host:  # an IP address: itself only
            return self.table.get(host)
        name = host
        while True:
            seconds = self.table.get(name)
            if seconds is not None:
                return seconds
            dot = name.find(".")
            if dot < 0:
                return None
            name = name[dot + 1 :]

    def __len__(self) -> int:
        return len(self.table)


@lru_cache(maxsize=8)
def intervals_from_file(path: str) -> HostIntervals:
    """The overrides of ``path``, read once per process ('' gives none)."""
    return HostIntervals.from_file(path) if path else HostIntervals()
