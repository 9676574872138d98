"""The crawl's scope as one value (crawler/scope/scope.py): what it lets in, why it refuses the
rest, and its form in Redis, which `scrapy submit` reads: the tests on real services in this
process (Redis, Cassandra, S3, page processes) (the others: tests/unit/test_crawl_scope.py)."""

import os
import time

from crawler.frontier import codec
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.keys import Keys
from crawler.frontier.submit import Submission, publish_scope, read_scope, submit, use_published_scope
from crawler.frontier.words import ADDED
from crawler.scope.reasons import OUT_OF_SCOPE, PRIVATE_ADDRESS, REJECTED
from crawler.scope.rules import CrawlRules, RulesWatch
from crawler.scope.scope import CrawlScope
from crawler.scope.traps import TrapGuard
from crawler.seeds.ingest import ingest


def test_published_is_read_back_and_an_unreadable_one_is_none(redis_client, crawl_name):
    keys = Keys(crawl_name)
    assert read_scope(redis_client, keys) is None
    publish_scope(redis_client, keys, CrawlScope(domains=("a.example",)))
    assert read_scope(redis_client, keys).domains == ("a.example",)
    publish_scope(redis_client, keys, CrawlScope())  # a later worker's: nothing of the first stays
    assert read_scope(redis_client, keys) == CrawlScope()
    redis_client.hset(keys.scope, "domains", "not json")
    assert read_scope(redis_client, keys) is None


def test_every_url_offered_gets_the_scopes_verdict_at_admission(redis_client, crawl_name, tmp_path):
    """Seeds, links, submissions and recrawls all pass Frontier.prepare, which asks the
    scope: what it refuses never reaches Redis, and put answers with the reason's code."""
    rules = tmp_path / "rules.txt"
    rules.write_text("reject regex /private/\n")
    watch = RulesWatch(str(rules), every=0.0)
    frontier = Frontier(redis_client, crawl_name, rules=watch)
    frontier.use_scope(CrawlScope(domains=("a.example", "10.0.0.1"), traps=TrapGuard(max_depth=2)))

    def offered(url, **fields):
        return frontier.put([Entry(url=url, payload=codec.encode_url(url), **fields)], now=0)[0]

    assert offered("http://a.example/1", depth=2) == ADDED  # a link
    assert offered("http://b.example/1", depth=1) == OUT_OF_SCOPE
    assert offered("http://a.example/2", depth=3) == "trap:depth"
    assert offered("http://a.example/private/1") == REJECTED
    assert offered("http://10.0.0.1/") == ADDED  # a link: the guard holds it at fetch
    assert offered("http://10.0.0.1/x", outside=True) == PRIVATE_ADDRESS  # a seed, a submission
    assert offered("http://b.example/r", follow_up=True) == ADDED  # a retry: admitted before
    # the crawl rules as they change: a recrawl (dont_filter) of a URL now rejected is not queued
    rules.write_text("reject host a.example\n")
    os.utime(rules, (time.time() + 5, time.time() + 5))
    assert offered("http://a.example/1", dont_filter=True) == REJECTED
    assert frontier.stats()["queued"] == 3

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://10.0.0.1/s\nhttp://c.example/\nhttp://a.example/z\n")
    report = ingest(frontier, [seeds])
    assert (report.added, report.refused) == (0, 3)
    assert report.refused_by == {PRIVATE_ADDRESS: 1, OUT_OF_SCOPE: 1, REJECTED: 1}
    assert submit(frontier, [Submission("http://c.example/")], {}) == [("http://c.example/", OUT_OF_SCOPE)]


def test_a_command_holds_what_it_offers_to_the_scope_the_workers_published(redis_client, crawl_name, tmp_path):
    """scrapy seed, submit and recrawl: the running workers' scope, rules and guard included,
    over the command's own settings."""
    frontier = Frontier(redis_client, crawl_name)
    assert use_published_scope(frontier) == CrawlScope()  # none published: the command's own
    rules = CrawlRules.parse("reject regex /old/\n", "rules.txt")
    published = CrawlScope(
        domains=("a.example",), rules=rules, guard_allow=("10.0.0.0/8",), traps=TrapGuard(max_depth=1)
    )
    publish_scope(redis_client, Keys(crawl_name), published)
    frontier = Frontier(redis_client, crawl_name)
    assert use_published_scope(frontier).fields() == published.fields()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\nhttp://b.example/\nhttp://a.example/old/\nhttp://10.1.1.1/\n")
    report = ingest(frontier, [seeds])  # (10.1.1.1: past the guard, outside the domains)
    assert report.added == 1 and report.refused_by == {OUT_OF_SCOPE: 2, REJECTED: 1}
