"""The crawl's live numbers in Redis: what every worker publishes, and the reader a
dashboard or an HTTP API calls (``activity``).

``LiveStats`` (an extension, every LIVE_STATS_INTERVAL seconds and once more when the
spider closes) writes in one pipeline, on the crawl's Redis (the first server of
REDIS_URLS, the first shard of a cluster, where the ``submit`` list is):

``tally`` (hash)
    HINCRBY of what this worker's stats counters that matter (``TALLIED``: pages by fate,
    responses by status, download errors, robots.txt refusals, copies, trap refusals,
    the archive's and the UrlStore's counts, back-offs...) gained since its last flush:
    each field is the sum over the crawl's workers, past and present.
``tally:<t>`` (hash, expires after BUCKET_TTL)
    pages by fate that the workers recorded in the 10-second bucket starting at ``t``
    (UNIX seconds): a page counts in the bucket of the time it was recorded, whenever
    the flush that carries it comes.
``recent`` (list, newest first, at most RECENT entries)
    the last pages recorded, as compact JSON ``{"url", "status", "fate", "title", "at"}``.
``workers`` (zset)
    this worker's heartbeat (worker id -> time of its last flush, ms); a closing worker
    takes itself out.
``waiting`` (hash)
    what this worker waits for, while it waits (``{"for": "the stores", "since", "pages",
    "bytes"}``, crawler/scheduler/pacing.py); taken out when it goes on or closes.
``published`` (hash)
    the settings the workers run with that shape what a viewer shows (``PUBLISHED``):
    ``scrapy frontier`` and the dashboard show the workers' interval, not their own.

A flush that fails (Redis away) logs one warning line and keeps what it carried: the
deltas are taken against what was last written, the buckets and the recent pages stay
pending (the recent pages bounded to RECENT), and the next try (no sooner than
``connection.outage_wait`` of the outage so far) writes them all: no count is lost or
written twice.
"""

from __future__ import annotations

import json
import logging
import time

from crawler.frontier.keys import Keys
from crawler.scope import reasons

logger = logging.getLogger(__name__)

BUCKET = 10  # seconds a bucket of the series spans
BUCKET_TTL = 2 * 3600  # seconds a bucket is kept
MAX_MINUTES = BUCKET_TTL // 60  # the longest series the buckets can give
RECENT = 50  # pages in the recent list (and pending in a worker between flushes)
TITLE_CHARS = 200  # of a recent page's title
LIVE_SECONDS = 30.0  # a worker whose last heartbeat is younger is live
WORKERS_KEPT = 86400  # seconds a heartbeat stays in the zset (a worker that died without closing)

# The settings a worker publishes (``published``), by their name in the hash.
PUBLISHED = {
    "host_interval": "FRONTIER_HOST_INTERVAL",
    "host_max_in_flight": "FRONTIER_HOST_MAX_IN_FLIGHT",
    "max_wait": "FRONTIER_MAX_WAIT",
    "close_when_idle": "FRONTIER_CLOSE_WHEN_IDLE",
    "politeness_key": "FRONTIER_POLITENESS_KEY",
    "profile": "SETTINGS_PROFILE",
    "max_pages": "CRAWL_MAX_PAGES",
}


def published_settings(settings) -> dict[str, str]:
    """What a worker publishes: PUBLISHED's settings, as text."""
    return {name: str(settings.get(setting)) for name, setting in PUBLISHED.items()}


def live_workers(client, keys: Keys, now: float, live_seconds: float = LIVE_SECONDS) -> int:
    """Workers with a heartbeat in the last ``live_seconds``."""
    return int(client.zcount(keys.workers, int((now - live_seconds) * 1000), "+inf"))


def read_published(client, keys: Keys) -> dict:
    """The workers' published settings, typed (empty: no worker published yet)."""
    raw = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
           for k, v in (client.hgetall(keys.published) or {}).items()}  # fmt: skip
    out: dict = dict(raw)
    for name in ("host_interval", "max_wait"):
        if name in raw:
            out[name] = float(raw[name])
    for name in ("host_max_in_flight", "max_pages"):
        if name in raw:
            out[name] = int(float(raw[name]))
    if "close_when_idle" in raw:
        out["close_when_idle"] = raw["close_when_idle"] in ("True", "true", "1")
    return out


# The stats counters that go into the tally: a name ending in "/" is a prefix (every
# counter under it), any other an exact name.
TALLIED = (
    "pages/fate/",
    "downloader/response_status_count/",
    "downloader/response_bytes",
    "downloader/exception_type_count/",
    "robotstxt/disallowed",
    "contentseen/exact",
    "contentseen/near",
    *(reasons.stat("frontier", code) + ("/" if code == reasons.TRAP else "") for code in reasons.ORDER),
    "seeds/added",
    "seeds/refused",
    "seeds/invalid",
    "submit/refused/",
    "archive/objects",
    "archive/bytes",
    "archive/records",
    "archive/retries",
    "archive/recovered_records",
    "frontier/lease/given_back",
    "urlstore/written/",
    "urlstore/failed",
    "ratelimit/handed_back",
    "backoff/",
)


def read_waiting(client, keys: Keys, now: float, live_seconds: float = LIVE_SECONDS) -> list[dict]:
    """What the live workers wait for, the longest waiting first: ``[{"worker", "for",
    "since", "pages", "bytes"}, ...]`` (a dead worker's entry is left out)."""
    p = client.pipeline(transaction=False)
    p.hgetall(keys.waiting)
    p.zrangebyscore(keys.workers, int((now - live_seconds) * 1000), "+inf")
    raw, live = p.execute()
    alive = {_text(w) for w in live}
    out = []
    for worker, value in raw.items():
        try:
            entry = json.loads(value)
        except ValueError:
            continue
        if _text(worker) in alive and isinstance(entry, dict):
            out.append({"worker": _text(worker), **entry})
    return sorted(out, key=lambda e: e.get("since", now))


def waiting_lines(waiting: list[dict], now: float) -> list[str]:
    """``worker-1 waits for the archive (S3 503 SlowDown, failing since 10:41:55) since
    10:42:07 (180 s): 500 pages (12.3 MB) not yet stored`` (``the stores`` when none fails:
    they are slow)."""
    lines = []
    for w in waiting:
        since = w.get("since", now)
        why = ""
        if w.get("why"):
            why = f" ({w['why']}, failing since {_clock(w.get('failing_since', since))})"
        lines.append(
            f"{w['worker']} waits for {w.get('for', '?')}{why} since {_clock(since)} ({now - since:.0f} s): "
            f"{w.get('pages', 0)} pages ({w.get('bytes', 0) / 1e6:.1f} MB) not yet stored"
        )
    return lines


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def read_tally(raw: dict) -> dict[str, int]:
    """The ``tally`` hash as Redis gives it (HGETALL), as {stats key: count}."""
    return {_text(k): int(v) for k, v in sorted(raw.items())}


def tallied(name: str) -> bool:
    """Whether the stats counter ``name`` goes into the tally."""
    return any(name.startswith(p) and len(name) > len(p) if p.endswith("/") else name == p for p in TALLIED)


def bucket_of(t: float) -> int:
    """The start (UNIX seconds) of the bucket holding time ``t``."""
    return int(t // BUCKET) * BUCKET


def buckets(now: float, minutes: int) -> list[int]:
    """The starts of the buckets of the last ``minutes`` minutes, oldest first, the last
    one holding ``now``."""
    last = bucket_of(now)
    count = max(1, minutes * 60 // BUCKET)
    return [last - BUCKET * (count - 1 - i) for i in range(count)]


def recent_entry(page, fate: str, at: float) -> dict:
    """What the recent list shows of a page."""
    status = page.get("status")
    title = (page.get("metadata") or {}).get("title")
    return {
        "url": page.get("url"),
        "status": status if isinstance(status, int) and not isinstance(status, bool) else None,
        "fate": fate,
        "title": title[:TITLE_CHARS] if isinstance(title, str) and title else None,
        "at": round(at, 3),
    }


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def activity(client, keys, now: float, minutes: int = 30, live_seconds: float = LIVE_SECONDS) -> dict:
    """The crawl's live numbers (one pipeline on ``client``, the Redis of the crawl's
    first shard; ``keys``: its Keys, or the crawl's name), as ``scrapy serve``'s
    ``activity`` endpoint gives them::

        {"bucket_seconds": 10,
         "series": [{"t": <bucket start>, "fates": {"fetched": n, ...}}, ...],
         "totals": {"<stats key>": n, ...},
         "recent": [{"url", "status", "fate", "title", "at"}, ...],
         "workers": n,
         "waiting": [{"worker", "for", "since", "pages", "bytes"}, ...]}

    ``series``: every bucket of the last ``minutes`` minutes (clamped to 1..MAX_MINUTES),
    oldest first, the last holding ``now``, an empty one with ``{}``; ``totals``: the
    tally; ``recent``: newest first; ``workers``: those with a heartbeat in the last
    ``live_seconds``; ``waiting``: what those wait for (``read_waiting``)."""
    if not isinstance(keys, Keys):
        keys = Keys(str(keys))
    minutes = min(max(int(minutes), 1), MAX_MINUTES)
    starts = buckets(now, minutes)
    p = client.pipeline(transaction=False)
    for t in starts:
        p.hgetall(keys.tally_bucket(t))
    p.hgetall(keys.tally)
    p.lrange(keys.recent, 0, RECENT - 1)
    p.zcount(keys.workers, int((now - live_seconds) * 1000), "+inf")
    *series, tally, recent, live = p.execute()
    waiting = read_waiting(client, keys, now, live_seconds)
    pages = []
    for raw in recent:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            pages.append(entry)
    return {
        "bucket_seconds": BUCKET,
        "series": [
            {"t": t, "fates": {_text(k): int(v) for k, v in sorted(fates.items())}}
            for t, fates in zip(starts, series, strict=True)
        ],
        "totals": read_tally(tally),
        "recent": pages,
        "workers": int(live),
        "waiting": waiting,
    }
