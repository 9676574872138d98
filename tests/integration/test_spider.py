"""The broad spider's parsing: one Page per response, links normalized and filtered."""

from types import SimpleNamespace

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, JsonResponse, TextResponse, XmlResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.items import Page
from crawler.pipelines.links import FollowLinksPipeline
from crawler.services import services
from crawler.spiders.broad import BroadSpider
from settings import base

HTML = b"""<html><head><title>t</title></head><body>
<a href="/b.html?utm_source=x&z=1&a=2#frag">B</a>
<a href="http://OTHER.example:80/c.html">C</a>
<a href="/hidden.html" rel="nofollow">hidden</a>
<a href="/doc.pdf">pdf</a>
<a href="mailto:a@b.example">mail</a>
<a href="javascript:void(0)">js</a>
<a href="http://[bad/">broken</a>
</body></html>"""


PROJECT_SETTINGS = {name: getattr(base, name) for name in dir(base) if name.isupper()}


def make_spider(**kwargs):
    crawler = get_crawler(BroadSpider, PROJECT_SETTINGS)
    return BroadSpider.from_crawler(crawler, **kwargs)


def response(body=HTML, url="http://a.example/a.html", cls=HtmlResponse, **meta):
    request = Request(url, meta={"depth": 2, **meta}, headers={"Referer": "http://a.example/"})
    return cls(url=url, body=body, request=request, headers={"Content-Type": "text/html"})


def parse(spider, resp) -> list:
    """What the spider's ``parse`` yields for ``resp``, the page read in this thread
    (``parse`` sends it to a page worker process)."""
    return [spider.page(resp, spider.read_now(resp))]


def follow(spider, page) -> list[str]:
    """The URLs the links pipeline hands to the engine for ``page`` (the engine's
    ``crawl`` is replaced by a list: this checks the pipeline's choice, not scheduling)."""
    requests = []
    spider.crawler.engine = SimpleNamespace(crawl=requests.append, scheduler=None)
    spider.crawler.spider = spider
    pipeline = FollowLinksPipeline.from_crawler(spider.crawler)
    pipeline.process_item(page)
    for r in requests:
        assert r.meta["depth"] == page["depth"] + 1 and r.headers[b"Referer"] == page["final_url"].encode()
    return [r.url for r in requests]


def test_one_page_item_and_followed_links():
    spider = make_spider()
    out = parse(spider, response())
    assert len(out) == 1  # links are followed by the links pipeline, after content seen
    page = out[0]
    assert isinstance(page, Page)
    assert page["url"] == page["final_url"] == "http://a.example/a.html"
    assert page["status"] == 200 and page["depth"] == 2 and page["referrer"] == "http://a.example/"
    assert page["body"] == HTML and page["error"] is None
    links = {link["url"]: link for link in page["outlinks"]}
    assert set(links) == {
        "http://a.example/b.html?a=2&z=1",
        "http://other.example/c.html",
        "http://a.example/hidden.html",
    }
    assert links["http://a.example/hidden.html"]["nofollow"] is True
    assert links["http://a.example/b.html?a=2&z=1"]["text"] == "B"
    assert follow(spider, page) == ["http://a.example/b.html?a=2&z=1", "http://other.example/c.html"]
    page["near_duplicate_of"] = "http://a.example/first.html"  # a near copy's links are followed
    assert follow(spider, page) == ["http://a.example/b.html?a=2&z=1", "http://other.example/c.html"]
    strict = BroadSpider.from_crawler(
        get_crawler(BroadSpider, {**PROJECT_SETTINGS, "CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES": False})
    )
    assert follow(strict, page) == []  # unless that is turned off
    del page["near_duplicate_of"]
    page["duplicate_of"] = "http://a.example/first.html"  # an exact copy's were followed from the first copy
    assert follow(spider, page) == []


def test_meta_robots_nofollow_follows_nothing():
    body = HTML.replace(b"<title>t</title>", b'<meta name="ROBOTS" content="noindex, nofollow">')
    out = parse(make_spider(), response(body))
    assert len(out) == 1 and out[0]["outlinks"] == []


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({"allowed_domains": "other.example"}, ["http://other.example/c.html"]),
        ({"allowed_prefixes": "http://a.example/b"}, ["http://a.example/b.html?a=2&z=1"]),
        ({"follow": "0"}, []),
    ],
)
def test_scope_from_arguments(kwargs, expected):
    spider = make_spider(**kwargs)
    (page,) = parse(spider, response())
    assert follow(spider, page) == expected
    followable = [link for link in page["outlinks"] if not link["nofollow"]]
    assert spider.crawler.stats.get_value("links/out_of_scope", 0) == len(followable) - len(expected)


def test_error_status_and_non_html_make_a_page_without_links():
    spider = make_spider()
    resp = response(b"gone", cls=TextResponse)
    resp = resp.replace(status=404)
    out = parse(spider, resp)
    assert len(out) == 1 and out[0]["status"] == 404 and out[0]["outlinks"] == []
    binary = response(b"\x89PNG...", cls=TextResponse).replace(headers={"Content-Type": "image/png"})
    assert len(parse(spider, binary)) >= 1


def test_download_failure_becomes_a_page_with_the_error():
    spider = make_spider()
    request = Request("http://a.example/x", meta={"depth": 1, "redirect_urls": ["http://a.example/old"]})
    failure = Failure(ConnectionRefusedError("refused"))
    failure.request = request
    (page,) = list(spider.errback(failure))
    assert page["url"] == "http://a.example/old" and page["status"] is None
    assert page["error"].startswith("ConnectionRefusedError")
    assert page["redirect_chain"] == ["http://a.example/old"]


def test_a_json_page_is_recorded_without_links():
    body = b'{"title": "api", "links": ["http://a.example/x.html"]}'
    request = Request("http://a.example/api.json", meta={"depth": 1}, headers={"Referer": "http://a.example/"})
    json_response = TextResponse(
        url="http://a.example/api.json", body=body, request=request, headers={"Content-Type": "application/json"}
    )
    out = parse(make_spider(), json_response)
    assert len(out) == 1 and out[0]["status"] == 200 and out[0]["outlinks"] == [] and out[0]["body"] == body
    assert json_response._cached_selector is None  # not parsed into Python objects for nothing
    as_scrapy_types_it = JsonResponse(url="http://a.example/api.json", body=body, request=request)
    assert parse(make_spider(), as_scrapy_types_it)[0]["outlinks"] == []
    assert as_scrapy_types_it._cached_selector is None


def test_a_text_page_whose_links_are_read_leaves_no_selector_behind():
    """A response and its selector refer to each other: kept, the pair and its parsed
    document would wait for a full pass of the garbage collector."""
    body = b'<?xml version="1.0"?><feed><a href="http://a.example/x.html">x</a></feed>'
    request = Request("http://a.example/feed.xml", meta={"depth": 1})
    xml = XmlResponse(url=request.url, body=body, request=request, headers={"Content-Type": "application/xml"})
    (page,) = parse(make_spider(), xml)
    assert [link["url"] for link in page["outlinks"]] == ["http://a.example/x.html"]
    assert xml._cached_selector is None


def test_the_spider_reads_a_page_once_for_every_pipeline(redis_url, crawl_name):
    from crawler.pipelines.contentseen import ContentSeenPipeline
    from crawler.pipelines.metadata import MetadataPipeline

    settings = {**PROJECT_SETTINGS, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}
    crawler = get_crawler(BroadSpider, settings)
    spider = BroadSpider.from_crawler(crawler)
    resp = response(HTML.replace(b"<title>t</title>", b"<title>Read once</title>"))
    reading = spider.read_now(resp)
    assert reading.prints is not None and reading.metadata["title"] == "Read once"
    (page,) = [spider.page(resp, reading._replace(metadata={"title": "from the reading"}))]
    assert crawler.stats.get_value("pagereader/pages") == 1
    assert crawler.stats.get_value("pagereader/ms/parse") > 0
    MetadataPipeline.from_crawler(crawler).process_now(page)
    assert page["metadata"] == {"title": "from the reading"}  # not read again
    ContentSeenPipeline.from_crawler(crawler).process_now(page)
    assert page["content_digest"] == f"sha1:{reading.prints.digest}"
    assert not any(value is reading or isinstance(value, type(reading)) for value in dict(page).values())
    assert services(crawler).pages.reading(dict(page)) is not None  # a copy of the page keeps it


def test_the_spider_reads_only_what_the_crawl_uses():
    links_only = {**PROJECT_SETTINGS, "ITEM_PIPELINES_BASE": {"crawler.pipelines.links.FollowLinksPipeline": 150}}
    spider = BroadSpider.from_crawler(get_crawler(BroadSpider, links_only))
    reading = spider.read_now(response())
    assert reading.prints is None and reading.metadata == {} and len(reading.links) == 3
    no_follow = make_spider(follow="0")
    assert no_follow.read_now(response()).links == []
