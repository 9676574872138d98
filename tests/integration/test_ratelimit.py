"""The shared per-host rate limiter: one slot per interval per host, for all workers.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_ratelimit.py, tests/e2e/test_ratelimit.py."""

import pytest

from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.intervals import HostIntervals

T0 = 1_700_000_000_000


@pytest.fixture
def frontier(redis_client, crawl_name):
    return Frontier(redis_client, crawl_name, host_interval=1.0)


def test_slots_are_one_interval_apart(frontier):
    assert frontier.slot("a.example", 1.0, now=T0) == T0
    assert frontier.slot("a.example", 1.0, now=T0 + 10) == T0 + 1000  # wait 990 ms
    assert frontier.slot("a.example", 1.0, now=T0 + 20) == T0 + 2000  # wait 1980 ms: not taken
    assert frontier.slot("a.example", 1.0, now=T0 + 30) == T0 + 2000  # ... so still free
    assert frontier.slot("a.example", 5.0, now=T0 + 40) == T0 + 2000  # taken with a longer wait
    assert frontier.slot("a.example", 1.0, now=T0 + 9000) == T0 + 9000
    assert frontier.slot("b.example", 1.0, now=T0 + 10) == T0 + 10  # hosts are independent


def test_a_request_handed_out_early_leaves_at_its_due_time(frontier):
    assert frontier.slot("a.example", 1.0, now=T0, not_before=T0 + 15) == T0 + 15
    # the interval still holds after it, and a due time already past changes nothing
    assert frontier.slot("a.example", 1.0, now=T0 + 20, not_before=T0 + 30) == T0 + 1015
    assert frontier.slot("a.example", 5.0, now=T0 + 9000, not_before=T0 + 100) == T0 + 9000


def test_host_override_sets_the_interval(frontier):
    frontier.set_delay("slow.example", 3)
    frontier.slot("slow.example", 10, now=T0)
    assert frontier.slot("slow.example", 10, now=T0) == T0 + 3000


def test_an_override_beats_crawl_delay_and_reaches_the_frontier(redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=1.0, intervals=HostIntervals({"example.com": 3}))
    f.set_delay("www.example.com", 10)  # e.g. robots.txt Crawl-delay
    f.set_delay("other.example", 10)
    assert f.slot("www.example.com", 100, now=T0) == T0
    assert f.slot("www.example.com", 100, now=T0) == T0 + 3000
    assert f.slot("other.example", 100, now=T0) == T0
    assert f.slot("other.example", 100, now=T0) == T0 + 10_000
    # the frontier's hand-outs follow the override too
    f.put([Entry(url=f"http://www.example.com/{i}", payload=f"{i}".encode()) for i in range(2)])
    leases, _ = f.get(1, now=T0 + 10_000)
    f.ack(leases[0].id, now=T0 + 10_001)  # its download ended then
    assert f.get(1, now=T0 + 13_000)[0] == []
    assert len(f.get(1, now=T0 + 13_001)[0]) == 1


def test_a_slot_too_far_away_pushes_the_host_back_in_the_frontier(frontier):
    frontier.put([Entry(url=f"http://a.example/{i}", payload=f"{i}".encode()) for i in range(2)])
    frontier.slot("a.example", 1.0, now=T0)  # e.g. robots.txt took the slot at T0
    frontier.slot("a.example", 1.0, now=T0)  # and the next one, T0 + 1000
    assert frontier.slot("a.example", 1.0, now=T0) == T0 + 2000  # too far: handed back
    assert frontier.get(1, now=T0 + 1999)[0] == []
    assert len(frontier.get(1, now=T0 + 2000)[0]) == 1
