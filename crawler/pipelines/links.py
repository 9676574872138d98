"""Follow links after content seen (Mercator's order): a page's outlinks enter the
frontier from this pipeline, which runs right after the content-seen pipeline, so that
the links of an exact copy are not followed again (they were followed from the first
copy); those of a near copy are, unless CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES is off. Links
marked nofollow, and links outside the spider's allowed domains and prefixes (the broad
spider's ``scope``, crawler/scope/scope.py, or another spider's ``in_scope``), are not
followed (counted as ``links/out_of_scope``). Each followed link is a request one level
deeper than its page, with the page's URL as Referer; the frontier then holds it to the
whole scope (the crawl rules, the trap guards: Frontier.prepare) and to URL-seen. The
frontier takes a page's links as plain URLs, through the worker's frontier client
(``services(crawler).frontier_client.offer_links``: the links are normalized already); with
another scheduler (no frontier client) each becomes a Request.
"""

from __future__ import annotations

from scrapy import Request

from crawler import meta
from crawler.items import Page
from crawler.scope.scope import CrawlScope
from crawler.services import services


class FollowLinksPipeline:
    def __init__(self, crawler):
        self.crawler = crawler
        self.stats = crawler.stats
        self.follow_near = crawler.settings.getbool("CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES")

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_item(self, item, spider=None):
        if not isinstance(item, Page) or not item.get("outlinks"):
            return item
        if item.get("duplicate_of"):
            self.stats.inc_value("links/duplicate_page_not_followed")
            return item
        if item.get("near_duplicate_of") and not self.follow_near:
            self.stats.inc_value("links/near_duplicate_page_not_followed")
            return item
        spider = self.crawler.spider
        errback = getattr(spider, "errback", None)
        referer = item.get("final_url") or item["url"]
        depth = (item.get("depth") or 0) + 1
        urls = [link["url"] for link in item["outlinks"] if not link.get("nofollow")]
        scope = getattr(spider, "scope", None)  # the broad spider's CrawlScope
        if isinstance(scope, CrawlScope):
            inside = [url for url in urls if scope.within(url)]
            if len(inside) < len(urls):  # counted here, once per page
                self.stats.inc_value("links/out_of_scope", len(urls) - len(inside))
            urls = inside
        elif getattr(spider, "in_scope", None) is not None:  # another spider's own test
            urls = [url for url in urls if spider.in_scope(url)]
        if not urls:
            return item
        self.stats.inc_value("links/followed", len(urls))
        client = services(self.crawler).frontier_client
        if client is not None:
            client.offer_links(urls, depth, referer, item.get("importance") or 0.0)
            return item
        for url in urls:
            self.crawler.engine.crawl(
                Request(url, errback=errback, headers={"Referer": referer}, meta={meta.DEPTH: depth})
            )
        return item
