"""Scrapy's log formatter (LOG_FORMATTER), except that a dropped item is named by its URL
rather than printed whole: a page's item holds its body, links and metadata. A store
that is away drops (and refetches) every page it cannot take: those drops are one line
every NOT_STORED_EVERY seconds, with how many there were since the last."""

from __future__ import annotations

import time

from scrapy import logformatter

from crawler.exceptions import StoreUnavailable

NOT_STORED_EVERY = 30.0  # seconds between two lines about pages not stored


class LogFormatter(logformatter.LogFormatter):
    def __init__(self):
        super().__init__()
        self._not_stored = 0  # pages not stored since the last line about them
        self._next_not_stored = 0.0

    def dropped(self, item, exception, response, spider):
        entry = super().dropped(item, exception, response, spider)
        url = item.get("url") if hasattr(item, "get") else None
        if not url:
            return entry
        entry["args"] = {"url": url, "exception": exception}
        if not isinstance(exception, StoreUnavailable):
            entry["msg"] = "Dropped %(url)s: %(exception)s"
            return entry
        self._not_stored += 1
        now = time.monotonic()
        if now < self._next_not_stored:
            return None
        self._next_not_stored = now + NOT_STORED_EVERY
        entry["msg"] = "Dropped %(url)s, its lease given back (fetched again later): %(exception)s"
        if self._not_stored > 1:
            entry["msg"] += "; %(count)d pages not stored since the last such line"
            entry["args"]["count"] = self._not_stored
        self._not_stored = 0
        return entry
