"""WARC files of raw pages, batched (warcio).

A ``WarcBatch`` is one ``.warc.gz`` being filled in a local spool file: every page adds
a response record (status line, headers and body as received, target URI, date, IP
address when known, block and payload digests) and a request record beside it
(``WARC-Concurrent-To``). Each record is its own gzip member, so a record can be read
back alone with a ranged read of (offset, length). A batch is closed by size or age
and then stored whole (storage.py) under its key.

Members are compressed here at ``level`` (ARCHIVE_GZIP_LEVEL, 6 as gzip's default), not
by warcio, whose writer always uses level 9: on HTML that costs about 40% more CPU than
6 for under 1% smaller files, and compression is most of what archiving a page costs.

Keys are deterministic and begin with a hash-derived part, so that objects spread over
the key space (no long common prefix: S3 partitions by prefix)::

    <4 hex of sha1(name)>/<prefix><crawl>/<worker>-<seq>.warc.gz

A retried upload writes the same key. ``recover`` trims a spool file left by a worker
that died to its last complete record, so it can be stored on restart.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
import zlib
from dataclasses import dataclass

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

# hop-by-hop and encoding headers that no longer describe the body as stored
_DROPPED_HEADERS = {"transfer-encoding", "content-encoding", "content-length"}


def object_key(crawl: str, worker: str, seq: int, prefix: str = "") -> str:
    name = f"{prefix}{crawl}/{worker}-{seq:06d}.warc.gz"
    return f"{hashlib.sha1(name.encode()).hexdigest()[:4]}/{name}"


@dataclass
class RawPage:
    """What a WARC response/request pair is made of."""

    url: str
    status: int
    reason: str
    protocol: str  # "HTTP/1.1"
    headers: list[tuple[str, str]]  # response headers, in order
    body: bytes
    method: str = "GET"
    request_headers: list[tuple[str, str]] | None = None
    ip_address: str | None = None
    fetched_at: float | None = None


class WarcBatch:
    """One .warc.gz under construction in ``path`` (the spool file)."""

    def __init__(self, path: str, key: str, level: int = 6):
        self.path = path
        self.key = key
        self.level = level
        self.created = time.monotonic()
        self.records = 0
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - open for the batch's life
        self.size = self._file.tell()  # bytes written so far
        self._member = _Member(self._file, level)  # each record compressed as warcio writes it
        self._writer = WARCWriter(self._member, gzip=False)

    def age(self) -> float:
        return time.monotonic() - self.created

    def add(self, page: RawPage) -> tuple[int, int]:
        """Append the page's response and request records; (offset, length) of the
        response record in the file."""
        date = _warc_date(page.fetched_at)
        warc_headers = {"WARC-Date": date}
        if page.ip_address:
            warc_headers["WARC-IP-Address"] = page.ip_address
        headers = [(k, v) for k, v in page.headers if k.lower() not in _DROPPED_HEADERS]
        headers.append(("Content-Length", str(len(page.body))))
        http = StatusAndHeaders(f"{page.status} {page.reason}".strip(), headers, protocol=page.protocol)
        response = self._writer.create_warc_record(
            page.url,
            "response",
            payload=io.BytesIO(page.body),
            length=len(page.body),
            http_headers=http,
            warc_headers_dict=warc_headers,
        )
        offset = self.size
        length = self._write(response)
        path = _request_target(page.url)
        request_headers = list(page.request_headers or [])
        if not any(k.lower() == "host" for k, _ in request_headers):
            request_headers.insert(0, ("Host", page.url.split("://", 1)[1].split("/", 1)[0]))
        request = self._writer.create_warc_record(
            page.url,
            "request",
            payload=io.BytesIO(b""),
            length=0,
            http_headers=StatusAndHeaders(
                f"{page.method} {path} {page.protocol}", request_headers, is_http_request=True
            ),
            warc_headers_dict={**warc_headers, "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")},
        )
        self._write(request)
        self.records += 1
        return offset, length

    def _write(self, record) -> int:
        """Append ``record`` as one gzip member; its compressed length."""
        self._member.start()
        self._writer.write_record(record)
        length = self._member.finish()
        self.size += length
        return length

    def close(self) -> None:
        """Flush and fsync the spool file: it is complete and safe on local disk (a
        record whose write failed partway is cut off)."""
        if not self._file.closed:
            self._file.flush()
            if self._file.tell() != self.size:
                self._file.truncate(self.size)
            os.fsync(self._file.fileno())
            self._file.close()


class _Member:
    """Where warcio writes a record: compressed as it comes (warcio writes a body in 16 KB
    pieces) into one gzip member of the file, so that neither the uncompressed record nor
    the whole member is ever in memory (a 10 MB page was 10 MB and its member more)."""

    def __init__(self, file, level: int):
        self.file = file
        self.level = level
        self.length = 0
        self._compressor = None

    def start(self) -> None:
        self._compressor = zlib.compressobj(self.level, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        self.length = 0

    def write(self, data) -> None:
        out = self._compressor.compress(data)
        if out:
            self.file.write(out)
            self.length += len(out)

    def flush(self) -> None:  # warcio's, after each record: the member ends in finish
        pass

    def finish(self) -> int:
        """End the member; its compressed length."""
        out = self._compressor.flush()
        self.file.write(out)
        self.length += len(out)
        self._compressor = None
        return self.length


def recover(path: str) -> int:
    """Trim a spool file to its last complete record (a worker may have died while
    writing one); returns how many response records it keeps."""
    end, responses = 0, 0
    with open(path, "rb") as f:
        try:
            it = ArchiveIterator(f)
            for record in it:
                record.content_stream().read()
                if record.rec_type == "response":
                    responses += 1
                end = it.get_record_offset() + it.get_record_length()
        except Exception:  # a torn last member: keep what came before it
            pass
    with open(path, "r+b") as f:
        f.truncate(end)
    return responses


def read_record(data: bytes) -> tuple[dict, bytes]:
    """The WARC headers and the HTTP body of one gzipped response record (what a ranged
    read of an archive pointer returns)."""
    record = next(iter(ArchiveIterator(io.BytesIO(data))))
    return dict(record.rec_headers.headers), record.content_stream().read()


def read_response(data: bytes) -> tuple[str | None, bytes]:
    """The HTTP Content-Type (as the site sent it, None when it sent none) and the body of
    one gzipped response record."""
    record = next(iter(ArchiveIterator(io.BytesIO(data))))
    content_type = record.http_headers.get_header("Content-Type") if record.http_headers else None
    return content_type, record.content_stream().read()


def _warc_date(when: float | None) -> str:
    t = time.gmtime(when if when is not None else time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)


def _request_target(url: str) -> str:
    rest = url.split("://", 1)[1]
    slash = rest.find("/")
    target = rest[slash:] if slash >= 0 else "/"
    return target.split("#", 1)[0] or "/"
