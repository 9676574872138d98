"""The lease middleware decides when a page is done: acknowledged once all its items left
the pipelines, given back when the UrlStore could not take it."""

import asyncio
import logging

from scrapy import Request, signals
from scrapy.exceptions import DropItem
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler import meta
from crawler.exceptions import StoreUnavailable
from crawler.items import Page
from crawler.middlewares.lease import LeaseMiddleware
from crawler.signals import page_handled, page_not_stored


def _run(items, failure=None):
    """Pass ``items`` through the middleware as a callback's output, then report each as
    having left the pipelines (with ``failure`` for the last one); the signals sent."""
    crawler = get_crawler()
    mw = LeaseMiddleware.from_crawler(crawler)
    sent = []
    crawler.signals.connect(
        lambda request, **kw: sent.append(("handled", request.url)), signal=page_handled, weak=False
    )
    crawler.signals.connect(
        lambda request, **kw: sent.append(("not_stored", request.url)), signal=page_not_stored, weak=False
    )
    request = Request("http://a.example/", meta={meta.LEASE: b"1\x1f1\x1fa.example\x1fhttp://a.example/"})
    response = HtmlResponse("http://a.example/", body=b"<html></html>", request=request)

    async def output():
        for item in items:
            yield item

    async def consume():
        return [out async for out in mw.process_spider_output(response, output())]

    outs = asyncio.run(consume())
    assert not sent  # nothing is done before the items leave the pipelines
    for i, item in enumerate(outs):
        last = i == len(outs) - 1
        if last and failure is not None:
            crawler.signals.send_catch_log(
                signals.item_error, item=item, response=response, spider=None, failure=failure
            )
        else:
            crawler.signals.send_catch_log(signals.item_scraped, item=item, response=response, spider=None)
    return sent


def test_a_page_is_acknowledged_when_its_items_are_stored():
    assert _run([Page(url="http://a.example/"), Page(url="http://a.example/#2")]) == [("handled", "http://a.example/")]


def test_a_page_the_store_could_not_take_gives_its_lease_back():
    failure = Failure(StoreUnavailable("UrlStore write failed"))
    assert _run([Page(url="http://a.example/")], failure) == [("not_stored", "http://a.example/")]


def test_a_page_dropped_because_the_store_could_not_take_it_gives_its_lease_back():
    """The UrlStore pipeline drops a page it could not store (StoreUnavailable is a DropItem)."""
    crawler = get_crawler()
    mw = LeaseMiddleware.from_crawler(crawler)
    sent = []
    crawler.signals.connect(lambda request, **kw: sent.append("not_stored"), signal=page_not_stored, weak=False)
    crawler.signals.connect(lambda request, **kw: sent.append("handled"), signal=page_handled, weak=False)
    request = Request("http://a.example/", meta={meta.LEASE: b"1\x1f1\x1fa.example\x1fhttp://a.example/"})
    response = HtmlResponse("http://a.example/", body=b"<html></html>", request=request)

    async def output():
        yield Page(url="http://a.example/")

    async def consume():
        return [out async for out in mw.process_spider_output(response, output())]

    (item,) = asyncio.run(consume())
    exception = StoreUnavailable("UrlStore write failed")
    crawler.signals.send_catch_log(signals.item_dropped, item=item, response=response, spider=None, exception=exception)
    assert sent == ["not_stored"]


def test_a_dropped_page_is_logged_by_its_url_in_one_line():
    from crawler.observe.logformatter import LogFormatter

    page = Page(url="http://a.example/", body=b"x" * 10_000)
    entry = LogFormatter().dropped(page, StoreUnavailable("UrlStore write failed"), None, None)
    assert entry["msg"] % entry["args"] == (
        "Dropped http://a.example/, its lease given back (fetched again later): UrlStore write failed"
    )
    assert entry["level"] == logging.WARNING


def test_pages_not_stored_are_one_line_every_half_minute_with_their_count(monkeypatch):
    from crawler.observe import logformatter

    clock = [1000.0]
    monkeypatch.setattr(logformatter.time, "monotonic", lambda: clock[0])
    formatter = logformatter.LogFormatter()
    lines = []
    for i in range(100):  # a store away for 50 s, a page dropped every half second
        entry = formatter.dropped(Page(url=f"http://a.example/{i}"), StoreUnavailable("down"), None, None)
        if entry is not None:
            lines.append(entry["msg"] % entry["args"])
        clock[0] += 0.5
    assert lines == [
        "Dropped http://a.example/0, its lease given back (fetched again later): down",
        "Dropped http://a.example/60, its lease given back (fetched again later): down; "
        "60 pages not stored since the last such line",
    ]
    # another drop is not counted among them, and is logged whatever the time
    entry = formatter.dropped(Page(url="http://a.example/x"), DropItem("a duplicate", log_level="INFO"), None, None)
    assert entry["msg"] % entry["args"] == "Dropped http://a.example/x: a duplicate"


def test_other_item_errors_still_acknowledge():
    failure = Failure(ValueError("a pipeline bug"))
    assert _run([Page(url="http://a.example/")], failure) == [("handled", "http://a.example/")]


def test_a_page_whose_item_a_pipeline_copied_waits_for_its_storing_all_the_same():
    """The archive pipeline marks a page as being stored until its batch is; a pipeline
    after it copies the item (``ItemAdapter(item).asdict()``): the lease is acknowledged
    once the storing fires, not when the copy leaves the pipelines."""
    from itemadapter import ItemAdapter
    from twisted.internet.defer import Deferred

    from crawler.services import services

    crawler = get_crawler()
    mw = LeaseMiddleware.from_crawler(crawler)
    sent = []
    crawler.signals.connect(lambda request, **kw: sent.append("handled"), signal=page_handled, weak=False)
    request = Request("http://a.example/", meta={meta.LEASE: b"1\x1f1\x1fa.example\x1fhttp://a.example/"})
    response = HtmlResponse("http://a.example/", body=b"<html></html>", request=request)

    async def output():
        yield Page(url="http://a.example/", fetched_at=1700000000.25)

    async def consume():
        return [out async for out in mw.process_spider_output(response, output())]

    (item,) = asyncio.run(consume())
    batch = Deferred()
    services(crawler).pages.set_storing(item, batch)  # the archive pipeline
    copy = ItemAdapter(item).asdict()  # a pipeline after it
    crawler.signals.send_catch_log(signals.item_scraped, item=copy, response=response, spider=None)
    assert sent == []  # its batch is not stored yet
    batch.callback(None)
    assert sent == ["handled"]
    assert services(crawler).pages.storing(item) is None  # nothing more is kept of it
