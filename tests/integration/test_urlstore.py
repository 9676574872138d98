"""One behavioural contract for every UrlStore backend: SQLite, and Cassandra on the
cluster CASSANDRA_HOSTS names (contact points, comma separated; each test creates and
drops a keyspace of its own); without it skipped, or failed in CI (tests/conftest.py).
What only the Cassandra backend does is tested in tests/*/test_urlstore_cassandra.py."""

import asyncio
import os
import re
import sqlite3
import time
from dataclasses import replace

import pytest

from crawler.urlstore.cassandra_cluster import schema_statements
from crawler.urlstore.record import ArchivePointer, FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore

T = 1_700_000_000.5


@pytest.fixture(params=["sqlite", "cassandra"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"), inlink_buckets=4)
        yield s
        s.close()
        return
    from crawler.urlstore.cassandra import CassandraUrlStore

    session = request.getfixturevalue("cassandra_session")
    keyspace = request.getfixturevalue("cassandra_keyspace")
    for statement in schema_statements(keyspace):
        session.execute(statement)
    s = CassandraUrlStore(session, keyspace, inlink_buckets=4)
    yield s
    s.close()


def _fetched(url, **kw):
    defaults = {"fate": "fetched", "fetched_at": T, "status": 200, "final_url": url}
    return FetchRecord(url=url, **{**defaults, **kw})


def test_a_fetch_result_round_trips(store):
    record = _fetched(
        "http://Example.com/a?b=2&a=1",
        redirect_chain=["http://example.com/old"],
        content_digest="sha1:abc",
        simhash=(1 << 64) - 5,  # the top bit set: stored signed, read back unsigned
        metadata={"title": "A page", "lang": "en"},
        archive=ArchivePointer("ab/crawl-0001.warc.gz", 1234, 567, bucket="crawl-archive"),
        outlinks=[{"url": "http://example.com/b", "text": "B", "nofollow": False}],
        next_fetch_at=T + 86400,
    )
    store.record_fetch(record).result(timeout=30)
    got = store.get("http://example.com/a?a=1&b=2")  # normalized on the way in
    assert got["url"] == "http://example.com/a?a=1&b=2"
    assert got["status"] == 200 and got["fate"] == "fetched"
    assert got["fetched_at"] == pytest.approx(T, abs=0.001)
    assert got["next_fetch_at"] == pytest.approx(T + 86400, abs=0.001)
    assert got["redirect_chain"] == ["http://example.com/old"]
    assert got["simhash"] == (1 << 64) - 5
    assert got["metadata"] == {"title": "A page", "lang": "en"}
    # the pointer names its bucket: a reader finds the object after ARCHIVE_S3_BUCKET changed
    assert got["archive"] == {"key": "ab/crawl-0001.warc.gz", "offset": 1234, "length": 567, "bucket": "crawl-archive"}
    assert got["outlinks"] == [{"url": "http://example.com/b", "text": "B", "nofollow": False}]


def test_a_record_written_without_its_pointer_gets_it_later(store):
    # the archive pipeline's order: the record at once, the pointer once its batch is stored
    url = "http://example.com/later"
    store.record_fetch(_fetched(url, metadata={"title": "Later"})).result(timeout=30)
    assert store.get(url)["archive"] is None
    store.set_archive(url, ArchivePointer("cd/crawl-0002.warc.gz", 99, 42), T).result(timeout=30)
    got = store.get(url)
    assert got["archive"] == {"key": "cd/crawl-0002.warc.gz", "offset": 99, "length": 42, "bucket": ""}  # (local)
    assert got["metadata"] == {"title": "Later"} and got["status"] == 200  # the rest as it was
    # a refetch writes its record without a pointer until its own batch is stored
    store.record_fetch(_fetched(url, fetched_at=T + 60)).result(timeout=30)
    assert store.get(url)["archive"] is None


def test_a_capture_stored_late_never_puts_its_pointer_over_a_newer_fetchs(store):
    """A URL fetched twice, the first capture's batch stored after the second (its upload
    retried, another worker's batch): the record keeps the newer capture's pointer, or none
    while it waits for it; a fetch without an answer does not stop the last answer's
    pointer. (Before, the last pointer written won: the older body served for the newer
    record.)"""
    first, second = ArchivePointer("ab/w1-0001.warc.gz", 10, 20), ArchivePointer("cd/w2-0007.warc.gz", 30, 40)
    shown = {"key": second.key, "offset": 30, "length": 40, "bucket": ""}
    url = "http://example.com/twice"
    store.record_fetch(_fetched(url)).result(30)
    store.record_fetch(_fetched(url, fetched_at=T + 60)).result(30)
    store.set_archive(url, second, T + 60).result(30)
    store.set_archive(url, first, T).result(30)  # (late)
    assert store.get(url)["archive"] == shown
    other = "http://example.com/waits"
    store.record_fetch(_fetched(other)).result(30)
    store.record_fetch(_fetched(other, fetched_at=T + 60)).result(30)
    store.set_archive(other, first, T).result(30)  # (late, before the newer capture's)
    assert store.get(other)["archive"] is None
    store.set_archive(other, second, T + 60).result(30)
    assert store.get(other)["archive"] == shown
    failed = "http://example.com/failed-after"
    store.record_fetch(_fetched(failed)).result(30)
    store.record_fetch(FetchRecord(url=failed, fate="timeout", fetched_at=T + 30)).result(30)
    store.set_archive(failed, first, T).result(30)
    assert store.get(failed)["archive"]["key"] == first.key


def test_a_pass_by_fetch_time_leaves_out_urls_put_back_since_their_fetch(store):
    """``due`` by fetch time with ``put_since`` (scrapy recrawl --older-than): a URL a pass
    put back at that time or later and not fetched since is left out; one put before it (its
    hold over), fetched since, or never put is read, with its put time; a put time given
    back (0) is none. A fetch's record leaves the put time as it is."""
    a, b, c = (f"http://p.example/{n}" for n in "abc")
    for url in (a, b, c):
        store.record_fetch(_fetched(url)).result(30)
    for url in (a, b):
        store.reschedule(url, T + 9000, put_at=T + 100).result(30)
    store.record_fetch(_fetched(b, fetched_at=T + 200)).result(30)

    def read(put_since):
        rows, _ = store.due(T + 1000, 100, fetched_before=T + 1000, put_since=put_since)
        return {row["url"]: row["put_at"] for row in rows}

    assert read(T + 50) == {b: pytest.approx(T + 100, abs=0.001), c: None}
    assert set(read(T + 150)) == set(read(None)) == {a, b, c}
    store.reschedule(a, T + 9000, put_at=0.0).result(30)  # (a pass whose put failed)
    assert set(read(T + 50)) == {a, b, c}


def test_a_record_replaces_the_previous_one_but_merges_its_metadata(store):
    url = "http://example.com/replaced"
    full = _fetched(
        url,
        canonical_url="http://example.com/canonical",
        near_duplicate_of="http://example.com/near",
        resemblance=0.9,
        redirect_chain=["http://example.com/old"],
        content_digest="sha1:abc",
        simhash=12345,
        metadata={"title": "T"},
        archive=ArchivePointer("ab/x.warc.gz", 1, 2),
        outlinks=[{"url": "http://example.com/b", "text": "B", "nofollow": True}],
        next_fetch_at=T + 60,
        fetch_interval=60.0,
        etag='"e"',
        last_modified="Tue, 14 Nov 2023 22:13:20 GMT",
    )
    store.record_fetch(full).result(30)
    before = store.get(url)
    # a fetch without an answer after it: the attempt's fate, error, times and schedule; the
    # page the last answer gave stays (its digest, archive pointer, validators, links)
    failed = FetchRecord(url=url, fate="timeout", error="TimeoutError", fetched_at=T + 1, next_fetch_at=T + 61)
    store.record_fetch(replace(failed, fetch_interval=60.0)).result(30)
    got = store.get(url)
    assert (got["fate"], got["status"], got["error"]) == ("timeout", None, "TimeoutError")
    assert got["fetched_at"] == pytest.approx(T + 1, abs=0.001)
    assert got["next_fetch_at"] == pytest.approx(T + 61, abs=0.001)
    kept = set(before) - {"fate", "status", "error", "fetched_at", "next_fetch_at"}
    assert {name: got[name] for name in kept} == {name: before[name] for name in kept}
    assert got["archive"] == {"key": "ab/x.warc.gz", "offset": 1, "length": 2, "bucket": ""}
    assert store.due(T + 120)[0][0]["content_digest"] == "sha1:abc"  # (the next recrawl compares with it)
    # an answer after the failure replaces the page, and has no error
    store.record_fetch(_fetched(url, fetched_at=T + 2, metadata={"lang": "en"})).result(30)
    got = store.get(url)
    assert (got["fate"], got["status"], got["error"]) == ("fetched", 200, None)
    assert got["content_digest"] is None and got["archive"] is None and got["outlinks"] == []
    assert got["metadata"] == {"title": "T", "lang": "en"}
    # a URL whose first fetch got no answer has a record of its attempt alone
    store.record_fetch(FetchRecord(url="http://example.com/never", fate="dns_error", fetched_at=T)).result(30)
    got = store.get("http://example.com/never")
    assert (got["fate"], got["status"], got["archive"], got["outlinks"]) == ("dns_error", None, None, [])


def test_every_fate_is_recorded(store):
    fates = {
        "http://a.example/robots": ("robots_disallowed", None, "RobotsDisallowed: ..."),
        "http://10.0.0.1/": ("refused", None, "AddressRefused: private"),
        "http://nx.example/": ("dns_error", None, "DNSLookupError"),
        "http://slow.example/": ("timeout", None, "TimeoutError"),
        "http://b.example/missing": ("fetched", 404, None),
        "http://b.example/broken": ("fetched", 503, None),
    }
    for url, (fate, status, error) in fates.items():
        store.record_fetch(FetchRecord(url=url, fate=fate, status=status, error=error, fetched_at=T)).result(30)
    for url, (fate, status, error) in fates.items():
        got = store.fetch_status(url)
        assert (got["fate"], got["status"], got["error"]) == (fate, status, error), url
    assert store.get("http://never.example/") is None
    assert store.fetch_status("http://never.example/") is None


def test_metadata_is_updated_a_few_fields_at_a_time(store):
    url = "http://example.com/p"
    store.record_fetch(_fetched(url, metadata={"title": "T", "lang": "en"})).result(30)
    store.update_metadata(url, {"description": "D", "lang": "fr"}).result(30)
    assert store.get(url)["metadata"] == {"title": "T", "lang": "fr", "description": "D"}
    # a refetch merges its fields too
    store.record_fetch(_fetched(url, status=304, metadata={"title": "T2"})).result(30)
    got = store.get(url)
    assert got["status"] == 304
    assert got["metadata"] == {"title": "T2", "lang": "fr", "description": "D"}


def test_get_follows_canonical_url(store):
    first = "http://example.com/article"
    store.record_fetch(_fetched(first, metadata={"title": "original"})).result(30)
    store.record_fetch(_fetched("http://example.com/article?ref=x", canonical_url=first, fate="duplicate")).result(30)
    got = store.get("http://example.com/article?ref=x")
    assert got["url"] == first and got["requested_url"] == "http://example.com/article?ref=x"
    assert got["metadata"]["title"] == "original"
    own = store.get("http://example.com/article?ref=x", follow_canonical=False)
    assert own["fate"] == "duplicate" and own["canonical_url"] == first
    # a near copy is a page of its own: get does not follow near_duplicate_of
    near = _fetched("http://example.com/article/print", near_duplicate_of=first, resemblance=0.96)
    store.record_fetch(near).result(30)
    got = store.get("http://example.com/article/print")
    assert got["url"] == "http://example.com/article/print" and got["canonical_url"] is None
    assert got["near_duplicate_of"] == first and got["resemblance"] == pytest.approx(0.96, abs=1e-6)
    # a canonical URL that is not stored (yet): the URL's own record
    store.record_fetch(_fetched("http://example.com/x", canonical_url="http://example.com/y")).result(30)
    assert store.get("http://example.com/x")["url"] == "http://example.com/x"
    # canonical loops end
    store.record_fetch(_fetched("http://example.com/l1", canonical_url="http://example.com/l2")).result(30)
    store.record_fetch(_fetched("http://example.com/l2", canonical_url="http://example.com/l1")).result(30)
    assert store.get("http://example.com/l1")["url"] in ("http://example.com/l1", "http://example.com/l2")
    # get_many: what get gives each URL, in order, duplicates and unknown URLs included
    asked = [
        "http://example.com/article?ref=x",
        "http://example.com/article/print",
        "http://example.com/x",
        "http://example.com/unknown",
        "http://EXAMPLE.com/article",
        "http://example.com/article?ref=x",
        "http://example.com/l2",
    ]
    assert store.get_many(asked) == [store.get(u) for u in asked]
    assert store.get_many([]) == []
    if store.reads_async:  # the same, read on an asyncio loop (scrapy serve's)

        async def on_a_loop():
            got = [await store.aget(u) for u in asked]
            # asked at once: read together (canonical hops included), each given its own
            at_once = await asyncio.gather(*(store.aget(u) for u in asked), store.aget_many(asked[:3]))
            return got, at_once, await store.aget_many(asked), await store.aget(asked[0], False, True)

        one_by_one, at_once, many, own = asyncio.run(on_a_loop())
        assert one_by_one == many == store.get_many(asked) == at_once[:-1]
        assert at_once[-1] == many[:3]
        assert own == store.get(asked[0], follow_canonical=False)


def test_outlinks_and_inlinks_agree(store):
    target = "http://example.com/popular"
    sources = [f"http://site{i}.example/page" for i in range(30)]
    futures = [
        store.record_fetch(_fetched(src, outlinks=[{"url": target, "text": f"link {i}", "nofollow": i % 2 == 1}]))
        for i, src in enumerate(sources)
    ]
    for f in futures:
        f.result(30)
    inlinks = store.inlinks(target)
    assert [link["url"] for link in inlinks] == sorted(sources)
    by_source = {link["url"]: link for link in inlinks}
    assert by_source[sources[3]] == {"url": sources[3], "text": "link 3", "nofollow": True}
    assert store.outlinks(sources[3]) == [{"url": target, "text": "link 3", "nofollow": True}]
    assert len(store.inlinks(target, limit=5)) == 5
    assert store.inlinks("http://example.com/lonely") == []
    pages, after = [], None  # paged by the last source of the page before
    while True:
        page = store.inlinks(target, limit=7, after=after)
        if not page:
            break
        pages.append([link["url"] for link in page])
        after = page[-1]["url"]
    assert [len(p) for p in pages] == [7, 7, 7, 7, 2]
    assert [u for p in pages for u in p] == sorted(sources)


def test_a_record_asked_as_stored_is_neither_normalized_nor_followed(store):
    store.record_fetch(_fetched("http://n.example/copy", canonical_url="http://n.example/main")).result(30)
    store.record_fetch(_fetched("http://n.example/main")).result(30)
    assert store.get("http://N.example/copy")["url"] == "http://n.example/main"
    assert store.get("http://n.example/copy", follow_canonical=False, normalize=False)["url"] == "http://n.example/copy"
    assert store.get("http://N.example/copy", follow_canonical=False, normalize=False) is None


def test_last_fetched_names_the_urls_fetched_with_an_answer(store):
    records = [
        _fetched("http://f.example/ok", fetched_at=T),
        _fetched("http://f.example/gone", status=404, fetched_at=T + 1),
        _fetched("http://f.example/copy", fate="duplicate", canonical_url="http://f.example/ok", fetched_at=T + 2),
        _fetched("http://f.example/broken", status=503, fetched_at=T + 3),
        FetchRecord(url="http://f.example/slow", fate="timeout", error="TimeoutError", fetched_at=T + 4),
        FetchRecord(url="http://f.example/robots", fate="robots_disallowed", fetched_at=T + 5),
    ]
    for r in records:
        store.record_fetch(r).result(30)
    store.update_metadata("http://f.example/meta-only", {"title": "t"}).result(30)
    asked = [r.url for r in records] + ["http://F.example/ok?", "http://f.example/meta-only", "http://never.example/"]
    got = store.last_fetched(asked)
    # keyed by the URL as asked (normalized for the lookup); failures and unknown URLs left out
    assert set(got) == {"http://f.example/ok", "http://f.example/gone", "http://f.example/copy", "http://F.example/ok?"}
    assert got["http://f.example/gone"] == pytest.approx(T + 1, abs=0.001)
    assert got["http://F.example/ok?"] == pytest.approx(T, abs=0.001)
    # a refetch that failed: its last attempt failed, so it is no longer fetched
    store.record_fetch(FetchRecord(url="http://f.example/ok", fate="dns_error", fetched_at=T + 9)).result(30)
    assert "http://f.example/ok" not in store.last_fetched(["http://f.example/ok"])
    assert store.last_fetched([]) == {}
    # archived: only pages with their archive pointer (an exact copy is never archived itself)
    assert set(store.last_fetched(asked, archived=True)) == {"http://f.example/copy"}
    store.set_archive("http://f.example/gone", ArchivePointer("ab/x.warc.gz", 10, 20), T + 1).result(30)
    assert set(store.last_fetched(asked, archived=True)) == {"http://f.example/copy", "http://f.example/gone"}


def test_the_schedule_and_validators_round_trip_and_reschedule_keeps_the_rest(store):
    record = _fetched(
        "http://example.com/r",
        content_digest="sha1:abc",
        metadata={"title": "R"},
        archive=ArchivePointer("ab/r.warc.gz", 10, 20),
        next_fetch_at=T + 600,
        fetch_interval=600.0,
        etag='"v1"',
        last_modified="Tue, 14 Nov 2023 22:13:20 GMT",
    )
    store.record_fetch(record).result(timeout=30)
    got = store.get("http://example.com/r")
    assert got["fetch_interval"] == 600.0 and got["etag"] == '"v1"'
    assert got["last_modified"] == "Tue, 14 Nov 2023 22:13:20 GMT"
    # a 304: only when it was fetched, when it is due and its interval move
    store.reschedule("http://example.com/r", T + 2000, fetched_at=T + 100, fetch_interval=840.0).result(timeout=30)
    got = store.get("http://example.com/r")
    assert got["fetched_at"] == pytest.approx(T + 100, abs=0.001)
    assert got["next_fetch_at"] == pytest.approx(T + 2000, abs=0.001)
    assert got["fetch_interval"] == 840.0
    assert got["archive"] == {"key": "ab/r.warc.gz", "offset": 10, "length": 20, "bucket": ""}
    assert got["metadata"] == {"title": "R"} and got["content_digest"] == "sha1:abc" and got["etag"] == '"v1"'
    assert got["status"] == 200 and got["fate"] == "fetched"
    # put back for a recrawl: only the due time moves
    store.reschedule("http://example.com/r", T + 9000).result(timeout=30)
    got = store.get("http://example.com/r")
    assert got["next_fetch_at"] == pytest.approx(T + 9000, abs=0.001) and got["fetch_interval"] == 840.0
    assert got["fetched_at"] == pytest.approx(T + 100, abs=0.001)
    # a 304 without a schedule (RECRAWL_INTERVAL 0): fetched, no due time, the interval kept
    store.reschedule("http://example.com/r", None, fetched_at=T + 200).result(timeout=30)
    got = store.get("http://example.com/r")
    assert got["next_fetch_at"] is None and got["fetch_interval"] == 840.0
    assert got["fetched_at"] == pytest.approx(T + 200, abs=0.001) and got["etag"] == '"v1"'
    # a new interval alone: the fetch time kept
    store.reschedule("http://example.com/r", T + 9500, fetch_interval=900.0).result(timeout=30)
    got = store.get("http://example.com/r")
    assert got["next_fetch_at"] == pytest.approx(T + 9500, abs=0.001) and got["fetch_interval"] == 900.0
    assert got["fetched_at"] == pytest.approx(T + 200, abs=0.001)


def _all_due(store, before, limit, **kw):
    out, cursor, pages = [], None, 0
    while True:
        rows, cursor = store.due(before, limit, cursor, **kw)
        assert len(rows) <= limit
        out += rows
        pages += 1
        if cursor is None:
            return out, pages
        assert pages < 100


def test_due_pages_through_the_urls_due_by_a_time(store):
    for i in range(7):
        store.record_fetch(
            _fetched(f"http://a.example/{i}", next_fetch_at=T + i * 10, fetch_interval=100.0, etag=f'"{i}"')
        ).result(timeout=30)
    store.record_fetch(_fetched("http://b.example:8080/x", next_fetch_at=T + 5)).result(timeout=30)
    store.record_fetch(_fetched("http://a.example/never", next_fetch_at=None)).result(timeout=30)
    rows, pages = _all_due(store, T + 45, 2)
    assert sorted(r["url"] for r in rows) == sorted(
        [f"http://a.example/{i}" for i in range(5)] + ["http://b.example:8080/x"]
    )
    assert pages >= 3  # two at a time
    one = next(r for r in rows if r["url"] == "http://a.example/3")
    assert one["etag"] == '"3"' and one["fetch_interval"] == 100.0
    assert one["next_fetch_at"] == pytest.approx(T + 30, abs=0.001)
    assert one["fetched_at"] == pytest.approx(T, abs=0.001) and one["content_digest"] is None
    rows, _ = _all_due(store, T + 1000, 3, host="b.example:8080")
    assert [r["url"] for r in rows] == ["http://b.example:8080/x"]
    assert _all_due(store, T - 1, 3)[0] == []
    # by age, due or not
    store.record_fetch(_fetched("http://a.example/old", fetched_at=T - 5000, next_fetch_at=T + 10**6)).result(30)
    rows, _ = _all_due(store, T, 2, fetched_before=T - 1000)
    assert [r["url"] for r in rows] == ["http://a.example/old"]


def test_sqlite_last_fetched_reads_beside_the_writer(tmp_path):
    # from another thread than the store's, while its writer is busy: each read sees the
    # records whose writes are done
    import threading

    store = SqliteUrlStore(str(tmp_path / "urlstore.sqlite"), inlink_buckets=4)
    try:
        links = [{"url": f"http://t.example/{i}", "text": "", "nofollow": False} for i in range(200)]
        futures = [store.record_fetch(_fetched(f"http://w.example/{i}", outlinks=links)) for i in range(60)]
        seen = []

        def read():
            for i in range(60):
                done = futures[i].done()
                got = store.last_fetched([f"http://w.example/{i}"])
                seen.append((done, bool(got)))

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(60)
        for f in futures:
            f.result(60)
        assert all(found for done, found in seen if done)
        assert len(store.last_fetched([f"http://w.example/{i}" for i in range(60)])) == 60
    finally:
        store.close()


def test_many_writes_in_flight_all_land(store):
    futures = [store.record_fetch(_fetched(f"http://bulk.example/{i}", fetched_at=time.time())) for i in range(300)]
    for f in futures:
        f.result(60)
    assert all(store.fetch_status(f"http://bulk.example/{i}")["status"] == 200 for i in range(0, 300, 37))


def test_a_sqlite_store_of_an_earlier_version_gains_the_new_columns(tmp_path):
    import sqlite3

    from crawler.urlstore.sqlite import ADDED_COLUMNS, SCHEMA, SqliteUrlStore

    path = tmp_path / "old.sqlite"
    old = _schema_without(SCHEMA.read_text(), ADDED_COLUMNS)  # the schema as it was before those columns
    db = sqlite3.connect(path)
    db.executescript(old)
    db.execute("INSERT INTO urls (url, fate) VALUES ('http://example.com/old', 'fetched')")
    db.commit()
    db.close()
    store = SqliteUrlStore(str(path))
    try:
        assert store.get("http://example.com/old")["near_duplicate_of"] is None
        near = _fetched("http://example.com/new", near_duplicate_of="http://example.com/old", resemblance=0.93)
        store.record_fetch(near).result(30)
        assert store.get("http://example.com/new")["near_duplicate_of"] == "http://example.com/old"
    finally:
        store.close()


def _schema_without(schema: str, columns) -> str:
    """schema.sql without ``columns`` (the last column left loses its comma)."""
    lines = [line for line in schema.splitlines() if not any(line.strip().startswith(name) for name in columns)]
    for i, line in enumerate(lines):
        if line.startswith(")") and "," in lines[i - 1].split("--", 1)[0]:
            code, _, comment = lines[i - 1].partition("--")
            lines[i - 1] = code.rstrip().rstrip(",") + (f"  --{comment}" if comment else "")
    return "\n".join(lines)


def _open_and_write(path: str, n: int, start, errors) -> None:
    from crawler.urlstore.sqlite import SqliteUrlStore

    start.wait()
    try:
        store = SqliteUrlStore(path)
        store.record_fetch(_fetched(f"http://example.com/{n}")).result(30)
        store.close()
    except Exception as exc:  # noqa: BLE001 - the test reports it
        errors.put(repr(exc))


def test_workers_opening_one_new_sqlite_store_together_all_get_it(tmp_path):
    import multiprocessing

    from crawler.urlstore.sqlite import SqliteUrlStore

    ctx = multiprocessing.get_context("fork")
    for round_ in range(6):  # worker processes opening a new store at the same moment
        path = str(tmp_path / f"shared{round_}" / "urlstore.sqlite")
        start, errors = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_and_write, args=(path, n, start, errors)) for n in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert errors.empty(), errors.get()
        store = SqliteUrlStore(path)
        try:
            assert all(store.get(f"http://example.com/{n}") for n in range(4))
        finally:
            store.close()


def test_workers_upgrading_one_old_sqlite_store_together_all_get_it(tmp_path):
    import multiprocessing
    import sqlite3

    from crawler.urlstore.sqlite import ADDED_COLUMNS, SCHEMA, SqliteUrlStore

    old = _schema_without(SCHEMA.read_text(), ADDED_COLUMNS)  # the schema as it was before those columns
    ctx = multiprocessing.get_context("fork")
    for round_ in range(6):
        path = tmp_path / f"old{round_}.sqlite"
        db = sqlite3.connect(path)
        db.executescript(old)
        db.execute("PRAGMA journal_mode=WAL")
        db.close()
        start, errors = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_and_write, args=(str(path), n, start, errors)) for n in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert errors.empty(), errors.get()
        store = SqliteUrlStore(str(path))
        try:
            assert all(store.get(f"http://example.com/{n}")["near_duplicate_of"] is None for n in range(4))
        finally:
            store.close()


def test_sqlite_commits_the_records_that_wait_together_and_a_bad_one_fails_alone(tmp_path):
    import threading

    store = SqliteUrlStore(str(tmp_path / "u.sqlite"))
    try:
        statements = []
        store._thread.submit(store._db.set_trace_callback, statements.append).result()
        busy = threading.Event()
        store._thread.submit(busy.wait, 30)  # the store's thread is busy: the next records wait together
        good = [store.record_fetch(_fetched(f"http://g.example/{i}")) for i in range(5)]
        bad = store.record_fetch(_fetched("http://b.example/", resemblance=object()))  # cannot be bound
        busy.set()
        for f in good:
            f.result(30)
        with pytest.raises(sqlite3.Error):
            bad.result(30)
        assert all(store.get(f"http://g.example/{i}") for i in range(5))
        # the group was rolled back, then each record had its own transaction
        assert statements.count("ROLLBACK") >= 1 and statements.count("COMMIT") == 5, statements
    finally:
        store.close()


def test_a_reader_reads_beside_the_writer_and_changes_nothing(tmp_path):
    """SqliteReader (``scrapy serve``): never creates a file, reads what the writer
    committed, from several threads, and refuses to write."""
    from concurrent.futures import ThreadPoolExecutor

    from crawler.urlstore.sqlite_reader import SqliteReader

    path = str(tmp_path / "urlstore.sqlite")
    with pytest.raises(FileNotFoundError):
        SqliteReader(path)
    assert not os.path.exists(path)
    writer = SqliteUrlStore(path, inlink_buckets=4)
    urls = [f"http://r.example/{i}" for i in range(200)]
    for u in urls:
        writer.record_fetch(_fetched(u, metadata={"title": u[-3:]}))
    writer.record_fetch(_fetched("http://r.example/last")).result(30)
    reader = SqliteReader(path, inlink_buckets=4)
    try:
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda u: reader.get(u)["metadata"]["title"], urls))
        assert got == [u[-3:] for u in urls]
        assert set(reader.last_fetched(urls[:3])) == set(urls[:3])
        writer.record_fetch(_fetched("http://r.example/later")).result(30)
        assert reader.get("http://r.example/later")["fate"] == "fetched"  # sees later commits
        with pytest.raises(TypeError):
            reader.record_fetch(_fetched("http://r.example/no"))
    finally:
        reader.close()
        writer.close()


def test_the_sqlite_writers_page_cache_is_the_setting(tmp_path):
    """URLSTORE_SQLITE_CACHE_BYTES: the page cache of the connection that writes, resident
    memory of the worker once full."""
    from scrapy.settings import Settings

    import settings.base

    settings_ = Settings()
    settings_.setmodule(settings.base)
    settings_.set("URLSTORE_SQLITE_PATH", str(tmp_path / "u.sqlite"))
    default = SqliteUrlStore.from_settings(settings_, {})
    small = SqliteUrlStore(str(tmp_path / "v.sqlite"), cache_bytes=4 * 2**20)
    try:
        assert default._run(lambda: default._db.execute("PRAGMA cache_size").fetchone()[0]).result() == -16 * 1024
        assert small._run(lambda: small._db.execute("PRAGMA cache_size").fetchone()[0]).result() == -4 * 1024
    finally:
        default.close()
        small.close()


def test_sqlite_due_pages_through_its_index_without_sorting(tmp_path):
    """Each page of the due query is read from the (next_fetch_at, url) index where the
    last page ended: its cost is its rows, not a sort of all that is due (which made a
    pass over a million due rows take quadratic time)."""
    store = SqliteUrlStore(str(tmp_path / "u.sqlite"))
    try:
        for i in range(30):
            store.record_fetch(_fetched(f"http://d{i % 3}.example/{i}", next_fetch_at=T + i % 5)).result(30)
        statements = []
        store._thread.submit(store._db.set_trace_callback, statements.append).result()
        rows, cursor = store.due(T + 10, 7)
        rows2, _ = store.due(T + 10, 7, cursor)
        store._thread.submit(store._db.set_trace_callback, None).result()
        keys = [(r["next_fetch_at"], r["url"]) for r in rows + rows2]
        assert keys == sorted(keys) and len(set(keys)) == 14  # the second page starts where the first ended
        paged = [s for s in statements if s.startswith("SELECT") and "next_fetch_at <=" in s][-1]
        plan = " ".join(
            row[-1] for row in sqlite3.connect(tmp_path / "u.sqlite").execute(f"EXPLAIN QUERY PLAN {paged}")
        )
        assert "urls_due" in plan and "TEMP B-TREE" not in plan, plan
    finally:
        store.close()


def _table_columns(schema: str, table: str) -> dict[str, str]:
    """Column -> type of one CREATE TABLE in a schema file (comments dropped)."""
    text = re.sub(r"--[^\n]*", "", schema)
    body = re.search(
        rf"CREATE TABLE IF NOT EXISTS (?:\{{keyspace\}}\.)?{table} \((.*?)\)\s*(?:WITH|WITHOUT|;)", text, re.S
    )
    columns, depth, part = {}, 0, ""
    for ch in body.group(1) + ",":
        depth += ch in "<(" and 1 or 0
        depth -= ch in ">)" and 1 or 0
        if ch == "," and depth == 0:
            words = part.split()
            if words and words[0] != "PRIMARY":
                columns[words[0]] = (
                    " ".join(words[1:]).replace(" PRIMARY KEY", "").replace(" NOT NULL DEFAULT '{}'", "")
                )
            part = ""
        else:
            part += ch
    return columns


def test_both_schemas_make_the_columns_the_record_names():
    from importlib import resources

    from crawler.urlstore import record

    sql = _table_columns(resources.files("crawler.urlstore").joinpath("schema.sql").read_text(), "urls")
    cql = _table_columns(resources.files("crawler.urlstore").joinpath("schema.cql").read_text(), "urls")
    assert list(sql) == list(cql) == ["url", *record.COLUMN_NAMES]
    assert [sql[name] for name in record.COLUMN_NAMES] == [c[1] for c in record.COLUMNS]
    assert [cql[name] for name in record.COLUMN_NAMES] == [c[2] for c in record.COLUMNS]
    # every field of a record is a column (its archive pointer four of them, and the fetch
    # time of the capture it names), and back
    stored = {f for f in record.FIELDS if f != "archive"} | set(record.ARCHIVE_COLUMNS) | {record.ARCHIVE_AT}
    assert set(record.COLUMN_NAMES) - set(record.RECORD_COLUMNS) == {record.PUT_AT}  # (a recrawl pass's)
    stored |= {record.PUT_AT}
    assert stored == set(("url", *record.COLUMN_NAMES))
