"""The broad spider's parsing: one Page per response, links normalized and filtered."""

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.items import Page
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


def test_one_page_item_and_followed_links():
    out = list(make_spider().parse(response()))
    page, requests = out[0], out[1:]
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
    assert [r.url for r in requests] == ["http://a.example/b.html?a=2&z=1", "http://other.example/c.html"]


def test_meta_robots_nofollow_follows_nothing():
    body = HTML.replace(b"<title>t</title>", b'<meta name="ROBOTS" content="noindex, nofollow">')
    out = list(make_spider().parse(response(body)))
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
    out = list(make_spider(**kwargs).parse(response()))
    assert [r.url for r in out[1:]] == expected


def test_error_status_and_non_html_make_a_page_without_links():
    spider = make_spider()
    resp = response(b"gone", cls=TextResponse)
    resp = resp.replace(status=404)
    out = list(spider.parse(resp))
    assert len(out) == 1 and out[0]["status"] == 404 and out[0]["outlinks"] == []
    binary = response(b"\x89PNG...", cls=TextResponse).replace(headers={"Content-Type": "image/png"})
    assert len(list(spider.parse(binary))) >= 1


def test_download_failure_becomes_a_page_with_the_error():
    spider = make_spider()
    request = Request("http://a.example/x", meta={"depth": 1, "redirect_urls": ["http://a.example/old"]})
    failure = Failure(ConnectionRefusedError("refused"))
    failure.request = request
    (page,) = list(spider.errback(failure))
    assert page["url"] == "http://a.example/old" and page["status"] is None
    assert page["error"].startswith("ConnectionRefusedError")
    assert page["redirect_chain"] == ["http://a.example/old"]
