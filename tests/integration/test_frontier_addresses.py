"""Politeness per address (FRONTIER_ADDRESS_POLITENESS) in the frontier's scripts, on a real
Redis: a host is handed out only once its address is known (RESOLVE), and the hosts of one
address class share its interval and its cap of leases in flight, whoever pops; a host whose
class is busy waits out of the heap without a lease and comes back when the class is free; a
host that moves to another class takes its budget there."""

from __future__ import annotations

import redis

from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import Entry, Frontier
from testing.frontiers import payload_url

T0 = 1_800_000_000_000  # ms: every verb gets its now from the test
TTL = 60_000


def _frontier(redis_url, crawl_name, **kw) -> Frontier:
    options = {"host_interval": 0.0, "max_in_flight": 0, "address_interval": 1.0, "address_max_in_flight": 0}
    return Frontier(redis.Redis.from_url(redis_url), crawl_name, **{**options, **kw})


def _push(frontier, urls, now=T0) -> None:
    assert set(frontier.put([Entry(url=u, payload=encode_url(u)) for u in urls], now=now)) == {"added"}


def _hosts(leases) -> list[str]:
    return [payload_url(lease.payload).split("/")[2] for lease in leases]


def _resolve(frontier, addresses: dict[str, str], now=T0) -> None:
    """What a worker does for the hosts claimed: each host's class is its address here."""
    claimed = [host for host, _ in frontier.resolve_claim(10_000, 100, now=now)]
    assert set(claimed) <= set(addresses)
    frontier.resolve_commit([(h, addresses[h], addresses[h], now + TTL, None, None) for h in claimed], now=now)


def test_hosts_of_one_address_share_its_interval_across_pops(redis_url, crawl_name):
    frontier = _frontier(redis_url, crawl_name)
    addresses = {f"h{i}.example": f"127.0.0.{1 + i % 2}" for i in range(6)}  # 3 hosts on each of 2
    _push(frontier, [f"http://{h}/{n}" for h in addresses for n in range(3)])

    # unknown addresses: nothing is handed out, every host waits to be resolved, out of the heap
    leases, next_due = frontier.get(10, now=T0)
    assert leases == [] and next_due == T0
    assert frontier.redis.zcard(frontier.keys.ready) == 0
    _resolve(frontier, addresses)
    assert frontier.resolve_claim(10_000, 100, now=T0) == []  # (each claimed once, then due at expiry)

    # one URL an address a second, though 6 hosts are due and the pop asks for 10
    seen = []
    for step in range(6):
        now = T0 + step * 1000
        leases, _ = frontier.get(10, now=now)
        assert sorted(lease.address for lease in leases) == ["127.0.0.1", "127.0.0.2"], step
        assert all(lease.due == now for lease in leases)
        frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)
        seen += _hosts(leases)
        assert frontier.get(10, now=now + 999)[0] == []
    # the hosts of an address take turns: each of them once in any 3 seconds
    assert sorted(seen) == sorted(list(addresses) * 2)
    assert sorted(seen[:6]) == sorted(seen[6:]) == sorted(addresses)


def test_an_address_holds_at_most_its_cap_of_leases_in_flight(redis_url, crawl_name):
    frontier = _frontier(redis_url, crawl_name, address_interval=0.0, address_max_in_flight=2)
    addresses = {f"h{i}.example": "10.0.0.1" for i in range(4)}
    _push(frontier, [f"http://{h}/{n}" for h in addresses for n in range(5)])
    frontier.get(1, now=T0)
    _resolve(frontier, addresses)
    leases, _ = frontier.get(10, now=T0)
    assert len(leases) == 2 and len(set(_hosts(leases))) == 2
    assert frontier.get(10, now=T0 + 5000)[0] == []  # the cap holds however long
    # a landing gives its place back: the next pop takes one more, from a host that waited
    frontier.ack(leases[0].id, landed=[leases[0].id], now=T0 + 6000)
    more, _ = frontier.get(10, now=T0 + 6000)
    assert len(more) == 1
    assert frontier.redis.hget(frontier.keys.aflight, "10.0.0.1") == b"2"
    frontier.ack(
        *[lease.id for lease in more + leases[1:]], landed=[lease.id for lease in more + leases[1:]], now=T0 + 7000
    )
    assert not frontier.redis.hexists(frontier.keys.aflight, "10.0.0.1")
    # everything comes out, once
    got = _hosts(leases + more)
    for step in range(40):
        batch, _ = frontier.get(10, now=T0 + 8000 + step)
        frontier.ack(*[lease.id for lease in batch], landed=[lease.id for lease in batch], now=T0 + 8000 + step)
        got += _hosts(batch)
    assert sorted(got) == sorted(h for h in addresses for _ in range(5))
    assert frontier.stats()["queued"] == 0


def test_a_host_that_moves_takes_its_budget_to_its_new_address(redis_url, crawl_name):
    frontier = _frontier(redis_url, crawl_name, address_max_in_flight=1)
    _push(frontier, ["http://holder.example/0"])
    frontier.get(1, now=T0)
    _resolve(frontier, {"holder.example": "10.0.0.1"})
    held, _ = frontier.get(10, now=T0)
    assert _hosts(held) == ["holder.example"]  # 10.0.0.1 at its cap from now on

    _push(frontier, [f"http://mover.example/{n}" for n in range(3)], now=T0 + 10)
    frontier.get(1, now=T0 + 10)
    _resolve(frontier, {"mover.example": "10.0.0.1"}, now=T0 + 10)
    assert frontier.get(10, now=T0 + 2000)[0] == []  # waits for 10.0.0.1, without a lease
    assert frontier.redis.zcard(frontier.keys.leases) == 1

    # its address is looked up again and has changed: its next URL goes at once, to the new one
    frontier.resolve_commit([("mover.example", "10.0.0.9", "10.0.0.9", T0 + TTL, None, None)], now=T0 + 3000)
    leases, _ = frontier.get(10, now=T0 + 3000)
    assert [(h, lease.address) for h, lease in zip(_hosts(leases), leases, strict=True)] == [
        ("mover.example", "10.0.0.9")
    ]
    # the first lease gives back the place of its own class when it lands
    frontier.ack(held[0].id, *[lease.id for lease in leases], landed=[held[0].id, leases[0].id], now=T0 + 4000)
    assert frontier.redis.hgetall(frontier.keys.aflight) == {}
    got = []
    for step in range(5):
        batch, _ = frontier.get(10, now=T0 + 5000 + step * 1000)
        frontier.ack(*[lease.id for lease in batch], landed=[lease.id for lease in batch], now=T0 + 5000 + step * 1000)
        got += [(h, lease.address) for h, lease in zip(_hosts(batch), batch, strict=True)]
    assert got == [("mover.example", "10.0.0.9")] * 2


def test_a_worker_dying_with_a_claim_leaves_the_host_to_the_next_and_idle_hosts_are_not_looked_up(
    redis_url, crawl_name
):
    frontier = _frontier(redis_url, crawl_name)
    _push(frontier, ["http://a.example/"])
    frontier.get(1, now=T0)
    assert frontier.resolve_claim(5_000, 10, now=T0) == [("a.example", False)]
    assert frontier.resolve_claim(5_000, 10, now=T0 + 4_999) == []  # (claimed)
    assert frontier.resolve_claim(5_000, 10, now=T0 + 5_000) == [("a.example", False)]  # the claimer died
    frontier.resolve_commit([("a.example", "10.0.0.1", "10.0.0.1", T0 + 5_000 + TTL, None, None)], now=T0 + 5_000)
    leases, _ = frontier.get(1, now=T0 + 5_000)
    assert [lease.address for lease in leases] == ["10.0.0.1"]
    frontier.ack(leases[0].id, landed=[leases[0].id], now=T0 + 5_001)
    # a refresh due is no work: nothing is due, and the crawl is finished
    assert frontier.redis.zscore(frontier.keys.refresh, "a.example") == T0 + 5_000 + TTL
    assert frontier.get(1, now=T0 + 5_002) == ([], None)
    assert frontier.outlook(60, now=T0 + 5_002)["state"] == "finished"
    # nothing queued for it: its address is not looked up again when it expires
    assert frontier.resolve_claim(5_000, 10, now=T0 + 5_000 + TTL) == []
    assert frontier.redis.zcard(frontier.keys.resolve) == frontier.redis.zcard(frontier.keys.refresh) == 0
    # its record stays, and a URL pushed later uses it until it expires
    assert frontier.redis.hexists(frontier.keys.haddr, "a.example")


def test_a_round_resolves_through_dns_with_the_ttl_bounded_and_a_name_that_does_not_is_down(redis_url, crawl_name):
    from crawler.frontier.addresses import AddressClasses, HostAddresses, Lookup
    from testing.dns import Zone

    frontier = _frontier(redis_url, crawl_name)
    _push(frontier, ["http://v4.test:8080/", "http://v6.test/", "http://gone.test/", "http://10.1.2.3:81/"])
    frontier.get(1, now=T0)
    with Zone({"v4.test": "192.0.2.9", "v6.test": "2001:db8::9"}, ttl=5) as zone:
        addresses = HostAddresses(
            frontier,
            Lookup([zone.nameserver], timeout=5),
            AddressClasses(v4_prefix=24),
            ttl_min=30,
            ttl_max=600,
            failure={"minimum": 10.0, "maximum": 10.0, "quiet": 600.0},
        )
        assert addresses.round(now=T0) == (3, 1)
        records = {k.decode(): v.decode().split("\x1f") for k, v in frontier.redis.hgetall(frontier.keys.haddr).items()}
        assert records == {
            "v4.test:8080": ["192.0.2.0/24", "192.0.2.9", str(T0 + 30_000)],  # (a TTL of 5 s kept 30)
            "v6.test": ["2001:db8::/64", "2001:db8::9", str(T0 + 30_000)],
            "10.1.2.3:81": ["10.1.2.0/24", "10.1.2.3", str(T0 + 30_000)],  # a literal: no look-up
        }
        assert dict(zone.asked) == {"v4.test": 1, "v6.test": 2, "gone.test": 1}  # (A, then AAAA; no such name)
        # the one that did not resolve: down for every worker, looked up again when its back-off ends
        assert frontier.redis.hget(frontier.keys.hback, "gone.test").decode().endswith(":down")
        assert frontier.redis.zscore(frontier.keys.resolve, "gone.test") == T0 + 10_000
        leases, _ = frontier.get(10, now=T0)
        assert sorted((_hosts([lease])[0], lease.address) for lease in leases) == [
            ("10.1.2.3:81", "10.1.2.3"),
            ("v4.test:8080", "192.0.2.9"),
            ("v6.test", "2001:db8::9"),
        ]
        # a name whose answer expired and that no longer resolves keeps its address
        zone.names.pop("v4.test")
        _push(frontier, ["http://v4.test:8080/more"], now=T0 + 1)
        # (v6.test and the literal, their leases in flight, looked up again; v4.test and
        # gone.test not resolved)
        assert addresses.round(now=T0 + 30_000) == (2, 2)
        assert frontier.redis.hget(frontier.keys.haddr, "v4.test:8080").decode().split("\x1f")[1] == "192.0.2.9"


def test_an_address_entry_names_a_class_for_a_network_and_gives_it_its_own_budget(redis_url, crawl_name, tmp_path):
    from crawler.frontier.addresses import AddressClasses, HostAddresses, Lookup
    from crawler.scope.rules import RulesWatch
    from testing.dns import Zone

    rules = tmp_path / "crawl.rules"
    rules.write_text("address 198.51.100.0/24 class=cdn interval=2\naddress 192.0.2.10 in_flight=0 interval=0\n")
    frontier = _frontier(redis_url, crawl_name, rules=RulesWatch(str(rules)), address_max_in_flight=1)
    _push(frontier, ["http://a.test/", "http://b.test/", "http://c.test/1", "http://c.test/2"])
    frontier.get(1, now=T0)
    names = {"a.test": "198.51.100.1", "b.test": "198.51.100.2", "c.test": "192.0.2.10"}
    with Zone(names) as zone:
        addresses = HostAddresses(frontier, Lookup([zone.nameserver]), AddressClasses(), ttl_min=60)
        assert addresses.round(now=T0) == (3, 0)
    classes = {k.decode(): v.decode().split("\x1f")[0] for k, v in frontier.redis.hgetall(frontier.keys.haddr).items()}
    assert classes == {"a.test": "cdn", "b.test": "cdn", "c.test": "192.0.2.10"}
    assert frontier.redis.hgetall(frontier.keys.adelay) == {b"cdn": b"2000", b"192.0.2.10": b"0"}
    assert frontier.redis.hgetall(frontier.keys.alimit) == {b"192.0.2.10": b"0"}
    # a.test and b.test, on two addresses, share the class's 2 s; c.test's address has no cap
    first, _ = frontier.get(10, now=T0)
    assert sorted(_hosts(first)) in (["a.test", "c.test"], ["b.test", "c.test"])
    second, _ = frontier.get(10, now=T0 + 1000)
    assert _hosts(second) == ["c.test"]  # its second URL at once, its first still in flight
    frontier.ack(*[lease.id for lease in first], landed=[lease.id for lease in first], now=T0 + 1)
    assert frontier.get(10, now=T0 + 2000)[0] == []  # the class's 2 s count from the landing
    third, _ = frontier.get(10, now=T0 + 2001)
    assert len(third) == 1 and {*_hosts(first), *_hosts(third)} == {"a.test", "b.test", "c.test"}


def test_the_busiest_addresses_with_their_hosts_queue_waiting_hosts_and_budget(redis_url, crawl_name):
    from crawler.commands.frontier import busiest_address_lines

    frontier = _frontier(redis_url, crawl_name, address_max_in_flight=2)
    addresses = {f"h{i}.example": ("10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2")[i] for i in range(4)}
    _push(frontier, [f"http://h{i}.example/{n}" for i in range(4) for n in range(1 + i)])
    frontier.get(1, now=T0)
    _resolve(frontier, addresses)
    leases, _ = frontier.get(10, now=T0)
    assert len(leases) == 2  # one an address: the interval holds the others
    busiest = frontier.busiest_addresses()
    assert busiest["complete"] and busiest["looked_at"] == 4
    got = [
        {k: c[k] for k in ("class", "hosts", "queued", "parked", "in_flight", "cap", "handed_out")}
        for c in busiest["classes"]
    ]
    one = next(lease for lease in leases if lease.address == "10.0.0.1")
    left_on_1 = 6 - 1  # h0..h2 queued 1 + 2 + 3 URLs, one of them handed out
    assert got == [
        {"class": "10.0.0.1", "hosts": 3 - (_hosts([one])[0] == "h0.example"), "queued": left_on_1, "parked": 2,
         "in_flight": 1, "cap": 2, "handed_out": 1},
        {"class": "10.0.0.2", "hosts": 1, "queued": 3, "parked": 0, "in_flight": 1, "cap": 2, "handed_out": 1},
    ]  # fmt: skip
    lines = busiest_address_lines(busiest)
    assert lines[0] == "busiest addresses by URLs queued"
    assert lines[2].split() == ["10.0.0.1", str(got[0]["hosts"]), "5", "2", "1/2", "1/s", "1"]


def test_a_crawl_run_on_without_politeness_per_address_gets_back_the_hosts_it_left_waiting(redis_url, crawl_name):
    frontier = _frontier(redis_url, crawl_name)
    _push(frontier, [f"http://h{i}.example/" for i in range(3)] + ["http://new.example/"])
    frontier.get(1, now=T0)
    _resolve(frontier, {f"h{i}.example": "10.0.0.1" for i in range(3)} | {"new.example": "10.0.0.1"}, now=T0)
    _push(frontier, ["http://unresolved.example/"], now=T0)
    held, _ = frontier.get(10, now=T0)
    assert len(held) == 1  # the others wait for 10.0.0.1 (parked) or for an address
    plain = Frontier(frontier.redis, crawl_name, host_interval=0.0, max_in_flight=0)  # (the setting off)
    got = held + plain.get(10, now=T0 + 1)[0]
    got += plain.get(10, now=T0 + 2)[0]
    assert sorted(_hosts(got)) == ["h0.example", "h1.example", "h2.example", "new.example", "unresolved.example"]
    assert not frontier.redis.exists(frontier.keys.aready, frontier.keys.resolve)


def test_a_class_at_its_cap_is_not_looked_at_again_until_a_landing(redis_url, crawl_name):
    frontier = _frontier(redis_url, crawl_name, address_max_in_flight=2)
    addresses = {f"h{i}.example": "10.0.0.1" for i in range(5)}
    _push(frontier, [f"http://{h}/" for h in addresses])
    frontier.get(1, now=T0)
    _resolve(frontier, addresses)
    first, _ = frontier.get(10, now=T0)
    second, _ = frontier.get(10, now=T0 + 1000)
    assert len(first) == len(second) == 1  # one a second, two in flight: the cap
    # nothing lands: no pop finds the class due (workers do not poll it), none hands out more
    for t in (T0 + 2000, T0 + 2001, T0 + 9000):
        leases, next_due = frontier.get(10, now=t)
        assert leases == [] and (next_due is None or next_due > t)
    assert frontier.redis.zscore(frontier.keys.aready, "10.0.0.1") is None
    frontier.ack(first[0].id, landed=[first[0].id], now=T0 + 9000)
    assert frontier.redis.zscore(frontier.keys.aready, "10.0.0.1") == T0 + 10_000
    assert len(frontier.get(10, now=T0 + 10_000)[0]) == 1
