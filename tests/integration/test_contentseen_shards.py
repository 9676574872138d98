"""Content seen in a sharded crawl: over three redis-servers (REDIS_URLS) and over a
three-master Redis Cluster (REDIS_CLUSTER_URL, the crawl's 16 shards), the pipeline
gives the verdicts it gives on one Redis, while its index is spread over the servers:
digests and buckets on several of them, each page's sketch stored once. On one Redis a
check stays one script call. Real redis-servers on loopback (testing/servers.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter

import pytest
from scrapy.utils.test import get_crawler

from crawler.contentseen import fingerprints as fp
from crawler.frontier.shards import DOWN_WAIT_MIN, HUNG_WAIT_FACTOR
from crawler.pipelines.contentseen import ContentSeenPipeline
from testing.pages import article, edit, html, page
from testing.servers import RedisServer, start_cluster
from testing.services import project_settings


class Layout:
    """Where a crawl's Redis is: its settings, and a client of each server (to look at
    what each holds)."""

    def __init__(self, settings: dict, clients: list):
        self.settings, self.clients = settings, clients

    def pipeline(self, name: str, **overrides):
        crawler = get_crawler(settings_dict=project_settings(CRAWL_NAME=name, **self.settings, **overrides))
        return ContentSeenPipeline.from_crawler(crawler), crawler.stats

    def keys(self, name: str, what: str) -> list[list[bytes]]:
        """Per server, the keys of crawl ``name`` (any of its shards) named ``what``
        after the crawl's prefix (a glob)."""
        pattern = f"crawl:\\{{{name}[}}#]*:{what}"
        return [sorted(c.scan_iter(match=pattern, count=1000)) for c in self.clients]

    def clear(self, name: str) -> None:
        for client in self.clients:
            found = list(client.scan_iter(match=f"crawl:\\{{{name}[}}#]*", count=1000))
            for key in found:  # one by one: in a cluster, the keys of several slots
                client.delete(key)


@pytest.fixture(scope="module")
def three_servers(tmp_path_factory):
    started = [RedisServer(tmp_path_factory.mktemp(f"cs-shard{i}")).start() for i in range(3)]
    yield started
    for server in started:
        server.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = start_cluster(tmp_path_factory.mktemp("cs-cluster"))
    yield nodes
    for node in nodes:
        node.kill()


def _layout(request, kind: str) -> Layout:
    if kind == "one":
        import redis

        url = request.getfixturevalue("redis_url")
        return Layout({"REDIS_URL": url}, [redis.Redis.from_url(url)])
    if kind == "servers":
        servers = request.getfixturevalue("three_servers")
        return Layout({"REDIS_URLS": ",".join(s.url for s in servers)}, [s.client for s in servers])
    nodes = request.getfixturevalue("cluster")
    return Layout({"REDIS_CLUSTER_URL": nodes[0].url}, [n.client for n in nodes])


@pytest.fixture
def name():
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["servers", "cluster"])
def sharded(request, name):
    layout = _layout(request, request.param)
    yield layout
    layout.clear(name)


# -- a stream of pages, and what content seen makes of it ---------------------------------


def stream() -> list[tuple[str, bytes]]:
    """(URL, body) in the order checked: originals, exact copies, near copies (of
    originals and of copies), a far copy, recrawls (same bytes; other bytes, same text;
    changed text), short pages."""
    words = [article(100 + i) for i in range(8)]
    out = [(f"http://site{i}.example/story", html(w)) for i, w in enumerate(words)]
    near1 = html(edit(words[1], 0.02, 1), extra="<b>printed on 3 May 2026</b>")
    out += [
        ("http://mirror.example/story0", html(words[0])),  # exact copy of site0
        ("http://site1.example/story?print=1", near1),  # near copy of site1
        ("http://site2.example/v2", html(edit(words[2], 0.05, 2))),  # near copy of site2
        ("http://site2.example/v3", html(edit(edit(words[2], 0.05, 2), 0.01, 3))),  # nearest v2
        ("http://mirror.example/printed", near1),  # exact copy of the near copy
        ("http://site3.example/far", html(edit(words[3], 0.3, 4))),  # another page
        ("http://site0.example/story", html(words[0])),  # recrawl, same bytes
        ("http://site4.example/story", html(words[4], extra="<script>var v = 2;</script>")),  # same text
        ("http://site1.example/story?print=1", near1),  # recrawl of the near copy
        ("http://site5.example/story", html(edit(words[5], 0.2, 5))),  # recrawl, changed text
        ("http://short.example/1", b"<html><body>page 1 of a short site, next, other</body></html>"),
        ("http://short.example/2", b"<html><body>page 2 of a short site, next, other</body></html>"),
        ("http://short.example/3", b"<html><body>page 1 of a short site, next, other</body></html>"),
    ]
    return out


def verdicts(pipeline, pages) -> list[tuple]:
    marks = []
    for url, body in pages:
        item = pipeline.process_now(page(url, body))
        marks.append((item.get("duplicate_of"), item.get("near_duplicate_of"), item.get("resemblance")))
    return marks


EXPECTED = {  # position in stream() -> (duplicate_of, near_duplicate_of); the rest are new
    8: ("http://site0.example/story", None),
    9: (None, "http://site1.example/story"),
    10: (None, "http://site2.example/story"),
    11: (None, "http://site2.example/v2"),
    12: ("http://site1.example/story?print=1", None),
    16: (None, "http://site1.example/story"),  # a recrawl keeps its first verdict
    20: ("http://short.example/1", None),
}


def test_the_verdicts_are_those_of_one_redis(request, sharded, name):
    one = _layout(request, "one")
    alone = f"{name}-one"
    try:
        expected = verdicts(one.pipeline(alone)[0], stream())
    finally:
        one.clear(alone)
    for i, (copy_of, near_of, _) in enumerate(expected):
        assert (copy_of, near_of) == EXPECTED.get(i, (None, None)), i
    first, _ = sharded.pipeline(name)
    second, stats = sharded.pipeline(name)  # another worker: its own clients
    pages = stream()
    got = verdicts(first, pages[:10]) + verdicts(second, pages[10:])
    assert got == expected
    assert stats.get_value("contentseen/exact") == 2 and stats.get_value("contentseen/near") == 3


def test_the_index_is_spread_over_the_servers_and_each_sketch_stored_once(sharded, name):
    pipeline, stats = sharded.pipeline(name)
    bodies = [html(article(200 + i)) for i in range(30)]
    for i, body in enumerate(bodies):
        assert "near_duplicate_of" not in pipeline.process_now(page(f"http://h{i}.example/", body))
    for i, body in enumerate(bodies[:5]):
        assert pipeline.process_now(page(f"http://copy{i}.example/", body))["duplicate_of"] == f"http://h{i}.example/"
    digests = [sum(sharded.clients[n].hlen(k) for k in keys) for n, keys in enumerate(sharded.keys(name, "cdigest"))]
    assert sum(digests) == 30 and sum(1 for d in digests if d) >= 2, digests
    records = Counter()
    for n, keys in enumerate(sharded.keys(name, "ndpage")):
        for key in keys:
            records.update(sharded.clients[n].hkeys(key))
    assert len(records) == 30 and set(records.values()) == {1}  # each sketch once, on one server
    holders = [sum(1 for _ in keys) for keys in sharded.keys(name, "ndpage")]
    assert sum(1 for h in holders if h) >= 2, holders
    counters = [keys for keys in sharded.keys(name, "ndseq") if keys]
    assert len(counters) == 1 and len(counters[0]) == 1  # one page number counter
    buckets = sharded.keys(name, "ndidx:*")
    assert sum(1 for held in buckets if held) >= 2, [len(b) for b in buckets]
    entries = sum(sharded.clients[n].strlen(k) for n, held in enumerate(buckets) for k in held) // 8
    assert entries == 30 * fp.BANDS  # each page's entry in each of its buckets, once
    names = [k.rsplit(b":", 1)[1] for held in buckets for k in held]
    assert len(names) == len(set(names))  # a bucket lives on one shard
    assert stats.get_value("contentseen/new") == 30 and stats.get_value("contentseen/exact") == 5


@pytest.mark.parametrize("kind", ["one", "servers", "cluster"])
def test_full_buckets_keep_their_entries_and_a_page_in_no_bucket_is_not_indexed(request, kind, name):
    layout = _layout(request, kind)
    try:
        pipeline, _ = layout.pipeline(name, CONTENT_SEEN_BUCKET_SIZE=2)
        words = article(21)
        first = fp.page_fingerprints(html(words), 50)
        assert pipeline.check(first, "http://a.example/first") is None
        # other pages whose band keys fall in the same buckets fill them (a third entry is refused)
        for n in range(2):
            other = first._replace(
                digest=f"other{n}", sketch=bytes(fp.BINS), bands=[k ^ ((n + 1) << 16) for k in first.bands]
            )
            assert pipeline.check(other, f"http://fill.example/{n}") is None
        assert bucket_lengths(layout, name, first.bands) == [16] * fp.BANDS  # 2 entries of 8 bytes, on one server each
        copy = fp.page_fingerprints(html(edit(words, 0.02, 5)), 50)
        assert pipeline.check(copy, "http://b.example/copy")[:2] == ("near", "http://a.example/first")
        # a page whose buckets are all full is checked, not indexed: its copy finds nothing
        late = first._replace(digest="late", sketch=bytes(range(fp.BINS)), bands=[k ^ (7 << 16) for k in first.bands])
        assert pipeline.check(late, "http://c.example/late") is None
        assert pipeline.check(late._replace(digest="late2"), "http://c.example/late-copy") is None
        assert bucket_lengths(layout, name, first.bands) == [16] * fp.BANDS
    finally:
        layout.clear(name)


def bucket_lengths(layout: Layout, name: str, band_keys) -> list[int]:
    """The length of each band key's bucket, wherever it lives (asserting it lives on one
    server)."""
    out = []
    for key in band_keys:
        held = [(n, k) for n, keys in enumerate(layout.keys(name, f"ndidx:{key >> 48:04x}")) for k in keys]
        assert len(held) == 1, held
        n, k = held[0]
        out.append(layout.clients[n].strlen(k))
    return out


def test_two_workers_with_near_copies_at_the_same_moment_never_mark_each_other(sharded, name):
    """Each of two workers checks one of a pair of near copies at the same moment: at
    most one is marked (the later-numbered, near the other); both may be missed."""
    workers = [sharded.pipeline(name)[0] for _ in range(2)]
    pairs = [(html(edit(article(400 + i), 0.02, 1)), html(edit(article(400 + i), 0.02, 2))) for i in range(25)]
    marks: dict[str, str | None] = {}
    barrier = threading.Barrier(2)

    def work(w: int) -> None:
        for i, pair in enumerate(pairs):
            barrier.wait(timeout=30)
            url = f"http://w{w}.example/{i}"
            marks[url] = workers[w].process_now(page(url, pair[w])).get("near_duplicate_of")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(marks) == 50
    numbers = {}  # URL -> page number, from the records
    for n, keys in enumerate(sharded.keys(name, "ndpage")):
        for key in keys:
            for number, record in sharded.clients[n].hgetall(key).items():
                numbers[record[fp.BINS :].decode()] = int.from_bytes(number, "big")
    for i in range(len(pairs)):
        a, b = f"http://w0.example/{i}", f"http://w1.example/{i}"
        assert not (marks[a] and marks[b]), (i, marks[a], marks[b])
        for url, other in ((a, b), (b, a)):
            if marks[url]:
                assert marks[url] == other and numbers[other] < numbers[url]


def test_a_server_that_stops_answering_leaves_pages_new_and_counted_without_holding_them(tmp_path, name):
    servers = [RedisServer(tmp_path / f"r{i}").start() for i in range(3)]
    try:
        layout = Layout({"REDIS_URLS": ",".join(s.url for s in servers)}, [s.client for s in servers])
        params = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5}
        pipeline, stats = layout.pipeline(name, REDIS_PARAMS=params)
        before = html(article(501))
        assert "duplicate_of" not in pipeline.process_now(page("http://a.example/before", before))
        os.kill(servers[1].proc.pid, signal.SIGSTOP)  # a server that hangs
        try:
            started = time.monotonic()
            items = [pipeline.process_now(page(f"http://b.example/{i}", html(article(600 + i)))) for i in range(10)]
            took = time.monotonic() - started
        finally:
            os.kill(servers[1].proc.pid, signal.SIGCONT)
        assert all("duplicate_of" not in i and "near_duplicate_of" not in i for i in items)  # kept as new
        # (a page whose digest, buckets and record all live elsewhere is checked as usual;
        # the servers' ports place them on the ring: the pages that touch server 2 differ by run)
        index = pipeline.index
        touching, number = 0, 2  # the page before drew number 1; a page that fails draws none
        for prints in (fp.page_fingerprints(html(article(600 + i)), 100) for i in range(10)):
            if 1 in {index.digest_shard(prints.digest), *(index.bucket_shard(k) for k in prints.bands)}:
                touching += 1
                continue
            touching += index.page_shard(number.to_bytes(4, "big")) == 1  # where its record goes
            number += 1
        assert touching >= 8 and stats.get_value("contentseen/redis_errors") == touching
        # one call waits for its timeout (once); the others pass the server that hangs at once,
        # for ten times that timeout
        assert took < 2, took
        time.sleep(HUNG_WAIT_FACTOR * params["socket_timeout"] + DOWN_WAIT_MIN)
        again = pipeline.process_now(page("http://c.example/again", before))
        assert again["duplicate_of"] == "http://a.example/before"
        assert stats.get_value("contentseen/redis_errors") == touching
    finally:
        for s in servers:
            s.kill()


@pytest.mark.parametrize("many", [False, True])
def test_on_one_redis_a_check_is_one_script_call(tmp_path, name, many):
    with RedisServer(tmp_path) as server:
        settings = {"REDIS_URLS": server.url} if many else {"REDIS_URL": server.url}
        pipeline, stats = Layout(settings, [server.client]).pipeline(name)
        pipeline.process_now(page("http://a.example/warm", html(article(700))))  # the script is loaded
        calls, _ = server.evalsha_stats()
        words = article(701)
        for url, body in (
            ("http://a.example/1", html(words)),
            ("http://b.example/1", html(words)),
            ("http://a.example/2", html(edit(words, 0.02, 1))),
            ("http://a.example/3", html(article(702))),
        ):
            pipeline.process_now(page(url, body))
        assert server.evalsha_stats()[0] - calls == 4
        assert server.client.info("commandstats").get("cmdstat_hmget") is None
        assert stats.get_value("contentseen/exact") == 1 and stats.get_value("contentseen/near") == 1
