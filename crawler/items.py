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


class PageStates:
    """What goes along with a page through the item pipelines that is no field of it (never
    exported), kept here rather than hidden on the item, so that a pipeline that copies the
    item (``ItemAdapter(item).asdict()``, ``item.copy()``) keeps it too: the page's reading
    (the broad spider's, crawler/page/reader.py: its links, fingerprints and metadata, read
    once) and, while its data is being stored, ``storing``: the Deferred that fires once its
    WARC batch, then its UrlStore archive pointer, are stored (the page leaves the pipelines
    before that, and its lease is acknowledged only after: crawler/middlewares/lease.py).
    A page is known by its URL and fetch time, which every copy of it has; ``take`` ends
    what is kept of it (the lease middleware, as the page leaves the pipelines). At most
    ``limit`` pages are kept, the oldest forgotten first (pages whose end nothing takes)."""

    def __init__(self, limit: int = 10_000):
        self.limit = limit
        self._pages: dict[tuple, dict] = {}

    @staticmethod
    def _key(page) -> tuple:
        return (page.get("url"), page.get("fetched_at"))

    def _state(self, page) -> dict:
        key = self._key(page)
        state = self._pages.get(key)
        if state is None:
            if len(self._pages) >= self.limit:
                del self._pages[next(iter(self._pages))]
            state = self._pages[key] = {}
        return state

    def set_reading(self, page, reading) -> None:
        self._state(page)["reading"] = reading

    def reading(self, page):
        """The spider's reading of the page, or None (another spider's page, or not read)."""
        return self._pages.get(self._key(page), {}).get("reading")

    def set_storing(self, page, d) -> None:
        """The page is being stored until ``d`` fires (the archive pipeline; later
        pipelines chain their own writes on ``d``)."""
        self._state(page)["storing"] = d

    def storing(self, page):
        """The Deferred that fires once the page's data is stored, or None."""
        return self._pages.get(self._key(page), {}).get("storing")

    def take(self, page):
        """The page leaves the pipelines: its ``storing`` (or None), and nothing more is kept."""
        return self._pages.pop(self._key(page), {}).get("storing")
