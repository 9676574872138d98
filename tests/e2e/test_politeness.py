"""Politeness across three worker processes: the shared rate limiter, robots.txt
(fetched once per site for everyone, RFC 9309 answers, Crawl-delay, sitemaps), the
operator's interval overrides, one request in flight per host, and a 429 Retry-After."""

import signal
import subprocess
import time
import uuid
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Frontier
from testing.workers import clean_env, crawl_command, log_tail, read_pages

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.010  # seconds: clocks and the site's own timing

DEFAULT = 0.4
CRAWL_DELAY = 1.0
OVERRIDE = 0.8  # "1.25qps" in the intervals file
RETRY_AFTER = 2
# host index -> robots.txt: body (answered 200) or status
ROBOTS = {
    # a group for the crawler's own token wins over "*", which would forbid everything
    0: (
        "User-agent: *\nDisallow: /\n\n"
        "User-agent: crawler\nDisallow: /p3.html\n\n"
        "Sitemap: http://127.0.0.2:{port}/sitemap-index.xml\n"
    ),
    1: f"User-agent: crawler\nCrawl-delay: {CRAWL_DELAY}\nAllow: /\n",
    2: 500,
    # 3: 404 (the site's default): everything allowed
}
OVERRIDE_HOST = 4  # listed in the intervals file
THROTTLED_HOST = 5  # its first page request is answered 429 with Retry-After
HOSTS = 6


def _run_three_workers(site, tmp_path, redis_url, name):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(site.seeds) + "\n")
    intervals = tmp_path / "intervals.txt"
    intervals.write_text(f"# operator overrides\n{site.hosts[OVERRIDE_HOST]} {1 / OVERRIDE:g}qps\n")
    procs = []
    for i in range(3):
        out = tmp_path / f"w{i}.jsonl"
        settings = {
            "CRAWL_NAME": name,
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": DEFAULT,
            "FRONTIER_HOST_INTERVALS_FILE": intervals,
            "ROBOTSTXT_RETRY_MIN": 600,  # the 500 host is not tried again during the test
            "LOG_FILE": tmp_path / f"w{i}.log",
            "LOG_LEVEL": "INFO",
        }
        env = clean_env()
        env["REDIS_URL"] = redis_url
        cmd = crawl_command(out, seeds if i == 0 else None, settings)
        procs.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.DEVNULL), out))
    return procs


def _fetched(site) -> set[tuple[str, str]]:
    return {(hit.host, hit.path) for hit in site.hits()}


def _expected(site) -> set[tuple[str, str]]:
    """Every request a correct crawl makes, robots.txt and sitemaps aside."""
    want = set()
    for i, host in enumerate(site.hosts):
        if i == 2:
            continue  # robots.txt answers 500: nothing else
        paths = set(site.page_paths())
        if i == 0:
            paths = (paths - {"/p3.html"}) | set(site.sitemap_paths())
        want |= {(host, path) for path in paths}
    return want


def test_three_workers_are_polite_together(redis_url, tmp_path):
    name = f"test-{uuid.uuid4().hex[:12]}"
    options = {"robots": ROBOTS, "sitemap_pages": 3, "throttle": {THROTTLED_HOST: RETRY_AFTER}}
    with serve_site(hosts=HOSTS, pages=6, **options) as site:
        procs = _run_three_workers(site, tmp_path, redis_url, name)
        try:
            # the crawl never ends by itself: the 500 host's URLs wait in the frontier
            deadline = time.monotonic() + 150
            while not _expected(site) <= _fetched(site) and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(1.5)  # anything fetched late (e.g. a disallowed page) shows up
            for proc, _ in procs:
                proc.send_signal(signal.SIGINT)
            for proc, _ in procs:
                proc.wait(timeout=60)
        finally:
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        hits = site.hits()
    logs = [tmp_path / f"w{i}.log" for i in range(3)]
    context = log_tail(logs, 30, "no worker logs")
    try:
        hosts = site.hosts
        fetched = {(hit.host, hit.path) for hit in hits}
        missing = _expected(site) - fetched
        assert not missing, f"never fetched: {sorted(missing)}\n{context}"

        # robots.txt once per site for all three workers; the 500 site: nothing else
        by_host = defaultdict(list)
        for hit in hits:
            by_host[hit.host].append(hit)
        for host in hosts:
            robots = [hit for hit in by_host[host] if hit.path == "/robots.txt"]
            assert len(robots) == 1, (host, len(robots))
        assert {hit.path for hit in by_host[hosts[2]]} == {"/robots.txt"}
        # disallowed for the crawler's token: never fetched, recorded as such
        assert (hosts[0], "/p3.html") not in fetched
        pages = [page for _, out in procs for page in read_pages(out)]
        statuses = {page["url"]: page["status"] for page in pages}
        assert statuses.get(site.url(0, "/p3.html")) == "robots_disallowed"
        # pages only a (gzipped) sitemap named were found
        for path in site.sitemap_paths():
            assert statuses.get(site.url(0, path)) == 200

        # spacing of every request (robots.txt included) per host, across all workers
        throttled = [hit for hit in by_host[hosts[THROTTLED_HOST]] if hit.path != "/robots.txt"][0]
        close = []
        for i, host in enumerate(hosts):
            interval = {1: CRAWL_DELAY, OVERRIDE_HOST: OVERRIDE}.get(i, DEFAULT)
            for a, b in pairwise(sorted(by_host[host], key=lambda hit: hit.start)):
                need = interval
                if a.path == "/robots.txt":
                    need = DEFAULT if i != OVERRIDE_HOST else OVERRIDE  # Crawl-delay not known yet
                if a is throttled:
                    need = RETRY_AFTER
                if b.start - a.start < need - TOLERANCE:
                    close.append((host, a.path, b.path, round(b.start - a.start, 3), need))
        assert not close, f"requests closer than their interval: {close}"
        # one request in flight per host: each answered before the next arrived
        overlaps = [
            (host, a.path, b.path)
            for host, hs in by_host.items()
            for a, b in pairwise(sorted(hs, key=lambda hit: hit.start))
            if a.end is not None and b.start < a.end
        ]
        assert not overlaps, overlaps
    finally:
        from redis import Redis

        Frontier(Redis.from_url(redis_url), name).clear()
