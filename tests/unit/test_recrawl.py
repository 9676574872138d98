"""Recrawl and freshness: due URLs back into the frontier (scrapy recrawl, the running crawl's
periodic round), conditional refetches and the adaptive schedule they feed: the unit tests
(pure: no service, no process) (the others: tests/integration/test_recrawl.py,
tests/e2e/test_recrawl.py)."""

import time

from scrapy import Request

from crawler import meta
from crawler.freshness.policy import RECRAWL, SKIPPED, FetchPolicy
from crawler.frontier import codec
from crawler.urlstore.record import ArchivePointer, FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore


class Stats:
    def __init__(self):
        self.values = {}

    def inc_value(self, key, count=1):
        self.values[key] = self.values.get(key, 0) + count


def test_a_recrawl_payload_carries_its_state_and_conditional_headers():
    info = {"interval": 80.0, "digest": "sha1:ab", "fetched_at": 1.5, "etag": '"v1"', "last_modified": "Mon, x"}
    payload = codec.encode_recrawl("http://a.example/p", info)
    request = codec.decode(payload, None)
    assert request.dont_filter and request.meta[meta.RECRAWL] == info
    assert request.headers[b"If-None-Match"] == b'"v1"' and request.headers[b"If-Modified-Since"] == b"Mon, x"
    assert not payload.startswith(codec.WHOLE) and codec.encode(request, None) == payload  # a retry keeps it
    bare = codec.decode(codec.encode_recrawl("http://a.example/q", {"interval": 5.0}), None)
    assert b"If-None-Match" not in bare.headers and bare.meta[meta.RECRAWL] == {"interval": 5.0}


def test_the_fetch_policy_lets_a_due_recrawl_through(tmp_path):
    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now = time.time()
    try:
        for url in ("http://p.example/a", "http://p.example/b"):
            record = FetchRecord(
                url=url, fate="fetched", status=200, fetched_at=now - 60, archive=ArchivePointer("k", 0, 1)
            )
            store.record_fetch(record).result(30)
        stats = Stats()
        requests = [
            Request("http://p.example/a"),  # found again (a link): fetched a minute ago
            codec.decode(codec.encode_recrawl("http://p.example/b", {"interval": 30.0}), None),
        ]
        assert FetchPolicy(store, 7 * 86400, stats).skip(requests, now) == {0}
        assert stats.values == {SKIPPED: 1, RECRAWL: 1}
    finally:
        store.close()
