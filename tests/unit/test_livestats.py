"""Live stats (crawler/observe/livestats.py): the buckets and the reader on plain values, the
extension of an in-process crawler fed signals and stats (flushes, no double counts, a Redis
that goes away and comes back), and a real crawl's numbers afterwards: the unit tests (pure:
no service, no process) (the others: tests/integration/test_livestats.py,
tests/e2e/test_livestats.py)."""

from __future__ import annotations

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.config.validation import problems
from crawler.extensions.livestats import LiveStats
from crawler.spiders.broad import BroadSpider
from testing.services import project_settings


def test_off_when_the_interval_is_zero():
    crawler = get_crawler(BroadSpider, project_settings(LIVE_STATS_INTERVAL=0))
    assert not any(isinstance(e, LiveStats) for e in crawler.extensions.middlewares)
    with pytest.raises(NotConfigured):
        LiveStats.from_crawler(crawler)
    assert not problems(Settings(project_settings()))  # the default, 2 s
    for bad in (-1, 11, "x"):
        assert [p.split(":")[0] for p in problems(Settings(project_settings(LIVE_STATS_INTERVAL=bad)))] == [
            f"LIVE_STATS_INTERVAL={str(bad)!r}"
        ]
