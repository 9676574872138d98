"""A site's robots.txt as this process uses it, without I/O: the parsed rules (Protego) of
one origin, the crawler's product token, and the rules a shared record gives at a given
time (crawler/robots/rules.py says when a record is fresh, stale, unreachable or given up).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from protego import Protego

from crawler.robots.rules import freshness

RULES_BYTES_PER_CHAR = 24  # Protego's parsed rules per character of robots.txt (measured: 23-25)
RULES_BYTES_MIN = 512  # a Rules without a parser, or an empty file


@dataclass
class Rules:
    """What one origin's robots.txt says, as used in this process."""

    origin: str
    valid_until: float  # time.time() after which it is looked up again
    parser: Protego | None = None  # None: everything allowed (or unreachable)
    unreachable: bool = False  # 5xx, 429 or network error, and no usable copy
    retry_at: float = 0.0  # when robots.txt is tried again (unreachable)
    down: bool = False  # unreachable because the host is (connection refused, DNS)
    sitemaps: list = field(default_factory=list)
    size: int = RULES_BYTES_MIN  # bytes the rules take in memory, about (RULES_BYTES_PER_CHAR)

    def allowed(self, url: str, token: str) -> bool:
        return self.parser is None or self.parser.can_fetch(url, token)


def product_token(settings) -> str:
    token = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "*"
    return token.split("/", 1)[0].split()[0]


class Unparsable(ValueError):
    """robots.txt that Protego could not read (everything is allowed)."""


def parse_rules(origin: str, status: int, stored: bytes, valid_until: float) -> Rules:
    """The rules of an answer (``stored``: its body, zlib-compressed): a 2xx's parsed, any
    other status's none (unavailable: everything allowed). Raises Unparsable."""
    if not 200 <= status < 300:
        return Rules(origin, valid_until)
    try:
        text = zlib.decompress(stored).decode("utf-8", errors="replace").lstrip("\ufeff")
        parser = Protego.parse(text)
    except Exception as exc:  # garbage: RFC 9309 parsers keep what they can; we allow
        raise Unparsable(str(exc)) from exc
    size = RULES_BYTES_MIN + RULES_BYTES_PER_CHAR * len(text)
    return Rules(origin, valid_until, parser=parser, sitemaps=list(parser.sitemaps), size=size)


def record_state(record: dict, now: float, *, lifetime: float, stale: float, allow_after: float):
    """What a shared record (as HGETALL gives it) says at ``now``: (state, until) of
    crawler/robots/rules.py ``freshness``; (None, now) for no record."""
    if not record:
        return None, now
    return freshness(
        now,
        status=int(record.get(b"status", 0)),
        fetched=int(record.get(b"fetched", 0)) / 1000,
        retry_at=int(record.get(b"retry", 0)) / 1000,
        since=int(record.get(b"since", 0)) / 1000,
        lifetime=lifetime,
        stale=stale,
        allow_after=allow_after,
    )
