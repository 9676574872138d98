"""Recrawl and freshness: due URLs back into the frontier (scrapy recrawl, the running crawl's
periodic round), conditional refetches and the adaptive schedule they feed: the tests on
real services in this process (Redis, Cassandra, S3, page processes) (the others:
tests/unit/test_recrawl.py, tests/e2e/test_recrawl.py)."""

import time

import pytest
from scrapy import Request

from crawler import meta
from crawler.freshness.recrawl import Recrawl, take_lock
from crawler.frontier import codec
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import Keys
from crawler.urlstore.record import FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.frontiers import drain


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
