"""Requests survive the trip through a frontier payload."""

import pickle

import pytest
import scrapy
from scrapy import Request

from crawler import meta
from crawler.frontier import codec


class Spider(scrapy.Spider):
    name = "t"

    def parse(self, response):
        pass

    def errback(self, failure):
        pass

    def other(self, response):
        pass


SPIDER = Spider()


def roundtrip(request):
    payload = codec.encode(request, SPIDER)
    return payload, codec.decode(payload, SPIDER)


def test_seed_payload_is_the_url():
    payload, back = roundtrip(Request("http://a.example/x", errback=SPIDER.errback))
    assert payload == b"http://a.example/x" == codec.encode_url("http://a.example/x")
    assert back.url == "http://a.example/x" and back.errback == SPIDER.errback


def test_plain_link_is_compact():
    req = Request(
        "http://a.example/x?q=1",
        meta={"depth": 3, meta.LEASE: "42"},
        headers={"Referer": "http://a.example/"},
        errback=SPIDER.errback,
    )
    payload, back = roundtrip(req)
    assert len(payload) < 60
    assert back.url == req.url
    assert back.meta == {"depth": 3}
    assert back.headers[b"Referer"] == b"http://a.example/"
    assert back.callback is None and back.errback == SPIDER.errback


def test_other_requests_are_stored_whole_without_the_lease():
    req = Request(
        "http://a.example/form",
        method="POST",
        body=b"a=1",
        callback=SPIDER.other,
        meta={"depth": 1, "redirect_urls": ["http://a.example/old"], meta.LEASE: "7"},
        dont_filter=True,
        priority=5,
    )
    payload, back = roundtrip(req)
    assert payload.startswith(codec.WHOLE) and b"\x80" not in payload  # JSON, no pickle
    assert (back.method, back.body, back.dont_filter, back.priority) == ("POST", b"a=1", True, 5)
    assert back.callback == SPIDER.other
    assert back.meta == {"depth": 1, "redirect_urls": ["http://a.example/old"]}


def test_link_payload_is_what_a_plain_request_encodes_to():
    url, referer = "http://a.example/x?q=1", "http://a.example/"
    request = Request(url, meta={"depth": 3}, headers={"Referer": referer}, errback=SPIDER.errback)
    assert codec.encode_link(url, 3, referer) == codec.encode(request, SPIDER)
    back = codec.decode(codec.encode_link(url, 3, referer), SPIDER)
    assert back.url == url and back.meta["depth"] == 3 and back.headers[b"Referer"] == referer.encode()


def test_a_forced_submission_stays_compact_and_forced():
    url = "http://a.example/news"
    payload = codec.encode_url(url, force=True)
    back = codec.decode(payload, SPIDER)
    assert not payload.startswith(codec.WHOLE) and len(payload) < 40
    assert back.url == url and back.meta == {"depth": 0, meta.FORCE: True}
    assert back.dont_filter and back.errback == SPIDER.errback
    # a redirect or retry of it (enqueued again) keeps the flag, and the plain form
    assert codec.encode(back, SPIDER) == payload
    assert not codec.decode(codec.encode_url(url), SPIDER).meta.get(meta.FORCE)


def test_a_submission_stays_compact_and_urgent():
    url = "http://a.example/news"
    for force in (False, True):
        payload = codec.encode_url(url, force=force, urgent=True)
        back = codec.decode(payload, SPIDER)
        assert not payload.startswith(codec.WHOLE) and len(payload) < 40
        assert back.meta[meta.URGENT] is True and bool(back.meta.get(meta.FORCE)) is force
        assert back.dont_filter is force
        assert codec.encode(back, SPIDER) == payload  # a redirect or retry of it stays urgent
    assert meta.URGENT not in codec.decode(codec.encode_url(url, force=True), SPIDER).meta


def test_bytes_and_header_maps_survive_json():
    req = Request(
        "http://a.example/api",
        method="PUT",
        body=b"\x00\xffraw",
        headers={"X-Token": "t", "Accept": ["a", "b"]},
        cookies={"session": "1"},
        meta={"depth": 2, "blob": b"\x01", "pair": ("x", 1), "nested": {"$b": "not a tag"}},
        callback=SPIDER.other,
    )
    _, back = roundtrip(req)
    assert back.body == b"\x00\xffraw" and back.headers.getlist("Accept") == [b"a", b"b"]
    assert back.cookies == {"session": "1"}
    assert back.meta == {"depth": 2, "blob": b"\x01", "pair": ["x", 1], "nested": {"$b": "not a tag"}}


def test_a_request_json_cannot_carry_is_refused_naming_the_key():
    req = Request("http://a.example/x", meta={"depth": 1, "hook": object()}, callback=SPIDER.other)
    with pytest.raises(codec.UnencodableRequest, match=r"meta\['hook'\] of http://a.example/x"):
        codec.encode(req, SPIDER)


class _Boom:
    def __reduce__(self):
        return (exec, ("raise SystemExit('ran')",))


@pytest.mark.parametrize(
    "payload",
    [
        b"P" + pickle.dumps({"url": "http://a.example/", "boom": _Boom()}),  # the old pickled form
        pickle.dumps(_Boom()),
        b'J{"url": "http://a.example/", "_class": "os.system"}',
        b"J{not json",
        b"",
    ],
)
def test_a_payload_of_no_known_form_is_refused_unread(payload):
    with pytest.raises(codec.UndecodablePayload):
        codec.decode(payload, SPIDER)
