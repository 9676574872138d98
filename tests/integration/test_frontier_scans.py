"""No frontier script reads a whole collection (docs/decisions/0053-no-script-reads-a-whole-collection.md):
PROMOTE finds a URL in flight in the index of leases by URL (``leased``), kept in step as
leases are handed out, renewed, expire, are replaced and acknowledged; a drop moves its
host's queues a chunk a call without touching the other hosts' URLs; a host's delayed
retries are in its own index (``dq:<host>``) and still come out at their time."""

from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.words import now_ms

T0 = 1_700_000_000_000


def _urls(host, n, start=0):
    return [f"http://{host}/{i}" for i in range(start, start + n)]


def _entries(urls, **kwargs):
    return [Entry(url=u, payload=u.encode(), **kwargs) for u in urls]


def _promote(f, url, now):
    return f.promote(_entries([url]), now=now)


def _take_all(f, now, n=500):
    """Every lease handed out until none is, each acknowledged at once: (drops by code, fetches)."""
    drops, fetch = {}, []
    while True:
        leases, _ = f.get(n, now=now)
        if not leases:
            return drops, fetch
        for lease in leases:
            if lease.due < 0:
                drops.setdefault(-lease.due, []).append(lease.payload.decode())
            else:
                fetch.append(lease.payload.decode())
        f.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)


def test_promote_finds_a_leased_url_through_the_index_as_its_lease_is_renewed_expires_and_is_replaced(
    redis_client, crawl_name
):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, lease_seconds=1)
    url = "http://p.example/page"
    f.put(_entries([url, "http://p.example/other"]), now=T0)
    [lease], _ = f.get(1, now=T0)
    assert lease.payload == url.encode()
    assert redis_client.hget(f.keys.leased, url) == b"1"
    assert _promote(f, url, T0 + 100) == ["seen"]  # in flight: not promoted
    f.renew([lease.id], now=T0 + 800)  # held until T0 + 1800
    assert _promote(f, url, T0 + 1500) == ["seen"]  # (past its first expiry, renewed)
    # it expires: the next pop puts it back in its queue, and it leaves the index
    assert f.get(0, now=T0 + 1900) == ([], None)
    assert redis_client.hexists(f.keys.leased, url) is False
    assert _promote(f, url, T0 + 1900) == ["promoted"]  # queued again: a copy to the head
    [again], _ = f.get(1, now=T0 + 2000)  # (one of its two copies; the other is dropped later)
    assert again.payload == url.encode() and again.id != lease.id
    assert _promote(f, url, T0 + 2000) == ["seen"]  # the promoted copy was handed out
    # its follow-up replaces the lease (a retry, due later): no lease holds it any more
    retry = Entry(url=url, payload=url.encode(), dont_filter=True, follow_up=True, not_before=T0 + 60_000)
    retry.replaces_lease = again.id
    assert f.put([retry], now=T0 + 2100) == ["added"]
    assert redis_client.hexists(f.keys.leased, url) is False
    redis_client.delete(f.keys.promoted)  # (forgotten: as after PROMOTED_DAYS)
    assert _promote(f, url, T0 + 2200) == ["promoted"]
    # two leases of one URL (a forced copy): it is in flight until both are gone
    drained = _take_all(f, now=T0 + 2300)
    assert sorted(drained[1]) == sorted(["http://p.example/other", url])
    assert redis_client.hlen(f.keys.leased) == 0 and redis_client.zcard(f.keys.leases) == 0
    twice = _entries([url, url], dont_filter=True)
    assert f.put(twice, now=T0 + 3000) == ["added", "added"]
    first, _ = f.get(1, now=T0 + 3000)
    second, _ = f.get(1, now=T0 + 3000)
    assert redis_client.hget(f.keys.leased, url) == b"2"
    f.ack(first[0].id, now=T0 + 3100)
    assert _promote(f, url, T0 + 3100) == ["seen"]  # the other lease still holds it
    f.give_back([second[0].id])  # given back: held until the next pop puts it back
    assert _promote(f, url, T0 + 3200) == ["seen"]
    f.get(0, now=T0 + 3300)
    assert _promote(f, url, T0 + 3300) == ["promoted"]


def test_a_drop_of_a_long_queue_moves_it_a_chunk_a_call_and_keeps_the_other_hosts_urls(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, order="importance")
    later = T0 + 3_600_000
    ranked, back, delayed = _urls("d.example", 1500), _urls("d.example", 1500, 2000), _urls("d.example", 1200, 4000)
    kept_back, kept_delayed = _urls("o.example", 300), _urls("o.example", 200, 1000)
    f.put(_entries(ranked), now=T0)  # (importance: into its ranked queue)
    f.put(_entries(back + kept_back, dont_filter=True, follow_up=True), now=T0)  # into the back queues
    f.put(_entries(delayed + kept_delayed, dont_filter=True, follow_up=True, not_before=later), now=T0)
    assert redis_client.zcard(f.keys.host_delayed("d.example")) == 1200
    assert redis_client.zcard(f.keys.delayed) == 1400
    calls = []
    script = f._hold

    def counted(keys, args):
        calls.append(args[2])
        return script(keys=keys, args=args)

    f._hold = counted
    assert f.drop("d.example", now=T0) is True
    assert calls == ["drop", "more", "more", "more", "more"]  # 4,200 entries, 1,000 a call
    assert redis_client.llen(f.keys.drops) == 4200
    for key in (f.keys.back("d.example"), f.keys.ranked("d.example"), f.keys.host_delayed("d.example")):
        assert redis_client.exists(key) == 0
    assert redis_client.zcard(f.keys.dropping) == 0
    assert redis_client.zcard(f.keys.delayed) == 200  # the other host's retries, left where they were
    assert redis_client.zcard(f.keys.host_delayed("o.example")) == 200
    assert redis_client.llen(f.keys.back("o.example")) == 300
    drops, fetch = _take_all(f, now=later)
    assert sorted(drops[1]) == sorted(ranked + back + delayed)
    assert sorted(fetch) == sorted(kept_back + kept_delayed)
    assert f.stats()["queued"] == 0


def test_a_host_given_up_is_dropped_a_chunk_now_and_the_rest_a_chunk_a_pop(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, give_up=10)
    t0 = now_ms()
    down, up = _urls("down.example", 2500), _urls("up.example", 20)
    f.put(_entries(down + up, dont_filter=True, follow_up=True), now=t0)
    limits = {"minimum": 1, "maximum": 2, "quiet": 60}
    f.fail("down.example", "down", down[0], now=t0, **limits)
    f.fail("down.example", "down", down[1], now=t0 + 10_000, **limits)  # given up: its first chunk moves
    assert f.paused()["dropped"]["down.example"][1] == "down"
    assert redis_client.llen(f.keys.drops) == 1000 and redis_client.llen(f.keys.back("down.example")) == 1500
    assert redis_client.zrange(f.keys.dropping, 0, -1, withscores=True) == [(b"down.example", 1.0)]
    f.get(0, now=t0 + 10_000)  # a pop moves the next chunk
    assert redis_client.llen(f.keys.back("down.example")) == 500
    drops, fetch = _take_all(f, now=t0 + 20_000)
    assert sorted(drops[2]) == sorted(down) and sorted(fetch) == sorted(up)
    assert redis_client.zcard(f.keys.dropping) == 0 and f.stats()["queued"] == 0


def test_a_drop_resumed_before_its_last_chunk_leaves_the_rest_queued(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0)
    urls = _urls("r.example", 1500)
    f.put(_entries(urls, dont_filter=True, follow_up=True), now=T0)
    assert f._hold_script("drop", "r.example", T0) == 2  # (its first chunk, as a caller that stopped there)
    assert f.resume("r.example", now=T0) is True
    assert redis_client.zcard(f.keys.dropping) == 0
    drops, fetch = _take_all(f, now=T0 + 1000)
    assert len(drops[1]) == 1000 and sorted(drops[1] + fetch) == sorted(urls) and len(fetch) == 500


def test_delayed_retries_in_their_hosts_index_come_out_at_their_time(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0)
    retries = [("http://a.example/1", T0 + 1000), ("http://b.example/1", T0 + 1500), ("http://a.example/2", T0 + 2000)]
    f.put(
        [Entry(url=u, payload=u.encode(), dont_filter=True, follow_up=True, not_before=at) for u, at in retries],
        now=T0,
    )
    indexed = redis_client.zrange(f.keys.host_delayed("a.example"), 0, -1, withscores=True)
    assert [(m.split(b"\x1f", 1)[1].decode(), at) for m, at in indexed] == [retries[0], retries[2]]
    assert f.get(10, now=T0 + 999) == ([], T0 + 1000)
    got = []
    for at in (T0 + 1000, T0 + 1500, T0 + 2000):
        leases, _ = f.get(10, now=at)
        got.append([lease.payload.decode() for lease in leases])
        f.ack(*[lease.id for lease in leases], now=at)
    assert got == [["http://a.example/1"], ["http://b.example/1"], ["http://a.example/2"]]
    assert redis_client.zcard(f.keys.delayed) == 0
    assert redis_client.exists(f.keys.host_delayed("a.example"), f.keys.host_delayed("b.example")) == 0
