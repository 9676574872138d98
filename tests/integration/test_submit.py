"""Real-time submission (`scrapy submit`, the submission list) and the fetch policy.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_submit.py, tests/e2e/test_submit.py."""

import json
import time

import redis
from scrapy import Request
from scrapy.utils.test import get_crawler

from crawler import meta
from crawler.extensions.submissions import Submissions
from crawler.frontier import codec, submit
from crawler.frontier.frontier import PROMOTED_DAYS, Entry, Frontier
from crawler.frontier.shards import ShardedFrontier
from crawler.frontier.words import now_ms
from crawler.services import services
from crawler.signals import frontier_grew
from crawler.spiders.broad import BroadSpider
from testing.frontiers import drain
from testing.services import project_settings
from testing.threads import FetchedOld, HeldThreads


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


def test_a_promoted_url_whose_lease_comes_back_is_handed_out_again_once(redis_client, crawl_name):
    """A promoted URL's copy that comes back after it was handed out (its lease given back,
    or a retry in its place) is not taken for the copy left behind: it is handed out again,
    once, whether the URL was queued when promoted or queued nowhere."""
    f = Frontier(redis_client, crawl_name, host_interval=0)
    now = now_ms()
    queued = [f"http://busy.example/{i}" for i in range(5)]
    f.put([Entry(url=u, payload=u.encode(), follow_up=True) for u in queued], now=now)
    nowhere = "http://gone.example/page"  # fetched long ago: queued nowhere
    assert f.promote([Entry(url=u, payload=u.encode()) for u in (queued[2], nowhere)], now=now) == ["promoted"] * 2
    first = f.get(2, now=now)[0]
    assert sorted(codec.decode(lease.payload, None).url for lease in first) == sorted([queued[2], nowhere])
    by_url = {codec.decode(lease.payload, None).url: lease for lease in first}
    f.give_back([by_url[queued[2]].id])  # (a worker stopping: back to its host's queue)
    retry = Entry(  # (a 503's retry, a second later)
        url=nowhere,
        payload=nowhere.encode(),
        dont_filter=True,
        follow_up=True,
        replaces_lease=by_url[nowhere].id,
        not_before=now + 1000,
    )
    assert f.put([retry], now=now) == ["added"]
    got = _urls(drain(f, now=now + 2000))
    assert sorted(got) == sorted(queued + [nowhere])  # the one given back once, its copy behind dropped
    assert f.stats()["queued"] == 0


def test_a_promoted_url_whose_host_is_dropped_is_recorded_once_and_not_after_its_fetch(redis_client, crawl_name):
    """A promoted URL has two copies queued (the promoted one at the head, the one it was);
    a drop of its host moves both to the drops: the second was handed out as a drop too (a
    URL recorded as dropped twice), and one left behind after the promoted copy's fetch was
    recorded as dropped over the fetch."""
    f = Frontier(redis_client, crawl_name, host_interval=0)
    now = now_ms()

    def everything(at):
        out, empty = [], 0
        while empty < 3:  # (a pop may move a dropped host's entries to the drops and hand out none)
            leases, _ = f.get(10, now=at)
            empty = 0 if leases else empty + 1
            f.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=at)
            out += [(codec.decode(lease.payload, None).url, lease.due < 0) for lease in leases]
        return out

    for host, fetch_first in (("a.example", False), ("b.example", True)):
        urls = [f"http://{host}/p{i}" for i in range(5)]
        f.put([Entry(url=u, payload=u.encode()) for u in urls], now=now)
        [first], _ = f.get(1, now=now)  # (its host's URLs in its back queue)
        f.ack(first.id, landed=[first.id], now=now)
        assert f.promote([Entry(url=urls[3], payload=urls[3].encode())], now=now) == ["promoted"]
        fetched = []
        if fetch_first:
            [promoted], _ = f.get(1, now=now + 1)
            f.ack(promoted.id, landed=[promoted.id], now=now + 1)
            fetched = [codec.decode(promoted.payload, None).url]
            assert fetched == [urls[3]]
        assert f.drop(host, now=now + 2)
        drops = everything(now + 3)
        assert all(dropped for _, dropped in drops)
        assert sorted(url for url, _ in drops) == sorted(set(urls[1:]) - set(fetched)), host


def test_a_take_of_the_submission_list_sent_again_gets_the_same_values(redis_client, crawl_name):
    """A take whose reply was lost is sent again under the same number (the client's retry,
    or the worker's next look after the call failed): it gets the values the first took,
    not the next ones, and nothing is lost; a worker's next take forgets its last; two
    workers take apart."""
    f = Frontier(redis_client, crawl_name, host_interval=0)
    values = [f"http://a.example/{i}".encode() for i in range(7)]
    redis_client.rpush(f.keys.submit, *values)
    assert submit.take(f, 3, "w1", 0) == (values[:3], 0)
    assert submit.take(f, 3, "w1", 0) == (values[:3], 0)  # sent again: the same three
    assert submit.take(f, 3, "w2", 0) == (values[3:6], 0)  # another worker: the next three
    assert submit.take(f, 3, "w1", 1) == (values[6:], 0)
    assert submit.take(f, 3, "w1", 1) == (values[6:], 0)
    assert redis_client.llen(f.keys.submit) == 0
    assert submit.take(f, 3, "w1", 2) == ([], 0) and not redis_client.exists(f.keys.submit_taken("w1"))
    assert 0 < redis_client.pttl(f.keys.submit_taken("w2")) <= submit.TAKE_KEPT_MS


def test_the_submission_list_lives_on_the_first_shard(redis_client, crawl_name):
    shards = [Frontier(redis_client, crawl_name, host_interval=0, shard=k) for k in range(2)]
    sharded = ShardedFrontier(shards, ["r1", "r2"])
    try:
        assert sharded.keys.submit == f"crawl:{{{crawl_name}#0}}:submit"
        redis_client.rpush(sharded.keys.submit, "http://a.example/", json.dumps({"url": "http://c.example/"}))
        values, counter = submit.take(sharded, 10, "w1", 0)
        assert values == [b"http://a.example/", b'{"url": "http://c.example/"}'] and counter == 0
        assert submit.take(sharded, 10, "w1", 1) == ([], 0)
        got = submit.submit(sharded, [submit.parse(v) for v in values], {})
        assert [status for _, status in got] == ["added", "added"]
        # each URL on its host's shard, the counter on the first
        assert {sharded.ring.index(h) for h in ("a.example", "c.example")} == {0, 1}
        assert sorted(codec.decode(lease.payload, None).url for lease in sharded.get(2)[0] + sharded.get(2)[0]) == [
            "http://a.example/",
            "http://c.example/",
        ]
        assert submit.take(sharded, 10, "w1", 2) == ([], 2)
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


def test_whether_a_seen_submission_was_fetched_is_asked_off_the_reactor(redis_url, crawl_name, redis_client):
    """A submission of a URL the crawl has seen: whether it was fetched recently is the
    UrlStore's to say, asked in a thread (here one the test runs by hand): the look returns
    at once, and once the store answers the one still queued is promoted (counted, the
    scheduler told) and the one fetched recently is not. (The store stands in for the
    UrlStore's last_fetched: what is checked is where the read runs.)"""
    from crawler.freshness.policy import FetchPolicy

    in_thread = HeldThreads()
    reads = in_thread.calls
    crawler = get_crawler(BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name))
    ext = Submissions(crawler, 1.0, 100, in_thread=in_thread)
    ext.policy = FetchPolicy(FetchedOld(), 86400, crawler.stats)
    grew = []
    crawler.signals.connect(lambda: grew.append(1), signal=frontier_grew, weak=False)
    frontier = services(crawler).frontier
    queued = ["http://s.example/old", "http://s.example/queued"]
    frontier.put([Entry(url=u, payload=u.encode()) for u in ["http://s.example/first", *queued]])
    redis_client.rpush(frontier.keys.submit, *queued)
    ext.look()
    assert len(reads) == 1 and not grew  # asked elsewhere; nothing promoted yet
    assert crawler.stats.get_value("frontier/promoted") is None
    assert reads[0][1] == (queued,)
    in_thread.finish(0)  # the thread's answer, back in the reactor
    assert grew == [1] and crawler.stats.get_value("frontier/promoted") == 1
    assert crawler.stats.get_value("frontier/seen") == 1  # the one fetched an hour ago: left as it is
    first = frontier.get(1)[0]
    assert [codec.decode(lease.payload, None).url for lease in first] == ["http://s.example/queued"]


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


def test_a_url_queued_as_a_whole_request_is_promoted_and_fetched_once(redis_client, crawl_name):
    """A URL whose queued request is stored whole (``J``: a meta of its own) is known by its
    URL: submitted while queued it is handed out once (the whole copy left behind is dropped
    when it comes up), and submitted while in flight it is seen, not promoted."""
    f = Frontier(redis_client, crawl_name, host_interval=0)
    now = now_ms()
    urls = [f"http://busy.example/{i}" for i in range(6)]
    whole = [codec.encode(Request(u, meta={"topic": "news"}), None) for u in urls]  # (not plain)
    assert all(p.startswith(codec.WHOLE) for p in whole)
    f.put([Entry(url=u, payload=p, follow_up=True) for u, p in zip(urls, whole, strict=True)], now=now)
    [flying] = f.get(1, now=now)[0]
    assert codec.decode(flying.payload, None).url == urls[-1]
    got = submit.submit(f, [submit.Submission(u) for u in (urls[2], urls[-1])], {})
    assert [s for _, s in got] == ["promoted", "seen"]
    f.ack(flying.id, landed=[flying.id], now=now)
    rest = _urls(drain(f, now=now))
    assert sorted(rest + [urls[-1]]) == sorted(urls)  # each once
    assert f.stats()["queued"] == 0 and f.redis.zcard(f.keys.promoted) == 0
    assert f.redis.hlen(f.keys.leased) == 0
