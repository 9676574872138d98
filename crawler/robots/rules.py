"""robots.txt freshness (RFC 9309 §2.4), without I/O: what a worker does with the shared
copy of a site's robots.txt at a given time, and when a failed fetch is tried again.
The robots middleware (crawler/middlewares/robots.py) does the fetching, crawler/robots/shared.py
the sharing, and its ROBOTS_CLAIM script makes the same "fetch or not" test in Redis.

A copy is **fresh** for ``lifetime`` seconds after its fetch (ROBOTSTXT_CACHE_SECONDS).
When a fetch fails (5xx, 429, network error), nothing is fetched from the site until
robots.txt is tried again (``retry_at``); meanwhile an earlier copy is used while it is
less than ``stale`` seconds past its lifetime (**stale**), else the site is
**unreachable** (its URLs wait), unless it has been unreachable for longer than
``allow_after`` seconds (**given up**: everything is allowed, as for a missing file).
Otherwise robots.txt is to be fetched (**fetch**).
"""

from __future__ import annotations

from typing import NamedTuple

FETCH, FRESH, STALE, UNREACHABLE, GIVEN_UP = "fetch", "fresh", "stale", "unreachable", "given_up"


class Freshness(NamedTuple):
    state: str  # FETCH, FRESH, STALE, UNREACHABLE or GIVEN_UP
    until: float  # when to look again (time.time() seconds); ``now`` for FETCH


def freshness(
    now: float,
    *,
    status: int,
    fetched: float,
    retry_at: float,
    since: float,
    lifetime: float,
    stale: float,
    allow_after: float,
) -> Freshness:
    """The state of a site's shared robots.txt copy at ``now``: ``status`` the HTTP status
    of its last answer (0: never answered), ``fetched`` when that answer came,
    ``retry_at`` when a failed fetch is tried again (0: the last fetch did not fail),
    ``since`` when the current run of failures began (0: none). Times in seconds."""
    if status and now < fetched + lifetime:
        return Freshness(FRESH, fetched + lifetime)
    if retry_at and now < retry_at:
        if status and now < fetched + lifetime + stale:
            return Freshness(STALE, retry_at)
        if since and now - since > allow_after:
            return Freshness(GIVEN_UP, retry_at)
        return Freshness(UNREACHABLE, retry_at)
    return Freshness(FETCH, now)


def retry_delay(fails: int, retry_after: float, *, minimum: float, maximum: float, jitter: float) -> float:
    """Seconds before robots.txt is tried again after ``fails`` failed fetches in a row:
    the answer's Retry-After if it gave one, else ``minimum`` doubled per failure, plus
    up to a quarter of it (``jitter`` in [0, 1)), so that workers do not all retry at
    once; never more than ``maximum``."""
    delay = retry_after or min(maximum, minimum * 2 ** max(fails - 1, 0)) * (1 + jitter / 4)
    return min(delay, maximum)
