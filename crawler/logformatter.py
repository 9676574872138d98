"""Scrapy's log formatter (LOG_FORMATTER), except that a dropped item is named by its URL
rather than printed whole: a page's item holds its body, links and metadata, and a store
that is away drops (and refetches) every page it cannot take."""

from __future__ import annotations

from scrapy import logformatter

from crawler.exceptions import StoreUnavailable


class LogFormatter(logformatter.LogFormatter):
    def dropped(self, item, exception, response, spider):
        entry = super().dropped(item, exception, response, spider)
        url = item.get("url") if hasattr(item, "get") else None
        if url:
            again = ", its lease given back (fetched again later)" if isinstance(exception, StoreUnavailable) else ""
            entry["msg"] = "Dropped %(url)s" + again + ": %(exception)s"
            entry["args"] = {"url": url, "exception": exception}
        return entry
