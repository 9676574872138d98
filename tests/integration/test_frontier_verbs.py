"""The single and the sharded frontier both satisfy the frontier's verbs
(crawler/frontier/verbs.py): every verb there, with every parameter it names: the tests on
real services in this process (Redis, Cassandra, S3, page processes) (the others:
tests/unit/test_frontier_verbs.py)."""

from crawler.frontier.frontier import Frontier
from crawler.frontier.shards import ShardedFrontier
from crawler.frontier.verbs import FrontierVerbs


def test_both_are_frontiers_at_run_time(redis_client, crawl_name):
    single = Frontier(redis_client, crawl_name)
    sharded = ShardedFrontier([Frontier(redis_client, crawl_name, shard=0)], ["a"])
    try:
        assert isinstance(single, FrontierVerbs) and isinstance(sharded, FrontierVerbs)
    finally:
        single.clear()
        sharded.clear()
