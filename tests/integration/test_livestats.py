"""Live stats (crawler/observe/livestats.py): the buckets and the reader on plain values, the
extension of an in-process crawler fed signals and stats (flushes, no double counts, a
Redis that goes away and comes back), and a real crawl's numbers afterwards.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_livestats.py, tests/e2e/test_livestats.py."""

from __future__ import annotations

import json
import logging
import time

from scrapy import signals
from scrapy.utils.test import get_crawler

from crawler.extensions.livestats import LiveStats
from crawler.frontier.keys import Keys
from crawler.items import Page
from crawler.observe.livestats import (
    BUCKET_TTL,
    MAX_MINUTES,
    RECENT,
    activity,
    bucket_of,
    buckets,
    recent_entry,
    tallied,
    waiting_lines,
)
from crawler.observe.trouble import ARCHIVE
from crawler.scheduler.pacing import Pacing
from crawler.services import services
from crawler.spiders.broad import BroadSpider
from testing.servers import RedisServer
from testing.services import project_settings

T0 = 1_700_000_003.5  # a fixed clock: bucket 1_700_000_000


def test_buckets_and_the_reader_on_plain_values(redis_client, crawl_name):
    assert bucket_of(T0) == 1_700_000_000 and bucket_of(1_700_000_010) == 1_700_000_010
    assert bucket_of(1_700_000_009.999) == 1_700_000_000
    starts = buckets(T0, 30)
    assert len(starts) == 180 and starts[-1] == 1_700_000_000 and starts[0] == 1_700_000_000 - 179 * 10
    assert starts == sorted(starts) and all(b - a == 10 for a, b in zip(starts, starts[1:], strict=False))
    assert buckets(T0, 1) == [1_700_000_000 - 50 + 10 * i for i in range(6)]

    for name in (
        "pages/fate/fetched",
        "downloader/response_status_count/404",
        "downloader/response_bytes",
        "downloader/exception_type_count/twisted.internet.error.DNSLookupError",
        "frontier/trap/depth",
        "frontier/host_full",
        "archive/retries",
        "urlstore/written/fetched",
        "backoff/throttled/429",
    ):
        assert tallied(name), name
    for name in ("links/followed", "downloader/response_bytes_by_status/200", "pages/fate/", "frontier/enqueued"):
        assert not tallied(name), name

    page = Page(url="http://a.example/", status=200, metadata={"title": "é" * 300})
    assert recent_entry(page, "fetched", 12.34567) == {
        "url": "http://a.example/",
        "status": 200,
        "fate": "fetched",
        "title": "é" * 200,
        "at": 12.346,
    }
    failed = Page(url="http://b.example/", status=None, error="DNSLookupError: no", metadata={})
    assert recent_entry(failed, "dns_error", 1.0)["status"] is None and recent_entry(failed, "x", 1)["title"] is None
    disallowed = Page(url="http://c.example/", status="robots_disallowed")
    assert recent_entry(disallowed, "robots_disallowed", 1.0)["status"] is None

    # what the workers wrote, read back
    keys = Keys(crawl_name)
    b = bucket_of(T0)
    redis_client.hset(keys.tally, mapping={"pages/fate/fetched": 7, "downloader/response_status_count/200": 9})
    redis_client.hset(keys.tally_bucket(b), mapping={"fetched": 4, "timeout": 1})
    redis_client.hset(keys.tally_bucket(b - 20), mapping={"fetched": 3})
    redis_client.hset(keys.tally_bucket(b - 3600), mapping={"fetched": 100})  # older than the series
    entries = [
        {"url": f"http://a.example/{i}", "status": 200, "fate": "fetched", "title": None, "at": i} for i in range(3)
    ]
    redis_client.lpush(keys.recent, *(json.dumps(e) for e in entries), b"not json")
    now_ms = int(T0 * 1000)
    redis_client.zadd(keys.workers, {"w1": now_ms - 1000, "w2": now_ms - 5000, "gone": now_ms - 600_000})

    got = activity(redis_client, keys, T0, minutes=5)
    assert list(got) == ["bucket_seconds", "series", "totals", "recent", "workers", "waiting"]
    assert got["waiting"] == []  # (no worker waits for the stores)
    assert got["bucket_seconds"] == 10
    assert [s["t"] for s in got["series"]] == buckets(T0, 5) and len(got["series"]) == 30
    by_t = {s["t"]: s["fates"] for s in got["series"]}
    assert by_t[b] == {"fetched": 4, "timeout": 1} and by_t[b - 20] == {"fetched": 3} and by_t[b - 10] == {}
    assert sum(f.get("fetched", 0) for f in by_t.values()) == 7
    assert got["totals"] == {"downloader/response_status_count/200": 9, "pages/fate/fetched": 7}
    assert [e["url"] for e in got["recent"]] == [f"http://a.example/{i}" for i in (2, 1, 0)]  # newest first
    assert got["workers"] == 2
    json.dumps(got)  # what the API serves as it is

    # the crawl's name will do for its keys; minutes are clamped to what the buckets hold
    assert activity(redis_client, crawl_name, T0, minutes=0)["series"][-1]["t"] == b
    assert len(activity(redis_client, crawl_name, T0, minutes=10_000)["series"]) == MAX_MINUTES * 6
    assert activity(redis_client, keys, T0 + 7200)["workers"] == 0  # heartbeats too old: none live
    empty = activity(redis_client, Keys(crawl_name + "-none"), T0, minutes=1)
    assert empty == {
        "bucket_seconds": 10,
        "series": [{"t": t, "fates": {}} for t in buckets(T0, 1)],
        "totals": {},
        "recent": [],
        "workers": 0,
        "waiting": [],
    }


def live_stats(crawler) -> LiveStats:
    ext = next((e for e in crawler.extensions.middlewares if isinstance(e, LiveStats)), None)
    assert ext is not None, "LiveStats is not among the extensions"
    return ext


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def scraped(crawler, *pages) -> None:
    for page in pages:
        crawler.signals.send_catch_log(signal=signals.item_scraped, item=page, response=None, spider=None)


def pages_of_every_fate(n: int) -> list[Page]:
    return [
        Page(url=f"http://a.example/{n}/ok", status=200, metadata={"title": f"Page {n}", "description": "d"}),
        Page(url=f"http://a.example/{n}/copy", status=200, duplicate_of="http://a.example/", metadata={}),
        Page(url=f"http://a.example/{n}/private", status="robots_disallowed"),
        Page(url=f"http://b.example/{n}", status=None, error="DNSLookupError: no such host"),
        Page(url=f"http://a.example/{n}/boom", status=503, metadata={"title": "Unavailable"}),
    ]


def test_flushes_add_what_is_new_once_by_bucket_with_the_recent_pages(redis_url, redis_client, crawl_name):
    crawler = get_crawler(BroadSpider, project_settings(CRAWL_NAME=crawl_name, REDIS_URL=redis_url))
    ext = live_stats(crawler)
    ext.clock = clock = Clock(T0)
    keys = Keys(crawl_name)
    stats = crawler.stats
    stats.inc_value("downloader/response_status_count/200", 3)
    stats.inc_value("downloader/response_bytes", 4096)
    stats.inc_value("frontier/trap/depth", 2)
    stats.inc_value("frontier/host_full")
    stats.inc_value("archive/objects")
    stats.inc_value("urlstore/written/fetched", 2)
    stats.inc_value("backoff/throttled/429")
    stats.inc_value("links/followed", 40)  # not a number the dashboard shows
    scraped(crawler, *pages_of_every_fate(1))
    clock.t = T0 + 4  # same bucket
    scraped(crawler, Page(url="http://a.example/late", status=200, metadata={"title": "Late"}))

    assert ext.flush()
    got = activity(redis_client, keys, T0 + 5, minutes=1)
    fates = {"fetched": 2, "duplicate": 1, "robots_disallowed": 1, "dns_error": 1, "server_error": 1}
    assert got["totals"] == {
        **{f"pages/fate/{f}": n for f, n in fates.items()},  # FrontierStats counts them
        "downloader/response_status_count/200": 3,
        "downloader/response_bytes": 4096,
        "frontier/trap/depth": 2,
        "frontier/host_full": 1,
        "archive/objects": 1,
        "urlstore/written/fetched": 2,
        "backoff/throttled/429": 1,
    }
    assert got["series"][-1] == {"t": bucket_of(T0), "fates": fates}
    assert all(s["fates"] == {} for s in got["series"][:-1])
    recent = got["recent"]
    assert [e["url"] for e in recent] == [
        "http://a.example/late",
        *[p["url"] for p in reversed(pages_of_every_fate(1))],
    ]
    assert recent[0] == {
        "url": "http://a.example/late",
        "status": 200,
        "fate": "fetched",
        "title": "Late",
        "at": T0 + 4,
    }
    assert recent[1]["fate"] == "server_error" and recent[1]["status"] == 503 and recent[1]["title"] == "Unavailable"
    assert recent[2]["status"] is None and recent[2]["fate"] == "dns_error" and recent[2]["title"] is None
    assert got["workers"] == 1  # its heartbeat, at the flush's time
    assert got == activity(redis_client, keys, T0 + 5, minutes=1)
    assert 0 < redis_client.ttl(keys.tally_bucket(bucket_of(T0))) <= BUCKET_TTL

    # a flush with nothing new adds nothing: no delta is written twice
    clock.t = T0 + 6
    assert ext.flush()
    assert activity(redis_client, keys, T0 + 6, minutes=1) == got

    # the next bucket: only what is new
    clock.t = T0 + 12
    scraped(crawler, *pages_of_every_fate(2))
    stats.inc_value("downloader/response_status_count/200", 2)
    stats.inc_value("downloader/response_status_count/404")
    assert ext.flush()
    after = activity(redis_client, keys, time.time(), minutes=MAX_MINUTES)
    assert after["totals"]["pages/fate/fetched"] == 3 and after["totals"]["pages/fate/duplicate"] == 2
    assert after["totals"]["downloader/response_status_count/200"] == 5
    assert after["totals"]["downloader/response_status_count/404"] == 1
    assert after["totals"]["urlstore/written/fetched"] == 2
    assert after["workers"] == 0
    one = activity(redis_client, keys, T0 + 12, minutes=1)
    by_t = {s["t"]: s["fates"] for s in one["series"]}
    assert by_t[bucket_of(T0)] == fates
    assert by_t[bucket_of(T0) + 10] == {
        "fetched": 1,
        "duplicate": 1,
        "robots_disallowed": 1,
        "dns_error": 1,
        "server_error": 1,
    }
    assert len(one["recent"]) == 11 and one["recent"][0]["url"] == "http://a.example/2/boom"

    # the recent list keeps the newest RECENT pages, and so does a worker between flushes
    many = [Page(url=f"http://c.example/{i}", status=200) for i in range(RECENT + 30)]
    scraped(crawler, *many)
    assert len(ext._recent) == RECENT
    assert ext.flush()
    listed = activity(redis_client, keys, T0 + 12, minutes=1)["recent"]
    assert [e["url"] for e in listed] == [p["url"] for p in reversed(many[-RECENT:])]


def test_a_live_worker_is_counted_until_it_closes(redis_url, redis_client, crawl_name):
    crawler = get_crawler(BroadSpider, project_settings(CRAWL_NAME=crawl_name, REDIS_URL=redis_url))
    ext = live_stats(crawler)
    other = live_stats(get_crawler(BroadSpider, project_settings(CRAWL_NAME=crawl_name, REDIS_URL=redis_url)))
    assert ext.flush() and other.flush()
    assert activity(redis_client, crawl_name, time.time())["workers"] == 2
    scraped(crawler, Page(url="http://a.example/last", status=200))
    crawler.signals.send_catch_log(signal=signals.spider_closed, spider=None, reason="finished")
    got = activity(redis_client, crawl_name, time.time())
    assert got["workers"] == 1  # the closing worker took itself out, after its last flush
    assert got["totals"] == {"pages/fate/fetched": 1} and got["recent"][0]["url"] == "http://a.example/last"


def test_a_redis_outage_loses_nothing_and_says_so_once(tmp_path, crawl_name, caplog):
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with RedisServer(tmp_path / "redis", persistent=True) as server:
        settings = project_settings(
            CRAWL_NAME=crawl_name,
            REDIS_URL=server.url,
            REDIS_PARAMS={"retry": Retry(NoBackoff(), 0), "socket_connect_timeout": 2},
        )
        crawler = get_crawler(BroadSpider, settings)
        ext = live_stats(crawler)
        ext.clock = clock = Clock(T0)
        scraped(crawler, *pages_of_every_fate(1))
        crawler.stats.inc_value("downloader/response_status_count/200", 3)
        assert ext.flush()

        server.stop()
        clock.t = T0 + 10
        scraped(crawler, *pages_of_every_fate(2))
        crawler.stats.inc_value("downloader/response_status_count/200", 4)
        with caplog.at_level(logging.DEBUG, logger="crawler.extensions.livestats"):
            assert not ext.flush()
            clock.t = T0 + 20
            scraped(crawler, Page(url="http://a.example/during", status=200, metadata={"title": "During"}))
            assert not ext.flush()
            ext.tick()  # the periodic flush waits for the outage's retry time
            warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warnings) == 1 and "Live stats not published" in warnings[0].getMessage(), warnings
            assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 1  # (the tick did not try)
            assert not any(r.exc_info for r in caplog.records)  # no traceback

            server.start()
            assert ext.flush()
            assert any("Live stats published again" in r.getMessage() for r in caplog.records)

        got = activity(server.client, crawl_name, T0 + 20, minutes=1)
        assert got["totals"]["pages/fate/fetched"] == 3
        assert got["totals"]["pages/fate/server_error"] == 2
        assert got["totals"]["downloader/response_status_count/200"] == 7
        by_t = {s["t"]: s["fates"] for s in got["series"]}
        assert by_t[bucket_of(T0)]["fetched"] == 1  # written before the outage
        assert by_t[bucket_of(T0) + 10]["fetched"] == 1 and by_t[bucket_of(T0) + 10]["dns_error"] == 1
        assert by_t[bucket_of(T0) + 20] == {"fetched": 1}  # each in the bucket of its own time
        assert [e["url"] for e in got["recent"][:2]] == ["http://a.example/during", "http://a.example/2/boom"]
        assert len(got["recent"]) == 11

        assert ext.flush()  # and nothing of it twice
        assert activity(server.client, crawl_name, T0 + 20, minutes=1) == got


def test_a_worker_waiting_for_the_stores_is_published_until_it_goes_on(redis_url, redis_client, crawl_name):
    """The scheduler's pacing at its bound of pages not stored: the flush publishes it, the
    reader (scrapy frontier, the API's activity) shows it, and it goes once the worker does."""
    crawler = get_crawler(BroadSpider, project_settings(CRAWL_NAME=crawl_name, REDIS_URL=redis_url))
    pacing = Pacing(8, max_unstored=2)
    services(crawler).pacing = pacing
    ext = live_stats(crawler)
    for lease in (b"a", b"b"):
        pacing.downloaded(lease, 1_000_000)
    now = time.time()
    assert pacing.unstored_full(now - 90)
    assert ext.flush()
    waiting = activity(redis_client, crawl_name, now)["waiting"]
    assert [(w["worker"], w["for"], w["pages"], w["bytes"]) for w in waiting] == [
        (ext.worker, "the stores", 2, 2_000_000)
    ]
    (line,) = waiting_lines(waiting, now)
    assert (
        line.startswith(f"{ext.worker} waits for the stores since ")
        and "(90 s): 2 pages (2.0 MB) not yet stored" in line
    )
    # a store that fails is named, with why and since when (its uploads retried)
    pacing.trouble.failed(ARCHIVE, "S3 503 SlowDown", now - 100)
    assert ext.flush()
    (waiting,) = activity(redis_client, crawl_name, now)["waiting"]
    assert (waiting["for"], waiting["why"], waiting["failing_since"]) == ("the archive", "S3 503 SlowDown", now - 100)
    (line,) = waiting_lines([waiting], now)
    assert line.startswith(f"{ext.worker} waits for the archive (S3 503 SlowDown, failing since ")
    pacing.trouble.stored(ARCHIVE)  # stored again: the stores are slow, not failing
    assert ext.flush() and activity(redis_client, crawl_name, now)["waiting"][0]["for"] == "the stores"
    assert pacing.done(b"a", now)  # below the bound: it goes on
    assert ext.flush()
    assert activity(redis_client, crawl_name, now)["waiting"] == []
