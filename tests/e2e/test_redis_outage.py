"""End-to-end: the frontier's Redis goes away in the middle of a crawl and comes back.

One real ``scrapy crawl broad`` worker crawls the loopback site of crawler/demo/site.py on
a private redis-server (append-only file, fsync always) that the test starts on a free
port of 127.0.0.1. Once the site has answered some pages, the test stops that server
(SIGTERM: Redis shuts down cleanly, its data is in the AOF), keeps it down for
OUTAGE_SECONDS while the worker keeps running, then starts a new redis-server on the
same port and directory, which loads the AOF. The scheduler's outage handling (its
outbox, crawler/scheduler/outages.py) must carry the worker through: it
waits, delivers what it learned while Redis was away, and finishes the crawl by itself.

Never touches any other Redis (the shared one on 6379 included). Every process the test
starts is bounded in time and killed at teardown if still running.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from crawler.demo.site import Site, serve_site
from crawler.frontier.frontier import Frontier
from testing.servers import RedisServer
from testing.workers import Worker, clean_env, launch_worker, seed_file

HOSTS, PAGES = 3, 20
SITE_DELAY = 0.2  # seconds per page answer, so the crawl lasts across the outage
HOST_INTERVAL = 0.3
IDLE_SECONDS = 3
LEASE_SECONDS = 10
HITS_BEFORE_OUTAGE = 8  # page requests the site must have seen before Redis is stopped
OUTAGE_SECONDS = 6
CRAWL_NAME = "outage"
TEST_BUDGET = 85  # seconds for the whole test, start to finish


# -- a private redis-server and the worker ------------------------------------------------


@pytest.fixture
def private_redis(tmp_path):
    server = RedisServer(tmp_path / "redis", persistent=True)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def worker_factory(tmp_path):
    started: list[Worker] = []

    def start(seeds: Path, redis_url: str) -> Worker:
        settings = {
            "CRAWL_NAME": CRAWL_NAME,
            "CRAWL_DIR": tmp_path / "crawl",  # unused with REDIS_URL; never the project's
            "FRONTIER_HOST_INTERVAL": HOST_INTERVAL,
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",  # the test site is on loopback
            "FRONTIER_IDLE_SECONDS": IDLE_SECONDS,
            "FRONTIER_LEASE_SECONDS": LEASE_SECONDS,
            "LOG_LEVEL": "INFO",
        }
        started.append(launch_worker(tmp_path, "worker", seeds, settings, {**clean_env(), "REDIS_URL": redis_url}))
        return started[-1]

    try:
        yield start
    finally:
        for w in started:
            w.kill()


# -- log checks ----------------------------------------------------------------------------

# a Scrapy log record starts with "YYYY-MM-DD HH:MM:SS [logger] LEVEL: "
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[([^\]]+)\] ([A-Z]+): ")


def _tracebacks(text: str) -> list[str]:
    """The log record (first line) of every Traceback in ``text`` (chained exceptions:
    one per Traceback)."""
    found, record = [], "(no record: stdout/stderr)"
    for line in text.splitlines():
        if _RECORD.match(line):
            record = line
        elif line.startswith("Traceback (most recent call last)"):
            found.append(record)
    return found


def _errors(text: str) -> list[str]:
    """ERROR and CRITICAL log records."""
    return [line for line in text.splitlines() if (m := _RECORD.match(line)) and m.group(2) in ("ERROR", "CRITICAL")]


# -- the test ------------------------------------------------------------------------------


def test_worker_survives_redis_outage(private_redis, worker_factory, tmp_path):
    t0 = time.monotonic()
    private_redis.start()
    with serve_site(hosts=HOSTS, pages=PAGES, delay=SITE_DELAY) as site:
        worker = worker_factory(seed_file(tmp_path, site.seeds), private_redis.url)

        # 1. the crawl is under way
        deadline = t0 + 40
        while len(site.page_hits()) < HITS_BEFORE_OUTAGE:
            assert worker.proc.poll() is None, (
                f"worker exited ({worker.proc.returncode}) before the outage\n{worker.tail()}"
            )
            if time.monotonic() > deadline:
                pytest.fail(f"site saw {len(site.page_hits())} page requests in 40 s\n{worker.tail()}")
            time.sleep(0.05)
        hits_before = len(site.page_hits())

        # 2. Redis goes away for a while; the worker must wait, not exit
        private_redis.stop()
        down_at = time.monotonic()
        while time.monotonic() - down_at < OUTAGE_SECONDS:
            assert worker.proc.poll() is None, (
                f"worker exited ({worker.proc.returncode}) during the Redis outage\n{worker.tail()}"
            )
            time.sleep(0.1)
        assert worker.proc.poll() is None, f"worker exited during the Redis outage\n{worker.tail()}"
        hits_during = len(site.page_hits()) - hits_before

        # 3. Redis comes back with its data (AOF) on the same port
        private_redis.start()
        up_at = time.monotonic()
        keys = private_redis.client.dbsize()
        assert keys > 0, f"the restarted redis-server has no data: AOF not loaded?\n{private_redis.log_tail()}"

        # 4. the worker finishes by itself
        remaining = max(TEST_BUDGET - (time.monotonic() - t0), 20)
        try:
            rc = worker.proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            worker.kill()
            pytest.fail(
                f"worker still running {time.monotonic() - up_at:.0f} s after Redis came back (killed); "
                f"site saw {len(site.page_hits())} page requests\n{worker.tail()}"
            )
        finished_at = time.monotonic()
        hits = site.page_hits()

    logs = worker.tail()
    timing = (
        f"(outage after {hits_before} page requests, {down_at - t0:.1f} s in; {hits_during} requests "
        f"during the outage; worker done {finished_at - up_at:.1f} s after Redis came back)"
    )
    assert rc == 0, f"worker exit code {rc} {timing}\n{logs}"

    text = worker.text()
    assert "Redis unreachable" in text, f"no 'Redis unreachable' warning: the outage went unnoticed {timing}\n{logs}"
    tracebacks = _tracebacks(text)
    assert not tracebacks, f"Tracebacks in the worker's log, after: {tracebacks[:5]} {timing}\n{logs}"
    errors = _errors(text)
    assert not errors, f"ERROR records in the worker's log: {errors[:5]} {timing}\n{logs}"

    # the crawl really continued after Redis came back
    after = [h for h in hits if h.start > up_at]
    assert after, f"no page requested after Redis came back: the outage was not mid-crawl {timing}\n{logs}"

    counts = Counter(h.key for h in hits)
    missing = sorted(site.expected_fetches() - set(counts))
    assert not missing, f"{len(missing)} reachable pages never fetched: {missing[:20]} {timing}\n{logs}"

    stats = Frontier(private_redis.client, CRAWL_NAME).stats()
    assert stats["queued"] == 0 and stats["leased"] == 0, f"frontier not drained: {stats} {timing}\n{logs}"

    _assert_output_covers(site, worker.pages(), f"{timing}\n{logs}")


def _assert_output_covers(site: Site, pages: list[dict], logs: str) -> None:
    urls = {p.get("url") for p in pages}
    missing = sorted(site.expected_page_urls() - urls)
    assert not missing, f"{len(missing)} pages missing from the output: {missing[:20]} {logs}"


def test_a_redis_that_comes_back_empty_is_reported_not_taken_for_finished(private_redis, worker_factory, tmp_path):
    # Redis restarted without its data (no persistence): the crawl's queues, URL-seen
    # filter and leases are gone. The worker must say so and stop with exit code 1, not
    # find an empty frontier and close as finished.
    private_redis.start()
    with serve_site(hosts=HOSTS, pages=PAGES, delay=SITE_DELAY) as site:
        worker = worker_factory(seed_file(tmp_path, site.seeds), private_redis.url)
        deadline = time.monotonic() + 40
        while len(site.page_hits()) < HITS_BEFORE_OUTAGE:
            assert worker.proc.poll() is None, f"worker exited ({worker.proc.returncode}) early\n{worker.tail()}"
            assert time.monotonic() < deadline, f"site saw {len(site.page_hits())} page requests\n{worker.tail()}"
            time.sleep(0.05)
        private_redis.kill()
        for path in private_redis.dir.iterdir():  # its data goes with it
            if path.is_dir():
                shutil.rmtree(path)
            elif path.suffix != ".log":
                path.unlink()
        private_redis.start()
        client = private_redis.client  # the crawl's epoch is gone (a reconnecting worker may write other keys)
        assert not [k for k in client.keys() if client.type(k) == b"hash" and client.hexists(k, "epoch")]
        restarted = time.monotonic()
        try:
            code = worker.proc.wait(timeout=LEASE_SECONDS + 30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker still running {LEASE_SECONDS + 30} s after Redis came back empty\n{worker.tail()}")
        took = time.monotonic() - restarted
    text = worker.text()
    assert code == 1, worker.tail()
    assert "vanished from Redis" in text and "Frontier empty: closing" not in text, worker.tail()
    assert took < LEASE_SECONDS / 3 + 15, took  # noticed at the next lease renewal


@pytest.mark.parametrize(
    "command",
    [
        ["demo"],
        ["crawl", "broad", "-a", "seeds=http://a.example/"],
        ["seed", "http://a.example/"],
        ["submit", "http://a.example/"],
        ["recrawl"],
        ["frontier"],
    ],
    ids=lambda command: command[0],
)
def test_a_command_whose_redis_cluster_is_unreachable_says_so_in_one_line(tmp_path, command):
    """REDIS_CLUSTER_URL naming a node nobody listens on (an export left from another
    shell's recipe): every command ends with exit code 1 and one line saying which
    cluster it could not reach, not a traceback."""
    import sys

    from testing.servers import free_port
    from testing.workers import ROOT

    port = free_port()
    env = {**clean_env(), "REDIS_CLUSTER_URL": f"redis://127.0.0.1:{port}/0", "CRAWL_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = out.stdout + out.stderr
    lines = [line for line in text.splitlines() if "cannot connect to Redis" in line]
    assert out.returncode == 1, text[-3000:]
    assert len(lines) == 1 and f"(Redis Cluster at redis://127.0.0.1:{port}/0)" in lines[0], text[-3000:]
    assert "Traceback" not in text, text[-3000:]
