"""Metadata pipeline: a fetched HTML page's descriptive fields (crawler/page/metadata.py: title,
description, language, canonical, Open Graph, Twitter, times, JSON-LD and microdata
products, recipes and articles) in ``item["metadata"]``, a flat ``dict[str, str]`` (the
UrlStore's open metadata map: SQLite JSON, Cassandra ``map<text, text>``), and its
rel=canonical in ``item["canonical_url"]``.

Only pages with an HTTP status 200-299 and an HTML body are read (``is_html``). Every
other item passes through unchanged. Nothing raises out of the pipeline: each problem
the extraction met is counted as ``metadata/errors/<kind>`` (the kinds in
crawler/page/metadata.py), and two more: ``undeclared_field`` (the item class has no
``metadata`` / ``canonical_url`` field) and ``crashed`` (the page killed the page worker
reading it: no metadata). ``metadata/pages`` counts pages read and ``metadata/fields``
the fields they gave.

The extraction runs in a page worker process (crawler/page/workers.py, PAGE_PROCESSES):
the broad spider's page reading (crawler/page/reader.py) brings it with the Page; for
other spiders' items this pipeline has it done.
"""

from __future__ import annotations

import logging
from functools import partial

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from crawler.page.decode import is_html
from crawler.page.metadata import extract_metadata
from crawler.page.workers import PageWorkerCrashed
from crawler.services import services
from crawler.urls import url_options

__all__ = ["MetadataPipeline", "extract_metadata", "is_html"]

logger = logging.getLogger(__name__)


# -- the pipeline --------------------------------------------------------------------------


class MetadataPipeline:
    def __init__(self, crawler, max_field_length: int, max_fields: int, max_bytes: int, url_opts: dict):
        self.stats = crawler.stats
        self.pages = services(crawler).pages  # (the spider's reading of a page)
        self.workers = services(crawler).page_workers
        # picklable (a module-level function), for the page workers
        self._extract = partial(
            extract_metadata,
            max_field_length=max_field_length,
            max_fields=max_fields,
            max_bytes=max_bytes,
            url_options=url_opts,
        )
        self._warned = False

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("METADATA_ENABLED"):
            raise NotConfigured
        return cls(
            crawler,
            s.getint("METADATA_MAX_FIELD_LENGTH"),
            s.getint("METADATA_MAX_FIELDS"),
            s.getint("METADATA_MAX_BYTES"),
            url_options(s),
        )

    def open_spider(self, spider=None):
        self.workers.start()

    async def process_item(self, item, spider=None):
        page = self._html_page(item)
        if page is None:
            return item
        reading = self.pages.reading(item)  # the broad spider's (crawler/page/reader.py)
        if reading is not None:
            return self._apply(item, page[1], reading.metadata, reading.problems)
        # the extraction runs in a page worker (crawler/page/workers.py); the item and the
        # stats are touched here
        try:
            found = await maybe_deferred_to_future(self.workers.run(self._extract, *page))
        except PageWorkerCrashed:  # the page killed its worker
            found = {}, ["crashed"]
        return self._apply(item, page[1], *found)

    def process_now(self, item):
        """``process_item`` in the calling thread (tests, benchmarks)."""
        page = self._html_page(item)
        if page is None:
            return item
        reading = self.pages.reading(item)
        if reading is not None:
            return self._apply(item, page[1], reading.metadata, reading.problems)
        return self._apply(item, page[1], *self._extract(*page))

    def _html_page(self, item) -> tuple[bytes, str, dict] | None:
        """(body, final URL, headers) of a 2xx HTML page, else None."""
        status = item.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 200 <= status <= 299:
            return None
        body = item.get("body")
        headers = item.get("headers") or {}
        if not isinstance(body, (bytes, bytearray)) or not is_html(headers, body):
            return None
        return body, item.get("final_url") or item.get("url") or "", headers

    def _apply(self, item, url: str, metadata: dict[str, str], problems: list[str]):
        self.stats.inc_value("metadata/pages")
        self.stats.inc_value("metadata/fields", len(metadata))
        for kind in problems:
            self.stats.inc_value(f"metadata/errors/{kind}")
        if problems:
            logger.debug("Metadata of %s: problems %s", url, ", ".join(problems))
        earlier = item.get("metadata")
        try:
            item["metadata"] = {**earlier, **metadata} if isinstance(earlier, dict) else metadata
            if "canonical" in metadata:
                item["canonical_url"] = metadata["canonical"]
        except KeyError:  # an Item class without these fields
            self.stats.inc_value("metadata/errors/undeclared_field")
            if not self._warned:
                self._warned = True
                logger.warning(
                    "%s has no 'metadata' or 'canonical_url' field: page metadata is not kept",
                    type(item).__name__,
                )
        return item
