"""Recrawl and freshness: due URLs back into the frontier (scrapy recrawl, the running crawl's
periodic round), conditional refetches and the adaptive schedule they feed: the tests on
real services in this process (Redis, Cassandra, S3, page processes) (the others:
tests/unit/test_recrawl.py, tests/e2e/test_recrawl.py)."""

import collections
import sqlite3
import time

import pytest
import redis
from scrapy import Request

from crawler import meta
from crawler.freshness.recrawl import Recrawl, take_lock
from crawler.frontier import codec
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import Keys
from crawler.urlstore.record import FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.frontiers import drain, payload_url
from testing.servers import free_port


def test_a_round_puts_due_urls_past_url_seen_once_and_holds_them(tmp_path, redis_client, crawl_name):
    frontier = Frontier(redis_client, crawl_name, host_interval=0)
    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now = time.time()
    try:
        urls = [f"http://r{i % 2}.example/{i}" for i in range(6)]
        frontier.put([codec_entry(u) for u in urls])  # seen by the crawl already
        drain(frontier)  # fetched and acknowledged
        for i, url in enumerate(urls):
            store.record_fetch(
                FetchRecord(
                    url=url,
                    fate="fetched",
                    status=200,
                    fetched_at=now - 100,
                    next_fetch_at=now - 10 + i * 5,
                    fetch_interval=50.0,
                    etag=f'"{i}"',
                )
            ).result(30)
        recrawl = Recrawl(store, frontier, hold=3600, page=2)
        seen = []
        report = recrawl.round(now=now, progress=lambda r: seen.append(r.read))
        assert report.read == 3 and report.added == 3 and seen[-1] == 3  # due by now: 0, 1, 2
        got = [codec.decode(payload, None) for payload in drain(frontier)]
        assert sorted(r.url for r in got) == sorted(urls[:3])
        assert all(r.meta[meta.RECRAWL]["interval"] == 50.0 and r.headers[b"If-None-Match"] for r in got)
        # held: the next round does not put them again; the host filter and ahead apply
        assert recrawl.round(now=now).read == 0
        assert store.get(urls[0])["next_fetch_at"] == pytest.approx(now + 3600)
        report = recrawl.round(now=now, ahead=100, host="r1.example")
        assert report.read == 2  # 3 and 5 (1 is held)
    finally:
        store.close()


def codec_entry(url):
    from crawler.frontier.frontier import Entry

    return Entry(url=url, payload=codec.encode_url(url))


def test_one_worker_at_a_time_holds_the_recrawl_lock(redis_client, crawl_name):
    class F:
        redis = redis_client
        keys = Keys(crawl_name)

    assert take_lock(F, "w1", 0.3)
    assert not take_lock(F, "w2", 0.3)
    assert take_lock(F, "w1", 0.3)  # its own: extended
    time.sleep(0.4)  # expired (its worker died): another takes it
    assert take_lock(F, "w2", 5)


def test_sitemap_hints_and_statuses_reach_the_records_schedule():
    from scrapy.http import HtmlResponse, XmlResponse
    from scrapy.settings import Settings
    from scrapy.utils.test import get_crawler

    from crawler.pipelines.urlstore import fetch_record, schedule_bounds
    from crawler.spiders.broad import BroadSpider
    from settings import base

    settings = {name: getattr(base, name) for name in dir(base) if name.isupper()}
    spider = BroadSpider.from_crawler(get_crawler(BroadSpider, settings))
    sitemap = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>http://s.example/hourly</loc><changefreq>hourly</changefreq><lastmod>2023-11-14</lastmod></url>
  <url><loc>http://s.example/plain</loc></url>
</urlset>"""
    requests = list(spider.parse_sitemap(XmlResponse("http://s.example/sitemap.xml", body=sitemap)))
    assert [r.url for r in requests] == ["http://s.example/hourly", "http://s.example/plain"]
    assert requests[0].meta["sitemap_hints"] == {"changefreq": "hourly", "lastmod": "2023-11-14"}
    assert "sitemap_hints" not in requests[1].meta
    bounds = schedule_bounds(Settings({**settings, "RECRAWL_SYNC_DELTA_RATE": 0}))

    def record(request, status, body=b"<html><body>x</body></html>", headers=None):
        resp = HtmlResponse(request.url, status=status, body=body, request=request, headers=headers or {})
        page = spider.page(resp, None)
        return fetch_record(page, bounds.initial, bounds.error, bounds)

    hourly = record(requests[0], 200, headers={"ETag": '"e1"', "Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT"})
    assert hourly.fetch_interval == 3600 and hourly.next_fetch_at == pytest.approx(hourly.fetched_at + 3600)
    assert hourly.etag == '"e1"' and hourly.last_modified == "Tue, 14 Nov 2023 22:13:20 GMT"
    plain = record(requests[1], 200)
    assert plain.fetch_interval == base.RECRAWL_INTERVAL
    gone = record(requests[1], 404)
    assert gone.next_fetch_at == pytest.approx(gone.fetched_at + base.RECRAWL_GONE_INTERVAL)
    moved = Request("http://s.example/new", meta={"redirect_urls": ["http://s.example/old"]})
    moved_record = record(moved, 200)
    assert moved_record.url == "http://s.example/old"
    assert moved_record.next_fetch_at == pytest.approx(moved_record.fetched_at + base.RECRAWL_REDIRECT_INTERVAL)
    # a recrawl whose digest did not change: its interval grows from the one it carried
    again = codec.decode(
        codec.encode_recrawl("http://s.example/plain", {"interval": 7200.0, "digest": "sha1:1"}), spider
    )
    resp = HtmlResponse(again.url, status=200, body=b"<html>x</html>", request=again)
    page = spider.page(resp, None)
    page["content_digest"] = "sha1:1"
    assert fetch_record(page, bounds.initial, bounds.error, bounds).fetch_interval == pytest.approx(7200 * 1.4)
    page["content_digest"] = "sha1:2"
    assert fetch_record(page, bounds.initial, bounds.error, bounds).fetch_interval == pytest.approx(7200 * 0.8)


def _record(store, url, due, fetched_at=None):
    store.record_fetch(
        FetchRecord(
            url=url,
            fate="fetched",
            status=200,
            fetched_at=fetched_at or due - 1000,
            next_fetch_at=due,
            fetch_interval=600.0,
        )
    ).result(30)


def _queued(frontier) -> collections.Counter:
    return collections.Counter(payload_url(p) for p in drain(frontier))


def test_urls_the_frontier_refuses_wait_the_hold_rather_than_starve_the_rounds(tmp_path, redis_client, crawl_name):
    """Due URLs of a host the rules reject since are held as the others are: each round
    read only them again, oldest first, and the URLs due after them were never reached."""
    from crawler.scope.rules import RulesWatch

    rules = tmp_path / "rules.txt"
    rules.write_text("reject host old.example\n")
    frontier = Frontier(redis_client, crawl_name, host_interval=0, rules=RulesWatch(str(rules), every=0.0))
    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now = time.time()
    try:
        for i in range(10):
            _record(store, f"http://old.example/{i}", now - 5000 + i)
        for i in range(5):
            _record(store, f"http://good.example/{i}", now - 100 + i)
        recrawl = Recrawl(store, frontier, hold=3600, page=5)
        assert recrawl.round(10, now=now).statuses == {"rejected": 10}
        assert recrawl.round(10, now=now).statuses == {"added": 5}
        assert sorted(_queued(frontier)) == [f"http://good.example/{i}" for i in range(5)]
        assert store.get("http://old.example/0")["next_fetch_at"] == pytest.approx(now + 3600)
    finally:
        store.close()


def test_a_url_is_held_before_it_is_put_so_a_failed_round_never_puts_it_twice(tmp_path, redis_client, crawl_name):
    """Each due URL is held (its due time moved past the hold) before it is put: a round
    whose hold fails (here another writer holds SQLite) puts nothing, where it put the
    URLs each round and failed to hold them; a round whose put fails (Redis away) gives
    the URLs their due times back, so the next round puts them."""
    frontier = Frontier(redis_client, crawl_name, host_interval=0)
    path = str(tmp_path / "urlstore.sqlite")
    store = SqliteUrlStore(path, timeout=0.3)
    now = time.time()
    urls = [f"http://a.example/{i}" for i in range(4)]
    try:
        for i, url in enumerate(urls):
            _record(store, url, now - 100 + i)
        other = sqlite3.connect(path, timeout=0.3, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        recrawl = Recrawl(store, frontier, hold=3600)
        for _ in range(3):
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                recrawl.round(100, now=now)
        other.execute("ROLLBACK")
        assert frontier.stats()["queued"] == 0
        for i, url in enumerate(urls):  # (holds of those rounds still waiting may land now: due again)
            _record(store, url, now - 100 + i)
        away = Frontier(redis.Redis(port=free_port(), socket_connect_timeout=0.5), crawl_name, host_interval=0)
        with pytest.raises(redis.ConnectionError):
            Recrawl(store, away, hold=3600).round(100, now=now)
        assert [store.get(url)["next_fetch_at"] for url in urls] == pytest.approx([now - 100 + i for i in range(4)])
        assert recrawl.round(100, now=now).added == 4
        assert recrawl.round(100, now=now).read == 0
        assert _queued(frontier) == dict.fromkeys(urls, 1)
    finally:
        store.close()


def test_a_pass_looking_further_ahead_than_the_hold_puts_each_url_once(tmp_path, redis_client, crawl_name):
    """``scrapy recrawl --due-within`` past RECRAWL_HOLD: a URL held is due again within the
    pass's horizon, after its cursor; it is held past the horizon, so it is read once."""
    frontier = Frontier(redis_client, crawl_name, host_interval=0)
    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now = time.time()
    try:
        for i in range(4):
            _record(store, f"http://a.example/{i}", now - 100 + i)
        report = Recrawl(store, frontier, hold=3600, page=2).round(ahead=7200, now=now)
        assert (report.read, report.added) == (4, 4)
        assert set(_queued(frontier).values()) == {1}
        assert store.get("http://a.example/0")["next_fetch_at"] == pytest.approx(now + 7200 + 3600)
    finally:
        store.close()


def test_a_pass_by_fetch_time_run_twice_puts_each_url_once(tmp_path, redis_client, crawl_name):
    """``scrapy recrawl --older-than`` run again while its URLs wait in the frontier: the
    second pass reads them (they are older still, due or not) and leaves them out, as they
    were put since their fetch and within the hold (before, each was put twice and fetched
    twice). A URL fetched since, or whose hold is over, is put again; a pass whose put
    failed gives the put time back with the due time, so the next pass puts the URL."""
    frontier = Frontier(redis_client, crawl_name, host_interval=0)
    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now, hold = time.time(), 36_000
    urls = [f"http://o.example/{i}" for i in range(4)]
    try:
        for i, url in enumerate(urls):
            _record(store, url, now + 86_400 + i, fetched_at=now - 7200)  # due tomorrow, fetched 2 h ago
        recrawl = Recrawl(store, frontier, hold=hold)
        assert recrawl.round(older_than=3600, now=now).added == 4
        assert recrawl.round(older_than=3600, now=now + 60).read == 0
        assert _queued(frontier) == dict.fromkeys(urls, 1)
        _record(store, urls[0], now + 86_400, fetched_at=now + 200)  # fetched since: too new for the next pass
        _record(store, urls[1], now + 86_400, fetched_at=now + 50)  # fetched since, old enough for it
        report = recrawl.round(older_than=3600, now=now + 3700)
        assert (report.read, report.added) == (1, 1) and _queued(frontier) == {urls[1]: 1}
        # the hold over (their puts lost, say): 2 and 3 put again, and 0, old enough now
        assert recrawl.round(older_than=3600, now=now + hold + 10).read == 3
        drain(frontier)
        away = Frontier(redis.Redis(port=free_port(), socket_connect_timeout=0.5), crawl_name, host_interval=0)
        later = now + hold + 3800  # (1's hold is over: put at now + 3700)
        with pytest.raises(redis.ConnectionError):
            Recrawl(store, away, hold=hold).round(older_than=3600, now=later)
        assert recrawl.round(older_than=3600, now=later + 1).added == 1
        assert _queued(frontier) == {urls[1]: 1}
    finally:
        store.close()


def test_urls_deferred_for_a_server_away_are_held_and_delivered_once(tmp_path):
    """A sharded frontier with one server away says ``deferred`` for its URLs (they wait in
    the worker's outbox): they are held as the added ones are, where each round put
    another copy into the outbox, all delivered once the server was back."""
    from crawler.frontier.shards import DOWN_WAIT_MIN, ShardedFrontier, server_name
    from testing.servers import RedisServer

    servers = [RedisServer(tmp_path / f"r{i}", persistent=True).start() for i in range(2)]
    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now = time.time()
    try:
        f = ShardedFrontier(
            [Frontier(s.client, "recrawl-deferred", host_interval=0) for s in servers],
            [server_name(s.url) for s in servers],
        )
        urls = [f"http://h{i}.example/x" for i in range(8)]
        for url in urls:
            _record(store, url, now - 100)
        f.put([codec_entry(f"http://w{i}.example/") for i in range(8)])  # (each server's URL-seen read)
        for shard in f.shards:
            drain(shard)
        away = f.ring.index("h0.example")
        servers[away].stop()
        recrawl = Recrawl(store, f, hold=3600)
        first = recrawl.round(now=now)
        assert first.read == 8 and first.statuses.get("deferred", 0) == f.owes() > 0
        assert recrawl.round(now=now + 1).read == 0 and recrawl.round(now=now + 2).read == 0
        servers[away].start()
        time.sleep(DOWN_WAIT_MIN + 0.2)
        f.deliver()
        got = collections.Counter()
        for shard in f.shards:
            got.update(payload_url(p) for p in drain(shard))
        assert got == dict.fromkeys(urls, 1)
    finally:
        store.close()
        for s in servers:
            s.kill()


def test_a_round_that_outlives_its_lock_stops_rather_than_run_beside_another(tmp_path, redis_client, crawl_name):
    """The periodic round renews the crawl's recrawl lock after each step: a round longer
    than the lock (two check intervals) keeps it, and one whose lock another worker took
    meanwhile stops (LockLost), where both ran, the second putting again what the first
    had read and not yet held."""
    from scrapy.settings import Settings

    from crawler.freshness.recrawl import LockLost, RecrawlTimer

    class Crawler:
        def __init__(self, settings):
            self.settings = Settings(settings)
            self.stats = None

    class SlowStore:  # (a loaded store: each page of due URLs takes 0.3 s; then ``then()``)
        def __init__(self, store, then=lambda: None):
            self.store, self.then = store, then

        def due(self, *args, **kwargs):
            time.sleep(0.3)
            out = self.store.due(*args, **kwargs)
            self.then()
            return out

        def reschedule(self, *args, **kwargs):
            return self.store.reschedule(*args, **kwargs)

    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now = time.time()
    try:
        for i in range(20):
            _record(store, f"http://h{i % 4}.example/{i}", now - 100 + i)
        settings = {"RECRAWL_CHECK_INTERVAL": 0.25, "RECRAWL_BATCH": 1000, "RECRAWL_HOLD": 3600}
        frontier = Frontier(redis_client, crawl_name, host_interval=0)
        a = RecrawlTimer(Crawler(settings), SlowStore(store), frontier)
        a.recrawl.page = 5
        assert a.run_once().added == 20  # 1.2 s: longer than its lock, renewed at each page
        assert RecrawlTimer(Crawler(settings), store, frontier).run_once() is None  # (a holds it)
        redis_client.delete(frontier.keys.recrawl_lock)
        for i in range(20, 40):
            _record(store, f"http://h{i % 4}.example/{i}", now - 100 + i)

        def taken():  # (as if the lock had expired during the page's read, and another worker took it)
            redis_client.set(frontier.keys.recrawl_lock, "another worker", px=10_000)

        c = RecrawlTimer(Crawler(settings), SlowStore(store, then=taken), frontier)
        c.recrawl.page = 5
        with pytest.raises(LockLost, match="after 5 due URLs read"):
            c.run_once()
        assert len(_queued(frontier)) == 25  # (the first 20, and the page read before it stopped)
    finally:
        store.close()
