"""The frontier over several Redis servers (crawler/frontier/shards.py): the unit tests (pure:
no service, no process) (the others: tests/integration/test_shards.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from crawler.frontier.shards import HashRing, server_name
from testing.servers import RedisServer

HOSTS = [f"h{i}.example" for i in range(30_000)]


def test_each_server_owns_about_a_third_of_the_hosts():
    ring = HashRing(["redis://a:6379/0", "redis://b:6379/0", "redis://c:6379/0"])
    shares = Counter(ring.index(h) for h in HOSTS)
    assert set(shares) == {0, 1, 2}
    assert all(0.27 < n / len(HOSTS) < 0.40 for n in shares.values()), shares


@pytest.mark.parametrize("servers", [2, 3, 5, 8])
def test_adding_a_server_moves_about_one_share_and_only_to_it(servers):
    names = [f"redis://10.0.0.{i}:6379/0" for i in range(servers)]
    before, after = HashRing(names), HashRing([*names, "redis://10.0.0.99:6379/0"])
    moved = [h for h in HOSTS if before.index(h) != after.index(h)]
    share = len(moved) / len(HOSTS)
    assert 0.6 / (servers + 1) < share < 1.5 / (servers + 1), share
    assert {after.index(h) for h in moved} == {servers}  # all to the new one


def test_removing_a_server_moves_only_its_hosts():
    names = [f"redis://10.0.0.{i}:6379/0" for i in range(4)]
    before, after = HashRing(names), HashRing(names[:2] + names[3:])
    for h in HOSTS[:5000]:
        was = names[before.index(h)]
        if was != names[2]:
            assert (names[:2] + names[3:])[after.index(h)] == was


def test_a_server_keeps_its_place_whatever_its_password_or_the_order_given():
    assert server_name("redis://:secret@10.0.0.1:6380/2") == server_name("redis://10.0.0.1:6380/2")
    a = HashRing([server_name(u) for u in ("redis://x:1/0", "redis://y:1/0")])
    b = HashRing([server_name(u) for u in ("redis://y:1/0", "redis://x:1/0")])
    names_a, names_b = ["redis://x:1/0", "redis://y:1/0"], ["redis://y:1/0", "redis://x:1/0"]
    assert all(names_a[a.index(h)] == names_b[b.index(h)] for h in HOSTS[:3000])


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    started = [RedisServer(tmp_path_factory.mktemp(f"shard{i}")).start() for i in range(3)]
    yield started
    for server in started:
        server.kill()
