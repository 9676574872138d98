"""An item pipeline for tests: one that takes a while to open, as a store slow to answer
at a worker's start does (``TEST_PIPELINE_OPEN_SECONDS``, 1.5 s unless set)."""

from __future__ import annotations

import asyncio
import logging

logger = logging.getLogger(__name__)


class SlowToOpen:
    def __init__(self, seconds: float):
        self.seconds = seconds

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getfloat("TEST_PIPELINE_OPEN_SECONDS", 1.5))

    async def open_spider(self, spider=None):
        await asyncio.sleep(self.seconds)
        logger.info("SlowToOpen opened after %.1f s", self.seconds)

    def process_item(self, item, spider=None):
        return item
