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
