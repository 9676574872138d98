"""Failures: a URL's own retries (the delayed set), a host slowed by failures and brought
back by answers (AIMD), a host down (backed off, probed), 429/Retry-After; all shared
by every worker through the frontier. Plain values first, then a real crawl.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_failures.py, tests/e2e/test_failures.py."""

import pytest

from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.words import DOWN, FINISHED, RETRY, ROBOTS, RUNNING, THROTTLED, WAITING
from crawler.observe.report import status_line

T0 = 1_700_000_000_000

LIMITS = {"minimum": 10, "maximum": 100, "quiet": 300}


@pytest.fixture
def frontier(redis_client, crawl_name):
    return Frontier(redis_client, crawl_name, host_interval=1.0)


def test_back_off_doubles_is_capped_and_forgiven(frontier):
    delays = [frontier.block_until("a.example", now=T0 + i * 1000, **LIMITS) for i in range(5)]
    assert delays == [10, 20, 40, 80, 100]
    # a quiet period later the doubling starts over
    assert frontier.block_until("a.example", now=T0 + 4000 + 301_000, **LIMITS) == 10


def test_retry_after_wins_but_is_capped(frontier):
    assert frontier.block_until("a.example", retry_after=7, now=T0, **LIMITS) == 7
    assert frontier.block_until("b.example", retry_after=7200, now=T0, **LIMITS) == 100


def test_backed_off_host_is_not_handed_out(frontier):
    frontier.put([Entry(url=f"http://a.example/{i}", payload=f"{i}".encode()) for i in range(2)])
    leases, _ = frontier.get(1, now=T0)
    assert len(leases) == 1
    frontier.block_until("a.example", now=T0 + 10, **LIMITS)
    frontier.ack(landed=[leases[0].id], now=T0 + 20)  # its download ended: back in the heap
    assert frontier.get(1, now=T0 + 9_999)[0] == []
    assert len(frontier.get(1, now=T0 + 10_010)[0]) == 1


def test_back_off_never_brings_a_host_forward(frontier):
    frontier.put([Entry(url="http://a.example/1", payload=b"1")], now=T0)
    frontier.block_until("a.example", retry_after=50, now=T0, **LIMITS)
    frontier.block_until("a.example", retry_after=5, now=T0 + 1, **LIMITS)
    assert frontier.get(1, now=T0 + 49_000)[0] == []
    assert len(frontier.get(1, now=T0 + 50_000)[0]) == 1


SLOW = {"factor": 2.0, "max_factor": 8.0, "down_after": 3, **LIMITS}


def _lease(frontier, url, now):
    frontier.put([Entry(url=url, payload=url.encode())], now=now)
    (lease,), _ = frontier.get(1, now=now)
    return lease


def test_a_retry_waits_in_the_delayed_set_and_then_jumps_the_queue(frontier):
    frontier.put([Entry(url=f"http://a.example/{i}", payload=f"{i}".encode()) for i in range(3)], now=T0)
    (first,), _ = frontier.get(1, now=T0)
    retry = Entry(url="http://a.example/0", payload=b"0", dont_filter=True, follow_up=True)
    retry.replaces_lease, retry.not_before = first.id, T0 + 30_000
    frontier.put([retry], now=T0 + 100)
    assert frontier.stats()["retries_delayed"] == 1 and frontier.stats()["queued"] == 3
    # the host's other URLs go on, one interval apart; the retry is not handed out early
    handed = []
    for i in range(3):
        leases, _ = frontier.get(1, now=T0 + 1100 + i * 1100)
        handed.append([lease.payload for lease in leases])
        frontier.ack(*(lease.id for lease in leases), now=T0 + 1100 + i * 1100 + 10)
    assert handed == [[b"1"], [b"2"], []]
    # nothing due: the pop says when the retry is
    assert frontier.get(1, now=T0 + 6000) == ([], T0 + 30_000)
    (again,), _ = frontier.get(1, now=T0 + 30_000)
    assert again.payload == b"0" and frontier.stats()["retries_delayed"] == 0


def test_failures_slow_a_host_and_answers_bring_it_back(frontier, redis_client):
    lease = _lease(frontier, "http://a.example/1", T0)
    factors = [frontier.fail("a.example", "url", f"http://a.example/{i % 2}", now=T0, **SLOW)[2] for i in range(5)]
    assert factors == [2, 4, 8, 8, 8]  # x2, capped
    # its interval is 8 s now, for every worker: the next URL waits that long after the landing
    frontier.ack(lease.id, now=T0 + 100)
    frontier.put([Entry(url="http://a.example/2", payload=b"2")], now=T0 + 100)
    assert frontier.get(1, now=T0 + 8_099)[0] == []
    (lease,), _ = frontier.get(1, now=T0 + 8_100)
    assert frontier.slot("a.example", 60, now=T0 + 8_100) == T0 + 8_100  # the limiter agrees...
    assert frontier.slot("a.example", 60, now=T0 + 8_200) == T0 + 16_100  # ... on the next one

    def factor():
        value = redis_client.hget(frontier.keys.hslow, "a.example")
        return None if value is None else round(float(value), 2)

    # each answer gives back a quarter of the base rate: 1/f + 1/4
    seen = []
    for i in range(4):
        frontier.ack(landed=[b"+" + lease.id], now=T0 + 20_000 * (i + 1))
        seen.append(factor())
        frontier.put([Entry(url=f"http://a.example/x{i}", payload=b"x")], now=T0 + 20_000 * (i + 1))
        (lease,), _ = frontier.get(1, now=T0 + 20_000 * (i + 1) + 10_000)
    assert seen == [2.67, 1.6, 1.14, None]
    assert frontier.stats()["hosts_slowed"] == 0


def test_an_answer_counts_whatever_ended_its_lease_first(frontier, redis_client):
    def factor():
        value = redis_client.hget(frontier.keys.hslow, "a.example")
        return None if value is None else round(float(value), 2)

    lease = _lease(frontier, "http://a.example/1", T0)
    frontier.fail("a.example", "url", "http://a.example/0", now=T0, **SLOW)
    assert factor() == 2
    frontier.ack(lease.id, landed=[b"+" + lease.id], now=T0 + 100)  # ack and landing in one call
    assert factor() == 1.33
    lease = _lease(frontier, "http://a.example/2", T0 + 10_000)
    redirect = Entry(url="http://a.example/3", payload=b"3", dont_filter=True, follow_up=True)
    redirect.replaces_lease = lease.id
    frontier.put([redirect], now=T0 + 10_100)  # a redirect's follow-up lands its lease first
    frontier.ack(landed=[b"+" + lease.id], now=T0 + 10_200)
    assert factor() is None


def test_a_follow_up_sent_twice_is_queued_once(frontier):
    lease = _lease(frontier, "http://a.example/1", T0)
    retry = Entry(url="http://a.example/1", payload=b"1", dont_filter=True, follow_up=True, replaces_lease=lease.id)
    assert frontier.put([retry], now=T0 + 10) == ["added"]
    assert frontier.put([retry], now=T0 + 20) == ["seen"]  # e.g. resent after a timeout
    assert frontier.stats()["queued"] == 1


def test_host_down_after_zero_never_makes_a_host_down(frontier):
    never = {**SLOW, "down_after": 0}
    assert not any(frontier.fail("a.example", "url", f"http://a.example/{i}", now=T0, **never)[0] for i in range(9))


def test_distinct_urls_failing_in_a_row_make_a_host_down(frontier):
    frontier.put([Entry(url=f"http://a.example/{i}", payload=f"{i}".encode()) for i in range(5)], now=T0)
    # the same URL failing again does not count twice
    assert [frontier.fail("a.example", "url", "http://a.example/0", now=T0, **SLOW)[0] for _ in range(3)] == [False] * 3
    assert frontier.fail("a.example", "url", "http://a.example/1", now=T0, **SLOW)[0] is False
    # an answer between ends the run
    (lease,), _ = frontier.get(5, now=T0 + 60_000)  # one per host; the others join its back queue
    frontier.ack(landed=[b"+" + lease.id], now=T0 + 60_010)
    assert frontier.fail("a.example", "url", "http://a.example/2", now=T0 + 60_020, **SLOW)[0] is False
    assert frontier.fail("a.example", "url", "http://a.example/3", now=T0 + 60_030, **SLOW)[0] is False
    down, delay, _ = frontier.fail("a.example", "url", "http://a.example/4", now=T0 + 60_040, **SLOW)
    assert down and delay == 10
    # down: nothing of the host is handed out until the back-off ends; then one probe
    assert frontier.deferred(now=T0 + 60_050)[DOWN]["urls"] == 4
    assert frontier.get(1, now=T0 + 70_039)[0] == []
    assert len(frontier.get(5, now=T0 + 70_040)[0]) == 1
    assert frontier.deferred(now=T0 + 70_050) == {}  # the probe is in flight, nothing waits


def test_a_refused_connection_backs_the_host_off_at_once(frontier):
    frontier.put([Entry(url=f"http://a.example/{i}", payload=b"x") for i in range(3)], now=T0)
    (lease,), _ = frontier.get(3, now=T0)
    frontier.ack(lease.id, now=T0)
    down, delay, factor = frontier.fail("a.example", DOWN, "http://a.example/0", now=T0, **SLOW)
    assert down and delay == 10 and factor == 1  # refused: backed off, not slowed
    assert frontier.fail("a.example", DOWN, "http://a.example/0", now=T0 + 1, **SLOW)[1] == 20  # doubling
    assert frontier.deferred(now=T0 + 2)[DOWN] == {
        "hosts": 1, "urls": 2, "due": T0 + 1 + 20_000, "examples": ["a.example"]
    }  # fmt: skip


def test_outlook_and_deferred_say_why_a_crawl_waits(frontier):
    assert frontier.outlook(60, now=T0)["state"] == FINISHED
    frontier.put([Entry(url=f"http://{h}.example/{i}", payload=b"x") for h in "abcd" for i in (1, 2)], now=T0)
    assert frontier.outlook(60, now=T0)["state"] == RUNNING  # due now
    for lease in frontier.get(4, now=T0)[0]:  # (sorts the front queues into back queues)
        frontier.ack(lease.id, now=T0)
    frontier.block_until("a.example", retry_after=600, reason=ROBOTS, now=T0, **{**LIMITS, "maximum": 3600})
    frontier.block_until("b.example", retry_after=90, reason=THROTTLED, now=T0, **LIMITS)
    frontier.fail("c.example", DOWN, "http://c.example/", now=T0, **SLOW)
    (lease,), _ = frontier.get(1, now=T0 + 1000)  # d.example; its retry waits 120 s
    retry = Entry(url="http://d.example/2", payload=b"x", dont_filter=True, follow_up=True)
    retry.replaces_lease, retry.not_before = lease.id, T0 + 120_000
    frontier.put([retry], now=T0)
    assert frontier.outlook(60, now=T0 + 1000)["state"] == RUNNING  # c.example is due within 60 s
    outlook = frontier.outlook(5, now=T0 + 1000)
    assert outlook == {
        "state": WAITING, "queued": 4, "leased": 0, "next_due": T0 + 10_000,
        "budget_spent": False, "max_pages": 0, "paused_at": None,
    }  # fmt: skip
    assert frontier.outlook(5, now=T0 + 10_000)["state"] == RUNNING  # c.example is due again
    deferred = frontier.deferred(now=T0 + 1000)
    assert {r: (d["hosts"], d["urls"], d["due"]) for r, d in deferred.items()} == {
        ROBOTS: (1, 1, T0 + 600_000),
        THROTTLED: (1, 1, T0 + 90_000),
        DOWN: (1, 1, T0 + 10_000),
        RETRY: (1, 1, T0 + 120_000),
    }
    assert frontier.outlook(60, now=T0 + 1000)["next_due"] == T0 + 10_000
    line = status_line(outlook, deferred, now=T0 / 1000 + 1)
    assert line.startswith("waiting until ") and "(in 9 s): 4 URLs queued" in line
    for words in ("robots.txt unreachable: 1 host", "host down: 1 host", "URL retry pending: 1 host, 1 URL"):
        assert words in line


def test_the_end_of_a_response_spaces_the_next_request(frontier):
    frontier.put([Entry(url="http://a.example/1", payload=b"1")], now=T0)
    assert frontier.slot("a.example", 1.0, now=T0) == T0  # robots.txt leaves at once...
    frontier.end("a.example", now=T0 + 400)  # ... and its answer ends 400 ms later
    # its redirect hop (or the page) leaves no sooner than that end + the interval
    assert frontier.slot("a.example", 5.0, now=T0 + 500) == T0 + 1400
    assert frontier.get(1, now=T0 + 1399)[0] == []  # the frontier agrees


def test_a_429_after_the_pages_last_back_off_still_keeps_the_host_away(redis_url, crawl_name):
    """A page answered 429 with Retry-After once more than HOST_BACKOFF_MAX_RETRIES: its
    answer is kept (recorded), and its host is left alone for the Retry-After all the same
    (the host's other URLs went out again at its interval)."""
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.utils.test import get_crawler

    from crawler import meta
    from crawler.frontier.words import now_ms
    from crawler.middlewares.failures import FailureMiddleware
    from crawler.spiders.broad import BroadSpider
    from testing.services import project_settings

    crawler = get_crawler(BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name))
    middleware = FailureMiddleware.from_crawler(crawler)
    last = crawler.settings.getint("HOST_BACKOFF_MAX_RETRIES")
    request = Request("http://a.example/p", meta={meta.LEASE: "x", meta.BACKOFF_RETRIES: last})
    response = Response(request.url, status=429, headers={"Retry-After": "3600"}, request=request)
    assert middleware.process_response(request, response) is response
    assert middleware.frontier.blocked_until("a.example") > now_ms() + 3_000_000
