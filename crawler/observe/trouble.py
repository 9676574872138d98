"""What a worker's stores are going through: the last failure of each store (the archive,
the UrlStore) that has not yet been followed by a success, so that a worker waiting for its
stores (crawler/scheduler/pacing.py) says which one and why ("the archive: S3 503 SlowDown,
failing since 10:42:07"): in its log line, ``scrapy frontier``, the API and the dashboard.

Called on the reactor thread (a store's thread hands its news over with callFromThread)."""

from __future__ import annotations

ARCHIVE = "the archive"
URLSTORE = "the UrlStore"


class StoreTrouble:
    def __init__(self):
        self._failing: dict[str, tuple[str, float]] = {}  # store -> (why, failing since)

    def failed(self, store: str, why: str, now: float) -> None:
        """``store`` failed (``why``: a few words, e.g. ``S3 503 SlowDown``) at ``now``; it
        stays failing until ``stored``."""
        since = self._failing.get(store, (why, now))[1]
        self._failing[store] = (why, since)

    def stored(self, store: str) -> None:
        """``store`` took a write again."""
        self._failing.pop(store, None)

    def worst(self) -> dict | None:
        """The store failing the longest: ``{"store", "why", "failing_since"}``; None when
        every store takes its writes."""
        if not self._failing:
            return None
        store, (why, since) = min(self._failing.items(), key=lambda item: item[1][1])
        return {"store": store, "why": why, "failing_since": since}
