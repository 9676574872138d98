"""Follow links after content seen (Mercator's order): a page's outlinks enter the
frontier from this pipeline, which runs right after the content-seen pipeline, so that
the links of an exact copy are not followed again (they were followed from the first
copy); those of a near copy are, unless CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES is off. Links
marked nofollow, and links the spider's ``in_scope`` rejects, are not
followed. Each followed link is a request one level deeper than its page, with the
page's URL as Referer; the frontier then applies URL-seen and the trap guards. The
frontier scheduler takes a page's links as plain URLs (``enqueue_links``: the links are
normalized already); with another scheduler each becomes a Request.
"""

from __future__ import annotations

import inspect

from scrapy import Request

from crawler import meta
from crawler.items import Page


class FollowLinksPipeline:
    def __init__(self, crawler):
        self.crawler = crawler
        self.stats = crawler.stats
        self.follow_near = crawler.settings.getbool("CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES")
        self.scope_counts = False  # set at open_spider

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def open_spider(self, spider=None):
        in_scope = getattr(self.crawler.spider, "in_scope", None)
        # the broad spider's in_scope leaves the counting to its caller (count=False)
        self.scope_counts = in_scope is not None and "count" in inspect.signature(in_scope).parameters

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
        in_scope = getattr(spider, "in_scope", None)
        errback = getattr(spider, "errback", None)
        referer = item.get("final_url") or item["url"]
        depth = (item.get("depth") or 0) + 1
        urls = [link["url"] for link in item["outlinks"] if not link.get("nofollow")]
        if in_scope is not None:
            if self.scope_counts:  # counted here, once per page
                inside = [url for url in urls if in_scope(url, count=False)]
                if len(inside) < len(urls):
                    self.stats.inc_value("links/out_of_scope", len(urls) - len(inside))
            else:
                inside = [url for url in urls if in_scope(url)]
            urls = inside
        if not urls:
            return item
        self.stats.inc_value("links/followed", len(urls))
        engine = self.crawler.engine
        enqueue_links = getattr(engine.scheduler, "enqueue_links", None)
        if enqueue_links is not None:
            enqueue_links(urls, depth, referer, item.get("importance") or 0.0)
            return item
        for url in urls:
            engine.crawl(Request(url, errback=errback, headers={"Referer": referer}, meta={meta.DEPTH: depth}))
        return item
