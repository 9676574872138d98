"""Real-time submission (`scrapy submit`, the submission list) and the fetch policy."""

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from scrapy.utils.test import get_crawler

from crawler import meta
from crawler.demo.site import serve_site
from crawler.extensions.submissions import Submissions
from crawler.freshness.policy import FORCED, LOOKUP_FAILED, SKIPPED, FetchPolicy
from crawler.frontier import codec, submit
from crawler.frontier.frontier import PROMOTED_DAYS, Entry, Frontier
from crawler.frontier.keys import Keys
from crawler.frontier.shards import ShardedFrontier
from crawler.frontier.words import now_ms
from crawler.services import services
from crawler.signals import frontier_grew
from crawler.spiders.broad import BroadSpider
from crawler.urlstore.record import ArchivePointer, FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.frontiers import drain
from testing.servers import free_port
from testing.services import project_settings
from testing.workers import clean_env, launch_worker, loopback_settings

ROOT = Path(__file__).resolve().parents[1]


# -- the submission list's values ------------------------------------------------------------


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


# -- submit(): to the head of the host's queue ----------------------------------------------


def test_a_submission_goes_ahead_of_everything_its_host_has_queued(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0)
    f.put([Entry(url=f"http://busy.example/{i}", payload=f"http://busy.example/{i}".encode()) for i in range(5)])
    f.put(
        [
            Entry(url=f"http://other{i}.example/", payload=f"http://other{i}.example/".encode(), priority=5)
            for i in range(3)
        ]
    )
    got = submit.submit(
        f,
        [
            submit.Submission("http://BUSY.example/news?utm_source=x"),
            submit.Submission("http://busy.example/0"),  # queued already
            submit.Submission("not a url"),
            submit.Submission("http://busy.example/" + "a/" * 5 + "a/a/a/a"),  # repeated segments
        ],
        {},
    )
    assert got[0] == ("http://busy.example/news", "added")
    assert got[1] == ("http://busy.example/0", "promoted")  # queued already: to the head
    assert got[2] == ("not a url", "invalid")
    assert got[3][1].startswith("trap:")
    assert int(redis_client.get(f.keys.submitted)) == 2
    leases, _ = f.get(1)
    assert [codec.decode(lease.payload, None).url for lease in leases] == ["http://busy.example/0"]
    f.ack(leases[0].id)
    leases, _ = f.get(1)
    assert [codec.decode(lease.payload, None).url for lease in leases] == ["http://busy.example/news"]
    f.ack(leases[0].id)
    # forced: past URL-seen, and flagged for the fetch policy
    [(url, status)] = submit.submit(f, [submit.Submission("http://busy.example/news", force=True)], {})
    assert status == "added"
    leases, _ = f.get(1)
    request = codec.decode(leases[0].payload, None)
    assert request.url == url and request.meta[meta.FORCE] and request.dont_filter


def _urls(payloads: list[bytes]) -> list[str]:
    return [codec.decode(payload, None).url for payload in payloads]


def test_a_queued_url_submitted_jumps_its_hosts_queue_and_is_fetched_once(redis_client, crawl_name):
    """A URL queued deep in a busy host's back queue, one still in a front queue and one
    in flight, submitted: the first two are handed out at their hosts' next turn and never
    again (the copy left behind is dropped when it comes up), the third stays seen; what
    the UrlStore says was fetched recently stays seen; a promotion is forgotten after
    PROMOTED_DAYS."""
    f = Frontier(redis_client, crawl_name, host_interval=0)
    now = now_ms()
    busy = [f"http://busy.example/{i}" for i in range(50)]
    f.put([Entry(url=u, payload=u.encode(), follow_up=True) for u in busy], now=now)  # its back queue
    front = [f"http://front.example/{i}" for i in range(20)]
    f.put([Entry(url=u, payload=u.encode()) for u in front], now=now)  # a front queue
    [flying] = f.get(1, now=now)[0]
    assert codec.decode(flying.payload, None).url == busy[-1]  # (follow-ups go to the head)
    got = submit.submit(
        f,
        [submit.Submission(u) for u in (busy[3], front[15], busy[-1], busy[10])],
        {},
        fetched=lambda urls: {busy[10]} & set(urls),  # fetched within the policy's age
    )
    assert [s for _, s in got] == ["promoted", "promoted", "seen", "seen"]
    assert f.redis.zcard(f.keys.promoted) == 2
    # a second submission of a promoted URL not yet handed out adds no third copy
    assert submit.submit(f, [submit.Submission(busy[3])], {}) == [(busy[3], "promoted")]
    f.ack(flying.id)
    first = f.get(2)[0]
    assert {codec.decode(lease.payload, None).url for lease in first} == {busy[3], front[15]}
    f.ack(*(lease.id for lease in first))
    rest = _urls(drain(f))
    assert sorted(rest + [busy[-1], busy[3], front[15]]) == sorted(busy + front)  # each once
    assert f.stats()["queued"] == 0 and f.redis.zcard(f.keys.promoted) == 0
    # a promoted URL that was queued nowhere (fetched by another worker meanwhile): its entry
    # is forgotten PROMOTED_DAYS later, at the next promotion
    f.promote([Entry(url=busy[0], payload=busy[0].encode())], now=now)
    assert _urls(drain(f)) == [busy[0]] and f.redis.zcard(f.keys.promoted) == 1
    later = now_ms() + PROMOTED_DAYS * 86_400_000 + 1000
    f.promote([Entry(url=busy[1], payload=busy[1].encode())], now=later)
    assert f.redis.zrange(f.keys.promoted, 0, -1) == [busy[1].encode()]


def test_the_submission_list_lives_on_the_first_shard(redis_client, crawl_name):
    shards = [Frontier(redis_client, crawl_name, host_interval=0, shard=k) for k in range(2)]
    sharded = ShardedFrontier(shards, ["r1", "r2"])
    try:
        assert sharded.keys.submit == f"crawl:{{{crawl_name}#0}}:submit"
        redis_client.rpush(sharded.keys.submit, "http://a.example/", json.dumps({"url": "http://c.example/"}))
        values, counter = submit.take(sharded, 10)
        assert values == [b"http://a.example/", b'{"url": "http://c.example/"}'] and counter == 0
        assert submit.take(sharded, 10) == ([], 0)
        got = submit.submit(sharded, [submit.parse(v) for v in values], {})
        assert [status for _, status in got] == ["added", "added"]
        # each URL on its host's shard, the counter on the first
        assert {sharded.ring.index(h) for h in ("a.example", "c.example")} == {0, 1}
        assert sorted(codec.decode(lease.payload, None).url for lease in sharded.get(2)[0] + sharded.get(2)[0]) == [
            "http://a.example/",
            "http://c.example/",
        ]
        assert submit.take(sharded, 10) == ([], 2)
    finally:
        sharded.clear()


def test_a_sharded_frontier_promotes_each_url_on_its_hosts_shard(redis_client, crawl_name):
    shards = [Frontier(redis_client, crawl_name, host_interval=0, shard=k) for k in range(2)]
    sharded = ShardedFrontier(shards, ["r1", "r2"])
    try:
        hosts = ["a.example", "c.example"]  # one on each shard (above)
        urls = [f"http://{h}/{i}" for h in hosts for i in range(5)]
        sharded.put([Entry(url=u, payload=u.encode()) for u in urls])
        got = submit.submit(sharded, [submit.Submission(f"http://{h}/4") for h in hosts], {})
        assert [s for _, s in got] == ["promoted", "promoted"]
        assert [redis_client.zcard(s.keys.promoted) for s in shards] == [1, 1]
        first = sharded.get(2)[0]
        assert sorted(codec.decode(lease.payload, None).url for lease in first) == [f"http://{h}/4" for h in hosts]
        sharded.ack(*(lease.id for lease in first))
        rest = _urls(drain(sharded))
        assert sorted(rest) == sorted(u for u in urls if not u.endswith("/4"))
    finally:
        sharded.clear()


# -- the fetch policy ------------------------------------------------------------------------


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


# -- `scrapy submit` -----------------------------------------------------------------------------


def _submit_command(redis_url, crawl_name, *args, stdin=None) -> subprocess.CompletedProcess:
    env = {**clean_env(), "REDIS_URL": redis_url}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "submit", "--crawl", crawl_name, *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_submit_says_what_became_of_each_url(redis_url, redis_client, crawl_name):
    Frontier(redis_client, crawl_name).put([Entry(url="http://seed.example/", payload=b"x")])  # a crawl running
    out = _submit_command(
        redis_url,
        crawl_name,
        "http://A.example/x?utm_medium=y",
        "ftp://a.example/",
        "-",
        stdin=("# from a pipe\nhttp://a.example/x\n\nhttp://b.example/\n"),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "added http://a.example/x",
        "invalid ftp://a.example/",
        "promoted http://a.example/x",  # queued: not fetched yet
        "added http://b.example/",
        "4 URLs submitted: 2 added, 1 invalid, 1 promoted",
    ]
    forced = _submit_command(redis_url, crawl_name, "--force", "http://b.example/")
    assert forced.stdout.splitlines()[0] == "added http://b.example/"
    assert int(redis_client.get(Keys(crawl_name).submitted)) == 4
    assert _submit_command(redis_url, crawl_name).returncode == 2  # no URL


def test_submit_without_redis_exits_1_with_one_line(crawl_name):
    out = _submit_command(f"redis://127.0.0.1:{free_port()}/0", crawl_name, "http://a.example/")
    assert out.returncode == 1
    assert re.fullmatch(r"submit: cannot connect to Redis \(redis://127\.0\.0\.1:\d+/0\): .+", out.stderr.strip())


# -- a running worker -----------------------------------------------------------------------------


def test_a_running_worker_fetches_submissions_and_keeps_the_policy(tmp_path, redis_url, redis_client):
    """A worker waiting for work (nothing seeded): a URL a program pushes onto the list,
    raw or as JSON, and one `scrapy submit` adds are fetched; a URL the UrlStore says was
    fetched an hour ago is not, until it is submitted with --force."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    keys = Keys(name)
    store_path = tmp_path / "urlstore.sqlite"
    try:
        with serve_site(hosts=3, pages=5) as site:
            pushed, listed, submitted, recent = (
                site.url(0, "/p1.html"),
                site.url(1, "/p2.html"),
                site.url(2, "/p3.html"),
                site.url(1, "/p1.html"),
            )
            store = SqliteUrlStore(str(store_path))  # another crawl fetched `recent` an hour ago
            archive = ArchivePointer("ab/earlier.warc.gz", 0, 100)
            store.record_fetch(
                FetchRecord(url=recent, fate="fetched", status=200, fetched_at=time.time() - 3600, archive=archive)
            )
            store.close()
            settings = loopback_settings(
                name,
                tmp_path / "worker.log",
                REDIS_URL=redis_url,
                URLSTORE_SQLITE_PATH=store_path,
                FRONTIER_CLOSE_WHEN_IDLE=False,
                CRAWL_FOLLOW_LINKS=False,
                LOG_LEVEL="DEBUG",
            )
            env = {**clean_env(), "REDIS_URL": redis_url}
            worker = launch_worker(tmp_path, "worker", None, settings, env)
            try:
                _wait_for(lambda: "Spider opened" in worker.text(), 60, worker)
                redis_client.rpush(keys.submit, pushed, json.dumps({"url": recent}), "not a url")
                redis_client.rpush(keys.submit, json.dumps({"url": listed, "priority": 2}))
                out = _submit_command(redis_url, name, submitted)
                assert out.stdout.startswith(f"added {submitted}\n"), out.stderr
                fetched = lambda: _fetched_urls(store_path)  # noqa: E731  (a page's record: once read)
                _wait_for(lambda: {pushed, listed, submitted} <= fetched(), 30, worker)
                _wait_for(lambda: "Fetch policy: " + recent in worker.text(), 10, worker)
                assert recent not in fetched()
                out = _submit_command(redis_url, name, "--force", recent)
                assert out.stdout.startswith(f"added {recent}\n"), out.stderr
                _wait_for(lambda: recent in fetched(), 30, worker)
            finally:
                if worker.proc.poll() is None:
                    worker.proc.send_signal(signal.SIGINT)
                code = worker.wait(60)
            hits = [h.key for h in site.page_hits()]
        assert code == 0, worker.tail()
        assert sorted(hits) == sorted(_key(u) for u in (pushed, listed, submitted, recent))  # each once
        text = worker.text()
        assert f"Fetch policy: {recent} not fetched: fetched 36" in text
        assert re.search(rf"'{SKIPPED}': 1\b", text) and re.search(rf"'{FORCED}': 1\b", text)
        assert re.search(r"'submit/taken': 3\b", text) and re.search(r"'submit/invalid': 1\b", text)
    finally:
        leftover = list(redis_client.scan_iter(match=keys.pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)


def test_a_url_queued_deep_in_a_busy_hosts_queue_is_fetched_at_its_next_turn(tmp_path, redis_url, redis_client):
    """A worker crawling one host at 0.3 s an interval, its 60 pages seeded (a queue of 18
    s): `scrapy submit` of the last page and of one already fetched says `promoted` and
    `seen`; the site is asked for the last page within a few turns of the submission, not
    at the end, and for every page once."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    keys = Keys(name)
    store_path = tmp_path / "urlstore.sqlite"
    try:
        with serve_site(hosts=2, pages=60) as site:  # (one crawled)
            urls = [site.url(0, f"/p{i}.html") for i in range(60)]
            seeds = tmp_path / "seeds.txt"
            seeds.write_text("\n".join(urls) + "\n")
            settings = loopback_settings(
                name,
                tmp_path / "worker.log",
                REDIS_URL=redis_url,
                URLSTORE_SQLITE_PATH=store_path,
                FRONTIER_HOST_INTERVAL=0.3,
                CRAWL_FOLLOW_LINKS=False,
            )
            worker = launch_worker(tmp_path, "worker", seeds, settings, {**clean_env(), "REDIS_URL": redis_url})
            try:
                _wait_for(lambda: len(_fetched_urls(store_path)) >= 5, 60, worker)
                done = sorted(_fetched_urls(store_path))[0]
                asked = time.monotonic()
                out = _submit_command(redis_url, name, "-s", f"URLSTORE_SQLITE_PATH={store_path}", urls[-1], done)
                assert out.stdout.splitlines()[:2] == [f"promoted {urls[-1]}", f"seen {done}"], out.stdout + out.stderr
                _wait_for(lambda: _key(urls[-1]) in {h.key for h in site.page_hits()}, 30, worker)
                [hit] = [h for h in site.page_hits() if h.key == _key(urls[-1])]
                code = worker.wait(120)
            finally:
                if worker.proc.poll() is None:
                    worker.proc.send_signal(signal.SIGINT)
                    worker.wait(60)
            hits = [h.key for h in site.page_hits()]
        assert code == 0, worker.tail()
        assert sorted(hits) == sorted(_key(u) for u in urls)  # every page once, the promoted one too
        assert hit.start - asked < 5.0  # (its turn in the queue: some 15 s later)
        assert hits.index(_key(urls[-1])) < 40
    finally:
        leftover = list(redis_client.scan_iter(match=keys.pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)


def _fetched_urls(path: Path) -> set[str]:
    """The URLs the UrlStore records as fetched since the test began (read as any program
    would; none before the worker made the store)."""
    if not path.exists():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return {url for (url,) in db.execute("SELECT url FROM urls WHERE fate = 'fetched' AND metadata LIKE '%title%'")}
    except sqlite3.OperationalError:  # (its tables not made yet)
        return set()
    finally:
        db.close()


def _key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname, parts.path


def _wait_for(condition, timeout: float, worker) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if worker.proc.poll() is not None:
            raise AssertionError(f"worker exited ({worker.proc.returncode})\n{worker.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s\n{worker.tail()}")
        time.sleep(0.1)


# -- the submissions extension ----------------------------------------------------------------------


def test_submissions_taken_while_redis_fails_are_put_at_the_next_look(redis_url, crawl_name, redis_client):
    """The extension takes the list's values, puts them, and tells the scheduler the frontier
    grew; a put that fails (Redis away: the one fault injected, on the frontier's put) keeps
    what was taken, and the next look after the outage's wait puts it."""
    crawler = get_crawler(BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name))
    ext = Submissions.from_crawler(crawler)
    grew = []
    crawler.signals.connect(lambda: grew.append(1), signal=frontier_grew, weak=False)
    frontier = services(crawler).frontier
    keys = frontier.keys
    redis_client.rpush(keys.submit, "http://sub.example/a", "not a url", json.dumps({"url": "http://sub.example/b"}))
    put = frontier.put
    failures = [redis.ConnectionError("injected")]

    def failing_put(entries, **kw):
        if failures:
            raise failures.pop()
        return put(entries, **kw)

    frontier.put = failing_put
    ext.look()
    assert frontier.stats()["queued"] == 0 and len(ext.pending) == 2 and not grew
    assert redis_client.llen(keys.submit) == 0  # taken
    ext.look()  # at once: it waits out the outage first (0.5 s after a failure)
    assert frontier.stats()["queued"] == 0 and len(ext.pending) == 2
    time.sleep(0.6)
    ext.look()
    assert frontier.stats()["queued"] == 2 and ext.pending == [] and grew == [1]
    stats = crawler.stats
    assert stats.get_value("submit/taken") == 2 and stats.get_value("submit/invalid") == 1
    assert stats.get_value("frontier/enqueued") == 2
    ext.look()  # nothing new: no word to the scheduler
    assert grew == [1]
    added = submit.submit(frontier, [submit.Submission("http://sub.example/c")], {})
    assert added == [("http://sub.example/c", "added")]
    ext.look()  # `scrapy submit` moved the counter: the scheduler looks at once
    assert grew == [1, 1]


def test_a_due_host_with_a_submission_is_handed_out_before_hosts_due_longer(redis_client, crawl_name):
    """Submissions first: of the hosts due, one with a submission waiting goes before those
    that fell due earlier (a busy crawl's hosts are all due, and the pop takes the longest
    due); one not yet due waits for its time all the same (politeness), then goes first; a
    paused host's submission waits for its resume; a host's precedence ends with its
    submissions."""
    f = Frontier(redis_client, crawl_name, host_interval=1.0)
    t = now_ms()
    hosts = [f"h{i}.example" for i in range(6)]
    for i, host in enumerate(hosts):  # each host due in turn, 100 ms apart; three URLs each
        f.put([Entry(url=f"http://{host}/{p}", payload=f"http://{host}/{p}".encode()) for p in range(3)], now=t)
        f.redis.hset(f.keys.hnext, host, t + 100 * i)
        f.redis.zadd(f.keys.ready, {host: t + 100 * i}, xx=True)
    later = t + 1000  # every host due, h0 the longest

    def pop(n, now):
        leases, _ = f.get(n, now=now)
        f.ack(*(lease.id for lease in leases), now=now)
        return [(codec.decode(lease.payload, None).url, lease.due) for lease in leases]

    got = submit.submit(f, [submit.Submission("http://h5.example/new"), submit.Submission("http://h4.example/2")], {})
    assert [s for _, s in got] == ["added", "promoted"]
    first = pop(2, later)
    assert sorted(url for url, _ in first) == ["http://h4.example/2", "http://h5.example/new"]
    assert all(due == later for _, due in first)
    assert f.redis.hlen(f.keys.hrush) == 0 and f.redis.zcard(f.keys.rush) == 0
    assert [url for url, _ in pop(1, later)] == ["http://h0.example/0"]  # then the longest due again
    # h5 was handed out at `later`: due again 1 s after; submitted now, it waits for that time
    # and then goes before the hosts due longer
    submit.submit(f, [submit.Submission("http://h5.example/soon")], {})
    assert [url for url, _ in pop(1, later + 500)] == ["http://h1.example/0"]  # (h5 not due)
    assert pop(1, later + 1000) == [("http://h5.example/soon", later + 1000)]
    # a paused host's submission waits for the resume, and keeps its precedence then
    f.pause("h3.example", now=later + 1000)
    submit.submit(f, [submit.Submission("http://h3.example/held")], {})
    assert [url for url, _ in pop(1, later + 1100)] != ["http://h3.example/held"]
    assert f.redis.hget(f.keys.hrush, "h3.example") == b"1" and f.redis.zcard(f.keys.rush) == 0
    f.resume("h3.example", now=later + 1100)
    assert [url for url, _ in pop(1, later + 1200)] == ["http://h3.example/held"]
    # backed off (a 429), a host with a submission waits as long in the rush as in the heap
    submit.submit(f, [submit.Submission("http://h1.example/later")], {})
    f.block_until("h1.example", minimum=5, maximum=5, quiet=60, now=later + 1200)
    assert f.redis.zscore(f.keys.rush, "h1.example") == f.redis.zscore(f.keys.ready, "h1.example") == later + 6200
    assert "http://h1.example/later" not in [url for url, _ in pop(3, later + 1300)]
    assert [url for url, _ in pop(1, later + 6200)] == ["http://h1.example/later"]
    # dropped, a host's submissions end with its queue
    submit.submit(f, [submit.Submission("http://h2.example/gone")], {})
    f.drop("h2.example", now=later + 1200)
    assert f.redis.hlen(f.keys.hrush) == 0 and f.redis.zcard(f.keys.rush) == 0


def test_a_pop_for_submissions_only_hands_out_nothing_else(redis_client, crawl_name):
    """What a worker asks between pops (Frontier.get urgent_only): the due hosts with a
    submission waiting, and nothing else: no other due host, no front queue entry, no
    URL to be recorded as not fetched; and no next due time. A host with a submission
    that is not due yet waits for its time all the same."""
    f = Frontier(redis_client, crawl_name, host_interval=1.0)
    t = now_ms()
    hosts = ["h0.example", "h1.example", "gone.example"]
    f.put([Entry(url=f"http://{h}/{p}", payload=f"http://{h}/{p}".encode()) for h in hosts for p in range(2)], now=t)
    leases, _ = f.get(4, now=t)  # one URL of each host handed out and fetched: each due again at t + 1 s
    assert len(leases) == 3
    f.ack(*(lease.id for lease in leases), now=t)
    f.drop("gone.example", now=t)  # its URL left: to be recorded as dropped
    f.put([Entry(url="http://front.example/0", payload=b"http://front.example/0")], now=t)  # a front queue's
    assert f.redis.llen(f.keys.drops) == 1
    queued = f.stats()["queued"]
    assert f.get(3, now=t + 1000, urgent_only=True) == ([], None)  # due hosts, drops, front queues left alone
    submit.submit(f, [submit.Submission("http://h0.example/new"), submit.Submission("http://fresh.example/")], {})
    got, next_due = f.get(3, now=t + 200, urgent_only=True)
    assert [codec.decode(lease.payload, None).url for lease in got] == ["http://fresh.example/"] and next_due is None
    assert f.get(3, now=t + 500, urgent_only=True) == ([], None)  # (h0 is due at t + 1 s)
    [late] = f.get(3, now=t + 1000, urgent_only=True)[0]
    assert codec.decode(late.payload, None).url == "http://h0.example/new" and late.due == t + 1000
    assert f.redis.hlen(f.keys.hrush) == 0 and f.stats()["queued"] == queued
    rest = f.get(10, now=t + 2000)[0]  # the rest, at an ordinary pop
    assert sorted(lease.payload for lease in rest) == [
        b"http://front.example/0",
        b"http://gone.example/1",
        b"http://h1.example/1",
    ]
    assert [lease.due < 0 for lease in rest].count(True) == 1  # (gone's: to be recorded as dropped)


def test_scrapy_submit_holds_a_url_to_the_running_crawls_scope(tmp_path, redis_url, redis_client):
    """A worker started with -a allowed_domains=<one host> (loopback allowed by its
    NETWORK_GUARD_ALLOW): `scrapy submit`, given no setting of its own, refuses a URL of
    another host (out-of-scope) and one at a link-local address (private address), each
    with why and what would let it in, exit code 2; a URL in scope is added and fetched.
    A value pushed onto the list outside the scope is counted and never fetched."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    keys = Keys(name)
    try:
        with serve_site(hosts=3, pages=5) as site:
            inside, outside = site.hosts[0], site.hosts[1]
            settings = loopback_settings(
                name,
                tmp_path / "worker.log",
                REDIS_URL=redis_url,
                FRONTIER_CLOSE_WHEN_IDLE=False,
                CRAWL_FOLLOW_LINKS=False,
            )
            env = {**clean_env(), "REDIS_URL": redis_url}
            worker = launch_worker(tmp_path, "worker", None, settings, env, args={"allowed_domains": inside})
            try:
                _wait_for(lambda: redis_client.exists(keys.scope), 60, worker)
                other = site.url(1, "/p4.html")
                out = _submit_command(redis_url, name, other)
                assert out.returncode == 2, out.stdout + out.stderr
                assert out.stdout.splitlines() == [
                    f"refused out-of-scope {other}: {outside} is not in the crawl's allowed domains ({inside}); "
                    f"to crawl it: run the workers with -a allowed_domains={inside},{outside} (or CRAWL_ALLOWED_DOMAINS)",
                    "1 URL submitted: 1 refused",
                ]
                metadata = "http://169.254.169.254/latest/meta-data/"
                out = _submit_command(redis_url, name, metadata)
                assert out.returncode == 2, out.stdout + out.stderr
                assert out.stdout.splitlines()[0] == (
                    f"refused private address {metadata}: 169.254.169.254 is a link-local address, which the "
                    "network guard refuses; to crawl it: run the workers with "
                    "-s NETWORK_GUARD_ALLOW=127.0.0.0/8,169.254.169.254/32"
                )
                redis_client.rpush(keys.submit, site.url(1, "/p3.html"))
                wanted = site.url(0, "/p2.html")
                out = _submit_command(redis_url, name, wanted)
                assert (out.returncode, out.stdout.splitlines()[0]) == (0, f"added {wanted}"), out.stdout + out.stderr
                _wait_for(lambda: _key(wanted) in {h.key for h in site.page_hits()}, 30, worker)
                _wait_for(lambda: "Submission refused" in worker.text(), 10, worker)
            finally:
                if worker.proc.poll() is None:
                    worker.proc.send_signal(signal.SIGINT)
                code = worker.wait(60)
            hosts = {h.host for h in site.hits()}
        assert code == 0, worker.tail()
        assert hosts == {inside}, f"requests to hosts out of the crawl's scope: {hosts}"
        assert re.search(r"'submit/refused/out_of_scope': 1\b", worker.text()), worker.tail()
    finally:
        leftover = list(redis_client.scan_iter(match=keys.pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)
