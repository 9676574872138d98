"""When a URL is due again, without I/O (Nutch's AdaptiveFetchSchedule).

The UrlStore pipeline (crawler/pipelines/urlstore.py) asks ``schedule`` after every
fetch; what it needs comes with the page (the previous interval and digest carried by a
recrawl request, crawler/frontier/codec.py ``meta.RECRAWL``).

A page that answered (2xx) adapts its interval to how often it changes:

- changed since the last fetch (its content digest differs): the interval shrinks,
  ``interval * (1 - dec_rate)`` (Nutch's dec_rate 0.2);
- unchanged (the same digest, or a 304 Not Modified): it grows,
  ``interval * (1 + inc_rate)`` (Nutch's inc_rate 0.4);
- sync delta: when the page says when it last changed (its Last-Modified, or its
  sitemap ``lastmod``) and that is longer ago than the interval, the interval becomes
  that age (a page untouched for a month is not looked at hourly); the next fetch counts
  from ``fetched_at - age * sync_delta_rate`` (Nutch's SYNC_DELTA_RATE 0.3: the fetch is
  moved toward the change's rhythm). A sitemap ``lastmod`` newer than the last fetch
  makes the page count as changed.
- a first fetch starts from its sitemap ``changefreq`` when it has one, else from
  ``initial``.

Every adaptive interval stays within [``minimum``, ``maximum``]. Other outcomes have
their own fixed intervals: ``gone`` (404, 410), ``redirect`` (3xx other than 304, the
page moved: its target is a URL of its own), ``error`` (5xx, a failed fetch); a 4xx
other than 404/410 counts as an answer without content (the page's interval grows as
if unchanged).
"""

from __future__ import annotations

from typing import NamedTuple

OK, GONE, REDIRECT, ERROR = "ok", "gone", "redirect", "error"

# a sitemap's <changefreq> (sitemaps.org) in seconds; "always" and "never" are the bounds
CHANGEFREQ = {
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
}


class Bounds(NamedTuple):
    """The schedule's settings (RECRAWL_*), read once."""

    initial: float  # a first fetch's interval (RECRAWL_INTERVAL)
    minimum: float  # RECRAWL_MIN_INTERVAL
    maximum: float  # RECRAWL_MAX_INTERVAL
    error: float  # RECRAWL_RETRY_INTERVAL
    gone: float  # RECRAWL_GONE_INTERVAL
    redirect: float  # RECRAWL_REDIRECT_INTERVAL
    inc_rate: float = 0.4  # RECRAWL_INC_RATE
    dec_rate: float = 0.2  # RECRAWL_DEC_RATE
    sync_delta_rate: float = 0.3  # RECRAWL_SYNC_DELTA_RATE (0: no sync delta)


class Schedule(NamedTuple):
    interval: float  # seconds: the interval the next schedule starts from
    due: float  # UNIX time of the next fetch


def outcome(status: int | None, redirected: bool = False) -> str:
    """The schedule's class of a fetch: OK (2xx, 304, other 4xx), GONE (404, 410),
    REDIRECT (3xx, or a page reached through redirects), ERROR (5xx, no answer)."""
    if status is None or status >= 500:
        return ERROR
    if status in (404, 410):
        return GONE
    if redirected or (300 <= status < 400 and status != 304):
        return REDIRECT
    return OK


def changefreq_seconds(changefreq: str | None, bounds: Bounds) -> float | None:
    """A sitemap ``changefreq`` as an interval (None when absent or not understood)."""
    value = (changefreq or "").strip().lower()
    if value == "always":
        return bounds.minimum
    if value == "never":
        return bounds.maximum
    return CHANGEFREQ.get(value)


def schedule(
    fetched_at: float,
    bounds: Bounds,
    *,
    kind: str = OK,
    previous: float | None = None,
    changed: bool | None = None,
    modified_at: float | None = None,
    changefreq: str | None = None,
    previous_fetch: float | None = None,
) -> Schedule:
    """The next fetch of a URL fetched at ``fetched_at`` with outcome ``kind``:
    ``previous`` its interval before this fetch (None: a first fetch), ``changed``
    whether its content changed since (None: unknown, e.g. no digest to compare),
    ``modified_at`` when it says it last changed (Last-Modified or a sitemap lastmod),
    ``changefreq`` its sitemap's, ``previous_fetch`` when it was fetched before."""
    if kind == ERROR:
        return Schedule(previous or bounds.initial, fetched_at + bounds.error)
    if kind == GONE:
        return Schedule(previous or bounds.initial, fetched_at + bounds.gone)
    if kind == REDIRECT:
        return Schedule(previous or bounds.initial, fetched_at + bounds.redirect)
    hinted = changefreq_seconds(changefreq, bounds)
    if previous is None or previous <= 0:
        interval = hinted if hinted is not None else bounds.initial
    else:
        if previous_fetch is not None and modified_at is not None and modified_at > previous_fetch:
            changed = True  # the sitemap (or the server) says it changed since
        interval = previous
        if changed:
            interval = previous * (1 - bounds.dec_rate)
        elif changed is False:
            interval = previous * (1 + bounds.inc_rate)
    delta = None
    if bounds.sync_delta_rate > 0 and modified_at is not None and modified_at <= fetched_at:
        delta = fetched_at - modified_at
        if delta > interval:
            interval = delta
    interval = min(max(interval, bounds.minimum), bounds.maximum)
    reference = fetched_at
    if delta is not None:
        # (the shift toward the time of change is a share of the interval at most: a page
        # unchanged for longer than the longest interval is due after most of it, not at
        # once; its share of delta alone went past the interval)
        reference = fetched_at - min(delta, interval) * bounds.sync_delta_rate
    return Schedule(interval, max(reference + interval, fetched_at + bounds.minimum))
