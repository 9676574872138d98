"""The scheduler sends the requests of one reactor turn (a page's links) to the frontier
in one call, and always before the acknowledgement of the page they came from (real
frontier, real Redis)."""

from scrapy import Request
from scrapy.utils.test import get_crawler

from crawler.frontier.codec import LEASE_META
from crawler.frontier.scheduler import FrontierScheduler
from crawler.spiders.broad import BroadSpider
from tests.conftest import project_settings


def test_a_pages_links_go_in_one_call_before_its_ack(redis_url, crawl_name):
    crawler = get_crawler(BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name))
    scheduler = FrontierScheduler.from_crawler(crawler)
    scheduler.open(BroadSpider.from_crawler(crawler))
    frontier = scheduler.frontier
    calls = []
    push_many = frontier.push_many
    frontier.push_many = lambda entries, **kw: calls.append(len(entries)) or push_many(entries, **kw)
    try:
        assert scheduler.enqueue_request(Request("http://seed.example/"))
        page = scheduler.next_request()  # sends the seed, then leases it
        assert calls == [1] and page.url == "http://seed.example/" and page.meta[LEASE_META]
        links = [f"http://h{i % 7}.example/p{i}" for i in range(60)] + ["http://h1.example/p1"]  # one twice
        assert all(scheduler.enqueue_request(Request(url, meta={"depth": 1})) for url in links)
        assert frontier.stats_queued() == 0  # nothing sent yet: they wait for the end of the turn
        assert not scheduler.enqueue_request(Request("http://a..example/"))  # invalid: refused at once
        scheduler.ack(page)  # the page is done: its links go first, in one call
        assert calls == [1, 61] and frontier.stats_queued() == 60
        assert crawler.stats.get_value("frontier/enqueued") == 61  # the seed and 60 links
        assert crawler.stats.get_value("frontier/seen") == 1
    finally:
        scheduler.close("finished")
    assert frontier.stats()["leased"] == 0  # the ack was delivered at close
