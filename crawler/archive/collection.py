"""A crawl's archive read as a web archive collection, for ``scrapy archive``: its WARC
files and the CDXJ index stored beside each (warc.py), in a local directory or an S3
bucket (storage.py).

``Collection(storage, crawl, prefix)``
    ``warc_keys()``        the crawl's WARC files (keys ``<hash>/<prefix><crawl>/...``)
    ``index_of(key)``      one file's index lines: its stored ``.cdxj``, or built again from
                           the WARC with cdxj-indexer (and stored) when it is missing or
                           ``rebuild`` is asked
    ``merged()``           every file's index, merged into one sorted CDXJ
    ``payload(lines, capture)``  a capture's record, a revisit followed to the capture
                           holding its payload (same digest, the URL and time it names)
    ``pointer_of_payload(url, digest, date)``  where that capture is, by the stored indexes

Long runs report each file done to ``progress(done, total)``.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_timestamp

from crawler.archive import cdxj
from crawler.archive.warc import INDEX_SUFFIX, WARC_SUFFIX, index_key

Progress = Callable[[int, int], None]


@dataclass
class Found:
    """A capture read from the archive: its index line and its record."""

    capture: cdxj.Capture
    warc_headers: dict
    http_status: str | None
    http_headers: list[tuple[str, str]]
    body: bytes


class Collection:
    def __init__(self, storage, crawl: str, prefix: str = ""):
        self.storage = storage
        self.crawl = crawl
        self.marker = f"/{prefix}{crawl}/"  # in each of the crawl's keys (object_key)
        self._keys: list[str] | None = None

    def _crawl_keys(self) -> list[str]:
        """The crawl's keys in the store (listed once: a bucket may hold many crawls)."""
        if self._keys is None:
            self._keys = [k for k in self.storage.keys() if self.marker in k]
        return self._keys

    def warc_keys(self) -> list[str]:
        return sorted(k for k in self._crawl_keys() if k.endswith(WARC_SUFFIX))

    def index_keys(self) -> set[str]:
        return {k for k in self._crawl_keys() if k.endswith(INDEX_SUFFIX)}

    def index_of(self, key: str, rebuild: bool = False, stored: set[str] | None = None) -> list[str]:
        """The sorted index lines of the WARC ``key`` (``stored``: the index keys there are,
        when the caller listed them)."""
        ikey = index_key(key)
        have = ikey in stored if stored is not None else ikey in self.index_keys()
        if have and not rebuild:
            return self.storage.get(ikey).decode("utf-8").splitlines()
        with tempfile.TemporaryDirectory(prefix="crawler-archive-") as tmp:
            path = self.storage.local_path(key)
            if path is None:
                path = os.path.join(tmp, "file" + WARC_SUFFIX)
                self.storage.download(key, path)
            index = os.path.join(tmp, "index" + INDEX_SUFFIX)
            lines = cdxj.rebuild(path, key, index)
            self.storage.put(ikey, index)
        return lines

    def indexes(self, rebuild: bool = False, progress: Progress | None = None) -> list[list[str]]:
        keys, stored = self.warc_keys(), self.index_keys()
        out = []
        for i, key in enumerate(keys, 1):
            out.append(self.index_of(key, rebuild, stored))
            if progress is not None:
                progress(i, len(keys))
        return out

    def merged(self, rebuild: bool = False, progress: Progress | None = None) -> Iterator[str]:
        """The crawl's index: every file's lines, merged in order (each with its newline)."""
        return cdxj.merge(self.indexes(rebuild, progress))

    def read(self, capture: cdxj.Capture) -> Found:
        f = capture.fields
        data = self.storage.get_range(f["filename"], int(f["offset"]), int(f["length"]))
        record = next(iter(ArchiveIterator(io.BytesIO(data))))
        http = record.http_headers
        return Found(
            capture,
            dict(record.rec_headers.headers),
            http.get_statuscode() if http else None,
            list(http.headers) if http else [],
            record.content_stream().read(),
        )

    def payload(self, lines: Iterable[str], capture: cdxj.Capture) -> tuple[Found, Found]:
        """(the capture's record, the record holding its payload): the same record, or for
        a revisit the capture of the URL it refers to with the same payload digest, the
        nearest the time it names. LookupError when that capture is not in the index."""
        found = self.read(capture)
        if not capture.revisit:
            return found, found
        target = found.warc_headers.get("WARC-Refers-To-Target-URI") or capture.url
        date = found.warc_headers.get("WARC-Refers-To-Date")
        original = _original(lines, target, capture.fields.get("digest"), date, capture.timestamp)
        if original is None:
            raise LookupError(f"the capture of {target} that the revisit of {capture.url} refers to is not archived")
        return found, self.read(original)

    def pointer_of_payload(self, url: str, digest: str, date: str | None) -> dict | None:
        """The archive pointer (``key``, ``offset``, ``length``, ``bucket``) of ``url``'s
        capture holding the payload ``digest``, the nearest the WARC date ``date`` (the
        latest without), by the stored indexes (none is built: a reader writes nothing);
        None when there is none. (warc.read_payload's ``find``: an exact copy whose original
        was fetched again with another body.)"""
        keys = sorted(self.index_keys())
        lines = (line for key in keys for line in self.storage.get(key).decode("utf-8").splitlines())
        original = _original(lines, url, digest, date, None)
        if original is None:
            return None
        f = original.fields
        return {"key": f["filename"], "offset": int(f["offset"]), "length": int(f["length"]), "bucket": ""}


def _original(lines: Iterable[str], url: str, digest: str | None, date: str | None, default: str | None):
    """The capture of ``url`` (no revisit) in index lines holding the payload ``digest`` (None:
    any), the nearest the WARC date ``date``, else the timestamp ``default`` (None: the latest)."""
    candidates = [
        c
        for c in cdxj.captures_of(lines, url)
        if not c.revisit and (digest is None or c.fields.get("digest") == digest)
    ]
    return cdxj.closest(candidates, iso_date_to_timestamp(date) if date else default)
