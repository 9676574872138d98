"""The spill (FRONTIER_HOST_WINDOW, decisions 0055 and 0061) on a real Redis and a real SQLite
spill store: new URLs wait in the crawl's inbox, leave Redis in chunks a host at a time and
come back as its window runs low, each handed out once and in order; workers that die between a claim and its
commit or load lose nothing and hand nothing out twice; at most FRONTIER_ACTIVE_HOSTS
hosts hold a window; a drop, a pause, ``clear`` and the counts see the spilled URLs."""

from __future__ import annotations

import itertools
import sqlite3
import threading

import pytest
import redis

from crawler.frontier.chunks import SqliteChunks, count_of, pack, uncompressed
from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import WORK_FRESH_MS, Entry, Frontier
from crawler.frontier.keys import NAMES
from crawler.frontier.spill import CLAIM_MS, PusherRounds, Spill
from crawler.frontier.words import PAUSED, RUNNING, THROTTLED, now_ms
from testing.frontiers import leases_through_spill, payload_url, urls_through_spill

T0 = 1_800_000_000_000  # ms: every verb gets its now from the test


def _frontier(redis_url, crawl_name, **kw) -> Frontier:
    options = {"host_interval": 0.0, "max_in_flight": 0, "window": 8, "active_hosts": 0, "spill_age": 1.0}
    return Frontier(redis.Redis.from_url(redis_url), crawl_name, **{**options, **kw})


def _urls(hosts: int, per_host: int) -> list[str]:
    return [f"http://h{h}.example/p{i}" for i in range(per_host) for h in range(hosts)]


def _push(frontier, urls, now=T0, cash=None) -> None:
    entries = [Entry(url=u, payload=encode_url(u), cash=(cash or {}).get(u, 0.0)) for u in urls]
    for i in range(0, len(entries), 100):
        assert set(frontier.put(entries[i : i + 100], now=now)) == {"added"}


def _inbox(frontier) -> int:
    """URLs waiting in the crawl's inbox now."""
    return frontier.redis.llen(frontier.keys.inbox)


def _redis_urls(frontier) -> int:
    """URLs held in Redis's windows and buffers now."""
    r, k = frontier.redis, frontier.keys
    total = 0
    for name in (NAMES["back"], NAMES["ranked"], NAMES["buffer"]):
        for key in r.scan_iter(match=k.pattern(name)):
            total += r.llen(key) if r.type(key) == b"list" else r.zcard(key)
    return total


def _read(frontier, chunks, claimed) -> list[tuple]:
    """The chunks of a load claim (host, id each) read from the spill store, as LOAD takes
    them: (host, id, entries), as Spill.refill reads them."""
    bodies = chunks.read(frontier.keys.prefix, claimed)
    return [(host, chunk, uncompressed(body)) for (host, chunk), body in zip(claimed, bodies, strict=True)]


def test_urls_beyond_the_window_go_to_disk_and_come_back_once_each_in_order(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    urls = _urls(3, 100)
    _push(frontier, urls)
    # every new URL waits in the crawl's inbox until a round writes it out: FRONTIER_SPILL_AGE
    # after the first came (at once after a short pop, or when it holds a slice)
    assert _inbox(frontier) == 300 and _redis_urls(frontier) == 0
    assert spill.round(T0) == (0, 0)
    # each host's 100: 12 chunks of 8 and one of 4; each host's oldest loaded into its window
    assert spill.round(T0 + 1000) == (300, 3 * 8)
    assert _inbox(frontier) == 0 and _redis_urls(frontier) == 3 * 8
    assert frontier.stats()["spilled"] == 276 and frontier.stats()["queued"] == 300
    assert chunks.size(frontier.keys.prefix)[0] == 3 * 12

    got = urls_through_spill(frontier, spill, T0 + 2000)
    assert sorted(got) == sorted(urls)  # every URL once
    for h in range(3):  # each host's in the order pushed
        assert [u for u in got if u.startswith(f"http://h{h}.")] == [u for u in urls if u.startswith(f"http://h{h}.")]
    stats = frontier.stats()
    assert stats["queued"] == 0 and stats["spilled"] == 0
    assert chunks.size(frontier.keys.prefix) == (0, 0)  # each chunk deleted once loaded


def test_importance_order_holds_in_the_window_and_chunks_keep_their_scores(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name, order="importance")
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = [f"http://a.example/p{i}" for i in range(40)]
    cash = {u: float(i % 10) for i, u in enumerate(urls)}
    _push(frontier, urls, cash=cash)
    got = urls_through_spill(frontier, spill, T0 + 2000)
    assert sorted(got) == sorted(urls)
    # the first window's best half before anything is loaded; the URLs of each chunk (8 in
    # the order pushed) come out most cash first: their scores went to disk and back
    assert set(got[:4]) == set(sorted(urls[:8], key=cash.get, reverse=True)[:4])
    for start in range(0, 40, 8):
        block = [u for u in got if u in urls[start : start + 8]]
        assert [cash[u] for u in block] == sorted((cash[u] for u in block), reverse=True)


def test_fifo_priority_levels_order_a_hosts_window_and_each_chunk_it_loads(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)  # fifo, 3 levels: priority 1, 0, -1 are levels 0, 1, 2
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = [f"http://a.example/p{i}" for i in range(40)]
    priority = {u: (0, -1, 1, 0, -1)[i % 5] for i, u in enumerate(urls)}
    entries = [Entry(url=u, payload=encode_url(u), priority=priority[u]) for u in urls]
    assert set(frontier.put(entries, now=T0)) == {"added"}
    # the 8 of priority 1 went to the window, the others to the inbox
    assert frontier.redis.llen(frontier.keys.back("a.example")) == 8 and _inbox(frontier) == 32
    assert not frontier.redis.exists(frontier.keys.hbeyond)
    got = urls_through_spill(frontier, spill, T0 + 2000)
    assert sorted(got) == sorted(urls)
    # the 8 of the highest level first; within a level, the order pushed; the URLs of each
    # chunk (the others, 8 pushed one after another) by level, through the disk and back
    assert got[:8] == [u for u in urls if priority[u] == 1]
    for p in (1, 0, -1):
        assert [u for u in got if priority[u] == p] == [u for u in urls if priority[u] == p]
    spilled = [u for u in urls if priority[u] != 1]
    for start in range(0, len(spilled), 8):
        block = [priority[u] for u in got if u in spilled[start : start + 8]]
        assert block == sorted(block, reverse=True)

    # a URL of the default level joins a window that holds lower ones ahead of them, and
    # one of a higher level ahead of both; the mark of a window with lower levels goes with it
    low, mid, high = (
        Entry(url=f"http://b.example/{n}", payload=encode_url(f"http://b.example/{n}"), priority=p)
        for n, p in (("low", -1), ("mid", 0), ("high", 1))
    )
    for e in (low, mid, high):
        assert frontier.put([e], now=T0 + 3000) == ["added"]
    assert urls_through_spill(frontier, spill, T0 + 4000) == [high.url, mid.url, low.url]
    assert not frontier.redis.exists(frontier.keys.hlevels)

    # only the lower tail is merged: a default URL goes between the default ones and the low
    def c(name, p=0):
        return Entry(url=f"http://c.example/{name}", payload=encode_url(f"http://c.example/{name}"), priority=p)

    assert frontier.put([c("d0"), c("d1"), c("low", -1)], now=T0 + 5000) == ["added"] * 3
    assert frontier.put([c("d2"), c("low2", -1)], now=T0 + 5000) == ["added"] * 2
    got = urls_through_spill(frontier, spill, T0 + 6000)
    assert got == [f"http://c.example/{n}" for n in ("d0", "d1", "d2", "low", "low2")]


def test_a_url_of_a_higher_level_passes_its_hosts_urls_on_disk_up_to_twice_the_window(redis_url, crawl_name, tmp_path):
    """Five levels (priority 2 .. -2), a window of 4: a.example has 4 URLs in its window and
    8 on disk. URLs of a level above the default join the window past its size, up to 8,
    and come out first; past that they wait beyond it, and the next of their level waits
    behind them (fifo within a level), ahead of the disk's default ones as they are loaded."""
    frontier = _frontier(redis_url, crawl_name, window=4, priority_levels=5)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    r, k = frontier.redis, frontier.keys

    def entry(name, priority=0):
        return Entry(url=f"http://a.example/{name}", payload=encode_url(f"http://a.example/{name}"), priority=priority)

    plain = [entry(f"d{i}") for i in range(12)]
    assert set(frontier.put(plain, now=T0)) == {"added"}
    assert spill.round(T0 + 1000) == (12, 4) and r.llen(k.back("a.example")) == 4
    for e in (entry("hi1", 1), entry("top", 2), entry("hi2", 1), entry("hi3", 1)):
        assert frontier.put([e], now=T0) == ["added"]
    assert r.llen(k.back("a.example")) == 8 and not r.exists(k.hbeyond)
    # the window is twice its size: hi4 waits beyond it, and hi5 behind hi4
    assert frontier.put([entry("hi4", 1), entry("hi5", 1)], now=T0) == ["added"] * 2
    assert r.llen(k.back("a.example")) == 8 and r.llen(k.buffer("a.example")) == 2
    assert r.hget(k.hbeyond, "a.example") == b"-1"
    got = urls_through_spill(frontier, spill, T0 + 2000)
    assert sorted(got) == sorted(
        [e.url for e in plain] + [f"http://a.example/{n}" for n in ("hi1", "hi2", "hi3", "hi4", "hi5", "top")]
    )
    names = [u.rsplit("/", 1)[1] for u in got]
    assert names[:4] == ["top", "hi1", "hi2", "hi3"]
    assert [n for n in names if n.startswith("hi")] == ["hi1", "hi2", "hi3", "hi4", "hi5"]
    assert [n for n in names if n.startswith("d")] == [f"d{i}" for i in range(12)]
    assert not r.exists(k.hbeyond)  # nothing beyond the window any more: forgotten


def test_a_url_of_a_higher_level_gives_a_host_waiting_on_disk_a_window_if_there_is_room(
    redis_url, crawl_name, tmp_path
):
    """FRONTIER_ORDER importance, five levels, one window at most: b.example waits wholly on
    disk. While a.example holds the window, a URL of priority 1 for b waits in its buffer,
    behind its chunks; once there is room, one of priority 2 gets b a window at once, is
    handed out first, and b's chunks are loaded behind it. A paused host's chunks stay on
    disk until it is resumed."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=1, order="importance", priority_levels=5)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    r, k = frontier.redis, frontier.keys

    def put(url, priority, now):
        assert frontier.put([Entry(url=url, payload=encode_url(url), priority=priority)], now=now) == ["added"]

    def hand_out(now):  # (no spill round: nothing is loaded)
        out = []
        while leases := frontier.get(4, now=now)[0]:
            frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)
            out += [payload_url(lease.payload) for lease in leases]
        return out

    a = [f"http://a.example/{i}" for i in range(4)]
    b = [f"http://b.example/{i}" for i in range(8)]
    _push(frontier, a + b)
    spill.round(T0 + 2000)
    assert r.zscore(k.dormant, "b.example") is not None and not r.exists(k.ranked("b.example"))
    hi, top = "http://b.example/hi", "http://b.example/top"
    put(hi, 1, T0 + 2000)  # no room: into b's buffer
    assert r.llen(k.buffer("b.example")) == 1 and r.zscore(k.dormant, "b.example") is not None
    assert r.hget(k.hbeyond, "b.example") == b"-1"
    assert hand_out(T0 + 2000) == a  # a's window empties: room for one
    put(top, 2, T0 + 2000)
    assert r.zscore(k.ranked("b.example"), top) is not None and r.zscore(k.dormant, "b.example") is None
    assert hand_out(T0 + 2000) == [top]
    got = urls_through_spill(frontier, spill, T0 + 3000)
    assert sorted(got) == sorted([*b, hi]) and [u for u in got if u != hi] == b
    assert got.index(hi) > 0  # (it waited behind b's chunks)
    assert frontier.stats()["queued"] == 0 and not r.exists(k.hbeyond)

    # paused, c.example gets a window for its URL of priority 2, but no load is asked for it
    # (nor is it handed out) until it is resumed
    c, d = ([f"http://{h}.example/{i}" for i in range(8)] for h in "cd")
    _push(frontier, d, now=T0 + 4000)
    spill.round(T0 + 5000)  # d written out, and given the window
    _push(frontier, c, now=T0 + 5000)
    spill.round(T0 + 6000)  # c written out: it waits on disk
    assert r.zscore(k.dormant, "c.example") is not None
    assert sorted(hand_out(T0 + 6000)) == sorted(d[:4])
    frontier.pause("c.example", now=T0 + 6000)
    top = "http://c.example/top"
    put(top, 2, T0 + 6000)
    assert r.zscore(k.ranked("c.example"), top) is not None
    assert r.zscore(k.ready, "c.example") is None and r.zscore(k.refill, "c.example") is None
    assert sorted(urls_through_spill(frontier, spill, T0 + 7000)) == d[4:]
    frontier.resume("c.example", now=T0 + 8000)
    assert urls_through_spill(frontier, spill, T0 + 8000) == [top, *c]


def test_a_submission_waiting_stays_ahead_of_urls_of_a_higher_level(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name, window=10)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))

    def entry(url, **kw):
        return Entry(url=url, payload=encode_url(url), **kw)

    assert frontier.put([entry("http://a.example/n0"), entry("http://a.example/n1")], now=T0) == ["added"] * 2
    assert frontier.put([entry("http://a.example/sub", urgent=True)], now=T0) == ["added"]
    assert frontier.put([entry("http://a.example/hi", priority=1)], now=T0) == ["added"]
    got = urls_through_spill(frontier, spill, T0 + 1)
    assert got == ["http://a.example/sub", "http://a.example/hi", "http://a.example/n0", "http://a.example/n1"]


def test_due_hosts_whose_next_url_is_of_a_higher_level_go_first(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))

    def entry(url, priority=0):
        return Entry(url=url, payload=encode_url(url), priority=priority)

    # a.example's and b.example's URLs are all due at once; b's first is of a higher level
    plain = [entry(f"http://a.example/{i}") for i in range(3)]
    keen = [entry("http://b.example/0"), entry("http://b.example/top", priority=2)]
    assert set(frontier.put(plain + keen, now=T0)) == {"added"}
    assert spill.round(T0 + 1000) == (4, 4)  # (b's top went to its window as it came)
    leases, _ = frontier.get(1, now=T0 + 1000)
    assert [payload_url(lease.payload) for lease in leases] == ["http://b.example/top"]
    # its next URL is of the default level: it no longer goes first
    frontier.ack(leases[0].id, landed=[leases[0].id], now=T0 + 1000)
    leases, _ = frontier.get(1, now=T0 + 1001)
    assert [payload_url(lease.payload) for lease in leases] == ["http://a.example/0"]
    frontier.ack(leases[0].id, landed=[leases[0].id], now=T0 + 1001)
    assert not frontier.redis.exists(frontier.keys.keen)
    assert sorted(urls_through_spill(frontier, spill, T0 + 1002)) == [
        "http://a.example/1",
        "http://a.example/2",
        "http://b.example/0",
    ]
    assert not frontier.redis.exists(frontier.keys.hkeen)


def _a_load_whose_worker_dies(frontier, chunks, at: int, claims: int, loads: int) -> Spill:
    """Worker C claims a load of ``claims`` URLs at ``at`` and dies before loading; D loads
    ``loads`` URLs (C's chunks among them) once the claim expires; C wakes up and loads what
    it read: refused, nothing handed out twice. D's spill."""
    claimed = frontier.load_claim("C", CLAIM_MS, 64, now=at)
    read = _read(frontier, chunks, claimed)
    assert len({host for host, _, _ in read}) == 1 and sum(count_of(data) for _, _, data in read) == claims
    assert frontier.load_claim("D", CLAIM_MS, 64, now=at + 1) == []
    d = Spill(frontier, chunks, token="D")
    assert d.refill(at + CLAIM_MS + 1) == loads
    assert chunks.read(frontier.keys.prefix, claimed) == [None] * len(claimed)  # (loaded: deleted)
    assert frontier.load("C", read, now=at + CLAIM_MS + 2) == [2] * len(claimed)
    return d


def test_a_worker_dying_between_take_and_put_or_load_loses_nothing(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    urls = _urls(1, 24)
    _push(frontier, urls)
    crawl = frontier.keys.prefix
    # worker A takes the inbox (24 URLs: three chunks), writes its chunks, then dies
    first, taken = frontier.inbox_take("A", CLAIM_MS, 100, now=T0)
    assert len(taken) == 24
    entries = [e.split(b"\x1f", 1)[1] for e in taken]
    written = [("h0.example", first + k, pack(entries[k * 8 : k * 8 + 8])) for k in range(3)]
    chunks.write(crawl, written)
    assert frontier.inbox_take("B", CLAIM_MS, 100, now=T0 + 1) == (0, [])  # A's claim holds
    # after it expires, B writes the same URLs as chunks of its own
    b = Spill(frontier, chunks, token="B")
    assert b.drain(T0 + CLAIM_MS + 1) == 24
    # A's put comes late: refused, and its chunks are its to delete (never listed)
    assert frontier.inbox_put("A", 24, first, [("h0.example", 3, 24)], now=T0 + CLAIM_MS + 2) == [False]
    chunks.delete(crawl, [(h, c) for h, c, _ in written])
    assert chunks.size(crawl)[0] == 3 and frontier.stats()["spilled"] == 24
    # C claims the oldest chunk of a host waiting on disk; once C's claim expired, the host
    # waits for a load with no URL in its window, and D's takes all three chunks
    d = _a_load_whose_worker_dies(frontier, chunks, T0 + CLAIM_MS + 4, claims=8, loads=24)
    got = urls_through_spill(frontier, d, T0 + 3 * CLAIM_MS)
    assert got == urls


def test_a_put_sent_again_after_its_reply_was_lost_keeps_its_chunks(redis_url, crawl_name):
    """A put whose reply was lost, sent again, finds no claim: each host's chunks are found
    listed (kept), or, once its last chunk was loaded, handed out already (deleted again)."""
    frontier = _frontier(redis_url, crawl_name)
    _push(frontier, _urls(2, 20))
    first, taken = frontier.inbox_take("A", CLAIM_MS, 100, now=T0)
    hosts = [("h0.example", 3, 20), ("h1.example", 3, 20)]
    assert frontier.inbox_put("A", len(taken), first, hosts, now=T0) == [True, True]
    assert frontier.inbox_put("A", len(taken), first, hosts, now=T0) == [True, True]  # sent again
    key = frontier.keys.spilled("h1.example")
    assert frontier.redis.lrange(key, 0, -1) == [str(first + c).encode() for c in range(3)]
    frontier.redis.delete(key)  # (as if h1's chunks were all loaded meanwhile)
    assert frontier.inbox_put("A", len(taken), first, hosts, now=T0) == [True, False]
    assert _inbox(frontier) == 0 and frontier.stats()["spilled"] == 40


def test_a_worker_dying_between_claim_and_commit_of_a_buffer_loses_nothing(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    # URLs of a level above the default: 16 join the window (twice its size), 16 the buffer
    urls = [f"http://h0.example/p{i}" for i in range(32)]
    assert set(frontier.put([Entry(url=u, payload=encode_url(u), priority=1) for u in urls], now=T0)) == {"added"}
    crawl = frontier.keys.prefix
    # worker A claims the buffer (16 URLs: two chunks' worth, in one claim) and writes its
    # chunks, then dies
    claimed = frontier.spill_claim("A", CLAIM_MS, 64, now=T0)
    assert [(h, len(e)) for h, _, e in claimed] == [("h0.example", 8)] * 2
    assert claimed[1][1] == claimed[0][1] + 1
    chunks.write(crawl, [(h, c, pack(e)) for h, c, e in claimed])
    assert frontier.spill_claim("B", CLAIM_MS, 64, now=T0 + 1) == []  # A's claim holds
    # after it expires, B writes the same URLs as a chunk of its own
    b = Spill(frontier, chunks, token="B")
    assert b.spill(T0 + CLAIM_MS + 1) == 16
    assert frontier.spill_commit("A", claimed, now=T0 + CLAIM_MS + 2) == set()  # A's commit comes late: refused
    # worker C claims a load and dies before loading; D loads after the claim expires
    for url in _drain_window(frontier, T0 + CLAIM_MS + 3):
        urls.remove(url)
    # the window ran dry: C claims both chunks (up to four windows), and so does D
    d = _a_load_whose_worker_dies(frontier, chunks, T0 + CLAIM_MS + 4, claims=16, loads=16)
    got = urls_through_spill(frontier, d, T0 + 3 * CLAIM_MS)
    assert sorted(got) == sorted(urls)


def _drain_window(frontier, now) -> list[str]:
    out = []
    while True:
        leases, _ = frontier.get(5, now=now)
        if not leases:
            return out
        frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)
        out += [payload_url(lease.payload) for lease in leases]


def test_at_most_the_active_hosts_hold_a_window_and_the_others_wait_on_disk(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name, active_hosts=2)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = _urls(6, 10)
    _push(frontier, urls)
    spill.round(T0 + 2000)  # all written out: 2 hosts get a window, the other 4 wait on disk
    assert frontier.redis.zcard(frontier.keys.ready) == 2 and frontier.redis.zcard(frontier.keys.dormant) == 4
    assert _redis_urls(frontier) == 2 * 8
    got, most = [], 0
    now = T0 + 3000
    while len(got) < len(urls):
        spill.round(now)
        most = max(most, frontier.redis.zcard(frontier.keys.ready))
        leases, _ = frontier.get(5, now=now)
        assert leases, (len(got), frontier.stats())
        frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)
        got += [payload_url(lease.payload) for lease in leases]
        now += 10
    assert sorted(got) == sorted(urls)
    assert most <= 3  # (a host claimed for a load while another leaves)


def test_a_dropped_host_records_its_spilled_urls_and_clear_deletes_the_chunks(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    _push(frontier, _urls(2, 40))
    spill.round(T0 + 2000)
    assert frontier.stats()["spilled"] == 64
    assert frontier.drop("h0.example", now=T0 + 2000) in (True, 1, 2)
    dropped = [lease for lease in leases_through_spill(frontier, spill, T0 + 3000) if lease.due < 0]
    assert len(dropped) == 40  # window, chunks and buffer of h0: each recorded as not fetched
    assert {payload_url(lease.payload).split("/")[2] for lease in dropped} == {"h0.example"}
    # clear: h1's chunks go with its keys
    assert chunks.size(frontier.keys.prefix)[0] == 0  # (all loaded by the drain)
    _push(frontier, [f"http://h2.example/q{i}" for i in range(40)], now=T0 + 4000)
    spill.round(T0 + 6000)
    assert chunks.size(frontier.keys.prefix)[0] == 4
    assert spill.clear() == 4 and chunks.size(frontier.keys.prefix)[0] == 0


def test_a_paused_host_keeps_its_chunks_until_resumed(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = _urls(1, 30)
    _push(frontier, urls)
    spill.round(T0 + 2000)
    frontier.pause("h0.example", now=T0 + 2000)
    assert leases_through_spill(frontier, spill, T0 + 3000) == []
    frontier.resume("h0.example", now=T0 + 4000)
    got = urls_through_spill(frontier, spill, T0 + 5000)
    assert got == urls


def test_a_paused_host_waiting_on_disk_gets_no_window_until_resumed(redis_url, crawl_name, tmp_path):
    """Two windows at most: a.example and b.example hold them, c.example and d.example wait
    on disk, c paused. Once a and b are done, the claim passes c over (out of 'dormant')
    and d gets a window; c's URLs stay on disk, counted, until it is resumed."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=2)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = {h: [f"http://{h}.example/p{i}" for i in range(10)] for h in "abcd"}
    _push(frontier, urls["a"] + urls["b"] + urls["c"] + urls["d"], now=T0)
    spill.round(T0 + 2_000)
    r, k = frontier.redis, frontier.keys
    assert r.zscore(k.dormant, "c.example") is not None and r.zscore(k.dormant, "d.example") is not None
    frontier.pause("c.example", now=T0 + 2_000)
    got = urls_through_spill(frontier, spill, T0 + 3_000)
    assert sorted(got) == sorted(urls["a"] + urls["b"] + urls["d"])
    assert not r.exists(k.back("c.example")) and r.zscore(k.dormant, "c.example") is None
    stats = frontier.stats()
    assert stats["hosts_with_urls"] == 1 and stats["spilled"] == 10
    frontier.resume("c.example", now=T0 + 4_000)
    assert r.zscore(k.dormant, "c.example") == T0 + 4_000
    assert urls_through_spill(frontier, spill, T0 + 5_000) == urls["c"]


def test_a_host_waiting_on_disk_that_a_follow_up_or_a_due_retry_makes_ready_leaves_dormant(
    redis_url, crawl_name, tmp_path
):
    """One window at most: a.example holds it, b.example and c.example wait on disk. A
    follow-up of b (a redirect's target) puts b in the ready heap at once, and a retry of c
    does when it comes due: each leaves 'dormant' for 'refill' (its chunks load behind
    what it holds), so the hosts with URLs are counted once each; everything comes out
    once, each host's spilled URLs in order behind its follow-up."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=1)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = {h: [f"http://{h}.example/p{i}" for i in range(10)] for h in "abc"}
    _push(frontier, urls["a"] + urls["b"] + urls["c"], now=T0)
    spill.round(T0 + 2_000)
    r, k = frontier.redis, frontier.keys
    assert r.zscore(k.dormant, "b.example") is not None and r.zscore(k.dormant, "c.example") is not None
    assert frontier.stats()["hosts_with_urls"] == 3
    moved, retry = "http://b.example/moved", "http://c.example/again"
    follow_up = Entry(url=moved, payload=encode_url(moved), follow_up=True, dont_filter=True)
    later = Entry(url=retry, payload=encode_url(retry), follow_up=True, dont_filter=True, not_before=T0 + 3_000)
    assert frontier.put([follow_up, later], now=T0 + 2_000) == ["added", "added"]
    assert r.zscore(k.ready, "b.example") is not None
    assert r.zscore(k.dormant, "b.example") is None and r.zscore(k.refill, "b.example") == T0 + 2_000
    assert r.zscore(k.dormant, "c.example") is not None  # (its retry is not due yet)
    assert frontier.stats()["hosts_with_urls"] == 3  # a, b (ready), c (on disk): b once
    leases, _ = frontier.get(1, now=T0 + 3_000)  # the retry comes due: c enters the heap
    frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=T0 + 3_000)
    assert r.zscore(k.ready, "c.example") is not None and r.zscore(k.dormant, "c.example") is None
    assert r.zscore(k.refill, "c.example") is not None
    got = [payload_url(lease.payload) for lease in leases] + urls_through_spill(frontier, spill, T0 + 4_000)
    assert sorted(got) == sorted(urls["a"] + urls["b"] + urls["c"] + [moved, retry])
    for host, first in (("b", moved), ("c", retry)):
        assert [u for u in got if u.startswith(f"http://{host}.example/")] == [first, *urls[host]]
    stats = frontier.stats()
    assert stats["hosts_with_urls"] == 0 and stats["spilled"] == 0 and stats["hosts_dormant"] == 0


def _script_calls(frontier) -> int:
    stats = frontier.redis.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))


def test_a_round_sends_only_the_claims_that_may_find_work(crawl_name, tmp_path):
    """spill_due says, without claiming, which claims of a round may find work: buffers due
    to be written, hosts waiting on disk (a window to give back, a chunk to load when there
    is room); a round that finds nothing sends no script, and one with work does it. (A
    Redis server of its own: its count of the scripts run is the server's.)"""
    from testing.servers import RedisServer

    with RedisServer(tmp_path / "redis") as server:
        frontier = _frontier(server.url, crawl_name, window=4, active_hosts=1, window_idle=60.0)
        spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
        spill.bind()
        assert frontier.spill_due(now=T0) == (False, False, False)
        before = _script_calls(frontier)
        assert spill.round(T0) == (0, 0) and _script_calls(frontier) == before  # nothing: no script
        urls = {h: [f"http://{h}.example/p{i}" for i in range(n)] for h, n in (("a", 6), ("b", 10))}
        _push(frontier, urls["a"], now=T0)  # a: in the inbox, due to be written out at T0 + 1 s
        assert frontier.spill_due(now=T0) == (False, False, False)
        assert frontier.spill_due(now=T0 + 1_000) == (True, False, False)
        _push(frontier, urls["b"], now=T0 + 1_000)  # b: in the inbox too
        # both written out; room for one window: a's (the first by name), its oldest chunk loaded
        assert spill.round(T0 + 2_000) == (16, 4)
        # b waits on disk: an idle window may go to it; no room to load it while a holds one
        assert frontier.spill_due(now=T0 + 2_000) == (False, True, False)
        got = urls_through_spill(frontier, spill, T0 + 3_000)
        assert sorted(got) == sorted(urls["a"] + urls["b"])
        assert frontier.spill_due(now=T0 + 4_000) == (False, False, False)


def _last_command(redis_url: str, name: str) -> str:
    """The last command the connection named ``name`` ran, as CLIENT LIST shows it from
    another connection."""
    with redis.Redis.from_url(redis_url) as other:
        return next(c["cmd"] for c in other.client_list() if c["name"] == name)


def test_a_pop_while_another_worker_loads_a_hosts_chunk_says_the_host_is_due_soon(redis_url, crawl_name, tmp_path):
    """A host whose chunk another worker claimed waits in 'refill' at the claim's expiry
    (when a third worker would take the load over), a minute away; a pop that finds
    nothing else says its URLs are due soon, as the load is under way (a worker
    that took the minute for the next page would store its open batches, and sleep, as if
    the crawl had paused; a load on SQLite takes milliseconds, so within 50 ms), and, the
    load done, hands them out."""
    frontier = _frontier(redis_url, crawl_name, window=4)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    urls = [f"http://a.example/p{i}" for i in range(3)]
    _push(frontier, urls, now=T0)
    assert spill.drain(T0) == 3
    claimed = frontier.load_claim("other", CLAIM_MS, 10, now=T0 + 1)
    assert claimed == [("a.example", claimed[0][1])]
    assert frontier.redis.zscore(frontier.keys.refill, "a.example") == T0 + 1 + CLAIM_MS
    leases, next_due = frontier.get(10, now=T0 + 2)
    assert leases == [] and T0 + 2 <= next_due <= T0 + 2 + 50
    read = _read(frontier, chunks, claimed)
    assert frontier.load("other", read, now=T0 + 3) == [1]
    leases, _ = frontier.get(10, now=T0 + 4)
    assert [payload_url(lease.payload) for lease in leases] == urls


@pytest.mark.parametrize("interval", [0.0, 1.0])
def test_a_pop_without_politeness_takes_a_few_urls_from_each_of_fewer_hosts(redis_url, crawl_name, tmp_path, interval):
    """Without politeness (no interval, no in-flight limit) a pop takes up to 4 URLs from
    each of the hosts due first, as many hosts as it needs, and looks at more while it is
    short: fewer hosts a pop, each through the ready heap once for several URLs. With an
    interval each due host gives one URL a pop."""
    frontier = _frontier(redis_url, crawl_name, host_interval=interval)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = _urls(8, 8)  # (8 hosts of 8 URLs, each a whole window)
    _push(frontier, urls)
    spill.round(T0 + 1000)
    leases, _ = frontier.get(8, now=T0 + 2000)
    hosts = [payload_url(lease.payload).split("/")[2] for lease in leases]
    assert len(leases) == 8
    assert sorted(hosts.count(h) for h in set(hosts)) == ([4, 4] if interval == 0 else [1] * 8)
    if interval == 0:
        # a pop larger than 4 URLs from each due host: the second look takes the others
        leases, _ = frontier.get(40, now=T0 + 2000)
        assert len(leases) == 40 and len({payload_url(lease.payload).split("/")[2] for lease in leases}) == 8
        rest = urls_through_spill(frontier, spill, T0 + 2000)
        assert len(rest) == 64 - 48


def test_a_short_pop_tells_the_round_after_it_what_it_may_find(redis_url, crawl_name, tmp_path):
    """A get that comes back short reads in POP what spill_due would read (buffers due,
    hosts waiting on disk, chunks to load): spill_due right after it answers the same with
    no round trip, once; a later one, or one long after, reads Redis again."""
    name = f"spill-work-{crawl_name}"
    frontier = Frontier(
        redis.Redis.from_url(redis_url, client_name=name),
        crawl_name,
        host_interval=0.0,
        max_in_flight=0,
        window=4,
        active_hosts=1,
        spill_age=1.0,
        window_idle=60.0,
    )
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    spill.bind()
    urls = {h: [f"http://{h}.example/p{i}" for i in range(n)] for h, n in (("a", 6), ("b", 10))}
    _push(frontier, urls["a"] + urls["b"], now=T0)  # in the inbox, due to be written out at T0 + 1 s
    got = []

    def short_pop_then_due(now: int) -> tuple[bool, bool, bool]:
        leases, _ = frontier.get(1_000, now=now)
        got.extend(payload_url(lease.payload) for lease in leases)
        frontier.ack(*[lease.id for lease in leases], now=now)
        due = frontier.spill_due(now=now)
        assert _last_command(redis_url, name) == "evalsha"  # answered from the pop: no round trip
        assert frontier.spill_due(now=now) == due  # the second reads Redis
        assert _last_command(redis_url, name) == "zcard"
        return due

    # nothing to hand out: the inbox is to be written out
    assert short_pop_then_due(T0 + 1_000) == (True, False, False)
    assert spill.round(T0 + 1_000) == (16, 4)  # room for one window: a's, its oldest chunk
    # a's window handed out: its next chunk is to load; b waits on disk
    assert short_pop_then_due(T0 + 2_000) == (False, True, True)
    # a's last chunk, and b's first: a, its window empty, has left the heap (room for b)
    assert spill.round(T0 + 2_000) == (0, 2 + 4)
    # a done, b's window handed out: its next chunk is to load
    assert short_pop_then_due(T0 + 3_000) == (False, False, True)
    leases, _ = frontier.get(1_000, now=T0 + 4_000)
    got.extend(payload_url(lease.payload) for lease in leases)
    frontier.ack(*[lease.id for lease in leases], now=T0 + 4_000)
    frontier.spill_due(now=T0 + 4_000 + WORK_FRESH_MS + 1)  # too long after the pop: read
    assert _last_command(redis_url, name) == "zcard"
    got += urls_through_spill(frontier, spill, T0 + 5_000)
    assert sorted(got) == sorted(urls["a"] + urls["b"])


def test_a_promoted_url_that_is_spilled_is_fetched_at_its_hosts_next_turn_and_once(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = _urls(1, 40)
    _push(frontier, urls)
    spill.round(T0 + 2000)
    deep = urls[30]  # on disk, in the host's last chunk
    assert frontier.promote([Entry(url=deep, payload=encode_url(deep))], now=T0 + 2000) == ["promoted"]
    got = urls_through_spill(frontier, spill, T0 + 3000)
    assert got[0] == deep and sorted(got) == sorted(urls)  # its own copy dropped when it came up


def test_a_sharded_frontier_spills_each_hosts_queue_on_its_own_server(tmp_path):
    from crawler.frontier.shards import ShardedFrontier, server_name
    from testing.servers import RedisServer

    servers = [RedisServer(tmp_path / f"shard{i}").start() for i in range(2)]
    try:
        shards = [
            Frontier(s.client, "sharded", host_interval=0.0, max_in_flight=0, window=8, spill_age=0.0) for s in servers
        ]
        frontier = ShardedFrontier(shards, [server_name(s.url) for s in servers])
        chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
        spill = Spill(frontier, chunks)
        urls = _urls(12, 15)
        assert frontier.put([Entry(url=u, payload=encode_url(u)) for u in urls], now=T0).count("added") == 180
        assert spill.round(T0) == (180, 12 * 8)  # (each host's oldest chunk loaded)
        # (the servers' ports place the hosts: 12 hosts all on one of 2 servers is 1 in 2,048)
        assert all(shard.stats()["spilled"] > 0 for shard in shards)
        got = []
        for _ in range(200):
            spill.round(T0 + 1000)
            leases, _ = frontier.get(10, now=T0 + 1000)
            if not leases:
                break
            frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=T0 + 1000)
            got += [payload_url(lease.payload) for lease in leases]
        assert sorted(got) == sorted(urls)
        assert frontier.stats()["spilled"] == 0 and frontier.stats()["queued"] == 0
    finally:
        for s in servers:
            s.kill()


def test_a_spilled_url_linked_again_gains_its_credit_when_it_is_loaded(redis_url, crawl_name, tmp_path):
    frontier = _frontier(redis_url, crawl_name, order="importance")
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = [f"http://a.example/p{i}" for i in range(40)]
    _push(frontier, urls, cash={u: 0.01 * (i % 8) for i, u in enumerate(urls)})
    spill.round(T0 + 2000)
    linked = urls[25]  # on disk; the least cash of its chunk (25 % 8 == 1: 0.01)
    assert frontier.credit([(linked, 1.0)]) == 1
    # linked again by a page while spilled, through PUSH (seen, with cash): gains that too
    assert frontier.put([Entry(url=urls[24], payload=encode_url(urls[24]), cash=1.0)], now=T0 + 2000) == ["seen"]
    got = urls_through_spill(frontier, spill, T0 + 3000)
    assert sorted(got) == sorted(urls)
    chunk = [u for u in got if u in urls[24:32]]
    assert chunk[:2] == [linked, urls[24]]  # 0.01 + 1.0, then 0.00 + 1.0: before the chunk's 0.07
    assert frontier.redis.exists(frontier.keys.prefix + "scr:a.example") == 0


def test_a_spill_not_yet_bound_checks_its_store_at_its_first_round(tmp_path, redis_url, crawl_name):
    """A worker started while its Redis is away waits for it, its spill not yet bound: its
    first round checks the store against the crawl's before anything is written, and
    another store than the one recorded is refused then."""
    from crawler.exceptions import StoreRefused

    frontier = _frontier(redis_url, crawl_name)
    recorded = Spill(frontier, SqliteChunks(str(tmp_path / "first.sqlite")))
    _push(frontier, _urls(1, 20))
    recorded.round(T0 + 2_000)  # binds: the crawl's store is first.sqlite
    assert recorded.bound
    other = Spill(frontier, SqliteChunks(str(tmp_path / "other.sqlite")))
    _push(frontier, [f"http://h0.example/more{i}" for i in range(20)])
    try:
        other.round(T0 + 4_000)
    except StoreRefused as exc:
        assert "first.sqlite" in str(exc) and "other.sqlite" in str(exc)
    else:
        raise AssertionError("a spill with another store than the crawl's was not refused")
    assert not other.bound and other.chunks.size(frontier.keys.prefix) == (0, 0)
    recorded.close()
    other.close()


def _busiest_line(busiest, host, now) -> str:
    """The host's line of the busiest-hosts table (`scrapy frontier`) at ``now`` (ms)."""
    from crawler.commands.frontier import busiest_lines

    return next(line for line in busiest_lines(busiest, now / 1000) if f" {host} " in line)


def test_a_host_not_due_for_long_gives_its_window_to_a_host_waiting_on_disk(redis_url, crawl_name, tmp_path):
    """Two windows at most (FRONTIER_ACTIVE_HOSTS 2): a.example told to wait an hour
    (Retry-After), c.example waiting on disk for a window. The round writes a's window out
    as its oldest chunk, a waits on disk until it is due, c gets the window: c is crawled
    now, a an hour later, every URL once and each host's in the order pushed."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=2, window_idle=60.0)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    urls = {h: [f"http://{h}.example/p{i}" for i in range(10)] for h in ("a", "b", "c")}
    _push(frontier, urls["a"] + urls["b"], now=T0)
    _push(frontier, urls["c"], now=T0)
    spill.round(T0 + 2_000)  # buffers written out; c waits on disk (two windows already)
    r, k = frontier.redis, frontier.keys
    assert r.zscore(k.dormant, "c.example") is not None and r.llen(k.back("a.example")) == 4
    # what `scrapy frontier` shows: c among the hosts with URLs and the busiest, on disk
    assert frontier.stats()["hosts_with_urls"] == 3
    busiest = frontier.busiest(now=T0 + 2_000)
    rows = {h["host"]: h for h in busiest["hosts"]}
    assert busiest["complete"] and [rows[h]["queued"] for h in ("a.example", "b.example", "c.example")] == [10] * 3
    assert rows["c.example"]["on_disk"] and not rows["a.example"]["on_disk"]
    assert "on disk, waiting for a window" in _busiest_line(busiest, "c.example", T0 + 2_000)
    hour = 3_600
    assert (
        frontier.block_until("a.example", retry_after=hour, minimum=1, maximum=hour, quiet=60, now=T0 + 2_000) == hour
    )

    assert spill.round(T0 + 3_000)[1] == 4  # a's window out, c's first chunk in
    assert not r.exists(k.back("a.example")) and r.zscore(k.dormant, "a.example") >= T0 + 2_000 + hour * 1000
    assert r.llen(k.back("c.example")) == 4 and r.zscore(k.dormant, "c.example") is None
    assert frontier.stats()["hosts_with_urls"] == 3  # (a on disk, counted once)
    busiest = frontier.busiest(now=T0 + 3_000)  # (its back-off said first)
    assert next(h for h in busiest["hosts"] if h["host"] == "a.example")["on_disk"]
    assert "Retry-After) until" in _busiest_line(busiest, "a.example", T0 + 3_000)
    # what is left says why: a's 10 URLs (4 given back, 6 on disk before) wait for Retry-After
    left = frontier.deferred(now=T0 + 3_000)
    assert {reason: (r["hosts"], r["urls"]) for reason, r in left.items()} == {THROTTLED: (1, 10)}
    frontier.pause("a.example", now=T0 + 3_000)  # once, as paused
    left = frontier.deferred(now=T0 + 3_000)
    assert {reason: (r["hosts"], r["urls"]) for reason, r in left.items()} == {PAUSED: (1, 10)}
    frontier.resume("a.example", now=T0 + 3_000)
    got = urls_through_spill(frontier, spill, T0 + 3_000)
    assert sorted(got) == sorted(urls["b"] + urls["c"])  # c got a's window
    assert [u for u in got if "//c." in u] == urls["c"]

    later = urls_through_spill(frontier, spill, T0 + 3_000 + hour * 1000)
    assert later == urls["a"]  # its window first, from disk, then the rest
    stats = frontier.stats()
    assert stats["queued"] == 0 and stats["spilled"] == 0 and chunks.size(k.prefix) == (0, 0)


def test_a_window_given_back_keeps_its_level_ahead_of_a_new_url_of_that_level(redis_url, crawl_name, tmp_path):
    """a.example's window holds a URL of priority 1 when it is given back (told to wait an
    hour): that URL is beyond the window now, so the next URL of its level waits behind it
    (on disk, not in a window of its own) and comes out after it. Its window's chunk is
    loaded first (hi1 and a's first chunk), then the rest of a's URLs on disk, which fit in
    the window, are loaded together and merged by level: hi2 ahead of the default level's."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=2, window_idle=60.0)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    r, k = frontier.redis, frontier.keys

    def entry(url, priority=0):
        return Entry(url=url, payload=encode_url(url), priority=priority)

    a = [f"http://a.example/p{i}" for i in range(6)]
    assert frontier.put([entry("http://a.example/hi1", 1)], now=T0) == ["added"]
    _push(frontier, a + [f"http://b.example/p{i}" for i in range(6)], now=T0)
    _push(frontier, [f"http://c.example/p{i}" for i in range(6)], now=T0)
    spill.round(T0 + 1_000)
    assert r.zscore(k.dormant, "c.example") is not None
    hour = 3_600
    frontier.block_until("a.example", retry_after=hour, minimum=1, maximum=hour, quiet=60, now=T0 + 1_000)
    spill.round(T0 + 2_000)  # a's window (hi1 at its head) out, c's first chunk in
    assert not r.exists(k.back("a.example")) and r.hget(k.hbeyond, "a.example") == b"-1"
    assert frontier.put([entry("http://a.example/hi2", 1)], now=T0 + 2_000) == ["added"]
    assert not r.exists(k.back("a.example")) and r.llen(k.buffer("a.example")) == 1
    urls_through_spill(frontier, spill, T0 + 2_000)  # b's and c's
    later = urls_through_spill(frontier, spill, T0 + 2_000 + hour * 1000)
    assert later == ["http://a.example/hi1", *a[:4], "http://a.example/hi2", *a[4:]]
    assert not r.exists(k.hbeyond)


def test_a_host_slow_by_its_own_interval_keeps_its_window_until_it_is_backed_off(redis_url, crawl_name, tmp_path):
    """a.example's own interval is 120 s (a Crawl-delay): after a hand-out it is due 120 s
    ahead, past FRONTIER_WINDOW_IDLE, but at its own pace, so it keeps its window while
    c.example waits on disk (it would write it out and read it back at each of its turns);
    told to wait an hour, past twice its interval, it gives the window to c."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=2, window_idle=60.0)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    _push(frontier, [f"http://{h}.example/p{i}" for h in "ab" for i in range(6)], now=T0)
    _push(frontier, [f"http://c.example/p{i}" for i in range(6)], now=T0)
    spill.round(T0 + 1_000)
    r, k = frontier.redis, frontier.keys
    assert r.zscore(k.dormant, "c.example") is not None
    frontier.set_delay("a.example", 120)
    leases, _ = frontier.get(1, now=T0 + 2_000)
    assert [payload_url(lease.payload) for lease in leases] == ["http://a.example/p0"]
    frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=T0 + 2_000)
    assert r.zscore(k.ready, "a.example") == T0 + 2_000 + 120_000

    spill.round(T0 + 3_000)
    assert r.llen(k.back("a.example")) == 3 and r.zscore(k.dormant, "a.example") is None
    assert r.zscore(k.dormant, "c.example") is not None and not r.exists(k.back("c.example"))

    frontier.block_until("a.example", retry_after=3_600, minimum=1, maximum=3_600, quiet=60, now=T0 + 3_000)
    spill.round(T0 + 4_000)
    assert not r.exists(k.back("a.example")) and r.zscore(k.dormant, "a.example") is not None
    assert r.llen(k.back("c.example")) == 4


def test_hosts_slow_by_their_own_pace_at_the_top_do_not_hide_a_backed_off_host(redis_url, crawl_name, tmp_path):
    """Five hosts whose own interval (1,000 s) puts them furthest ahead keep their windows;
    the claim looks past them to a.example, backed off for 600 s, whose window goes to
    c.example, waiting on disk."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=6, window_idle=60.0)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    slow = [f"s{i}.example" for i in range(5)]
    _push(frontier, [f"http://{h}/p{i}" for h in [*slow, "a.example"] for i in range(6)], now=T0)
    spill.round(T0 + 1_000)  # written out, and a window each
    _push(frontier, [f"http://c.example/p{i}" for i in range(6)], now=T0 + 1_000)
    spill.round(T0 + 2_000)  # written out: c waits on disk
    r, k = frontier.redis, frontier.keys
    assert r.zscore(k.dormant, "c.example") is not None
    frontier.block_until("a.example", retry_after=600, minimum=1, maximum=600, quiet=60, now=T0 + 2_000)
    for host in slow:
        frontier.set_delay(host, 1_000)
    leases, _ = frontier.get(10, now=T0 + 2_000)
    assert sorted(payload_url(lease.payload) for lease in leases) == [f"http://{h}/p0" for h in slow]
    frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=T0 + 2_000)

    spill.round(T0 + 3_000)
    assert not r.exists(k.back("a.example")) and r.zscore(k.dormant, "a.example") is not None
    assert r.llen(k.back("c.example")) == 4 and all(r.llen(k.back(h)) == 3 for h in slow)


def test_a_window_that_changes_while_it_is_written_out_stays(redis_url, crawl_name, tmp_path):
    """A window is written out only if it is still what was claimed: a follow-up pushed to it
    between the claim and the commit keeps it in Redis, and the chunk written is deleted; a
    claim that is never committed (its worker died) lists nothing."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=1, window_idle=60.0)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    _push(frontier, [f"http://a.example/p{i}" for i in range(6)], now=T0)
    _push(frontier, [f"http://c.example/p{i}" for i in range(6)], now=T0)
    spill.round(T0 + 2_000)
    r, k = frontier.redis, frontier.keys
    frontier.block_until("a.example", retry_after=600, minimum=1, maximum=600, quiet=60, now=T0 + 2_000)

    dead = frontier.evict_claim("dead-worker", CLAIM_MS, 10, now=T0 + 3_000)  # never committed
    assert [(host, len(entries)) for host, _, entries in dead] == [("a.example", 4)]
    assert frontier.evict_claim("other", CLAIM_MS, 10, now=T0 + 3_000) == []  # (its claim is live)
    claimed = frontier.evict_claim("w", CLAIM_MS, 10, now=T0 + 3_000 + CLAIM_MS + 1)
    assert [host for host, _, _ in claimed] == ["a.example"]
    follow = "http://a.example/again"
    entry = Entry(url=follow, payload=encode_url(follow), follow_up=True, dont_filter=True)
    assert frontier.put([entry], now=T0 + 3_000 + CLAIM_MS + 1) == ["added"]
    assert frontier.evict_commit("w", claimed, now=T0 + 3_000 + CLAIM_MS + 2) == set()
    assert r.llen(k.back("a.example")) == 5 and r.zscore(k.dormant, "a.example") is None

    assert spill.evict(T0 + 3_000 + CLAIM_MS + 3) == 5  # unchanged since: written out
    assert not r.exists(k.back("a.example")) and r.llen(k.spilled("a.example")) == 2
    got = urls_through_spill(frontier, spill, T0 + 700_000)
    assert [u for u in got if "//a." in u][0] == follow and sorted(got) == sorted([follow] + [f"http://a.example/p{i}" for i in range(6)]
                                                      + [f"http://c.example/p{i}" for i in range(6)])  # fmt: skip
    assert frontier.stats()["spilled"] == 0 and chunks.size(k.prefix) == (0, 0)


def test_a_window_written_out_ahead_of_a_chunk_claimed_for_loading_goes_first(redis_url, crawl_name, tmp_path):
    """a.example's window runs low (a load of its next chunk is due) as it is told to wait
    ten minutes while c.example waits on disk: a worker claims the window to write it out,
    another claims a's next chunk to load it. The window, written out, becomes a's oldest
    chunk, ahead of the one claimed: that load puts nothing in the window and leaves a's
    chunks as they are, and a's URLs come out once each, in the order pushed."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=1, window_idle=60.0)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    a = [f"http://a.example/p{i}" for i in range(10)]
    c = [f"http://c.example/p{i}" for i in range(4)]
    _push(frontier, a, now=T0)
    assert spill.round(T0 + 2_000) == (10, 4)  # a: chunks of 4, 4 and 2; its first in its window
    _push(frontier, c, now=T0 + 2_000)
    spill.drain(T0 + 2_000)  # (c waits on disk: one window at most)
    r, k = frontier.redis, frontier.keys
    leases, _ = frontier.get(2, now=T0 + 2_000)
    frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=T0 + 2_000)
    assert [payload_url(lease.payload) for lease in leases] == a[:2]
    assert r.zscore(k.refill, "a.example") is not None  # (its window at half: its next chunk due)
    frontier.block_until("a.example", retry_after=600, minimum=1, maximum=600, quiet=60, now=T0 + 2_000)

    evicted = frontier.evict_claim("E", CLAIM_MS, 10, now=T0 + 3_000)
    assert [(host, len(entries)) for host, _, entries in evicted] == [("a.example", 2)]
    claimed = frontier.load_claim("L", CLAIM_MS, 10, now=T0 + 3_000)
    assert [host for host, _ in claimed] == ["a.example"]
    chunks.write(k.prefix, [(host, chunk, pack(entries)) for host, chunk, entries in evicted])
    assert frontier.evict_commit("E", evicted, now=T0 + 3_000) == {evicted[0][1]}
    listed = r.lrange(k.spilled("a.example"), 0, -1)
    assert int(listed[0]) == evicted[0][1] and int(listed[1]) == claimed[0][1]  # the window ahead
    read = _read(frontier, chunks, claimed)
    assert frontier.load("L", read, now=T0 + 3_000) == [0]  # no longer the oldest: it stays
    assert r.lrange(k.spilled("a.example"), 0, -1) == listed and not r.exists(k.back("a.example"))
    assert frontier.stats()["spilled"] == 8 + 4

    assert urls_through_spill(frontier, spill, T0 + 3_000 + CLAIM_MS + 1) == c
    assert urls_through_spill(frontier, spill, T0 + 700_000) == a[2:]
    stats = frontier.stats()
    assert stats["queued"] == 0 and stats["spilled"] == 0 and chunks.size(k.prefix) == (0, 0)


def test_a_host_that_fills_a_slice_with_more_chunks_than_a_script_unpacks_is_written_out(
    redis_url, crawl_name, tmp_path
):
    """One host's 16,010 new URLs with a window of 2 make 8,005 chunks in one slice, more
    values than Lua's unpack takes at once (some 8,000): the put lists them all, and the
    host's URLs come out from its oldest chunk on."""
    frontier = _frontier(redis_url, crawl_name, window=2)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    urls = [f"http://big.example/p{i}" for i in range(16_010)]
    entries = [Entry(url=u, payload=encode_url(u)) for u in urls]
    for i in range(0, len(entries), 2000):
        assert set(frontier.put(entries[i : i + 2000], now=T0)) == {"added"}
    assert spill.drain(T0) == 16_010
    r, k = frontier.redis, frontier.keys
    assert _inbox(frontier) == 0 and r.llen(k.spilled("big.example")) == 8_005
    assert frontier.stats()["spilled"] == 16_010 and chunks.size(k.prefix)[0] == 8_005
    assert spill.round(T0)[1] == 2
    leases, _ = frontier.get(2, now=T0)
    assert [payload_url(lease.payload) for lease in leases] == urls[:2]


class _SlowDisk(SqliteChunks):
    """An SQLite spill store whose writes wait while ``go`` is clear (a slow disk) and raise
    ``fail`` when it is set (a full one): faults the machine's disk does not give on demand."""

    def __init__(self, path: str):
        super().__init__(path)
        self.go, self.writing = threading.Event(), threading.Event()
        self.go.set()
        self.fail: Exception | None = None

    def write(self, crawl, chunks):
        self.writing.set()
        assert self.go.wait(30)
        if self.fail is not None:
            raise self.fail
        super().write(crawl, chunks)


def test_a_pushers_rounds_write_the_inbox_out_beside_its_pushes(redis_url, crawl_name, tmp_path):
    """The rounds of a process that pushes (`scrapy seed`'s) run in a thread of their own: its
    pushes go on while a round's chunks are written, until it is ``behind`` URLs ahead of the
    round, when it waits for it; ``close`` waits for the round running and starts none more
    when nothing came after it began; each host's URLs come out once, in the order pushed. A
    round that fails (its disk full) says so at ``close``, and its URLs wait in the inbox for
    the next round."""
    frontier = _frontier(redis_url, crawl_name, spill_age=0.0)  # (the inbox due as it fills)
    now = now_ms()  # (the rounds' clock)
    disk = _SlowDisk(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, disk)
    rounds = PusherRounds(spill, every=20, behind=40)
    urls = _urls(5, 20)  # 100 URLs, the hosts' in turn
    disk.go.clear()
    _push(frontier, urls[:20], now)
    rounds.pushed(20)  # a round begins: its chunks wait for the disk
    assert disk.writing.wait(10)
    _push(frontier, urls[20:40], now)
    rounds.pushed(20)  # 20 ahead of it: the pushes go on
    _push(frontier, urls[40:60], now)
    pusher = threading.Thread(target=rounds.pushed, args=(20,))
    pusher.start()  # 40 ahead: the pusher waits for the round
    pusher.join(0.5)
    assert pusher.is_alive() and _inbox(frontier) == 60
    disk.go.set()
    pusher.join(10)
    assert not pusher.is_alive()
    _push(frontier, urls[60:], now)
    rounds.pushed(40)
    rounds.close()
    assert _inbox(frontier) == 0 and frontier.stats()["spilled"] == 100
    got = urls_through_spill(frontier, spill, now_ms())
    assert sorted(got) == sorted(urls)
    for h in range(5):
        assert [u for u in got if f"//h{h}." in u] == [f"http://h{h}.example/p{i}" for i in range(20)]

    pusher = _frontier(redis_url, crawl_name, spill_age=0.0)  # (another process: `scrapy seed` again)
    spill = Spill(pusher, disk)
    later = [f"http://h9.example/p{i}" for i in range(20)]
    disk.fail = sqlite3.OperationalError("database or disk is full")
    failing = PusherRounds(spill, every=20)
    _push(pusher, later, now_ms())
    failing.pushed(20)
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        failing.close()
    assert _inbox(pusher) == 20  # (nothing lost: its claim expires, or its worker takes again)
    disk.fail = None
    assert spill.round(loads=False)[0] == 20 and _inbox(pusher) == 0


def test_rounds_beside_a_workers_own_take_apart_from_them(redis_url, crawl_name, tmp_path):
    """A spider's seed ingestion runs its rounds beside its worker's (``Spill.beside``): a
    slice one of them is writing out is not taken again by the other, and each URL is
    written out once (with one token, the second take claimed the same slice again, and the
    first one's chunks were written in vain: refused, deleted)."""
    frontier = _frontier(redis_url, crawl_name, spill_age=0.0)
    disk = _SlowDisk(str(tmp_path / "spill.sqlite"))
    worker = Spill(frontier, disk)
    seeding = worker.beside()
    assert seeding.token != worker.token and seeding.chunks is disk and seeding.frontier is frontier
    urls = _urls(4, 10)
    _push(frontier, urls, now_ms())
    disk.go.clear()
    writing = threading.Thread(target=seeding.round, kwargs={"loads": False})
    writing.start()
    assert disk.writing.wait(10)  # (the seeding round took the inbox, its chunks wait for the disk)
    disk.go.set()  # (the worker's round writes at once: whatever it took)
    assert worker.drain() == 0
    writing.join(10)
    assert not writing.is_alive()
    assert _inbox(frontier) == 0 and frontier.stats()["spilled"] == 40
    assert disk.size(frontier.keys.prefix)[0] == len(frontier.chunk_keys()) == 8  # (none written in vain)
    got = urls_through_spill(frontier, worker, now_ms())
    assert sorted(got) == sorted(urls)


def _open_files(path: str) -> int:
    """This process's open files of the SQLite file ``path`` (its log and shared memory too)."""
    import os

    fds = os.listdir("/proc/self/fd")
    return sum(1 for fd in fds if os.path.realpath(f"/proc/self/fd/{fd}").startswith(os.path.realpath(path)))


def test_a_pushers_rounds_let_go_of_the_store_when_closed(redis_url, crawl_name, tmp_path):
    """The thread of a pusher's rounds has a connection of its own to an SQLite store, closed
    with the rounds (``scrapy seed`` runs in a process that goes on: a spider's ingestion)."""
    frontier = _frontier(redis_url, crawl_name, spill_age=0.0)
    path = str(tmp_path / "spill.sqlite")
    disk = SqliteChunks(path)
    disk.close()  # (the caller's own connection, made to set the file up)
    before = _open_files(path)
    rounds = PusherRounds(Spill(frontier, disk), every=10)
    _push(frontier, _urls(2, 10), now_ms())
    rounds.pushed(20)  # (a round in the rounds' thread)
    rounds._running.result(10)
    assert _open_files(path) > before  # (its connection, the file and its log)
    rounds.close(last=False)
    rounds.close(last=False)  # (a second close, as ingest's error path makes: nothing more to do)
    assert _open_files(path) == before
    assert frontier.stats()["spilled"] == 20

    class Counted(SqliteChunks):
        released = 0

        def release(self):
            Counted.released += 1
            super().release()

    idle = PusherRounds(Spill(frontier, Counted(path)), every=10)
    idle.pushed(5)  # (no round: fewer than ``every``)
    idle.close(last=False)
    assert Counted.released == 0  # (no thread started only to find no connection)
    used = PusherRounds(Spill(frontier, Counted(path)), every=10)
    used.pushed(10)
    used.close()
    used.close()
    assert Counted.released == 1


def test_a_crawl_that_keeps_all_in_redis_refuses_a_process_that_would_spill(redis_url, crawl_name, tmp_path):
    """The first process of a crawl records whether it spills: one without a window records
    that every queued URL stays in Redis, and a later process with a window is refused (its
    buffers would never be written out by the others), as one without a window is on a
    crawl that spills."""
    from crawler.exceptions import StoreRefused
    from crawler.frontier.spill import NO_SPILL, bind_spill

    frontier = _frontier(redis_url, crawl_name)
    bind_spill(frontier, None)
    bind_spill(frontier, None)  # (a second such process agrees)
    assert frontier.spill_store(None) == NO_SPILL
    spilling = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    try:
        bind_spill(frontier, spilling)
    except StoreRefused as exc:
        assert "keeps every queued URL in Redis (FRONTIER_HOST_WINDOW=0)" in str(exc)
    else:
        raise AssertionError("a spilling process joined a crawl that keeps all in Redis")
    assert not spilling.bound
    spilling.close()


def test_hosts_whose_urls_wait_on_disk_or_are_being_loaded_count_once_among_the_hosts_with_urls(
    redis_url, crawl_name, tmp_path
):
    """Two windows at most, five hosts: their new URLs wait in the inbox (counted there, their
    hosts not yet), then a and b get windows and c, d and e wait on disk ('dormant'). They
    count among the hosts with URLs, as they do while a worker loads their chunk (claimed:
    out of 'dormant', no window yet), each once."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=2)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    urls = {h: [f"http://{h}.example/p{i}" for i in range(3)] for h in "abcde"}
    _push(frontier, [u for h in "abcde" for u in urls[h]], now=T0)
    r, k = frontier.redis, frontier.keys
    stats = frontier.stats()
    assert stats["inbox"] == 15 and stats["queued"] == 15 and stats["hosts_with_urls"] == 0
    outlook = frontier.outlook(60.0, now=T0)  # (the inbox is the next round's: due now)
    assert outlook["state"] == RUNNING and outlook["next_due"] == T0
    assert spill.round(T0 + 1_000) == (15, 6)
    assert r.zcard(k.ready) == 2 and r.zcard(k.dormant) == 3
    stats = frontier.stats()
    assert stats["inbox"] == 0 and stats["hosts_with_urls"] == 5 and stats["hosts_queued"] == 2
    leases, _ = frontier.get(10, now=T0 + 2_000)  # a and b done: room for two windows
    frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=T0 + 2_000)
    claimed = frontier.load_claim(spill.token, CLAIM_MS, 10, now=T0 + 2_000)
    assert len(claimed) == 2 and r.zcard(k.dormant) == 1  # (two chunks being loaded, one waiting)
    assert frontier.stats()["hosts_with_urls"] == 3
    got = [payload_url(lease.payload) for lease in leases] + urls_through_spill(frontier, spill, T0 + 3_000 + CLAIM_MS)
    assert sorted(got) == sorted(u for h in "abcde" for u in urls[h])
    assert frontier.stats()["hosts_with_urls"] == 0


def test_a_hosts_small_chunks_that_fit_in_its_window_are_claimed_and_loaded_together(redis_url, crawl_name, tmp_path):
    """b.example's URLs come one at a time, each written out alone (a chunk of one URL) while
    a.example holds the one window. Once a is done, one claim takes all five of b's chunks,
    oldest first (its 5 URLs on disk fit in its window of 8), and one load puts them in its
    window in order and deletes them. c.example, with 9 URLs on disk in chunks of one, more
    than a window, gets its oldest chunk alone; a claim that is lost (another worker's, after
    the first expired) loads nothing, and the chunks stay for the worker that holds it."""
    frontier = _frontier(redis_url, crawl_name, window=8, active_hosts=1, spill_age=0.5)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    r, k = frontier.redis, frontier.keys
    _push(frontier, [f"http://a.example/p{i}" for i in range(3)], now=T0 - 1_000)
    assert spill.round(T0 - 500) == (3, 3)  # a: written out, and given the window
    b = [f"http://b.example/p{i}" for i in range(5)]
    c = [f"http://c.example/p{i}" for i in range(9)]
    for i in range(9):
        _push(frontier, ([b[i]] if i < 5 else []) + [c[i]], now=T0 + i * 1_000)
        spill.drain(T0 + i * 1_000 + 500)
    assert r.llen(k.spilled("b.example")) == 5 and r.llen(k.spilled("c.example")) == 9
    leases, _ = frontier.get(10, now=T0 + 10_000)
    frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=T0 + 10_000)
    assert [payload_url(lease.payload) for lease in leases] == [f"http://a.example/p{i}" for i in range(3)]
    first = [int(i) for i in r.lrange(k.spilled("b.example"), 0, -1)]
    claimed = frontier.load_claim(spill.token, CLAIM_MS, 10, now=T0 + 10_000)
    assert claimed == [("b.example", chunk) for chunk in first]  # (room for one window: b's, the oldest)
    assert r.hget(k.load_claims, "b.example").decode().split(":")[1] == ",".join(map(str, first))
    read = _read(frontier, chunks, claimed)
    lost = frontier.load("another-worker", read, now=T0 + 10_000)
    assert lost == [0] * 5 and r.llen(k.spilled("b.example")) == 5 and not r.exists(k.back("b.example"))
    assert frontier.load(spill.token, read, now=T0 + 10_000) == [1] * 5
    chunks.delete(k.prefix, claimed)  # (as Spill.refill does with the chunks loaded)
    assert [payload_url(e) for e in r.lrange(k.back("b.example"), 0, -1)] == b
    assert not r.exists(k.spilled("b.example")) and frontier.stats()["spilled"] == 9
    got = urls_through_spill(frontier, spill, T0 + 11_000)
    assert got == b + c
    stats = frontier.stats()
    assert stats["queued"] == 0 and stats["spilled"] == 0 and chunks.size(k.prefix) == (0, 0)


def test_a_host_whose_window_ran_dry_loads_up_to_four_windows_of_chunks_at_once(redis_url, crawl_name, tmp_path):
    """A host handed out faster than its chunks come (no politeness) finds its window empty
    when its next load is claimed: the claim takes as many of its oldest chunks as four
    windows hold by their mean size, and the load stops where the window would pass four
    windows (those chunks stay listed, loaded later), every URL once and in order. A host
    waiting on disk for its first window gets one chunk, as before."""
    frontier = _frontier(redis_url, crawl_name, window=8, active_hosts=1)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    r, k = frontier.redis, frontier.keys
    urls = [f"http://a.example/p{i}" for i in range(88)]
    _push(frontier, urls[:48], now=T0)
    assert spill.drain(T0) == 48  # six chunks of 8
    for i in range(48, 88):  # then forty of one URL each
        _push(frontier, [urls[i]], now=T0 + i)
        assert spill.drain(T0 + i) == 1
    assert spill.refill(T0 + 100) == 8  # a host waiting on disk: its oldest chunk
    leases, _ = frontier.get(10, now=T0 + 200)
    got = [payload_url(lease.payload) for lease in leases]
    assert got == urls[:8] and not r.exists(k.back("a.example"))  # its window ran dry
    claimed = frontier.load_claim(spill.token, CLAIM_MS, 10, now=T0 + 300)
    # 80 URLs on disk in 45 chunks: 4 x 8 x 45 / 80 = 18 chunks, of which four (32 URLs) fit
    assert len(claimed) == 18
    read = _read(frontier, chunks, claimed)
    assert frontier.load(spill.token, read, now=T0 + 300) == [1] * 4 + [0] * 14
    chunks.delete(k.prefix, claimed[:4])  # (as Spill.refill does with the chunks loaded)
    assert r.llen(k.back("a.example")) == 32 and r.llen(k.spilled("a.example")) == 41
    assert frontier.stats()["spilled"] == 48
    got += urls_through_spill(frontier, spill, T0 + 400)
    assert got == urls
    assert frontier.stats()["queued"] == 0 and chunks.size(k.prefix) == (0, 0)


def test_a_commit_sent_again_after_its_reply_was_lost_deletes_none_of_its_chunks(redis_url, crawl_name, tmp_path):
    """A client sends a script again when its reply is lost (a connection reset or a timeout:
    redis-py's retry, REDIS_PARAMS). Each SPILL put and EVICT commit here is sent twice, the first
    reply dropped: the second finds no claim, yet the chunks the first listed are reported
    committed, so the round deletes none of them; every URL comes out once, each host's in
    order, a's window given back and read again an hour later."""
    frontier = _frontier(redis_url, crawl_name, window=4, active_hosts=2, window_idle=60.0)
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    sent_twice = []

    def twice(name):
        commit = getattr(frontier, name)

        def again(*args, now=None):
            commit(*args, now=now)  # (its reply lost)
            sent_twice.append(name)
            return commit(*args, now=now)

        setattr(frontier, name, again)

    twice("inbox_put")
    twice("evict_commit")
    urls = {h: [f"http://{h}.example/p{i}" for i in range(10)] for h in ("a", "b", "c")}
    _push(frontier, urls["a"] + urls["b"] + urls["c"], now=T0)
    # the inbox written out (each host's 10: three chunks, its put sent twice); a and b get
    # a window, their oldest chunk loaded; c waits on disk
    assert spill.round(T0 + 2_000) == (30, 8)
    assert chunks.size(frontier.keys.prefix)[0] == len(frontier.chunk_keys()) == 7  # listed, none deleted
    hour = 3_600
    frontier.block_until("a.example", retry_after=hour, minimum=1, maximum=hour, quiet=60, now=T0 + 2_000)
    assert spill.round(T0 + 3_000)[1] == 4  # a's window written out (its commit sent twice), c's first chunk in
    assert set(sent_twice) == {"inbox_put", "evict_commit"}
    assert chunks.size(frontier.keys.prefix)[0] == len(frontier.chunk_keys())  # every chunk listed, none deleted
    got = urls_through_spill(frontier, spill, T0 + 3_000)
    assert sorted(got) == sorted(urls["b"] + urls["c"])
    assert [u for u in got if "//c." in u] == urls["c"]
    assert urls_through_spill(frontier, spill, T0 + 3_000 + hour * 1000) == urls["a"]
    stats = frontier.stats()
    assert stats["queued"] == 0 and stats["spilled"] == 0 and chunks.size(frontier.keys.prefix) == (0, 0)


def test_each_claim_of_a_long_round_is_made_at_its_own_time(redis_url, crawl_name, tmp_path, monkeypatch):
    """A round given ``now`` makes each claim at that time and the time gone by since it
    began: a claim made late in a round that writes to a slow store is not expired as it is
    made (they were all made at ``now``: past CLAIM_MS into the round, another worker took
    the next claims and wrote their URLs again)."""
    import time

    from crawler.frontier import spill as spill_module

    monkeypatch.setattr(spill_module, "HOSTS_A_CALL", 1)  # (a claim a host: three claims)

    class SlowChunks(SqliteChunks):
        def read(self, crawl, keys):
            time.sleep(0.2)
            return super().read(crawl, keys)

    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SlowChunks(str(tmp_path / "spill.sqlite")))
    _push(frontier, _urls(3, 20))  # (in the inbox, due at T0 + 1 s)
    times, claim = [], frontier.load_claim
    frontier.load_claim = lambda *args, now=None: times.append(now) or claim(*args, now=now)
    # each host's oldest chunk loaded: a claim a host, each after the last one's slow read
    assert spill.round(T0 + 1000) == (60, 3 * 8)
    assert len(times) == 4 and times[0] - (T0 + 1000) < 100
    assert [b - a >= 200 for a, b in itertools.pairwise(times)] == [True] * 3
    assert sorted(urls_through_spill(frontier, spill, T0 + 2000)) == sorted(_urls(3, 20))
