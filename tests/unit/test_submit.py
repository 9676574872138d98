"""Real-time submission (`scrapy submit`, the submission list) and the fetch policy: the unit
tests (pure: no service, no process) (the others: tests/integration/test_submit.py,
tests/e2e/test_submit.py)."""

import time

import pytest

from crawler.freshness.policy import FORCED, LOOKUP_FAILED, SKIPPED, FetchPolicy
from crawler.frontier import codec, submit
from crawler.urlstore.record import ArchivePointer, FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore


def test_a_value_is_a_url_or_a_json_object():
    assert submit.parse(b"https://example.com/a\n") == submit.Submission("https://example.com/a")
    assert submit.parse('{"url": "http://x.example/", "force": true}') == submit.Submission(
        "http://x.example/", force=True
    )
    assert submit.parse(b'{"url": "http://x.example/", "priority": 3}').priority == 3
    for bad in (b"", b"two words", b"{}", b'{"url": 5}', b'{"url": "http://x/", "force": "yes"}', b"{not json"):
        with pytest.raises(ValueError):
            submit.parse(bad)
    with pytest.raises(ValueError):
        submit.parse(b'{"url": "http://x/", "priority": 1.5}')


class Stats:
    def __init__(self):
        self.values = {}

    def inc_value(self, key, count=1):
        self.values[key] = self.values.get(key, 0) + count


def test_the_policy_skips_what_was_fetched_within_its_age(tmp_path):
    from scrapy import Request

    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"))
    now = time.time()
    for url, age, fate, status in [
        ("http://p.example/fresh", 3600, "fetched", 200),
        ("http://p.example/old", 8 * 86400, "fetched", 200),
        ("http://p.example/failed", 60, "fetched", 503),
        ("http://p.example/forced", 60, "fetched", 200),
        ("http://p.example/moved", 60, "fetched", 200),
    ]:
        record = FetchRecord(url=url, fate=fate, status=status, fetched_at=now - age, archive=ArchivePointer("k", 0, 1))
        store.record_fetch(record).result(30)
    # recorded, but its batch never stored (its worker died): fetched again
    store.record_fetch(FetchRecord(url="http://p.example/unstored", fate="fetched", status=200, fetched_at=now)).result(
        30
    )
    stats = Stats()
    policy = FetchPolicy(store, 7 * 86400, stats)
    requests = [
        Request("http://p.example/fresh"),
        Request("http://p.example/old"),
        Request("http://p.example/failed"),
        Request("http://p.example/new"),
        Request("http://p.example/unstored"),
        codec.decode(codec.encode_url("http://p.example/forced", force=True), None),
        Request("http://p.example/moved", meta={"redirect_urls": ["http://p.example/x"]}),  # a follow-up
    ]
    try:
        assert policy.skip(requests, now) == {0}
        assert stats.values == {SKIPPED: 1, FORCED: 1}
        assert FetchPolicy(store, 1800, Stats()).skip(requests, now) == set()

        class Away:  # a store that does not answer (Cassandra unreachable)
            def last_fetched(self, urls):
                raise TimeoutError("no answer")

        stats = Stats()
        assert FetchPolicy(Away(), 7 * 86400, stats).skip(requests, now) == set()
        assert stats.values == {FORCED: 1, LOOKUP_FAILED: 5}
    finally:
        store.close()
