"""The records of a WARC batch as web archives expect them (WARC/1.1): a warcinfo record
first; a response with its request and a metadata record (outlinks, fetch time); an exact
copy and a 304 as revisit records naming the capture they stand for; and the batch's own
CDXJ index, line for line what cdxj-indexer makes of the same file."""

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from crawler.archive import cdxj, warc
from crawler.archive.warc import (
    IDENTICAL_PAYLOAD,
    NOT_MODIFIED,
    RawPage,
    Refers,
    WarcBatch,
    index_key,
    payload_digest,
    warc_date,
)

BODY = b"<html><head><title>A</title></head><body><a href='/b'>b</a></body></html>"
FETCHED = 1_700_000_000.25


def page(url: str, **kw) -> RawPage:
    fields = dict(
        url=url,
        status=200,
        reason="OK",
        protocol="HTTP/1.1",
        headers=[("Content-Type", "text/html; charset=utf-8"), ("ETag", '"v1"')],
        body=BODY,
        request_headers=[("User-Agent", "crawler/0.1")],
        fetched_at=FETCHED,
    )
    fields.update(kw)
    return RawPage(**fields)


def records(path) -> list:
    with open(path, "rb") as f:
        out = []
        for record in ArchiveIterator(f):
            out.append((record.rec_type, record.rec_headers, record.content_stream().read()))
        return out


def written_batch(tmp_path) -> WarcBatch:
    batch = WarcBatch(
        str(tmp_path / "spool" / "ab" / "c.warc.gz"), "ab/c.warc.gz", info={"isPartOf": "c", "robots": "obey"}
    )
    batch.add(page("http://a.example/", outlinks=["http://a.example/b", "http://b.example/"], fetch_ms=42))
    digest = "sha1:" + hashlib.sha1(BODY).hexdigest()
    batch.add(
        page(
            "http://mirror.example/",
            fetched_at=FETCHED + 5,
            refers=Refers(IDENTICAL_PAYLOAD, "http://a.example/", FETCHED, payload_digest(digest)),
        )
    )
    not_modified = page(
        "http://a.example/",
        status=304,
        reason="Not Modified",
        headers=[("ETag", '"v1"')],
        body=b"",
        fetched_at=FETCHED + 3600,
    )
    not_modified.refers = Refers(NOT_MODIFIED, "http://a.example/", FETCHED, payload_digest(digest))
    batch.add(not_modified)
    batch.close()
    return batch


def test_a_batch_opens_with_warcinfo_and_its_copies_are_revisits(tmp_path):
    batch = written_batch(tmp_path)
    got = records(batch.path)
    assert [t for t, _, _ in got] == [
        "warcinfo",
        "response", "request", "metadata",
        "revisit", "request",
        "revisit", "request",
    ]  # fmt: skip
    assert all(h.protocol == "WARC/1.1" for _, h, _ in got)
    info = got[0][2].decode()
    assert "isPartOf: c\r\n" in info and "robots: obey\r\n" in info
    response, metadata, copy, not_modified = got[1][1], got[3], got[4][1], got[6][1]
    assert metadata[1]["Content-Type"] == "application/warc-fields"
    assert metadata[1]["WARC-Concurrent-To"] == response["WARC-Record-ID"]
    assert metadata[2] == b"outlink: http://a.example/b\r\noutlink: http://b.example/\r\nfetchTimeMs: 42\r\n"
    assert response["WARC-Date"] == warc_date(FETCHED) == "2023-11-14T22:13:20.250Z"
    # the copy: its payload is the original's, named by URL, date and digest
    assert copy["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    assert copy["WARC-Refers-To-Target-URI"] == "http://a.example/"
    assert copy["WARC-Refers-To-Date"] == response["WARC-Date"]
    assert copy["WARC-Payload-Digest"] == response["WARC-Payload-Digest"]
    assert copy["WARC-Truncated"] == "length"
    assert got[4][2] == b""  # no payload: the HTTP headers only
    assert not_modified["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    assert not_modified["WARC-Refers-To-Date"] == response["WARC-Date"]
    assert "WARC-Truncated" not in not_modified and got[6][2] == b""  # an empty block
    check = subprocess.run(
        [sys.executable, "-c", "import sys; from warcio.cli import main; sys.exit(main())", "check", "-v", batch.path],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_batch_index_is_what_cdxj_indexer_makes_of_the_file(tmp_path):
    batch = written_batch(tmp_path)
    ours = Path(batch.index_path).read_text().splitlines()
    assert batch.index_path == index_key(batch.path) and batch.index_path.endswith("ab/c.cdxj")
    assert ours == cdxj.index_warc(batch.path, "ab/c.warc.gz")
    assert len(ours) == 3 and ours == sorted(ours)
    captures = cdxj.captures_of(ours, "http://a.example/")
    assert [c.revisit for c in captures] == [False, True]
    assert captures[0].fields["mime"] == "text/html" and captures[0].fields["status"] == "200"
    assert captures[1].fields["mime"] == "warc/revisit" and "status" not in captures[1].fields
    assert cdxj.closest(captures, "2023111422") == captures[0] and cdxj.closest(captures, None) == captures[1]


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=20, max_size=20))
def test_a_digest_is_base32_as_the_standard_library_writes_it(raw):
    assert warc._base32(raw) == base64.b32encode(raw).decode("ascii")
    assert warc.payload_digest(raw.hex()) == "sha1:" + base64.b32encode(raw).decode("ascii")
