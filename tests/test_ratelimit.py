"""The shared per-host rate limiter: one slot per interval per host, for all workers."""

import subprocess
import uuid
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.intervals import HostIntervals
from testing.workers import clean_env, crawl_command, read_pages

ROOT = Path(__file__).resolve().parents[1]
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


def test_intervals_file_hosts_domains_and_qps(tmp_path, caplog):
    path = tmp_path / "intervals.txt"
    path.write_text(
        "# popular domains\n"
        "example.com 2\n"
        "api.example.com 5qps   # the longest match wins\n"
        "127.0.0.3 0.5\n"
        "broken line here\n"
        "neg.example -1\n"
        "zero.example 0qps\n"
    )
    table = HostIntervals.from_file(str(path))
    assert len(table) == 3
    assert table.lookup("example.com") == 2
    assert table.lookup("www.example.com") == 2
    assert table.lookup("v1.api.example.com") == 0.2
    assert table.lookup("notexample.com") is None
    assert table.lookup("127.0.0.3") == 0.5
    assert table.lookup("10.127.0.0.3") is None
    assert sum("skipped" in r.message for r in caplog.records) == 3


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


def test_three_workers_never_hit_a_host_faster_than_its_interval(redis_url, tmp_path):
    interval, tolerance = 0.4, 0.05
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=2, pages=8) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        procs = []
        for i in range(3):
            out = tmp_path / f"w{i}.jsonl"
            settings = {
                "CRAWL_NAME": name,
                "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
                "FRONTIER_HOST_INTERVAL": interval,
                "FRONTIER_IDLE_SECONDS": 3,
                "LOG_LEVEL": "INFO",
            }
            cmd = crawl_command(out, seeds if i == 0 else None, settings)
            env = clean_env()
            env["REDIS_URL"] = redis_url
            procs.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True), out))
        logs = [proc.communicate(timeout=120)[1] for proc, _ in procs]
        hits = site.hits()
        expected = site.expected_page_urls()
    try:
        assert all(proc.returncode == 0 for proc, _ in procs), logs[0][-2000:]
        by_host = defaultdict(list)
        for hit in hits:  # robots.txt included: every request to a host counts
            by_host[hit.host].append(hit.start)
        close = [
            (host, round(b - a, 3))
            for host, times in by_host.items()
            for a, b in pairwise(sorted(times))
            if b - a < interval - tolerance
        ]
        assert not close, f"requests closer than {interval} s - {tolerance} s: {close}"
        pages = {page["url"] for _, out in procs for page in read_pages(out)}
        assert expected <= pages
        robots = [hit for hit in hits if hit.path == "/robots.txt"]
        assert len(robots) == 2  # once per host for all three workers
    finally:
        from redis import Redis

        Frontier(Redis.from_url(redis_url), name).clear()
