"""WARC/1.1 files of raw pages, batched (warcio).

A ``WarcBatch`` is one ``.warc.gz`` being filled in a local spool file. It opens with a
``warcinfo`` record (the software, the format, the crawl, its operator and robots policy,
the host). Every page adds its capture and, beside it (``WARC-Concurrent-To``), its
request record and a ``metadata`` record (``application/warc-fields``: one ``outlink:``
line per link, as Heritrix writes them, and ``fetchTimeMs:``, the download's time). The
capture is a ``response`` record (status line, headers and body as received, target
URI, date, IP address when known, block and payload digests), or a ``revisit`` record
when the page brought nothing new to store:

- an exact copy of a page captured before (``identical-payload-digest``): the HTTP
  headers as the block, ``WARC-Truncated: length`` (the payload is the original's),
  ``WARC-Payload-Digest``, and ``WARC-Refers-To-Target-URI``/``-Date`` naming the
  original capture;
- a 304 to a recrawl's conditional request (``server-not-modified``): an empty block,
  referring to the stored capture of the same URL, whose headers and payload replay tools
  then serve (a block of the 304's headers would be replayed as a 304).

Each record is its own gzip member, so a record can be read back alone with a ranged
read of (offset, length). The batch keeps the CDXJ line of each capture (cdxj.py) as it
writes it, from what it knows (offset, length, digest); closed (by size or age), it
writes them sorted beside the spool file (``index_path``), and both are stored
(storage.py), the WARC under its key and the index under ``index_key(key)``.

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

import base64
import hashlib
import io
import os
import time
import zlib
from dataclasses import dataclass

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.archive import cdxj

# hop-by-hop and encoding headers that no longer describe the body as stored
_DROPPED_HEADERS = {"transfer-encoding", "content-encoding", "content-length"}

WARC_VERSION = "1.1"
IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
WARC_SUFFIX, INDEX_SUFFIX = ".warc.gz", ".cdxj"


def object_key(crawl: str, worker: str, seq: int, prefix: str = "") -> str:
    name = f"{prefix}{crawl}/{worker}-{seq:06d}{WARC_SUFFIX}"
    return f"{hashlib.sha1(name.encode()).hexdigest()[:4]}/{name}"


def index_key(key: str) -> str:
    """The key of a WARC's CDXJ index: the WARC's, ``.cdxj`` for ``.warc.gz``."""
    return key.removesuffix(WARC_SUFFIX) + INDEX_SUFFIX


def payload_digest(hex_sha1: str) -> str:
    """A SHA-1 in hex (``sha1:`` optional) as a WARC payload digest: ``sha1:`` and base32."""
    raw = bytes.fromhex(hex_sha1.removeprefix("sha1:"))
    return "sha1:" + base64.b32encode(raw).decode("ascii")


@dataclass
class Refers:
    """The earlier capture a revisit record stands for."""

    profile: str  # IDENTICAL_PAYLOAD or NOT_MODIFIED
    uri: str  # its URL
    date: float | None  # when it was fetched (UNIX time; None: unknown)
    digest: str | None  # its payload digest (payload_digest); None: unknown


@dataclass
class RawPage:
    """What a WARC response/request pair is made of."""

    url: str
    status: int
    reason: str
    protocol: str  # "HTTP/1.1"
    headers: list[tuple[str, str]]  # response headers, in order
    body: bytes  # (a revisit record holds its length, not the body)
    method: str = "GET"
    request_headers: list[tuple[str, str]] | None = None
    ip_address: str | None = None
    fetched_at: float | None = None
    outlinks: list[str] | None = None  # the page's links (the metadata record)
    fetch_ms: int | None = None  # the download's time (the metadata record)
    refers: Refers | None = None  # a revisit: the capture it stands for
    payload_digest: str | None = None  # the body's, when known (payload_digest())


class WarcBatch:
    """One .warc.gz under construction in ``path`` (the spool file); ``info``: the
    fields of its warcinfo record (written when the file is new)."""

    def __init__(self, path: str, key: str, level: int = 6, info: dict | None = None):
        self.path = path
        self.key = key
        self.level = level
        self.created = time.monotonic()
        self.records = 0
        self.index: list[str] = []  # the CDXJ line of each capture, in writing order
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - open for the batch's life
        self.size = self._file.tell()  # bytes written so far
        self._member = _Member(self._file, level)  # each record compressed as warcio writes it
        self._writer = WARCWriter(self._member, gzip=False, warc_version=WARC_VERSION)
        if self.size == 0 and info is not None:
            self._write(self._writer.create_warcinfo_record(os.path.basename(key), info))

    @property
    def index_path(self) -> str:
        return index_key(self.path)

    def age(self) -> float:
        return time.monotonic() - self.created

    def add(self, page: RawPage) -> tuple[int, int]:
        """Append the page's capture (response, or revisit when ``page.refers``), request
        and metadata records; (offset, length) of the capture in the file."""
        ms = _ms(page.fetched_at)
        date = warc_date(ms / 1000)
        warc_headers = {"WARC-Date": date}
        if page.ip_address:
            warc_headers["WARC-IP-Address"] = page.ip_address
        headers = [(k, v) for k, v in page.headers if k.lower() not in _DROPPED_HEADERS]
        if page.refers is None or page.refers.profile == IDENTICAL_PAYLOAD:
            headers.append(("Content-Length", str(len(page.body))))
        http = StatusAndHeaders(f"{page.status} {page.reason}".strip(), headers, protocol=page.protocol)
        if page.refers is None:
            known = {"WARC-Payload-Digest": page.payload_digest} if page.payload_digest else {}  # (not computed again)
            response = self._writer.create_warc_record(
                page.url,
                "response",
                payload=io.BytesIO(page.body),
                length=len(page.body),
                http_headers=http,
                warc_headers_dict={**warc_headers, **known},
            )
        else:
            response = self._revisit(page, http, warc_headers)
        offset = self.size
        length = self._write(response)
        digest = response.rec_headers.get_header("WARC-Payload-Digest")
        mime = cdxj.REVISIT_MIME if page.refers is not None else cdxj.mime_of(http.get_header("Content-Type"))
        empty = page.refers is not None and page.refers.profile == NOT_MODIFIED  # (no HTTP headers)
        self.index.append(
            cdxj.line(
                page.url,
                cdxj.timestamp(ms),
                mime=mime,
                status=None if empty else str(page.status),
                digest=digest,
                length=length,
                offset=offset,
                filename=self.key,
            )
        )
        concurrent = {**warc_headers, "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")}
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
            warc_headers_dict=concurrent,
        )
        self._write(request)
        fields = [f"outlink: {url}" for url in page.outlinks or ()]
        if page.fetch_ms is not None:
            fields.append(f"fetchTimeMs: {page.fetch_ms}")
        if fields:
            block = ("\r\n".join(fields) + "\r\n").encode("utf-8")
            metadata = self._writer.create_warc_record(
                page.url,
                "metadata",
                payload=io.BytesIO(block),
                length=len(block),
                warc_content_type="application/warc-fields",
                warc_headers_dict=concurrent,
            )
            self._write(metadata)
        self.records += 1
        return offset, length

    def _revisit(self, page: RawPage, http: StatusAndHeaders, warc_headers: dict):
        """The revisit record of a capture that stands for ``page.refers``."""
        refers = page.refers
        headers = {**warc_headers, "WARC-Profile": refers.profile}
        headers["WARC-Refers-To-Target-URI"] = refers.uri
        if refers.date is not None:
            headers["WARC-Refers-To-Date"] = warc_date(refers.date)
        if refers.digest:
            headers["WARC-Payload-Digest"] = refers.digest
        if refers.profile == NOT_MODIFIED:
            # an empty block: replay serves the stored capture's headers with its payload (a
            # block of the 304's headers would be replayed as a 304)
            return self._writer.create_warc_record(page.url, "revisit", warc_headers_dict=headers)
        headers["WARC-Truncated"] = "length"  # the payload is the original's
        return self._writer.create_warc_record(page.url, "revisit", http_headers=http, warc_headers_dict=headers)

    def _write(self, record) -> int:
        """Append ``record`` as one gzip member; its compressed length."""
        self._member.start()
        self._writer.write_record(record)
        length = self._member.finish()
        self.size += length
        return length

    def close(self) -> None:
        """Flush and fsync the spool file: it is complete and safe on local disk (a
        record whose write failed partway is cut off); then write its index, sorted,
        beside it."""
        if not self._file.closed:
            self._file.flush()
            if self._file.tell() != self.size:
                self._file.truncate(self.size)
            os.fsync(self._file.fileno())
            self._file.close()
            write_index(self.index_path, sorted(self.index))


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


def read_payload(get_range, pointer: dict, pointer_of) -> tuple[str | None, bytes]:
    """The HTTP Content-Type and the body of the capture at ``pointer`` (``key``,
    ``offset``, ``length``), read with ``get_range(key, offset, length)``; a revisit
    record is followed once to the capture it refers to (``pointer_of(url)``: the archive
    pointer of that URL's stored record). LookupError when that capture is not stored."""
    data = get_range(pointer["key"], pointer["offset"], pointer["length"])
    record = next(iter(ArchiveIterator(io.BytesIO(data))))
    if record.rec_type == "revisit":
        target = record.rec_headers.get_header("WARC-Refers-To-Target-URI")
        original = pointer_of(target) if target else None
        if not original or original == pointer:
            raise LookupError(f"the capture {target} that this revisit record refers to is not stored")
        data = get_range(original["key"], original["offset"], original["length"])
        record = next(iter(ArchiveIterator(io.BytesIO(data))))
    content_type = record.http_headers.get_header("Content-Type") if record.http_headers else None
    return content_type, record.content_stream().read()


def write_index(path: str, lines: list[str]) -> None:
    """Write index lines to ``path`` (through a temporary file, fsynced)."""
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(text + "\n" for text in lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def warc_date(when: float | None) -> str:
    """A WARC/1.1 date: UTC, to the millisecond."""
    ms = _ms(when)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def _ms(when: float | None) -> int:
    return int(round((time.time() if when is None else when) * 1000))


def _request_target(url: str) -> str:
    rest = url.split("://", 1)[1]
    slash = rest.find("/")
    target = rest[slash:] if slash >= 0 else "/"
    return target.split("#", 1)[0] or "/"
