"""WARC/1.1 files of raw pages, batched.

A ``WarcBatch`` is one ``.warc.gz`` being filled in a local spool file. It opens with a
``warcinfo`` record (the software, the format, the crawl, its operator and robots policy,
the host). Every page adds its capture and, beside it (``WARC-Concurrent-To``), its
request record and a ``metadata`` record (``application/warc-fields``: one ``outlink:``
line per link, as Heritrix writes them, and ``fetchTimeMs:``, the download's time). The
capture is a ``response`` record (status line and headers as received, but those that
describe the transfer, and the body as Scrapy decoded it: decision 0044; target URI, date,
IP address when known, block and payload digests), or a ``revisit`` record
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

Every header of a record is known here (its digests too: the payload's from content
seen), so a record is written as it is (``_write``): its WARC headers and the HTTP headers
formatted by warcio's ``StatusAndHeaders``, compressed at ``level`` (ARCHIVE_GZIP_LEVEL, 6
as gzip's default; warcio's writer always uses 9, about 40% more CPU on HTML for under 1%
smaller files) in one member, a body 64 KB at a time. warcio's writer would look each
header up and replace it again, and compute the digests again: about 40 us a record, as
much as compressing a request record (``bench/archive_records.py``, docs/BENCHMARKS.md).
warcio reads them back (``recover``, ``read_payload``), and the tests hold every file to
``warcio check`` and every index to cdxj-indexer's.

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
import uuid
import zlib
from dataclasses import dataclass

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordbuilder import RecordBuilder
from warcio.statusandheaders import StatusAndHeaders

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
    return "sha1:" + _base32(bytes.fromhex(hex_sha1.removeprefix("sha1:")))


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
        if self.size == 0 and info is not None:
            block = "".join(f"{name}: {value}\r\n" for name, value in info.items() if value).encode("utf-8")
            fields = [("WARC-Date", warc_date(None)), ("WARC-Filename", os.path.basename(key))]
            self._write("warcinfo", _record_id(), None, fields, None, body=block)

    @property
    def index_path(self) -> str:
        return index_key(self.path)

    def age(self) -> float:
        return time.monotonic() - self.created

    def add(self, page: RawPage) -> tuple[int, int]:
        """Append the page's capture (response, or revisit when ``page.refers``), request
        and metadata records; (offset, length) of the capture in the file."""
        ms = _ms(page.fetched_at)
        fields = [("WARC-Date", warc_date(ms / 1000))]
        if page.ip_address:
            fields.append(("WARC-IP-Address", page.ip_address))
        headers = [(k, v) for k, v in page.headers if k.lower() not in _DROPPED_HEADERS]
        if page.refers is None or page.refers.profile == IDENTICAL_PAYLOAD:
            headers.append(("Content-Length", str(len(page.body))))
        http = StatusAndHeaders(f"{page.status} {page.reason}".strip(), headers, protocol=page.protocol)
        http.compute_headers_buffer()  # (warcio's: ASCII, a value that is not %-encoded)
        capture = _record_id()
        offset = self.size
        if page.refers is None:
            payload = page.payload_digest or _digest(page.body)  # (known: not computed again)
            length = self._write("response", capture, page.url, fields, payload, http.headers_buff, page.body)
        else:
            payload = page.refers.digest
            length = self._write(
                "revisit",
                capture,
                page.url,
                self._revisit(page.refers, fields),
                payload,
                b"" if page.refers.profile == NOT_MODIFIED else http.headers_buff,
            )
        mime = cdxj.REVISIT_MIME if page.refers is not None else cdxj.mime_of(http.get_header("Content-Type"))
        empty = page.refers is not None and page.refers.profile == NOT_MODIFIED  # (no HTTP headers)
        self.index.append(
            cdxj.line(
                page.url,
                cdxj.timestamp(ms),
                mime=mime,
                status=None if empty else str(page.status),
                digest=payload,
                length=length,
                offset=offset,
                filename=self.key,
            )
        )
        fields.append(("WARC-Concurrent-To", capture))
        request_headers = list(page.request_headers or [])
        if not any(k.lower() == "host" for k, _ in request_headers):
            request_headers.insert(0, ("Host", page.url.split("://", 1)[1].split("/", 1)[0]))
        request = StatusAndHeaders(
            f"{page.method} {_request_target(page.url)} {page.protocol}", request_headers, is_http_request=True
        )
        request.compute_headers_buffer()
        self._write("request", _record_id(), page.url, fields, _EMPTY, request.headers_buff, level=1)
        lines = [f"outlink: {url}" for url in page.outlinks or ()]
        if page.fetch_ms is not None:
            lines.append(f"fetchTimeMs: {page.fetch_ms}")
        if lines:
            block = ("\r\n".join(lines) + "\r\n").encode("utf-8")
            # (a list of links: at level 1 in half the CPU of level 6, some 10% larger; and
            # the request's few headers likewise)
            self._write("metadata", _record_id(), page.url, fields, _digest(block), body=block, level=1)
        self.records += 1
        return offset, length

    @staticmethod
    def _revisit(refers: Refers, fields: list) -> list:
        """The WARC fields of a revisit record that stands for ``refers``. Its block: the
        HTTP headers, the payload being the original's (``WARC-Truncated: length``); or for
        a 304 an empty block, so that replay serves the stored capture's headers with its
        payload (a block of the 304's headers would be replayed as a 304)."""
        fields = [*fields, ("WARC-Profile", refers.profile), ("WARC-Refers-To-Target-URI", refers.uri)]
        if refers.date is not None:
            fields.append(("WARC-Refers-To-Date", warc_date(refers.date)))
        if refers.profile == IDENTICAL_PAYLOAD:
            fields.append(("WARC-Truncated", "length"))
        return fields

    def _write(self, kind, record_id, url, fields, payload, head=b"", body=b"", level=None) -> int:
        """Append a record as one gzip member; its compressed length. Its block: ``head``
        (the HTTP headers) then ``body`` (a response's payload); ``payload``: its payload
        digest (None: none). The headers are all known here: warcio's writer would build,
        look up and replace each again, more than compressing a request record costs."""
        headers = [("WARC-Type", kind), ("WARC-Record-ID", record_id)]
        if url is not None:
            headers.append(("WARC-Target-URI", url))
        headers += fields
        if payload is not None:
            headers.append(("WARC-Payload-Digest", payload))
        headers.append(("WARC-Block-Digest", _digest(head, body)))
        headers.append(("Content-Type", RecordBuilder.WARC_RECORDS[kind]))
        headers.append(("Content-Length", str(len(head) + len(body))))
        warc = StatusAndHeaders("", headers, protocol=f"WARC/{WARC_VERSION}").to_bytes()
        level = self.level if level is None else min(level, self.level)
        length = _write_member(self._file, level, (warc, head, body, b"\r\n\r\n"))
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
            cdxj.write_index(self.index_path, sorted(self.index))


_PIECE = 1 << 16  # a body is compressed 64 KB at a time: its member is never whole in memory


def _write_member(file, level: int, parts: tuple[bytes, ...]) -> int:
    """Write ``parts`` to ``file`` as one gzip member at ``level``; its length. The
    compressor's window is no larger than the record (which then compresses to the same
    bytes): one of the full 32 KB window takes some 256 KB, which the C library gives back
    to the system when it is freed and must fault in again for the next member, about 60 us
    a record, more than compressing a request record costs."""
    size = sum(len(p) for p in parts)
    wbits = min(zlib.MAX_WBITS, max(9, (size - 1).bit_length()))
    memory = min(zlib.DEF_MEM_LEVEL, wbits - 6)  # (its hash table and block buffer likewise)
    compressor = zlib.compressobj(level, zlib.DEFLATED, wbits + 16, memory)
    length = 0
    for part in parts:
        view = memoryview(part)
        for start in range(0, len(view), _PIECE):
            out = compressor.compress(view[start : start + _PIECE])
            file.write(out)
            length += len(out)
    out = compressor.flush()
    file.write(out)
    return length + len(out)


def recover(path: str) -> int:
    """Trim a spool file to its last whole record (a worker may have died while writing
    one); returns how many response records it keeps. Each record is a gzip member of its
    own: one is kept if its member ends (a member cut short inflates without an error,
    which a reader took for a whole record: a torn page stored as a capture) and its block
    is as long as its Content-Length says."""
    end, responses = 0, 0
    with open(path, "rb") as f:
        for stop, raw in _members(f):
            kind = _whole_record(raw)
            if kind is None:
                break
            responses += kind == b"response"
            end = stop
    with open(path, "r+b") as f:
        f.truncate(end)
    return responses


def _members(f, piece: int = 1 << 20):
    """(end, inflated bytes) of each whole gzip member of the file ``f``, in order, until
    its end or the first member that is torn or not gzip."""
    offset, left = 0, b""
    while True:
        inflate, parts = zlib.decompressobj(zlib.MAX_WBITS | 16), []
        while not inflate.eof:
            data = left or f.read(piece)
            left = b""
            if not data:
                return  # (the end of the file: between members, or within a torn one)
            try:
                parts.append(inflate.decompress(data))
            except zlib.error:
                return
            left = inflate.unused_data
            offset += len(data) - len(left)
        yield offset, b"".join(parts)


def _whole_record(raw: bytes) -> bytes | None:
    """A WARC record's type if ``raw`` is one whole record (its headers, a block of its
    Content-Length, the two line ends after it), else None."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep or not head.startswith(b"WARC/"):
        return None
    fields = dict(line.partition(b":")[::2] for line in head.split(b"\r\n")[1:])
    fields = {name.strip().lower(): value.strip() for name, value in fields.items()}
    try:
        length = int(fields.get(b"content-length", b""))
    except ValueError:
        return None
    if len(rest) != length + 4 or not rest.endswith(b"\r\n\r\n"):
        return None
    return fields.get(b"warc-type")


def read_record(data: bytes) -> tuple[dict, bytes]:
    """The WARC headers and the HTTP body of one gzipped response record (what a ranged
    read of an archive pointer returns)."""
    record = _first_record(data)
    return dict(record.rec_headers.headers), record.content_stream().read()


def _first_record(data: bytes):
    """The first record of ``data``; LookupError when it holds none (a pointer that points
    at nothing: an empty range, one past the object's end)."""
    try:
        record = next(iter(ArchiveIterator(io.BytesIO(data))), None)
    except ArchiveLoadFailed:  # (bytes that are no record: a pointer off its record's start)
        record = None
    if record is None:
        raise LookupError("the archive pointer points at no record")
    return record


FOLLOWED = 4  # revisit records read_payload follows at most (a copy of a page fetched again unchanged: 2)


def read_payload(get_range, pointer: dict, pointer_of, find=None) -> tuple[str | None, bytes]:
    """The HTTP Content-Type and the body of the capture at ``pointer`` (``key``,
    ``offset``, ``length``, ``bucket``), read with ``get_range(key, offset, length, bucket)``.
    A revisit record is followed to the capture it refers to: ``pointer_of(url)``, the archive
    pointer of that URL's stored record, which holds the URL's last fetch. That capture serves
    when its payload is the revisit's (the same payload digest), and is followed in turn when it
    is a revisit of the same payload (the URL fetched again unchanged); when the URL was fetched
    again with another body, ``find(url, digest, date)`` gives the pointer of its capture with
    the revisit's payload (the archive's index; None: not found). LookupError when that capture
    is not stored, the pointer points at no record, or revisits lead back where they began."""
    record = _read_at(get_range, pointer)
    seen, want, date = [pointer], None, None  # the payload digest and the date the first revisit names
    while record.rec_type == "revisit":
        if len(seen) > FOLLOWED:
            raise LookupError(f"the revisit records from {pointer['key']} lead on past {FOLLOWED} records")
        target = record.rec_headers.get_header("WARC-Refers-To-Target-URI")
        if want is None:
            want = record.rec_headers.get_header("WARC-Payload-Digest")
            date = record.rec_headers.get_header("WARC-Refers-To-Date")
        original = pointer_of(target) if target else None
        stored = bool(original) and original not in seen
        if stored:
            record = _read_at(get_range, original)
        if not stored or (want and record.rec_headers.get_header("WARC-Payload-Digest") != want):
            # (none stored, or the URL fetched again since with another body: its capture of
            # this payload, by the archive's index)
            original = find(target, want, date) if find is not None and want else None
            if not original or original in seen:
                raise LookupError(
                    f"{target} was fetched again with another body, and its capture that this revisit"
                    " record refers to is not found"
                    if stored
                    else f"the capture {target} that this revisit record refers to is not stored"
                )
            record = _read_at(get_range, original)
        seen.append(original)
    if record.rec_type != "response":
        raise LookupError(f"the capture at {seen[-1]['key']} is a {record.rec_type} record, not a response")
    content_type = record.http_headers.get_header("Content-Type") if record.http_headers else None
    return content_type, record.content_stream().read()


def _read_at(get_range, pointer: dict):
    """The record at an archive pointer (``_first_record``)."""
    return _first_record(get_range(pointer["key"], pointer["offset"], pointer["length"], pointer.get("bucket") or ""))


def warc_date(when: float | None) -> str:
    """A WARC/1.1 date: UTC, to the millisecond."""
    ms = _ms(when)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def _digest(*parts: bytes) -> str:
    """The WARC digest (``sha1:`` and base32) of the bytes ``parts`` make."""
    sha1 = hashlib.sha1()
    for part in parts:
        sha1.update(part)
    return "sha1:" + _base32(sha1.digest())


_PAIRS = [a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"]


def _base32(sha1: bytes) -> str:
    """``base64.b32encode`` of a 20-byte digest, ten bits a step (twice as fast: four
    digests a page)."""
    n = int.from_bytes(sha1, "big")
    return "".join([_PAIRS[(n >> shift) & 1023] for shift in range(150, -1, -10)])


_EMPTY = _digest()  # an empty block's or payload's


def _record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def _ms(when: float | None) -> int:
    return int(round((time.time() if when is None else when) * 1000))


def _request_target(url: str) -> str:
    rest = url.split("://", 1)[1]
    slash = rest.find("/")
    target = rest[slash:] if slash >= 0 else "/"
    return target.split("#", 1)[0] or "/"
