"""The shared per-host rate limiter: one slot per interval per host, for all workers: the end-
to-end tests (commands and workers as subprocesses) (the others:
tests/unit/test_ratelimit.py, tests/integration/test_ratelimit.py)."""

import subprocess
import uuid
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Frontier
from testing.workers import clean_env, crawl_command, read_pages

ROOT = Path(__file__).resolve().parents[2]


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
