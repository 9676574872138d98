"""The crawl's scope in its Redis (``scope``, a hash on the first shard, beside the
submission list): each worker writes its own at start and again when its crawl rules
change (crawler/extensions/submissions.py), so that ``scrapy submit``, run anywhere,
holds a URL to the scope of the workers that would fetch it. The last worker to write
it sets it: the workers of a crawl are meant to share one scope."""

from __future__ import annotations

import logging

from crawler.frontier.keys import Keys
from crawler.scope.scope import CrawlScope

logger = logging.getLogger(__name__)


def publish(client, keys: Keys, scope: CrawlScope) -> None:
    """Write ``scope`` as the crawl's (every field, so none of an earlier one stays)."""
    client.hset(keys.scope, mapping=scope.fields())


def read(client, keys: Keys) -> CrawlScope | None:
    """The scope the crawl's workers published; None when none did, or when what is there
    cannot be read (logged)."""
    fields = client.hgetall(keys.scope)
    if not fields:
        return None
    try:
        return CrawlScope.from_fields(fields)
    except ValueError as exc:
        logger.warning("The crawl's published scope cannot be read (%s); using this command's settings", exc)
        return None
