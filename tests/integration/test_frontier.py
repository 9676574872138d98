"""Every frontier operation against a real Redis (see conftest.py).

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_frontier.py."""

import pytest

from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.keys import NAMES
from crawler.frontier.words import FINISHED, now_ms
from testing.frontiers import drain_concurrently

T0 = 1_700_000_000_000  # a fixed "now" in ms: the frontier takes time from its caller


def entry(url, **kw):
    return Entry(url=url, payload=url.encode(), **kw)


@pytest.fixture
def make_frontier(redis_client, crawl_name):
    def make(**kw):
        kw.setdefault("host_interval", 1.0)
        # most tests hand out several URLs of a host without landing them; the
        # in-flight limit has tests of its own
        kw.setdefault("max_in_flight", 0)
        return Frontier(redis_client, kw.pop("name", crawl_name), **kw)

    return make


def pop_urls(frontier, n=1, now=T0):
    leases, next_due = frontier.get(n, now=now)
    return [lease.payload.decode() for lease in leases], leases, next_due


def test_push_then_pop_hands_out_once(make_frontier):
    f = make_frontier()
    assert f.put([entry("http://a.example/1")])[0] == "added"
    urls, leases, _ = pop_urls(f)
    assert urls == ["http://a.example/1"]
    assert pop_urls(f, now=T0 + 10_000)[0] == []
    st = f.stats()
    assert st["queued"] == 0 and st["leased"] == 1 and st["popped"] == 1


def test_url_seen_admits_a_url_once_unless_dont_filter(make_frontier):
    f = make_frontier()
    assert f.put([entry("http://a.example/1")])[0] == "added"
    assert f.put([entry("http://a.example/1")])[0] == "seen"
    assert f.put([entry("http://a.example/1", dont_filter=True)])[0] == "added"
    assert f.stats()["queued"] == 2
    assert f.stats()["seen"]["urls"] == 1


def test_host_is_handed_out_only_when_due(make_frontier):
    f = make_frontier(host_interval=2.0)
    f.put([entry("http://a.example/1"), entry("http://a.example/2"), entry("http://b.example/1")])
    urls, _, next_due = pop_urls(f, n=10, now=T0)
    assert sorted(urls) == ["http://a.example/1", "http://b.example/1"]
    assert next_due == T0 + 2000
    assert pop_urls(f, n=10, now=T0 + 1999)[0] == []
    assert pop_urls(f, n=10, now=T0 + 2000)[0] == ["http://a.example/2"]


def test_host_keeps_its_next_time_after_its_queue_empties(make_frontier):
    f = make_frontier(host_interval=5.0)
    f.put([entry("http://a.example/1")])
    assert pop_urls(f, now=T0)[0] == ["http://a.example/1"]
    f.put([entry("http://a.example/2")])
    urls, _, next_due = pop_urls(f, now=T0 + 100)
    assert urls == [] and next_due == T0 + 5000
    assert pop_urls(f, now=T0 + 5000)[0] == ["http://a.example/2"]


def test_higher_priority_first_without_starving_lower(make_frontier):
    f = make_frontier(host_interval=0.0)
    f.put([entry(f"http://low{i}.example/", priority=-1) for i in range(50)])
    f.put([entry(f"http://high{i}.example/", priority=1) for i in range(50)])
    assert f.stats()["front_by_level"] == [50, 0, 50]
    order = [pop_urls(f, now=T0 + i)[0][0] for i in range(100)]
    first_twenty = order[:20]
    highs = sum("high" in u for u in first_twenty)
    assert highs >= 14  # weights 4:2:1, so about 4 of every 5 from the high level
    assert any("low" in u for u in first_twenty)  # ... and the low level is not starved
    assert sorted(order) == sorted({*order})  # each handed out once


def test_priority_levels_map_scrapy_priorities(make_frontier):
    f = make_frontier(priority_levels=5)
    assert [f.level(p) for p in (10, 2, 1, 0, -1, -2, -10)] == [0, 0, 1, 2, 3, 4, 4]


def test_expired_lease_goes_back_and_ack_ends_it(make_frontier):
    f = make_frontier(lease_seconds=10)
    f.put([entry("http://a.example/1")])
    _, leases, _ = pop_urls(f, now=T0)
    # the worker died: nothing acknowledged; after expiry the URL is handed out again
    assert pop_urls(f, now=T0 + 9_000)[0] == []
    # expired (its download ended, as far as anyone knows): due again one interval later
    assert pop_urls(f, now=T0 + 10_001)[0] == []
    urls, again, _ = pop_urls(f, now=T0 + 11_001)
    assert urls == ["http://a.example/1"]
    assert f.stats()["expired"] == 1
    assert f.ack(again[0].id) == 1
    assert f.ack(again[0].id) == 0  # idempotent
    assert f.ack(leases[0].id) == 0  # the expired lease is gone
    assert pop_urls(f, now=T0 + 100_000)[0] == []
    assert f.outlook(0)["state"] == FINISHED


def test_renew_keeps_a_lease(make_frontier):
    f = make_frontier(lease_seconds=10)
    f.put([entry("http://a.example/1")])
    _, leases, _ = pop_urls(f, now=T0)
    f.renew([leases[0].id], now=T0 + 9_000)
    assert pop_urls(f, now=T0 + 15_000)[0] == []
    assert pop_urls(f, now=T0 + 19_001)[0] == []  # expired now: due one interval later
    assert pop_urls(f, now=T0 + 20_001)[0] == ["http://a.example/1"]


def test_url_whose_leases_keep_expiring_is_abandoned(make_frontier):
    f = make_frontier(lease_seconds=1, max_attempts=2, host_interval=0.0)
    f.put([entry("http://poison.example/")])
    assert pop_urls(f, now=T0)[0]
    assert pop_urls(f, now=T0 + 1001)[0]  # attempt 2
    assert pop_urls(f, now=T0 + 3000)[0] == []  # attempt 3 would exceed the maximum
    st = f.stats()
    assert st["abandoned"] == 1 and st["queued"] == 0 and st["leased"] == 0


def test_release_gives_back_without_counting_an_attempt(make_frontier):
    f = make_frontier(lease_seconds=60, max_attempts=1, host_interval=0.0)
    f.put([entry("http://a.example/1")])
    _, leases, _ = pop_urls(f, now=T0)
    f.give_back([leases[0].id])
    assert pop_urls(f, now=T0 + 1)[0] == ["http://a.example/1"]
    assert f.stats()["abandoned"] == 0


def test_follow_up_takes_over_the_lease(make_frontier):
    f = make_frontier(host_interval=1.0)
    f.put([entry("http://a.example/old")])
    _, leases, _ = pop_urls(f, now=T0)
    status = f.put([entry("http://a.example/new", follow_up=True, replaces_lease=leases[0].id)], now=T0 + 1)[0]
    assert status == "added"
    st = f.stats()
    assert st["leased"] == 0 and st["queued"] == 1 and st["acked"] == 1
    # the follow-up waits for the host's interval, from the end of the download it follows
    assert pop_urls(f, now=T0 + 1000)[0] == []
    assert pop_urls(f, now=T0 + 1001)[0] == ["http://a.example/new"]
    # a follow-up to a URL already seen releases the lease and queues nothing
    _, leases, _ = pop_urls(f, now=T0)  # nothing
    f.put([entry("http://b.example/1")])
    _, leases, _ = pop_urls(f, now=T0 + 5000)
    new = entry("http://a.example/new", follow_up=True, replaces_lease=leases[0].id)
    assert f.put([new], now=T0 + 5000)[0] == "seen"
    assert f.stats()["leased"] == 1  # only a.example/new's own lease


def test_retry_with_dont_filter_is_requeued(make_frontier):
    f = make_frontier(host_interval=0.0)
    f.put([entry("http://a.example/1")])
    _, leases, _ = pop_urls(f, now=T0)
    retry = entry("http://a.example/1", dont_filter=True, follow_up=True, replaces_lease=leases[0].id)
    assert f.put([retry], now=T0 + 1)[0] == "added"
    assert pop_urls(f, now=T0 + 1)[0] == ["http://a.example/1"]


@pytest.mark.parametrize(
    "url,depth,status",
    [
        ("http://a.example/" + "x" * 3000, 0, "trap:url_length"),
        ("http://a.example/deep", 21, "trap:depth"),
        ("http://a.example/a/b/a/b/a/b/a/b/", 0, "trap:repeated_segments"),
        ("http://a.example/cal/2024/cal/2024/cal/2024/cal/2024", 0, "trap:repeated_segments"),
        ("http://a.example/?" + "&".join(f"p{i}=1" for i in range(30)), 0, "trap:query_params"),
        ("http://a.example/?s=1&s=2&s=3&s=4", 0, "trap:query_repeats"),
        ("http://a.example/?q=" + "y" * 1100, 0, "trap:query_length"),
        ("http://a.example/a/b/a/b/", 0, "added"),
        ("http://a.example/?s=1&s=2", 20, "added"),
        ("not a url", 0, "invalid"),
    ],
)
def test_trap_guards(make_frontier, url, depth, status):
    f = make_frontier()
    assert f.put([entry(url, depth=depth)])[0] == status


def test_host_max_pages(make_frontier):
    f = make_frontier(host_max_pages=3)
    statuses = f.put([entry(f"http://a.example/{i}") for i in range(5)] + [entry("http://b.example/")])
    assert statuses == ["added"] * 3 + ["host_full"] * 2 + ["added"]
    # each host's count goes on from call to call (read once a call, written after it)
    more = f.put([entry(f"http://b.example/{i}") for i in range(1, 4)] + [entry("http://a.example/9")])
    assert more == ["added", "added", "host_full", "host_full"]


def test_url_seen_grows_instead_of_saturating(make_frontier):
    f = make_frontier(seen_capacity=100, seen_error_rate=1e-6)
    urls = [f"http://h{i % 7}.example/page/{i}" for i in range(700)]
    assert f.put([entry(u) for u in urls]) == ["added"] * 700
    seen = f.stats()["seen"]
    assert seen["generations"] == 3  # generations of 100, 400 and 1,600 URLs
    assert seen["urls"] == 700 and seen["fill"] == [1.0, 1.0, 0.125]
    assert seen["false_positive_rate"] <= 1e-6
    assert set(f.put([entry(u) for u in urls])) == {"seen"}
    # another client with a stale idea of the generation count catches up
    g = make_frontier(seen_capacity=100, seen_error_rate=1e-6)
    g._generation = 1
    assert g.put([entry(urls[5])])[0] == "seen"
    assert g.put([entry("http://h1.example/page/new")])[0] == "added"


def test_url_seen_keeps_the_layout_the_crawl_began_with(make_frontier, caplog):
    """A worker whose URL-seen settings differ from the crawl's (an upgrade, a changed
    setting) uses the layout the first push recorded: the URLs admitted stay seen."""
    f = make_frontier(seen_capacity=1000, seen_error_rate=1e-6)
    urls = [f"http://h{i % 7}.example/page/{i}" for i in range(300)]
    assert f.put([entry(u) for u in urls]) == ["added"] * 300
    g = make_frontier(seen_capacity=5000, seen_error_rate=1e-7)
    assert g.layout.generation(0).buckets != f.layout.generation(0).buckets
    with caplog.at_level("WARNING"):
        assert set(g.put([entry(u) for u in urls])) == {"seen"}
    assert "1000 1e-06 4" in caplog.text and "5000 1e-07 4" in caplog.text
    assert g.layout.spelled() == f.layout.spelled()
    assert g.put([entry("http://h1.example/page/new")]) == ["added"]
    assert f.put([entry("http://h1.example/page/new")]) == ["seen"]


def test_url_seen_matches_whole_fingerprints_only(make_frontier, redis_client):
    """A crawl whose URL-seen keeps string buckets (its layout recorded before sets): a bucket
    holding a URL's fingerprint bytes across two entries does not make the URL seen; the same
    bytes at an entry's start do."""
    from crawler.frontier.urlseen import STRINGS, url_hashes

    f = make_frontier(seen_capacity=100)
    redis_client.hset(f.keys.seen_meta, "layout", "100 1e-06 4")  # (as crawls recorded it before sets)
    url = "http://a.example/unseen"
    h, fp = url_hashes(url)
    key = f.keys.seen(0, h % f.layout.of_kind(STRINGS).generation(0).buckets)
    redis_client.set(key, b"\x00\x00" + fp.to_bytes(4, "big") + b"\x00\x00")
    assert f.put([entry(url)]) == ["added"]
    assert f.layout.kind == STRINGS
    assert redis_client.strlen(key) == 12  # its fingerprint added as the third entry
    other = "http://a.example/other"
    h2, fp2 = url_hashes(other)
    redis_client.set(f.keys.seen(0, h2 % f.layout.generation(0).buckets), fp2.to_bytes(4, "big"))
    assert f.put([entry(other)]) == ["seen"]


def test_url_seen_keeps_the_strings_of_a_crawl_that_pushed_before_layouts_were_recorded(make_frontier, redis_client):
    """A crawl whose first pushes recorded no layout has string buckets: they stay strings."""
    from crawler.frontier.urlseen import STRINGS, url_hashes

    f = make_frontier(seen_capacity=100)
    redis_client.hset(f.keys.seen_meta, mapping={"gen": 1, "n:0": 1})
    old = "http://a.example/old"
    h, fp = url_hashes(old)
    redis_client.set(f.keys.seen(0, h % f.layout.of_kind(STRINGS).generation(0).buckets), fp.to_bytes(4, "big"))
    assert f.put([entry(old), entry("http://a.example/new")]) == ["seen", "added"]
    assert f.layout.kind == STRINGS and redis_client.hget(f.keys.seen_meta, "layout") == b"100 1e-06 4"


def test_url_seen_buckets_are_sets_of_4_byte_integers(make_frontier, redis_client):
    """A new crawl's buckets are Redis sets of the fingerprints made signed, which Redis keeps
    as intsets (4 bytes each): a URL is seen when its bucket holds its fingerprint, in any
    generation; the buckets stay intsets as full as a generation fills them."""
    from crawler.frontier.urlseen import SETS, url_hashes

    f = make_frontier(seen_capacity=2000)
    urls = [f"http://h{i % 5}.example/p/{i}" for i in range(2500)]  # a full first generation
    assert f.put([entry(u) for u in urls]) == ["added"] * 2500
    assert f.layout.kind == SETS and redis_client.hget(f.keys.seen_meta, "layout") == b"2000 1e-06 4 sets"
    assert f.stats()["seen"]["fill"] == [1.0, 500 / 8000]
    g0 = f.layout.generation(0)
    buckets = [f.keys.seen(0, b) for b in range(g0.buckets)]
    assert sum(redis_client.scard(k) for k in buckets) == 2000
    assert {redis_client.object("encoding", k) for k in buckets} == {b"intset"}
    for k in buckets:  # 4 bytes a fingerprint (an unsigned one would take 8: 2,600 bytes a bucket
        # of some 330), and the key's own: its name, its entry in the keyspace, the allocation's
        # rounding (a few hundred bytes)
        n = redis_client.scard(k)
        assert n > 250 and 4 * n < redis_client.memory_usage(k) < 4 * n + 512
    # an unseen URL whose fingerprint is in its bucket of the first generation is taken for seen
    url = "http://a.example/unseen"
    h, fp = url_hashes(url)
    redis_client.sadd(f.keys.seen(0, h % g0.buckets), fp - 2**31)
    assert f.put([entry(url)]) == ["seen"]
    assert set(f.put([entry(u) for u in urls])) == {"seen"}
    assert f.put([entry("http://h1.example/p/new")]) == ["added"]


def test_url_seen_keeps_strings_where_the_server_would_not_keep_sets_small(tmp_path):
    """A server that keeps sets of fewer than 512 integers as intsets
    (set-max-intset-entries) would keep full buckets as hash tables, ten times larger: a
    crawl that begins there records string buckets."""
    from crawler.frontier.urlseen import STRINGS
    from testing.servers import RedisServer

    with RedisServer(tmp_path / "redis") as server:
        server.client.config_set("set-max-intset-entries", 128)
        f = Frontier(server.client, "small-intsets", host_interval=0.0, seen_capacity=1000)
        assert f.put([entry(f"http://a.example/{i}") for i in range(300)]) == ["added"] * 300
        assert f.layout.kind == STRINGS and server.client.hget(f.keys.seen_meta, "layout") == b"1000 1e-06 4"
        assert server.client.type(f.keys.seen(0, 0)) == b"string"
        assert set(f.put([entry(f"http://a.example/{i}") for i in range(300)])) == {"seen"}


def test_url_seen_takes_sets_on_a_server_that_refuses_config(tmp_path):
    """A managed server may refuse CONFIG: a crawl that begins there takes the default's
    sets (set-max-intset-entries 512 unless configured)."""
    import redis

    from crawler.frontier.urlseen import SETS
    from testing.servers import RedisServer

    with RedisServer(tmp_path / "redis") as server:
        server.client.acl_setuser(
            "crawler",
            enabled=True,
            passwords=["+pw"],
            keys=["*"],
            channels=["*"],
            categories=["+@all"],
            commands=["-config"],
        )
        client = redis.Redis(host="127.0.0.1", port=server.port, username="crawler", password="pw")
        with pytest.raises(redis.ResponseError):
            client.config_get("set-max-intset-entries")
        f = Frontier(client, "no-config", host_interval=0.0, seen_capacity=1000)
        assert f.put([entry(f"http://a.example/{i}") for i in range(300)]) == ["added"] * 300
        assert f.layout.kind == SETS and client.hget(f.keys.seen_meta, "layout") == b"1000 1e-06 4 sets"
        assert set(f.put([entry(f"http://a.example/{i}") for i in range(300)])) == {"seen"}
        client.close()


def test_crawls_do_not_touch_each_other(make_frontier, redis_client):
    import uuid

    other_name = f"test-{uuid.uuid4().hex[:12]}"
    f = make_frontier()
    g = make_frontier(name=other_name)
    try:
        f.put([entry("http://a.example/1")])
        assert g.put([entry("http://a.example/1")])[0] == "added"
        assert pop_urls(g)[0] == ["http://a.example/1"]
        assert f.stats()["queued"] == 1
        g.clear()
        assert f.stats()["queued"] == 1
        assert not list(redis_client.scan_iter(match=g.keys.pattern()))
    finally:
        g.clear()


def test_concurrent_workers_each_url_once(make_frontier):
    f = make_frontier(host_interval=0.0)
    urls = [f"http://h{i}.example/{j}" for i in range(40) for j in range(5)]
    f.put([entry(u) for u in urls])
    assert sorted(drain_concurrently(make_frontier)) == sorted(urls)
    assert f.outlook(0)["state"] == FINISHED


def test_pop_carries_acknowledgements(make_frontier):
    f = make_frontier(host_interval=0.0)
    f.put([entry("http://a.example/1"), entry("http://b.example/1")])
    _, first, _ = pop_urls(f, now=T0)
    leases, _ = f.get(1, now=T0 + 1, ack=[first[0].id, "no-such-lease"])
    assert f.last_acked == 1 and len(leases) == 1
    st = f.stats()
    assert st["acked"] == 1 and st["leased"] == 1


def test_url_seen_grows_with_its_urls(make_frontier, redis_client):
    """Nothing is allocated ahead: the buckets hold 4 bytes per URL admitted (intsets of
    32-bit integers), in one generation, then in two."""
    f = make_frontier(seen_capacity=10_000)

    def seen_bytes():
        keys = list(redis_client.scan_iter(match=f.keys.pattern()[:-1] + NAMES["seen"] + "[0-9]*", count=1000))
        assert {redis_client.object("encoding", k) for k in keys} == {b"intset"}
        return sum(4 * redis_client.scard(k) for k in keys), keys

    f.put([entry("http://a.example/1")])
    assert seen_bytes()[0] == 4
    urls = [f"http://h{i % 50}.example/{i}" for i in range(15_000)]
    f.put([entry(u) for u in urls + urls[:100]])
    total, keys = seen_bytes()
    assert total == 4 * 15_001
    gens = f.layout.generations(2)
    assert len(keys) <= gens[0].buckets + gens[1].buckets


def test_binary_payloads_survive_the_round_trip(make_frontier):
    f = make_frontier(host_interval=0.0)
    payload = b"P\x00\x1f\n\x1d\xff" + bytes(range(256))
    assert f.put([Entry(url="http://a.example/bin", payload=payload)])[0] == "added"
    leases, _ = f.get(1, now=T0)
    assert leases[0].payload == payload
    # and again after its lease expired and it went back to its queue
    again, _ = f.get(1, now=T0 + f.lease_ms + 1)
    assert again[0].payload == payload


def test_a_host_waits_for_its_download_to_land(make_frontier):
    f = make_frontier(max_in_flight=1, host_interval=1.0)
    f.put([entry(f"http://a.example/{i}") for i in range(3)] + [entry("http://b.example/1")])
    urls, leases, _ = pop_urls(f, n=10, now=T0)
    assert sorted(urls) == ["http://a.example/0", "http://b.example/1"]
    a = next(lease for lease in leases if b"a.example" in lease.payload)
    # due again by its interval, but its download has not ended
    assert pop_urls(f, n=10, now=T0 + 5000)[0] == []
    st = f.stats()
    assert st["hosts_queued"] == 0 and st["in_flight"] == 2 and st["hosts_in_flight"] == 2
    f.ack(landed=[a.id], now=T0 + 5000)  # landed; its page is still being handled
    assert f.stats()["leased"] == 2
    # due one interval after the landing (politeness counts from the end of a download)
    assert pop_urls(f, n=10, now=T0 + 5999)[0] == []
    urls, leases2, _ = pop_urls(f, n=10, now=T0 + 6000)
    assert urls == ["http://a.example/1"]
    # an acknowledgement lands too (once: landing again changes nothing)
    f.ack(a.id, landed=[a.id], now=T0 + 6500)
    assert pop_urls(f, n=10, now=T0 + 9000)[0] == []
    f.ack(leases2[0].id, now=T0 + 9001)
    assert pop_urls(f, n=10, now=T0 + 10_000)[0] == []
    assert pop_urls(f, n=10, now=T0 + 10_001)[0] == ["http://a.example/2"]


def test_a_host_due_within_the_lookahead_is_handed_out_with_its_due_time(make_frontier):
    f = make_frontier(max_in_flight=1, host_interval=1.0)
    f.put([entry(f"http://a.example/{i}") for i in range(3)])
    (first,), _ = f.get(1, now=T0, lookahead=20)
    assert (first.due, first.interval) == (T0, 1000)
    f.ack(landed=[(first.id, T0 + 200)], now=T0 + 250)  # its download ended at T0 + 200
    assert f.get(1, now=T0 + 1170, lookahead=20) == ([], T0 + 1200)  # due at T0 + 1200
    (second,), _ = f.get(1, now=T0 + 1185, lookahead=20)
    assert second.payload == b"http://a.example/1" and second.due == T0 + 1200
    # the next turn counts from the end of its download, never from the early hand-out
    f.ack(landed=[(second.id, T0 + 1300)], now=T0 + 1300)
    assert f.get(1, now=T0 + 2279, lookahead=20)[0] == []
    assert f.get(1, now=T0 + 2280, lookahead=20)[0][0].due == T0 + 2300
    # without lookahead, a host is handed out only once due
    f.put([entry("http://b.example/1")], now=T0)
    (b,), _ = f.get(1, now=T0)
    f.ack(landed=[b.id], now=T0 + 10)
    f.put([entry("http://b.example/2")], now=T0 + 20)[0]  # joins its host's queue at the next pop
    assert f.get(1, now=T0 + 1009)[0] == []
    assert f.get(1, now=T0 + 1010)[0][0].due == T0 + 1010


def test_a_landing_never_counts_from_later_than_now(make_frontier):
    f = make_frontier(max_in_flight=1, host_interval=1.0)
    f.put([entry(f"http://a.example/{i}") for i in range(2)])
    (first,), _ = f.get(1, now=T0)
    f.ack(landed=[(first.id, T0 + 60_000)], now=T0 + 100)  # a clock ahead: counts from now
    assert f.get(1, now=T0 + 1100)[0][0].payload == b"http://a.example/1"


def test_expired_and_replaced_leases_land(make_frontier):
    f = make_frontier(max_in_flight=1, host_interval=0.0, lease_seconds=10)
    f.put([entry(f"http://a.example/{i}") for i in range(3)])
    _, leases, _ = pop_urls(f, now=T0)
    assert pop_urls(f, now=T0 + 100)[0] == []
    # a follow-up (redirect) replacing the lease ends its flight and goes first
    f.put([entry("http://a.example/moved", follow_up=True, replaces_lease=leases[0].id)], now=T0 + 200)
    urls, leases, _ = pop_urls(f, now=T0 + 300)
    assert urls == ["http://a.example/moved"]
    # a lease that expires (a dead worker) lands, and its URL is handed out again
    assert pop_urls(f, now=T0 + 400)[0] == []
    urls, _, _ = pop_urls(f, now=T0 + 300 + 10_001)
    assert urls == ["http://a.example/moved"]


def test_a_higher_limit_allows_that_many_at_once(make_frontier):
    f = make_frontier(max_in_flight=2, host_interval=0.0)
    f.put([entry(f"http://a.example/{i}") for i in range(4)])
    assert len(pop_urls(f, now=T0)[0]) == 1
    assert len(pop_urls(f, now=T0 + 1)[0]) == 1
    assert pop_urls(f, now=T0 + 2)[0] == []
    f.ack(landed=[], now=T0 + 3)  # nothing to land: nothing changes
    assert pop_urls(f, now=T0 + 4)[0] == []


def test_leases_of_one_host_landing_in_one_call_change_it_once(make_frontier):
    """A call that lands several leases of one host (a pop's share of it, acknowledged with
    the next pop) changes its host once: in flight one fewer for each lease (a lease landed
    and acknowledged in the same call counts once), back in the heap below its limit, due
    its interval after the latest of those landings (one by one, the first put it back in
    the heap at its own time)."""
    f = make_frontier(max_in_flight=3, host_interval=1.0)
    f.put([entry(f"http://a.example/{i}") for i in range(5)])
    leases = [f.get(1, now=t)[0][0] for t in (T0, T0 + 1000, T0 + 2000)]
    assert f.get(1, now=T0 + 3000)[0] == []  # three in flight: at its limit
    first, second, _ = leases
    landed = [(first.id, T0 + 3100), (second.id, T0 + 3400)]
    f.ack(first.id, landed=landed, now=T0 + 3500)
    st = f.stats()
    assert (st["in_flight"], st["hosts_in_flight"], st["hosts_queued"]) == (1, 1, 1)
    assert f.get(1, now=T0 + 4399)[0] == []
    (nxt,), _ = f.get(1, now=T0 + 4400)
    assert nxt.payload == b"http://a.example/3" and nxt.due == T0 + 4400
    (last,), _ = f.get(1, now=T0 + 5400)  # (two in flight: one more may go)
    assert last.payload == b"http://a.example/4"


def test_a_host_downloading_with_urls_left_counts_among_the_hosts_with_urls(make_frontier):
    f = make_frontier(max_in_flight=1)
    f.put([entry(f"http://a.example/{i}") for i in range(5)] + [entry("http://b.example/0")])
    urls, leases, _ = pop_urls(f, 10, now=now_ms())
    assert sorted(urls) == ["http://a.example/0", "http://b.example/0"]  # one each: both downloading
    s = f.stats()
    assert s["hosts_queued"] == 0  # neither is ready while it downloads
    assert s["hosts_with_urls"] == 1  # a has 4 URLs left; b none


def test_without_an_in_flight_limit_a_landing_still_counts(make_frontier):
    """FRONTIER_HOST_MAX_IN_FLIGHT 0 (no limit): a host's next turn counts from the end of
    its last download too, when that is later than one interval after its hand-out."""
    f = make_frontier(max_in_flight=0, host_interval=1.0)
    f.put([entry(f"http://a.example/{i}") for i in range(2)])
    (first,), _ = f.get(1, now=T0)
    assert f.stats()["in_flight"] == 1  # (tracked, though nothing is limited)
    f.ack(landed=[(first.id, T0 + 3000)], now=T0 + 3000)  # a slow answer: it ended 3 s later
    assert f.get(1, now=T0 + 3999)[0] == []
    assert f.get(1, now=T0 + 4000)[0][0].payload == b"http://a.example/1"


def test_the_outbox_delivers_a_run_of_pushes_or_acks_in_one_call(redis_client, crawl_name):
    """Pushes and acks kept while Redis was away go back in order, a run of one kind a call
    (three calls for 40 pushes, 10 acks, 5 pushes), not a round trip an entry."""
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler
    from twisted.internet import task

    from crawler.frontier.outbox import ACK, PUSH, Outbox

    frontier = Frontier(redis_client, crawl_name, host_interval=0)
    frontier.put([Entry(url=f"http://o{i}.example/", payload=b"x") for i in range(10)])
    leases, _ = frontier.get(10)
    calls = []

    class Counting:
        def put(self, entries, now=None):
            calls.append((PUSH, len(entries)))
            return frontier.put(entries, now=now)

        def ack(self, *ids, now=None):
            calls.append((ACK, len(ids)))
            return frontier.ack(*ids, now=now)

    clock = task.Clock()
    stats = MemoryStatsCollector(get_crawler())
    outbox = Outbox(Counting(), stats, clock, on_up=lambda: None, on_refused=lambda exc: None)
    for i in range(40):
        outbox.defer(PUSH, Entry(url=f"http://p{i}.example/", payload=b"x"))
    for lease in leases:
        outbox.defer(ACK, lease.id)
    for i in range(5):
        outbox.defer(PUSH, Entry(url=f"http://q{i}.example/", payload=b"x"))
    assert outbox.drain() and len(outbox) == 0
    assert calls == [(PUSH, 40), (ACK, 10), (PUSH, 5)]
    assert frontier.stats()["queued"] == 45 and frontier.stats()["leased"] == 0
    outbox.stop()
