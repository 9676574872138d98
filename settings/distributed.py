"""Production profile: services from the environment, workers wait for new work.

REDIS_URL       the shared frontier, e.g. redis://redis.internal:6379/0
CRAWL_NAME      the crawl these workers work on
"""

import os

from settings.base import *  # noqa: F403

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
FRONTIER_CLOSE_WHEN_IDLE = os.environ.get("FRONTIER_CLOSE_WHEN_IDLE", "") in ("1", "true", "yes")
LOGSTATS_INTERVAL = 60.0
RECRAWL_CHECK_INTERVAL = 300.0  # one worker at a time puts the URLs that are due back into the frontier
