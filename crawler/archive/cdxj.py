"""CDXJ index lines, as replay tools read them (pywb, and ``cdxj-indexer``'s output).

A line is ``SURT timestamp {json}``: the URL's SURT form (the ``surt`` package, as
cdxj-indexer keys it), the capture's 14-digit timestamp (warcio's, from WARC-Date), and
the record's fields in cdxj-indexer's order, each a string, left out when unknown:
``url``, ``mime`` (the HTTP Content-Type up to its first ``;`` or space; ``warc/revisit``
for a revisit), ``status``, ``digest`` (WARC-Payload-Digest), ``length`` and ``offset``
(of the record's gzip member in the file) and ``filename`` (the WARC's key, relative to
the archive's root). Lines sort as text, which orders them by URL, then time.

The archive writes a line for each response and revisit record as it writes the record
(warc.py); ``index_warc`` builds them again from a WARC file with cdxj-indexer itself (a
spool file a dead worker left, ``scrapy archive index --rebuild``); ``scrapy archive``
merges and reads them.
"""

from __future__ import annotations

import heapq
import io
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from crawler.urls import url_key

REVISIT_MIME = "warc/revisit"
_MIME_END = re.compile(r"[;\s]")


def mime_of(content_type: str | None) -> str | None:
    if not content_type:
        return None
    return _MIME_END.split(content_type, 1)[0].strip() or None


def timestamp(ms: int) -> str:
    """The 14-digit timestamp of a capture fetched at ``ms`` (what warcio reads from its
    WARC-Date: the second, UTC)."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(ms // 1000))


def line(
    url: str,
    stamp: str,
    *,
    mime: str | None,
    status: str | None,
    digest: str | None,
    length: int,
    offset: int,
    filename: str,
) -> str:
    """One index line (without its newline); ``stamp``: ``timestamp``'s 14 digits."""
    fields = {"url": url, "mime": mime, "status": status, "digest": digest}
    fields = {k: v for k, v in fields.items() if v is not None}
    fields.update(length=str(length), offset=str(offset), filename=filename)
    return f"{url_key(url)} {stamp} {json.dumps(fields)}"


@dataclass(frozen=True)
class Capture:
    """One index line, read."""

    key: str  # SURT
    timestamp: str  # 14 digits
    fields: dict

    @property
    def url(self) -> str:
        return self.fields.get("url", "")

    @property
    def revisit(self) -> bool:
        return self.fields.get("mime") == REVISIT_MIME


def parse(text: str) -> Capture:
    key, timestamp, fields = text.rstrip("\n").split(" ", 2)
    return Capture(key, timestamp, json.loads(fields))


def merge(sources: Iterable[Iterable[str]]) -> Iterator[str]:
    """The lines of sorted indexes, merged in order (one pass, constant memory)."""
    yield from heapq.merge(*(_lines(s) for s in sources))


def _lines(source: Iterable[str]) -> Iterator[str]:
    for text in source:
        text = text.rstrip("\n")
        if text and not text.startswith("!"):  # ("!" opens a header line in some indexes)
            yield text + "\n"


def captures_of(lines: Iterable[str], url: str) -> list[Capture]:
    """The captures of ``url`` in index lines, by time."""
    key = url_key(url)
    prefix = key + " "
    found = [parse(t) for t in lines if t.startswith(prefix)]
    return sorted(found, key=lambda c: c.timestamp)


def closest(captures: list[Capture], timestamp: str | None) -> Capture | None:
    """The capture nearest ``timestamp`` (14 digits, or fewer: the rest taken as zeros),
    the latest when None."""
    if not captures:
        return None
    if timestamp is None:
        return captures[-1]
    want = int(timestamp.ljust(14, "0")[:14])
    return min(captures, key=lambda c: (abs(int(c.timestamp) - want), -int(c.timestamp)))


def index_warc(path: str, filename: str) -> list[str]:
    """The sorted index lines of the WARC file at ``path``, by cdxj-indexer, each naming
    the file ``filename`` (its key in the archive)."""
    from cdxj_indexer.main import CDXJIndexer  # (6 MB a worker would hold for a rare call)

    out = io.StringIO()
    CDXJIndexer(out, [path], sort=True, filename=filename).process_all()
    return out.getvalue().splitlines()


def rebuild(warc_path: str, filename: str, index_path: str) -> list[str]:
    """Index the WARC file at ``warc_path`` again (``index_warc``) and write the lines to
    ``index_path``; the lines."""
    lines = index_warc(warc_path, filename)
    write_index(index_path, lines)
    return lines


def write_index(path: str, lines: list[str]) -> None:
    """Write index lines to ``path`` (through a temporary file, fsynced)."""
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(text + "\n" for text in lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
