"""The crawl's scope as one value (crawler/scope/scope.py): what it lets in, why it refuses the
rest, and its form in Redis, which `scrapy submit` reads: the tests on real services in this
process (Redis, Cassandra, S3, page processes) (the others: tests/unit/test_crawl_scope.py)."""

from crawler.frontier.keys import Keys
from crawler.frontier.submit import publish_scope, read_scope
from crawler.scope.scope import CrawlScope


def test_published_is_read_back_and_an_unreadable_one_is_none(redis_client, crawl_name):
    keys = Keys(crawl_name)
    assert read_scope(redis_client, keys) is None
    publish_scope(redis_client, keys, CrawlScope(domains=("a.example",)))
    assert read_scope(redis_client, keys).domains == ("a.example",)
    publish_scope(redis_client, keys, CrawlScope())  # a later worker's: nothing of the first stays
    assert read_scope(redis_client, keys) == CrawlScope()
    redis_client.hset(keys.scope, "domains", "not json")
    assert read_scope(redis_client, keys) is None
