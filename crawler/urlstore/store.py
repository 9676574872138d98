"""The UrlStore: what the crawl knows about every URL (Aragog's UrlStore).

One small interface, two backends: SQLite (sqlite.py, a file in the crawl directory,
the embedded default) and Cassandra (cassandra.py, production). Both keep one contract,
tested by tests/*/test_urlstore.py against each.

The model, keyed by normalized URL (``FetchRecord``): canonical_url (rel=canonical, or
the first page of an exact copy); near_duplicate_of and resemblance (the page whose main
text this one nearly repeats, and how much of it); the fetch status
(HTTP status, fate, fetched_at, error, next fetch due); the redirect chain; the content
digest and simhash; an open map of metadata fields, updated a few at a time; the archive
pointer (key, offset, length of the page's WARC record); the outlinks. Inlinks live in
their own table keyed by target URL, spread over URLSTORE_INLINK_BUCKETS partitions per
target so that a very popular target does not make one huge partition.

Every URL's fate is recorded, not only successes (``fate``): ``fetched`` (any HTTP
answer), ``robots_disallowed``, ``refused`` (network guard), ``dns_error``, ``timeout``,
``connection_error``, ``error`` (anything else), and ``duplicate`` for a page whose
body was seen before (its canonical_url names the first copy). A near copy's fate is
``fetched``: it was read and archived like any page.

Writes return a ``concurrent.futures.Future`` (the page's lease is acknowledged once its
writes are done); reads are plain calls (the ``scrapy urlstore`` command, and
``last_fetched``, which the workers' fetch policy asks before each batch of URLs is
fetched: crawler/freshness/policy.py).
URLs are normalized on the way in, and ``get`` follows canonical_url (never
near_duplicate_of: a near copy is a page of its own).
"""

from __future__ import annotations

from concurrent.futures import Future

from crawler.urls import InvalidURL, normalize_url
from crawler.urlstore.record import MAX_CANONICAL_HOPS, ArchivePointer, FetchRecord


class UrlStore:
    """The interface; see sqlite.py and cassandra.py. ``normalize`` options come from
    crawler.urls.url_options(settings)."""

    def __init__(self, url_options: dict | None = None, inlink_buckets: int = 16):
        self.url_options = url_options or {}
        self.inlink_buckets = inlink_buckets

    # -- writes (asynchronous) ----------------------------------------------------------

    def record_fetch(self, record: FetchRecord) -> Future:
        """Store a URL's fetch result (replacing the previous one; metadata fields are
        merged), and an inlink for each outlink."""
        raise NotImplementedError

    def update_metadata(self, url: str, fields: dict[str, str]) -> Future:
        """Set some metadata fields of a URL, leaving the others as they are."""
        raise NotImplementedError

    def set_archive(self, url: str, archive: ArchivePointer, fetched_at: float) -> Future:
        """Set the archive pointer of a URL's record, leaving the rest as it is (called
        once the object holding the page's WARC record is stored, after the record
        itself was written); ``fetched_at``: the capture's fetch time. The pointer of a
        capture older than the record's last answer is not written (a batch stored late,
        after the URL was fetched again: record.ARCHIVE_AT)."""
        raise NotImplementedError

    def reschedule(
        self,
        url: str,
        next_fetch_at: float | None,
        fetched_at: float | None = None,
        fetch_interval: float | None = None,
        put_at: float | None = None,
    ) -> Future:
        """Set when ``url`` is due again (and, when given, when it was fetched and its
        interval, and when a recrawl pass put it back: ``put_at``, 0 for never), leaving the
        rest of its record as it is: a 304's answer (the page, its metadata and archive
        pointer unchanged), or a URL put back into the frontier (not put again before
        ``next_fetch_at``, nor by a pass by fetch time before it is fetched or its hold
        ends: ``due``'s ``put_since``). Only for a URL that has a record."""
        raise NotImplementedError

    # -- reads --------------------------------------------------------------------------

    def due(
        self,
        before: float,
        limit: int = 1000,
        after: tuple | None = None,
        host: str | None = None,
        fetched_before: float | None = None,
        put_since: float | None = None,
    ) -> tuple[list[dict], tuple | None]:
        """A page of the URLs due by ``before`` (next_fetch_at at or before it), or with
        ``fetched_before`` of those fetched at or before that time whatever their due time,
        but those a pass put back at ``put_since`` or later and not fetched since
        (``record.put_again``); ``host``: only that host's. Each: url, next_fetch_at,
        fetched_at, fetch_interval, content_digest, etag, last_modified, put_at. At most
        ``limit`` rows, and the cursor to pass as ``after`` for the next page (None: no
        more)."""
        raise NotImplementedError

    def _row(self, url: str) -> dict | None:
        """The stored row of a normalized URL, as FetchRecord.as_dict() gives it."""
        raise NotImplementedError

    def _inlinks(self, url: str, limit: int, after: str | None = None) -> list[dict]:
        """Links to a normalized URL by source URL, those after ``after`` only."""
        raise NotImplementedError

    # -- get and get_many: their steps without I/O, run by a blocking or an asyncio reader

    #: the store reads without a thread on an asyncio loop (``aget``, ``aget_many``); else
    #: a server runs ``get`` and ``get_many`` in a thread
    reads_async = False

    def get(self, url: str, follow_canonical: bool = True, normalize: bool = True) -> dict | None:
        """The record of ``url`` (normalized first, unless ``normalize`` is false: the
        URL's own row, as stored); with follow_canonical, the record of its canonical URL
        when one is known and stored (``requested_url`` says which URL was asked for).
        None when the URL is unknown."""
        return _read_through(self._get_steps(url, follow_canonical, normalize), self._read)

    def get_many(self, urls: list[str]) -> list[dict | None]:
        """``get`` of each of ``urls`` (normalized, canonical URLs followed), in order; a
        backend that reads several rows at once (``_rows``) reads each hop's rows at once."""
        return _read_through(self._get_many_steps(urls), self._read)

    async def aget(self, url: str, follow_canonical: bool = True, normalize: bool = True) -> dict | None:
        """``get`` on the running asyncio loop (a store that ``reads_async``)."""
        return await _aread_through(self._get_steps(url, follow_canonical, normalize), self._aread)

    async def aget_many(self, urls: list[str]) -> list[dict | None]:
        """``get_many`` on the running asyncio loop (a store that ``reads_async``)."""
        return await _aread_through(self._get_many_steps(urls), self._aread)

    def _read(self, urls: list[str]) -> dict[str, dict]:
        if len(urls) == 1:
            row = self._row(urls[0])
            return {} if row is None else {urls[0]: row}
        return self._rows(urls)

    async def _aread(self, urls: list[str]) -> dict[str, dict]:
        """``_read`` on the running asyncio loop."""
        raise NotImplementedError

    def _get_steps(self, url: str, follow_canonical: bool, normalize: bool):
        # yields the URLs whose rows it needs next, is sent {url: row}, returns the record
        if normalize:
            url = self.normalize(url)
        row = (yield [url]).get(url)
        hops = 0
        while follow_canonical and row and row.get("canonical_url") and hops < MAX_CANONICAL_HOPS:
            target = row["canonical_url"]
            if target == row["url"]:
                break
            canonical = (yield [target]).get(target)
            if canonical is None:
                break
            row, hops = canonical, hops + 1
        if row is not None:
            row["requested_url"] = url
        return row

    def _get_many_steps(self, urls: list[str]):
        asked = [self.normalize(u) for u in urls]
        rows = yield list(dict.fromkeys(asked))
        found = {u: rows.get(u) for u in asked}
        settled: set[str] = set()  # URLs whose canonical URL is not stored: their row stays
        for _ in range(MAX_CANONICAL_HOPS):
            hops = {
                u: r["canonical_url"]
                for u, r in found.items()
                if r and r.get("canonical_url") and r["canonical_url"] != r["url"] and u not in settled
            }
            if not hops:
                break
            targets = yield list(dict.fromkeys(hops.values()))
            for u, target in hops.items():
                if targets.get(target) is None:
                    settled.add(u)
                else:
                    found[u] = dict(targets[target])
        out = []
        for u in asked:
            row = found[u]
            if row is not None:
                row = {**row, "requested_url": u}
            out.append(row)
        return out

    def _rows(self, urls: list[str]) -> dict[str, dict]:
        """The stored rows of ``urls`` (normalized), by URL; unknown ones left out."""
        out = {}
        for url in urls:
            row = self._row(url)
            if row is not None:
                out[url] = row
        return out

    def last_fetched(self, urls: list[str], archived: bool = False) -> dict[str, float]:
        """When each of ``urls`` was last fetched with an answer (fate ``fetched`` or
        ``duplicate``, status below 500: what RECRAWL_INTERVAL counts from), as UNIX
        time, keyed by the URL as given; URLs never fetched, or whose last attempt
        failed, are left out. ``archived``: only pages whose handling was completed, with
        their archive pointer (an exact copy is never archived itself): a page recorded
        but whose batch was never stored (its worker died) is left out, so that it is
        fetched again. One batch lookup, safe to call from any thread and while writes
        are in flight; it sees the writes whose Futures are done."""
        raise NotImplementedError

    def fetch_status(self, url: str) -> dict | None:
        """status, fate, fetched_at, error and next_fetch_at of ``url`` itself."""
        row = self._row(self.normalize(url))
        if row is None:
            return None
        return {k: row[k] for k in ("url", "status", "fate", "fetched_at", "error", "next_fetch_at", "fetch_interval")}

    def outlinks(self, url: str) -> list[dict]:
        row = self._row(self.normalize(url))
        return list(row["outlinks"]) if row else []

    def inlinks(self, url: str, limit: int = 1000, after: str | None = None) -> list[dict]:
        """Links to ``url``: {"url" (the source), "text", "nofollow"}, at most ``limit``,
        ordered by source URL; ``after``: only sources after it (the last source of the
        previous page: a cursor)."""
        return self._inlinks(self.normalize(url), limit, after)

    def normalize(self, url: str) -> str:
        try:
            return normalize_url(url, **self.url_options)
        except InvalidURL:
            return url

    def close(self) -> None:
        """Wait for pending writes and release connections."""


def _read_through(steps, read):
    """The result of ``steps`` (a generator of ``_get_steps``' kind), each read by ``read``."""
    try:
        asked = next(steps)
        while True:
            asked = steps.send(read(asked) if asked else {})
    except StopIteration as done:
        return done.value


async def _aread_through(steps, aread):
    """``_read_through`` with an asyncio ``aread``."""
    try:
        asked = next(steps)
        while True:
            asked = steps.send(await aread(asked) if asked else {})
    except StopIteration as done:
        return done.value
