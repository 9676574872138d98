"""What the crawl yields: one Page per fetched (or failed) URL."""

from __future__ import annotations

import base64

import scrapy


def _b64(body):
    return base64.b64encode(body).decode("ascii") if body else ""


class Page(scrapy.Item):
    url = scrapy.Field()  # the URL that was requested (before redirects)
    final_url = scrapy.Field()  # the URL the body came from
    redirect_chain = scrapy.Field()  # URLs before final_url, in order
    status = scrapy.Field()  # HTTP status, or None when the fetch failed
    error = scrapy.Field()  # why the fetch failed, else None
    headers = scrapy.Field()  # {name: [values]} of the final response
    body = scrapy.Field(serializer=_b64)  # raw bytes (base64 in feed exports)
    fetch_latency = scrapy.Field()  # seconds, from request sent to response received
    depth = scrapy.Field()
    importance = scrapy.Field()  # FRONTIER_ORDER importance: the cash its links share (none otherwise)
    referrer = scrapy.Field()
    outlinks = scrapy.Field()  # [{"url", "text", "nofollow"}], normalized, in page order
    fetched_at = scrapy.Field()  # UNIX time
    method = scrapy.Field()  # of the request
    request_headers = scrapy.Field()  # {name: [values]} the request was sent with
    protocol = scrapy.Field()  # "HTTP/1.1"
    ip_address = scrapy.Field()  # the server's address, when known
    archive = scrapy.Field()  # {"key", "offset", "length"} of its WARC record (archive pipeline)
    content_digest = scrapy.Field()  # "sha1:<hex>" of the body (content-seen pipeline)
    simhash = scrapy.Field()  # 64-bit SimHash of the main text's words
    duplicate_of = scrapy.Field()  # URL of the first page with the same body (an exact copy)
    duplicate_fetched_at = scrapy.Field()  # UNIX time that first page was fetched (when known)
    near_duplicate_of = scrapy.Field()  # URL of the indexed page whose main text this one nearly repeats
    resemblance = scrapy.Field()  # share of the main text's words in common with near_duplicate_of
    canonical_url = scrapy.Field()  # rel=canonical (metadata pipeline), normalized
    metadata = scrapy.Field()  # {name: text} (metadata pipeline)
    recrawl = scrapy.Field()  # a recrawl's stored state (meta.RECRAWL); absent on a first fetch
    sitemap = scrapy.Field()  # {"changefreq", "lastmod"} its sitemap gave; absent when not from one


def storing(page):
    """The Deferred that fires once the page's data is durably stored (its WARC batch,
    then its UrlStore archive pointer), or None when nothing of it is still being stored.
    The page leaves the item pipelines before that (Scrapy holds no response for it
    meanwhile), and its lease is acknowledged only after (crawler/middlewares/lease.py).
    Not a field: never exported."""
    return getattr(page, "_storing", None)


def set_storing(page, d) -> None:
    """Mark the page as being stored until ``d`` fires (the archive pipeline; later
    pipelines chain their own writes on ``d``)."""
    page._storing = d
