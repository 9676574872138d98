"""The operator's hand on a running crawl: pause and resume (the crawl, or a host), and
the page budget (CRAWL_MAX_PAGES), on one frontier and a sharded one.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/e2e/test_steering.py."""

import pytest
import redis

from crawler.frontier import codec
from crawler.frontier.frontier import SEED_CASH, Entry, Frontier
from crawler.frontier.keys import SEP
from crawler.frontier.shards import ShardedFrontier
from crawler.frontier.words import FINISHED, PAUSED, RUNNING, WAITING, now_ms
from crawler.scope.rules import RulesWatch
from testing.frontiers import drain
from testing.servers import free_port


def _entries(hosts, per_host):
    return [Entry(url=u, payload=u.encode()) for i in range(per_host) for h in hosts for u in [f"http://{h}/{i}"]]


def test_a_paused_crawl_hands_out_nothing_yet_takes_acks(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0)
    f.put(_entries(["a.example", "b.example", "c.example"], 2))
    [held], _ = f.get(1)
    assert f.pause() is True
    assert f.pause() is False  # (paused already)
    assert f.paused()["crawl"] is not None
    outlook = f.outlook(60)
    assert outlook["state"] == PAUSED and outlook["leased"] == 1 and outlook["paused_at"]
    leases, next_due = f.get(10, ack=[held.id], landed=[held.id])
    assert leases == [] and next_due is None
    assert f.last_acked == 1  # what was in hand is acknowledged while paused
    assert f.outlook(60)["state"] == PAUSED  # (5 URLs queued, none handed out)
    assert f.resume() is True and f.resume() is False
    assert f.paused() == {"crawl": None, "hosts": {}, "dropped": {}}
    assert len(drain(f)) == 5
    assert f.outlook(60)["state"] == FINISHED


def test_a_paused_host_waits_while_the_others_go_on(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=1)
    f.put(_entries(["a.example", "b.example"], 3)[:2])  # one URL of each
    [first_a], _ = f.get(1)  # (a.example: the front queue's first)
    assert first_a.payload == b"http://a.example/0"
    assert f.pause("a.example") is True
    f.put(_entries(["a.example", "b.example"], 3)[2:])  # more of both, while a is paused
    got = drain(f)
    assert got and all(p.startswith(b"http://b.example/") for p in got)
    # what would bring a back into the heap leaves it out: its lease landing, its expiry
    f.ack(landed=[first_a.id])
    f.give_back([first_a.id])
    assert drain(f) == []
    deferred = f.deferred(0)
    assert deferred[PAUSED]["urls"] == 3 and deferred[PAUSED]["hosts"] == 1 and deferred[PAUSED]["due"] is None
    assert f.outlook(60)["state"] == WAITING
    assert f.paused()["hosts"].keys() == {"a.example"}
    assert f.stats()["hosts_with_urls"] == 1 and f.stats()["hosts_paused"] == 1  # (out of the heap, URLs left)
    assert f.resume("a.example") is True
    assert sorted(drain(f)) == [b"http://a.example/0", b"http://a.example/1", b"http://a.example/2"]


def test_the_page_budget_caps_what_is_handed_out_and_ends_the_crawl(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, max_pages=5)
    f.put(_entries([f"h{i}.example" for i in range(10)], 1))
    leases, _ = f.get(10)
    assert len(leases) == 5
    assert f.get(10)[0] == []
    f.ack(*[lease.id for lease in leases[:2]])
    assert f.get(10)[0] == []  # 2 handled + 3 in hand: spent
    assert f.outlook(60)["state"] == RUNNING
    f.give_back([leases[2].id])  # a page given back unhandled frees its place
    [again], _ = f.get(10)
    assert again.payload == leases[2].payload
    f.ack(*[lease.id for lease in leases[3:]], again.id)
    assert f.budget() == {"max": 5, "done": 5, "leased": 0, "spent": True}
    outlook = f.outlook(60)
    assert outlook["state"] == FINISHED and outlook["budget_spent"] and outlook["queued"] == 5


def test_a_sharded_crawl_pauses_on_every_shard_and_spends_one_budget(redis_client, crawl_name):
    shards = [
        Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, max_pages=6, shard=k) for k in range(2)
    ]
    f = ShardedFrontier(shards, ["r1", "r2"])
    hosts = ["a.example", "c.example"]  # one on each shard
    assert {f.ring.index(h) for h in hosts} == {0, 1}
    f.put(_entries(hosts, 5))
    assert f.pause() is True
    assert all(shard.paused()["crawl"] for shard in shards)
    assert f.get(10)[0] == [] and f.outlook(60)["state"] == PAUSED
    assert f.resume() is True
    assert f.pause("c.example") is True
    assert f.paused()["hosts"].keys() == {"c.example"}
    assert {p.split(b"/")[2] for p in drain(f)} == {b"a.example"}
    assert f.resume("c.example") is True
    got = drain(f)
    assert len(got) == 1  # 5 of a.example and this one: the budget of 6, over both shards
    assert f.budget()["done"] == 6 and f.budget()["spent"]
    assert f.outlook(60)["state"] == FINISHED


def _by_due(leases):
    """(payloads handed out to be recorded, by code; payloads to fetch)."""
    drops, fetch = {}, []
    for lease in leases:
        if lease.due < 0:
            drops.setdefault(-lease.due, []).append(lease.payload)
        else:
            fetch.append(lease.payload)
    return drops, fetch


def _take_all(f, now=None):
    out = []
    while True:
        leases, _ = f.get(10, now=now)
        if not leases:
            return out
        out += leases
        f.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)


def test_a_dropped_hosts_urls_come_out_to_be_recorded_wherever_they_were_queued(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=1)
    urls = [f"http://a.example/{i}" for i in range(4)]
    f.put([Entry(url=u, payload=u.encode()) for u in urls[:3]] + _entries(["b.example"], 2))
    [first], _ = f.get(1)  # a.example/0 in flight
    [b0], _ = f.get(1)  # b.example/0; the refill sorts a/1 and a/2 into a's back queue on its way
    assert redis_client.llen(f.keys.back("a.example")) == 2
    f.ack(b0.id)
    retry = Entry(url=urls[0], payload=urls[0].encode(), dont_filter=True, follow_up=True)
    retry.replaces_lease, retry.not_before = first.id, now_ms() + 60_000
    f.put([retry])  # its retry waits in the delayed set
    assert f.drop("a.example") is True and f.drop("a.example") is False
    f.put([Entry(url=urls[3], payload=urls[3].encode())])  # discovered after the drop: in a front queue
    drops, fetch = _by_due(_take_all(f))
    assert sorted(drops[1]) == sorted(u.encode() for u in urls)  # the back queue's, the retry, the late one
    assert sorted(fetch) == [b"http://b.example/1"]
    assert f.stats()["queued"] == 0 and f.outlook(60)["state"] == FINISHED
    assert f.paused()["dropped"]["a.example"][1] == "operator"
    assert f.resume("a.example") is True  # crawled again from its next URL
    f.put([Entry(url="http://a.example/new", payload=b"http://a.example/new")])
    assert _by_due(_take_all(f)) == ({}, [b"http://a.example/new"])


def test_a_host_down_for_the_give_up_time_is_given_up_and_the_crawl_can_end(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, give_up=10)
    t0 = now_ms()
    f.put(_entries(["down.example", "up.example"], 3), now=t0)
    limits = {"minimum": 1, "maximum": 2, "quiet": 60}
    assert f.fail("down.example", "down", "http://down.example/0", now=t0, **limits)[0]
    assert f.fail("down.example", "down", "http://down.example/1", now=t0 + 9_000, **limits)[0]
    assert f.paused()["dropped"] == {}  # 9 s down: not yet
    assert f.fail("down.example", "down", "http://down.example/2", now=t0 + 10_000, **limits)[0]
    assert f.paused()["dropped"] == {"down.example": [t0 + 10_000, "down"]}
    drops, fetch = _by_due(_take_all(f, now=t0 + 20_000))
    assert sorted(drops[2]) == [f"http://down.example/{i}".encode() for i in range(3)]
    assert sorted(fetch) == [f"http://up.example/{i}".encode() for i in range(3)]
    # an answer in between starts the count again
    f.put([Entry(url="http://flaky.example/0", payload=b"x")], now=t0)
    f.fail("flaky.example", "down", "http://flaky.example/0", now=t0, **limits)
    [lease], _ = f.get(1, now=t0 + 30_000)
    f.ack(lease.id, landed=[b"+" + lease.id], now=t0 + 30_000)  # it answered
    f.fail("flaky.example", "down", "http://flaky.example/1", now=t0 + 35_000, **limits)
    assert "flaky.example" not in f.paused()["dropped"]


def test_urls_over_a_hosts_quota_come_out_to_be_recorded(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, host_max_pages=2)
    statuses = f.put(_entries(["q.example"], 4) + _entries(["r.example"], 1))
    assert statuses == ["added", "added", "host_full", "host_full", "added"]
    drops, fetch = _by_due(_take_all(f))
    assert sorted(drops[3]) == [b"http://q.example/2", b"http://q.example/3"]
    assert sorted(fetch) == [b"http://q.example/0", b"http://q.example/1", b"http://r.example/0"]
    assert f.put(_entries(["q.example"], 4)) == ["seen"] * 4  # (refused URLs stay seen)


def test_the_crawl_rules_decide_every_entry_and_set_each_hosts_own_limits(redis_client, crawl_name, tmp_path):
    path = tmp_path / "rules.txt"
    path.write_text(
        "reject regex \\.pdf$\n"
        "accept host  keep.example\n"
        "accept host  two.example\n"
        "reject all   # nothing else\n"
        "host keep.example max_pages=2 priority=5\n"
        "host two.example  in_flight=2 interval=0.5\n"
    )
    clock = [0.0]
    rules = RulesWatch(str(path), every=5, clock=lambda: clock[0])
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=1, priority_levels=3, rules=rules)
    urls = ["http://keep.example/a.pdf", "http://other.example/", *[f"http://keep.example/{i}" for i in range(3)]]
    urls += [f"http://two.example/{i}" for i in range(3)]
    statuses = f.put([Entry(url=u, payload=u.encode()) for u in urls])
    assert statuses[:5] == ["rejected", "rejected", "added", "added", "host_full"]
    assert f.put([Entry(url="http://other.example/", payload=b"x")]) == ["rejected"]  # (never marked seen)
    assert [f.level(0), f.level(5)] == [1, 0]
    assert redis_client.llen(f.keys.front(0)) == 2  # keep.example's, at its priority's level
    assert f.interval_override("two.example") == 0.5 and f.interval_override("keep.example") is None
    leases, _ = f.get(10)
    held = sorted(lease.payload for lease in leases if lease.due >= 0)
    # one of keep.example's in flight (the default limit), two of two.example's (its own)
    assert held == [b"http://keep.example/0", b"http://two.example/0", b"http://two.example/1"]
    # the file changes: seen within CRAWL_RULES_CHECK_INTERVAL, an invalid one is refused
    path.write_text("reject host two.example\n")
    assert f.put([Entry(url="http://two.example/new", payload=b"x")]) == ["added"]  # (not looked at yet)
    clock[0] = 6.0
    assert f.put([Entry(url="http://two.example/newer", payload=b"x")]) == ["rejected"]
    path.write_text("reject nothing\n")
    clock[0] = 12.0
    assert f.put([Entry(url="http://two.example/newest", payload=b"x")]) == ["rejected"]  # the rules before


def test_a_drop_given_back_comes_out_again_to_be_recorded_and_is_no_page_of_the_budget(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=1, host_max_pages=1, max_pages=5)
    f.put(_entries(["q.example"], 2))  # q/1 over the quota
    leases, _ = f.get(10)
    [drop] = [lease for lease in leases if lease.due < 0]
    assert drop.payload == b"http://q.example/1" and drop.due == -3
    f.give_back([drop.id])  # (a worker stopping with it unread)
    again, _ = f.get(10)
    assert [(lease.payload, lease.due) for lease in again] == [(b"http://q.example/1", -3)]
    f.ack(again[0].id, *[lease.id for lease in leases if lease.due >= 0])
    assert f.budget()["done"] == 1  # q/0 fetched; the drop recorded, no page of the budget
    assert f.stats()["queued"] == 0


def test_a_url_pushed_twice_past_url_seen_waits_once_in_its_ranked_queue(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, order="importance")
    due = Entry(url="http://d.example/", payload=b"http://d.example/", dont_filter=True, cash=1.0)  # (a recrawl's)
    assert f.put([due]) == ["added"] and f.put([due]) == ["seen"]
    assert f.stats()["queued"] == 1 and len(drain(f)) == 1 and f.stats()["queued"] == 0
    assert f.outlook(60)["state"] == FINISHED


def test_a_ranked_url_whose_payload_is_the_url_alone_waits_with_no_payload_entry(redis_client, crawl_name):
    """A seed's payload is its URL: its ranked queue's member says it all, and 'rqpay' holds
    nothing for it (a window of seeds keeps each URL once); a link's payload (depth,
    referer) is kept there, and each comes out whole."""
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, order="importance")
    seed, link = "http://r.example/seed", "http://r.example/link"
    payloads = {seed: codec.encode_url(seed), link: codec.encode_link(link, 2, "http://r.example/")}
    assert f.put([Entry(url=u, payload=p, cash=1.0) for u, p in payloads.items()]) == ["added", "added"]
    assert redis_client.hkeys(f.keys.ranked_payloads) == [link.encode()]
    assert sorted(drain(f)) == sorted(payloads.values())
    assert not redis_client.exists(f.keys.ranked_payloads)


def test_importance_keeps_small_shares_apart(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, order="importance")
    shares = [0.0123456, 0.0123457, 1e-6, 1.1e-6, 1e-8]
    f.put(
        [
            Entry(url=f"http://s.example/{i}", payload=f"http://s.example/{i}".encode(), cash=c)
            for i, c in enumerate(shares)
        ]
    )
    got = []
    while True:
        leases, _ = f.get(1)
        if not leases:
            break
        got.append(leases[0].cash)
        f.ack(leases[0].id)
    assert got == pytest.approx(sorted(shares, reverse=True), rel=1e-6)


def test_a_url_back_from_its_lease_keeps_its_importance(redis_client, crawl_name):
    """A URL handed out with its importance and put back (its lease given back, or expired,
    or taken over by its retry or by its redirect's target) is handed out again with it."""
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, order="importance", lease_seconds=10)
    link = codec.encode_link
    urls = [f"http://k.example/{name}" for name in ("given", "expired", "retried", "moved")]
    f.put(
        [Entry(url=u, payload=link(u, 1, "http://k.example/"), depth=1, cash=0.5 - i / 10) for i, u in enumerate(urls)]
    )
    now = now_ms()
    leases, _ = f.get(4, now=now)
    first = {lease.payload.split(SEP.encode())[0].decode(): lease for lease in leases}
    assert {u: first[u].cash for u in urls} == pytest.approx({u: 0.5 - i / 10 for i, u in enumerate(urls)})
    f.give_back([first[urls[0]].id])
    lease = first[urls[2]].id
    retry = Entry(
        urls[2], first[urls[2]].payload, dont_filter=True, follow_up=True, replaces_lease=lease, not_before=now + 5_000
    )
    target = "http://k.example/target"
    payload = link(target, 1, "http://k.example/")
    moved = Entry(target, payload, follow_up=True, replaces_lease=first[urls[3]].id)  # (a redirect's target)
    assert f.put([retry, moved], now=now) == ["added", "added"]
    again, _ = f.get(10, now=now + 11_000)  # (the second lease has expired; the retry is due)
    back = {lease.payload.split(SEP.encode())[0].decode(): lease for lease in again}
    assert sorted(back) == sorted([*urls[:3], target])
    assert {u: back[u].cash for u in back} == pytest.approx({urls[0]: 0.5, urls[1]: 0.4, urls[2]: 0.3, target: 0.2})
    assert back[urls[1]].id.split(SEP.encode())[1] == b"2:0.4"  # its second attempt, with its cash
    # dropped while back in its queue or waiting for its retry, it is recorded as it was queued
    f.give_back([back[urls[0]].id])
    lease = back[urls[2]].id
    retry = Entry(
        urls[2], back[urls[2]].payload, dont_filter=True, follow_up=True, replaces_lease=lease, not_before=now + 60_000
    )
    assert f.put([retry], now=now + 11_000) == ["added"]
    f.get(1, now=now + 11_000, urgent_only=True)  # (puts the lease given back in its queue)
    f.drop("k.example")
    taken = _take_all(f, now=now + 11_000)
    drops, fetch = _by_due(taken)
    assert sorted(drops[1]) == sorted(back[u].payload for u in urls[::2]) and not fetch
    assert [lease.id.split(SEP.encode())[1] for lease in taken] == [b"-1", b"-1"]  # (given back: to 'drops')


def test_a_sharded_budget_goes_on_with_a_shard_down(redis_client, crawl_name):
    dead = redis.Redis(port=free_port(), socket_connect_timeout=0.2)
    shards = [
        Frontier(client, crawl_name, host_interval=0, max_pages=10, shard=k)
        for k, client in enumerate([redis_client, dead])
    ]
    f = ShardedFrontier(shards, ["r1", "r2"])
    host = next(h for h in (f"h{i}.example" for i in range(50)) if f.ring.index(h) == 0)
    shards[0].put(_entries([host], 3))
    leases, _ = f.get(10)
    assert len(leases) == 1 and f.budget() == {"max": 10, "done": 0, "leased": 1, "spent": False}


def test_importance_hands_out_each_hosts_most_important_url_first(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, order="importance")
    link = codec.encode_link
    f.put([Entry(url="http://h.example/", payload=b"http://h.example/", cash=SEED_CASH)])  # a seed
    [seed], _ = f.get(1)
    assert seed.cash == 1.0
    found = [f"http://h.example/{i}" for i in range(4)]
    f.put([Entry(url=u, payload=link(u, 1, "http://h.example/"), depth=1, cash=0.25) for u in found])
    f.ack(seed.id)
    # another page links to 2 and 3 again: they gain its share (a seen URL still queued)
    assert f.put([Entry(url=u, payload=link(u, 2, "http://x/"), cash=0.5) for u in found[2:]]) == ["seen"] * 2
    f.put([Entry(url="http://h.example/new", payload=b"http://h.example/new", cash=0.3)])
    # a worker that sent a URL before sends only its share (credit): 0.3 more for /new
    assert f.credit([("http://h.example/new", 0.3), ("http://h.example/", 5.0), ("http://else.example/", 1)]) == 1
    f.put([Entry(url="http://h.example/first", payload=b"http://h.example/first", urgent=True)])  # a submission
    f.put([Entry(url="http://h.example/seed2", payload=b"http://h.example/seed2", priority=1, cash=0.01)])
    f.put([Entry(url="http://h.example/map", payload=b"http://h.example/map")])  # (no cash: a sitemap's)
    assert f.stats()["queued"] == 8 and f.queue_lengths(["h.example"]) == [8]
    order, cash = [], {}
    while True:
        leases, _ = f.get(1)
        if not leases:
            break
        order.append(leases[0].payload.split(SEP.encode())[0].decode())
        cash[order[-1]] = leases[0].cash
        f.ack(leases[0].id)
    assert order == [
        "http://h.example/first",  # the submission: its host's back queue
        "http://h.example/seed2",  # a higher priority level
        "http://h.example/2",  # 0.75 (its payload, depth 1, kept from its first entry)
        "http://h.example/3",
        "http://h.example/new",  # 0.6 (and not the seed: handed out, it gains nothing)
        "http://h.example/0",  # 0.25
        "http://h.example/1",
        "http://h.example/map",  # no cash of its own
    ]
    assert cash["http://h.example/2"] == 0.75 and cash["http://h.example/first"] == 0
    assert redis_client.hlen(f.keys.ranked_payloads) == 0 and f.stats()["queued"] == 0


def test_a_dropped_hosts_ranked_urls_are_recorded_too(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=0, max_in_flight=0, order="importance")
    f.put(_entries(["r.example"], 3))
    f.drop("r.example")
    drops, fetch = _by_due(_take_all(f))
    assert sorted(drops[1]) == [f"http://r.example/{i}".encode() for i in range(3)] and not fetch
    assert redis_client.hlen(f.keys.ranked_payloads) == 0
