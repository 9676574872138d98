"""The garbage-collection extension: start-up objects frozen, full passes rarer."""

import gc

from scrapy import signals
from scrapy.utils.test import get_crawler

from crawler.extensions.memory import GarbageCollection
from crawler.spiders.broad import BroadSpider
from testing.services import project_settings


def test_engine_start_freezes_what_exists_and_makes_full_passes_rarer():
    before = gc.get_threshold()
    crawler = get_crawler(BroadSpider, project_settings())
    GarbageCollection.from_crawler(crawler)
    try:
        startup = [object() for _ in range(10)], {"made": "before the engine started"}
        crawler.signals.send_catch_log(signal=signals.engine_started)
        assert gc.get_freeze_count() > 0
        assert not any(o is startup for o in gc.get_objects())  # out of every pass
        assert gc.get_threshold() == (before[0], before[1], GarbageCollection.FULL_EVERY)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_live_line_counts_304s_as_pages_kept_not_errors(caplog):
    """A recrawl's 304 (fate not_modified) is a page kept, as the closing summary says: the
    periodic line counted 40 of them as 40 errors."""
    import logging
    import types

    from scrapy.settings import Settings
    from scrapy.statscollectors import MemoryStatsCollector

    from crawler.extensions.summary import FrontierStats
    from crawler.items import Page

    stats = MemoryStatsCollector(types.SimpleNamespace(settings=Settings()))
    ext = FrontierStats(types.SimpleNamespace(settings=Settings({"FRONTIER_MAX_WAIT": 30}), stats=stats), 60)
    for status in [304] * 40 + [200] * 10 + [503] * 2:
        ext.item_scraped(Page(url="http://a.example/", status=status))
    seen = {"urls": 52, "fill": [0.0], "false_positive_rate": 0.0}
    numbers = {"queued": 0, "hosts_queued": 0, "hosts_due": 0, "leased": 0, "seen": seen, "acked_last_minute": 52}
    ext._frontier = lambda: types.SimpleNamespace(stats=lambda: numbers)
    with caplog.at_level(logging.INFO):
        ext.log()
    assert "52 pages, 2 errors (server_error 2)" in caplog.text, caplog.text
