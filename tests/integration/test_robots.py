"""robots.txt answers a crawler meets (RFC 9309), in one real crawl: redirects, too many
redirects, a body over 500 KiB, garbage, 429 with Retry-After, a dropped connection, and an
earlier copy used while the site answers 503; the parsed rules a worker keeps, bounded in
bytes: the tests on real services in this process (Redis, Cassandra, S3, page processes)
(the others: tests/unit/test_robots.py, tests/e2e/test_robots.py)."""

import asyncio
import time
import zlib

from redis import Redis
from scrapy.utils.test import get_crawler

from crawler.middlewares.robots import RobotsMiddleware
from crawler.services import services
from testing.services import project_settings

DISALLOW_P2 = "User-agent: *\nDisallow: /p2.html\n"


def test_the_parsed_rules_a_worker_keeps_are_bounded_in_bytes(redis_url, crawl_name):
    """A worker keeps ROBOTSTXT_CACHE_BYTES of parsed rules at most (Protego's rules are
    ~24 bytes per character of robots.txt): the sites of large files are read from Redis
    again when their turn comes back, those of small ones stay in memory."""
    crawler = get_crawler(
        settings_dict=project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name, ROBOTSTXT_CACHE_BYTES=2**21)
    )
    mw = RobotsMiddleware.from_crawler(crawler)
    keys, client = services(crawler).frontier.keys, Redis.from_url(redis_url)
    large = "User-agent: *\n" + "".join(f"Disallow: /private/{i}/*?session={i}\n" for i in range(1500))
    small = DISALLOW_P2

    def site(origin: str, text: str) -> str:
        fields = {"status": 200, "fetched": int(time.time() * 1000), "body": zlib.compress(text.encode())}
        client.hset(keys.robots(origin), mapping=fields)
        return origin

    def read(origins) -> int:
        """Redis reads of the rules of ``origins``, asked for in turn."""
        before = crawler.stats.get_value("robotstxt/shared", 0)
        for origin in origins:
            assert not asyncio.run(mw.rules(origin)).allowed(origin + "/private/1/x?session=1", "crawler")
        return crawler.stats.get_value("robotstxt/shared", 0) - before

    large_sites = [site(f"http://large{i}.example", large) for i in range(20)]
    small_sites = [site(f"http://small{i}.example", small.replace("/p2.html", "/private/")) for i in range(100)]
    assert read(small_sites) == 100
    assert read(small_sites) == 0  # all kept
    assert read(large_sites) == 20
    assert read(large_sites) == 20  # two at most fit: each read again
    held = crawler.stats.get_value("robotstxt/cache_bytes")
    print(f"rules held: {held / 2**20:.1f} MB of {len(large) / 1024:.0f} KB robots.txt files")
    assert 2**20 < held <= 2**21
