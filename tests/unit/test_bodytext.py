"""Scrapy's decompression and meta-refresh middlewares, without whole-page decoding."""

import gzip

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.http.response import text as text_module
from scrapy.utils.test import get_crawler

from crawler.middlewares.bodytext import HttpCompressionMiddleware, MetaRefreshMiddleware

URL = "http://example.com/page"
CYRILLIC = "<html><head><title>Привет, мир</title></head><body>" + "текст " * 2000 + "</body></html>"


@pytest.fixture
def decoded(monkeypatch):
    """The bodies Scrapy decoded (html_to_unicode: charset detection and decoding)."""
    bodies = []
    real = text_module.html_to_unicode

    def spy(content_type, body, **kwargs):
        bodies.append(body)
        return real(content_type, body, **kwargs)

    monkeypatch.setattr(text_module, "html_to_unicode", spy)
    return bodies


def middleware(cls):
    crawler = get_crawler()
    return cls.from_crawler(crawler)


def test_a_gzipped_page_is_decompressed_and_only_its_decompressed_body_decoded(decoded):
    body = CYRILLIC.encode("cp1251")
    compressed = gzip.compress(body)
    response = HtmlResponse(URL, body=compressed, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})
    out = middleware(HttpCompressionMiddleware).process_response(Request(URL), response)
    assert out.body == body
    assert "Content-Encoding" not in out.headers
    assert decoded == []  # nothing decoded for the compressed response
    assert out.text == CYRILLIC  # the new response detects its own encoding
    assert out.encoding == "cp1251"
    assert decoded == [body]


def test_an_uncompressed_page_is_left_as_it_is(decoded):
    response = HtmlResponse(URL, body=b"<html>plain</html>", headers={"Content-Type": "text/html"})
    out = middleware(HttpCompressionMiddleware).process_response(Request(URL), response)
    assert out is response
    assert decoded == []


def test_a_page_without_meta_refresh_is_not_decoded(decoded):
    response = HtmlResponse(URL, body=CYRILLIC.encode("utf-8"))
    assert middleware(MetaRefreshMiddleware).process_response(Request(URL), response) is response
    assert decoded == []


@pytest.mark.parametrize(
    "encoding, head",
    [
        ("utf-8", '<META HTTP-EQUIV="Refresh" CONTENT="0; URL=/next">'),
        ("cp1251", "<meta http-equiv=refresh content='0;url=/next'>"),
        ("utf-16", '<meta http-equiv="refresh" content="0; url=/next">'),  # NUL bytes: Scrapy's own check
    ],
)
def test_a_meta_refresh_is_followed_in_any_encoding(encoding, head):
    body = f"<html><head>{head}<title>Привет</title></head><body>x</body></html>".encode(encoding)
    response = HtmlResponse(URL, body=body, encoding=encoding if encoding == "utf-16" else None)
    out = middleware(MetaRefreshMiddleware).process_response(Request(URL), response)
    assert isinstance(out, Request)
    assert out.url.startswith("http://example.com/next")  # (UTF-16: Scrapy keeps the BOM as a query)


def test_a_meta_refresh_past_scrapys_window_is_not_followed():
    """Scrapy's own rule (the first 4,096 characters) still holds."""
    body = ("<html><head><title>x</title></head><body>" + "é" * 5000).encode() + (
        b'<meta http-equiv="refresh" content="0; url=/next"></body></html>'
    )
    response = HtmlResponse(URL, body=body)
    assert middleware(MetaRefreshMiddleware).process_response(Request(URL), response) is response
