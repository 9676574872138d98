"""robots.txt answers a crawler meets (RFC 9309), in one real crawl: redirects, too many
redirects, a body over 500 KiB, garbage, 429 with Retry-After, a dropped connection,
and an earlier copy used while the site answers 503; the parsed rules a worker keeps,
bounded in bytes.

Here: the end-to-end tests (commands and workers as subprocesses); the others of this
subject: tests/unit/test_robots.py, tests/integration/test_robots.py."""

import re
import subprocess
import time
import uuid
import zlib
from collections import Counter
from pathlib import Path

from redis import Redis

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import Keys
from testing.workers import clean_env, crawl_command, log_tail, loopback_settings, read_pages, seed_file

ROOT = Path(__file__).resolve().parents[2]

LIFETIME = 3600

DISALLOW_P2 = "User-agent: *\nDisallow: /p2.html\n"

HUGE = DISALLOW_P2 + "# padding\n" * 60_000 + "Disallow: /p4.html\n"  # the last line is past 500 KiB
# more than DOWNLOAD_MAXSIZE (1 MB here), with its Content-Length: its first 500 KiB count too
HUGER = DISALLOW_P2 + "# padding\n" * 150_000

ROBOTS = {
    # 0: the seed host, 404
    1: (301, {"Location": "/r1.txt"}, ""),  # three hops to a body
    2: (301, {"Location": "/loop1.txt"}, ""),  # more than five hops: unavailable, allow all
    3: HUGE,
    4: (200, {}, bytes(range(256)) * 64),  # garbage
    5: [(429, {"Retry-After": "1"}, ""), DISALLOW_P2],
    6: ["drop", DISALLOW_P2],  # a network error, then an answer
    7: 503,  # unreachable; an earlier copy is in Redis
    8: "drop",  # unreachable for longer than ROBOTSTXT_UNREACHABLE_ALLOW_AFTER
    9: HUGER,
}

ROUTES = {
    "/r1.txt": (302, {"Location": "/r2.txt"}, ""),
    "/r2.txt": (307, {"Location": "/r3.txt"}, ""),
    "/r3.txt": DISALLOW_P2,
    **{f"/loop{i}.txt": (301, {"Location": f"/loop{i + 1}.txt"}, "") for i in range(1, 9)},
}


def test_robots_answers_of_every_kind(redis_url, tmp_path):
    name = f"test-{uuid.uuid4().hex[:12]}"
    client = Redis.from_url(redis_url)
    with serve_site(hosts=10, pages=5, robots=ROBOTS, routes=ROUTES) as site:
        # host 7's robots.txt was fetched before, and its lifetime has passed
        stale = {
            "status": 200,
            "fetched": int((time.time() - LIFETIME - 60) * 1000),
            "body": zlib.compress(DISALLOW_P2.encode()),
            "fails": 0,
        }
        client.hset(Keys(name).robots(f"http://{site.hosts[7]}:{site.port}"), mapping=stale)
        seeds = seed_file(tmp_path, site.seeds)
        out = tmp_path / "pages.jsonl"
        settings = loopback_settings(
            name,
            tmp_path / "worker.log",
            FRONTIER_HOST_INTERVAL=0.1,
            ROBOTSTXT_CACHE_SECONDS=LIFETIME,
            ROBOTSTXT_RETRY_MIN=1,
            ROBOTSTXT_UNREACHABLE_ALLOW_AFTER=2,
            HOST_BACKOFF_MIN=1,
            DOWNLOAD_TIMEOUT=10,
            DOWNLOAD_MAXSIZE=2**20,
            LOG_LEVEL="INFO",
            STATS_DUMP=True,
        )
        env = clean_env()
        env["REDIS_URL"] = redis_url
        proc = subprocess.run(crawl_command(out, seeds, settings), cwd=ROOT, env=env, timeout=180)
        hits = site.hits()
    context = log_tail([tmp_path / "worker.log"], 40, "no log")
    try:
        assert proc.returncode == 0, context
        hosts = site.hosts
        fetched = {(hit.host, hit.path) for hit in hits}
        robots = Counter(hit.host for hit in hits if hit.path == "/robots.txt")

        def pages_of(i):
            return {path for host, path in fetched if host == hosts[i] and path.startswith("/p")}

        everything = {f"/p{i}.html" for i in range(5)}
        assert pages_of(0) == everything  # 404: all allowed
        # redirected three times to a body that disallows /p2.html
        assert {"/r1.txt", "/r2.txt", "/r3.txt"} <= {p for h, p in fetched if h == hosts[1]}
        assert pages_of(1) == everything - {"/p2.html"}
        # six redirects and more: unavailable, so everything is allowed
        assert pages_of(2) == everything
        # only the first 500 KiB count, also of one larger than DOWNLOAD_MAXSIZE (it was
        # cancelled unread, its host taken for unreachable, then given up)
        assert pages_of(3) == everything - {"/p2.html"}
        assert pages_of(9) == everything - {"/p2.html"} and robots[hosts[9]] == 1
        assert pages_of(4) == everything  # garbage parses to no rules
        # 429 and a dropped connection: nothing fetched until robots.txt answered
        for i in (5, 6):
            assert robots[hosts[i]] == 2, (i, robots)
            assert pages_of(i) == everything - {"/p2.html"}
            first_page = min(hit.start for hit in hits if hit.host == hosts[i] and hit.path != "/robots.txt")
            second_robots = sorted(hit.start for hit in hits if hit.host == hosts[i] and hit.path == "/robots.txt")[1]
            assert first_page > second_robots
        # unreachable for longer than allowed: tried again and again, then everything allowed
        assert robots[hosts[8]] >= 2
        assert pages_of(8) == everything
        # 503 with an earlier copy: the copy's rules hold
        assert robots[hosts[7]] >= 1  # tried again after ROBOTSTXT_RETRY_MIN
        assert pages_of(7) == everything - {"/p2.html"}

        pages = read_pages(out)
        disallowed = {page["url"] for page in pages if page["status"] == "robots_disallowed"}
        assert disallowed == {site.url(i, "/p2.html") for i in (1, 3, 5, 6, 7, 9)}
        stats = _stats(tmp_path / "worker.log")
        assert stats["robotstxt/disallowed"] == 6
        assert stats["robotstxt/stale_used"] >= 1
        assert stats["robotstxt/deferred"] >= 2
    finally:
        Frontier(client, name).clear()


def _stats(log: Path) -> dict:
    """The integer stats Scrapy dumps at the end of a crawl's log."""
    text = log.read_text()
    dump = text[text.rindex("Dumping Scrapy stats:") :]
    return {k: int(v) for k, v in re.findall(r"'([\w/.-]+)': (\d+),?\n", dump)}
