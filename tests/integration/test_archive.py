"""The raw-page archive: WARC batches that other tools read, stored in a local directory
or in S3 (SeaweedFS's S3 gateway on loopback, scripts/s3server.py, through boto3), each
page's pointer returning exactly the bytes the site sent, through an outage of S3 too.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_archive.py, tests/e2e/test_archive.py."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.archive.storage import S3Storage, StorageRefused
from crawler.archive.warc import RawPage, WarcBatch, read_record, recover
from testing.servers import free_port


def warcio_check(path) -> subprocess.CompletedProcess:
    code = "import sys; from warcio.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, "check", "-v", str(path)], capture_output=True, text=True)


def _page(i: int) -> RawPage:
    body = (f"<html><body>page {i} " + "x" * 500 + "</body></html>").encode()
    return RawPage(
        url=f"http://a.example/p{i}",
        status=200,
        reason="OK",
        protocol="HTTP/1.1",
        headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
        body=body,
        request_headers=[("User-Agent", "crawler/0.1")],
        ip_address="127.0.0.2",
        fetched_at=1_700_000_000,
    )


def test_a_batch_is_standard_warc_and_each_record_reads_alone(tmp_path):
    batch = WarcBatch(str(tmp_path / "spool" / "b.warc.gz"), "b")
    pointers = [(batch.add(_page(i)), _page(i).body) for i in range(5)]
    batch.close()
    data = Path(batch.path).read_bytes()
    for (offset, length), body in pointers:
        headers, got = read_record(data[offset : offset + length])
        assert got == body
        assert headers["WARC-Type"] == "response" and headers["WARC-IP-Address"] == "127.0.0.2"
        assert headers["WARC-Payload-Digest"].startswith("sha1:") and headers["WARC-Target-URI"].startswith("http://")
    check = warcio_check(batch.path)
    assert check.returncode == 0 and check.stdout.count("digest pass") == 10, check.stdout + check.stderr
    assert check.stdout.count(" request") == 5  # a request record beside each response
    assert len(gzip.decompress(data)) > len(data)  # gzipped members


def test_a_big_body_is_compressed_as_it_is_written(tmp_path):
    """A 12 MB body: its record reads back whole between two others, and writing it holds
    no copy of the record (it is compressed 64 KB at a time into the spool file)."""
    import random
    import tracemalloc

    rng = random.Random(7)
    big = _page(1)
    big.body = b"<html><body>" + bytes(rng.choices(b"abcdefgh <p>", k=12 * 2**20)) + b"</body></html>"
    batch = WarcBatch(str(tmp_path / "spool" / "b.warc.gz"), "b")
    batch.add(_page(0))
    tracemalloc.start()
    pointer = batch.add(big)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    last = batch.add(_page(2))
    batch.close()
    data = Path(batch.path).read_bytes()
    assert read_record(data[pointer[0] : pointer[0] + pointer[1]])[1] == big.body
    assert read_record(data[last[0] : last[0] + last[1]])[1] == _page(2).body
    assert peak < 2**20, peak  # was the 12 MB record, then its member
    check = warcio_check(batch.path)
    assert check.returncode == 0 and check.stdout.count("digest pass") == 6, check.stdout + check.stderr


def test_a_torn_spool_file_keeps_its_complete_records(tmp_path):
    batch = WarcBatch(str(tmp_path / "t.warc.gz"), "t")
    for i in range(3):
        batch.add(_page(i))
    batch.close()
    path = Path(batch.path)
    path.write_bytes(path.read_bytes()[:-25])  # a worker died while writing the last record
    assert recover(str(path)) == 3
    assert warcio_check(path).returncode == 0


def test_a_spool_file_torn_anywhere_in_a_record_keeps_the_whole_ones_before_it(tmp_path):
    """A torn last gzip member inflates without an error: a record cut inside its body was
    kept, stored and indexed as a capture of a truncated page (or, cut elsewhere, the file
    could not be indexed and stayed in the spool for good). Cut at points all through a
    page's records, the file keeps exactly the whole records before the cut, each page whole."""
    import random

    from warcio.archiveiterator import ArchiveIterator

    big = _page(1)
    big.body = b"<html><body>" + bytes(random.Random(3).choices(b"abcdefgh <p>", k=50_000)) + b"</body></html>"
    batch = WarcBatch(str(tmp_path / "t.warc.gz"), "t")
    batch.add(_page(0))
    starts = [batch.add(big)[0]]
    batch.close()
    data = Path(batch.path).read_bytes()
    bounds = []
    with open(batch.path, "rb") as f:
        records = ArchiveIterator(f)
        for record in records:
            record.content_stream().read()
            bounds.append(records.get_record_offset() + records.get_record_length())
    first = max(b for b in bounds if b <= starts[0])  # (the end of the first page's records)
    torn = tmp_path / "torn.warc.gz"
    for cut in range(first + 1, len(data), max((len(data) - first) // 60, 1)):
        torn.write_bytes(data[:cut])
        kept = recover(str(torn))
        size = torn.stat().st_size
        assert size == max(b for b in [0, *bounds] if b <= cut), cut
        bodies = {}
        with open(torn, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    bodies[record.rec_headers.get_header("WARC-Target-URI")] = record.content_stream().read()
        assert kept == len(bodies) and bodies.get(big.url, big.body) == big.body, cut
        assert warcio_check(torn).returncode == 0, cut


def _read_back(batch):
    """A closed batch's bytes, a ``get_range`` over them, and the archive pointer of an
    (offset, length) the batch gave (its key ``b``)."""
    data = Path(batch.path).read_bytes()

    def get_range(key, offset, length, bucket=""):
        return data[offset : offset + length]

    def pointer(at):
        return {"key": "b", "offset": at[0], "length": at[1], "bucket": ""}

    return data, get_range, pointer


def test_an_exact_copy_reads_its_originals_capture_and_a_pointer_at_no_record_is_none(tmp_path):
    """An exact copy's revisit record is read through its original's pointer, which must be
    a response (a revisit there: not stored); a pointer at no record (past its object's
    end, of no length, off a record's start) is none either: it raised StopIteration,
    which hung the server's read."""
    from dataclasses import replace

    from crawler.archive.warc import IDENTICAL_PAYLOAD, Refers, read_payload

    batch = WarcBatch(str(tmp_path / "b.warc.gz"), "b")
    first = _page(0)
    original = batch.add(first)
    refers = Refers(IDENTICAL_PAYLOAD, first.url, first.fetched_at, None)
    copy = batch.add(replace(first, url="http://b.example/", refers=refers))
    other = batch.add(replace(first, url="http://c.example/", refers=refers))  # (another revisit)
    batch.close()
    data, get_range, pointer = _read_back(batch)

    assert read_payload(get_range, pointer(copy), lambda url: pointer(original))[1] == first.body
    with pytest.raises(LookupError, match="is not stored"):  # (its original's pointer, a revisit of itself)
        read_payload(get_range, pointer(copy), lambda url: pointer(other))
    for nowhere in ((len(data) + 10, 100), (0, 0), (original[0] + 3, original[1])):
        with pytest.raises(LookupError, match="points at no record"):
            read_payload(get_range, pointer(nowhere), lambda url: None)


def test_an_exact_copy_reads_the_body_it_copied_after_its_original_was_fetched_again(tmp_path):
    """The copy's revisit names its payload's digest: when the original's stored pointer has
    moved on to a later fetch with another body, or to a revisit of its own (fetched again
    unchanged), the copy is served the body it copied (found by the archive's index), never
    the later one; without an index to ask, a clear LookupError. (Before, the later body.)"""
    import hashlib
    from dataclasses import replace

    from crawler.archive.warc import IDENTICAL_PAYLOAD, Refers, payload_digest, read_payload

    batch = WarcBatch(str(tmp_path / "b.warc.gz"), "b")
    first = _page(0)
    digest = payload_digest(hashlib.sha1(first.body).hexdigest())
    original = batch.add(first)
    copy = batch.add(replace(first, url="http://b.example/", refers=Refers(IDENTICAL_PAYLOAD, first.url, 1.0, digest)))
    changed = batch.add(replace(first, body=b"<html><body>another body</body></html>", fetched_at=1_700_086_400))
    again = batch.add(
        replace(first, fetched_at=1_700_172_800, refers=Refers(IDENTICAL_PAYLOAD, first.url, 1.0, digest))
    )
    batch.close()
    _, get_range, pointer = _read_back(batch)

    asked = []

    def find(url, want, date):  # (the archive's index: the capture of ``url`` with that payload)
        asked.append((url, want))
        return pointer(original) if (url, want) == (first.url, digest) else None

    assert read_payload(get_range, pointer(copy), lambda url: pointer(original))[1] == first.body
    assert not asked
    for latest in (changed, again):
        assert read_payload(get_range, pointer(copy), lambda url, at=latest: pointer(at), find)[1] == first.body
        with pytest.raises(LookupError, match="another body|is not stored"):
            read_payload(get_range, pointer(copy), lambda url, at=latest: pointer(at))
    assert asked == [(first.url, digest)] * 2


@pytest.mark.parametrize("rebuilt", [False, True], ids=["batch index", "cdxj-indexer"])
def test_the_archives_index_finds_the_capture_an_exact_copy_refers_to(tmp_path, rebuilt):
    """Collection.pointer_of_payload (scrapy serve's ``find``): the stored index's capture of
    the URL holding that payload, the nearest the date named, a revisit never; read through
    read_payload, the copy gets the body it copied though its original's pointer moved on.
    The same from the batch's own index and from one cdxj-indexer builds again."""
    import hashlib
    from dataclasses import replace

    from crawler.archive.collection import Collection
    from crawler.archive.storage import LocalStorage
    from crawler.archive.warc import IDENTICAL_PAYLOAD, Refers, index_key, payload_digest, read_payload

    key = "ab/arch/test/b.warc.gz"
    batch = WarcBatch(str(tmp_path / "spool" / "b.warc.gz"), key)
    first = _page(0)
    digest = payload_digest(hashlib.sha1(first.body).hexdigest())
    original = batch.add(first)
    copy = batch.add(replace(first, url="http://b.example/", refers=Refers(IDENTICAL_PAYLOAD, first.url, 1.0, digest)))
    changed = batch.add(replace(first, body=b"<html><body>another body</body></html>", fetched_at=1_700_086_400))
    batch.close()
    storage = LocalStorage(str(tmp_path / "archive"))
    storage.put(key, batch.path)
    if rebuilt:
        Collection(storage, "test", "arch/").index_of(key, rebuild=True)  # (cdxj-indexer's lines, stored)
    else:
        storage.put(index_key(key), batch.index_path)
    collection = Collection(storage, "test", "arch/")  # (a collection lists its keys once)

    def at(where):
        return {"key": key, "offset": where[0], "length": where[1], "bucket": ""}

    assert collection.pointer_of_payload(first.url, digest, "2023-11-14T22:13:20Z") == at(original)
    assert collection.pointer_of_payload(first.url, "sha1:" + "A" * 32, None) is None
    assert collection.pointer_of_payload("http://b.example/", digest, None) is None  # (a revisit only)
    got = read_payload(storage.get_range, at(copy), lambda url: at(changed), collection.pointer_of_payload)
    assert got == ("text/html", first.body)


def test_s3_storage_puts_once_and_reads_a_range(s3, tmp_path):
    endpoint, bucket = s3
    src = tmp_path / "f.warc.gz"
    src.write_bytes(bytes(range(256)) * 40)
    storage = S3Storage(bucket, endpoint_url=endpoint, region="us-east-1")
    storage.put("12/x/f.warc.gz", str(src))
    assert storage.puts == 1
    assert storage.get_range("12/x/f.warc.gz", 2, 3) == bytes([2, 3, 4])
    assert storage.get_range("12/x/f.warc.gz", 10_000, 240) == src.read_bytes()[10_000:]  # the last byte included
    head = storage.client.head_object(Bucket=bucket, Key="12/x/f.warc.gz")
    assert head["ContentLength"] == 10_240
    storage.put("12/x/f.warc.gz", str(src))  # a retried upload writes the same key again
    listed = storage.client.list_objects_v2(Bucket=bucket)["Contents"]
    assert [o["Key"] for o in listed] == ["12/x/f.warc.gz"]


def test_s3_storage_refuses_at_once_what_no_retry_mends(s3, tmp_path, monkeypatch):
    """A secret key or an access key the server does not know: StorageRefused on the first
    answer, not retried as an outage would be. (SeaweedFS makes a bucket that is not there
    at the first PUT of an identity with every right: no NoSuchBucket to try here.)"""
    endpoint, bucket = s3
    src = tmp_path / "f.warc.gz"
    src.write_bytes(b"x" * 100)
    retries, tried = [], []
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"):
        monkeypatch.setenv(name, os.environ[name] + "-wrong")
        storage = S3Storage(bucket, endpoint_url=endpoint, region="us-east-1", retry_min=30)
        storage.on_retry = lambda: retries.append(1)
        with pytest.raises(StorageRefused, match="SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied"):
            storage.put("k.warc.gz", str(src))
        tried.append(storage.puts)
    assert (tried, retries) == ([1, 1], [])


def test_a_spool_file_of_a_live_worker_is_not_taken_as_left_over():
    import socket

    from crawler.pipelines.archive import _worker_alive

    host = socket.gethostname()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _worker_alive(f"{host}-{live.pid}-1a2b3c-000001.warc.gz")
    finally:
        live.kill()
        live.wait()
    assert not _worker_alive(f"{host}-{live.pid}-1a2b3c-000001.warc.gz")  # gone: its file is left over
    assert not _worker_alive(f"other-host-{live.pid}-1a2b3c-000001.warc.gz")
    assert not _worker_alive("garbage.warc.gz")


def test_s3_storage_checks_its_bucket_and_ignores_the_crawls_proxy(s3, monkeypatch):
    """HeadBucket at start: a bucket that is not there, or credentials the server refuses,
    are one line naming what to fix (SeaweedFS would make a mistyped bucket at the first
    PUT); a server that does not answer is no such line. The crawl's HTTP_PROXY (for the
    web) is not S3's unless ARCHIVE_S3_PROXY says so. (SeaweedFS answers HeadBucket whatever
    the credentials: a refused upload says those, StorageRefused above.)"""
    endpoint, bucket = s3
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "")
    assert S3Storage(bucket, endpoint_url=endpoint, region="us-east-1").check() is None
    missing = S3Storage(bucket + "-typo", endpoint_url=endpoint, region="us-east-1").check()
    assert missing == f"the archive's bucket s3://{bucket}-typo does not exist (ARCHIVE_S3_BUCKET)"
    through_env = S3Storage(bucket, endpoint_url=endpoint, region="us-east-1", proxy="env")
    assert through_env.check() is None  # (the proxy does not answer: no verdict, a warning)
    with pytest.raises(Exception, match="proxy|Proxy"):
        through_env.client.head_bucket(Bucket=bucket)


SPOOL_FULL = r"""
import os, resource, signal, sys
from scrapy.utils.test import get_crawler
from twisted.internet import defer, task
from crawler.exceptions import StoreUnavailable
from crawler.pipelines.archive import ArchivePipeline
from testing.services import project_settings

async def main(reactor):
    settings = project_settings(CRAWL_DIR=sys.argv[1], CRAWL_NAME="full", ARCHIVE_ENABLED=True)
    crawler = get_crawler(settings_dict=settings)
    pipeline = ArchivePipeline.from_crawler(crawler)
    await pipeline.open_spider()
    page = {"url": "http://a.example/", "status": 200, "headers": {}, "body": os.urandom(256 * 1024)}
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (EFBIG: a write past the limit fails, as on a full disk)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
    try:
        await pipeline.process_item(dict(page))
        print("stored")
    except StoreUnavailable as exc:
        print("unavailable:", exc)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print("spool errors", crawler.stats.get_value("archive/spool_errors"))
    item = await pipeline.process_item(dict(page))  # (the disk has room again)
    print("archived", item["archive"]["length"] > 0)
    await pipeline.close_spider()

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def test_a_page_the_spool_cannot_take_is_dropped_as_not_stored(tmp_path):
    """The spool's disk refuses a write (a file limit: the write fails, as on a full disk):
    the page is dropped with StoreUnavailable, as the UrlStore drops one it cannot store,
    so that its lease is given back and it is fetched again (a page failed with another
    error was acknowledged as stored, with neither record nor archive); counted; the next
    page, with room again, is archived."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", SPOOL_FULL, str(tmp_path)], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("unavailable: Page not archived: the spool in ") and "File too large" in lines[0], lines
    assert lines[1:] == ["spool errors 1", "archived True"], lines


ARCHIVE_DIR_FAILS = r"""
import os, sys
from scrapy.utils.test import get_crawler
from twisted.internet import defer, task
from crawler.pipelines.archive import ArchivePipeline
from crawler.services import services
from testing.services import project_settings

async def main(reactor):
    crawl_dir, archive_dir = sys.argv[1], sys.argv[2]
    settings = project_settings(CRAWL_DIR=crawl_dir, CRAWL_NAME="fails", ARCHIVE_ENABLED=True, ARCHIVE_DIR=archive_dir)
    crawler = get_crawler(settings_dict=settings)
    pipeline = ArchivePipeline.from_crawler(crawler)
    await pipeline.open_spider()
    outcomes = []
    for again in range(3):  # (the same pages fetched again after each failed batch)
        for i in range(4):
            item = {"url": f"http://a.example/{i}", "status": 200, "headers": {}, "body": os.urandom(2000),
                    "fetched_at": 1e9 + again * 10 + i}
            await pipeline.process_item(item)
            services(crawler).pages.take(item).addCallbacks(
                lambda _: outcomes.append("stored"), lambda f: outcomes.append("not stored"))
        pipeline._close_batch()
        while pipeline._storing:
            await task.deferLater(reactor, 0.05, lambda: None)
        spool = [f for _, _, files in os.walk(pipeline.spool_dir) for f in files]
        print(f"batch {again}: {outcomes.count('not stored')} not stored, {len(spool)} spool files")
    await pipeline.close_spider()

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def test_a_batch_the_local_archive_cannot_take_leaves_nothing_behind(tmp_path):
    """A batch whose local store fails (here ARCHIVE_DIR cannot be made; a full disk
    likewise): its pages are not acknowledged (fetched again), and its spool files are
    deleted (they stayed for the rest of the run, a copy at each failure, and the next
    start stored them beside the pages' later captures); a copy that fails halfway leaves
    no part file in the archive's directory."""
    from crawler.archive.storage import LocalStorage

    root = Path(__file__).resolve().parents[2]
    archive_dir = tmp_path / "archive"
    archive_dir.write_text("")  # (a file where the directory should be)
    proc = subprocess.run(
        [sys.executable, "-c", ARCHIVE_DIR_FAILS, str(tmp_path / "crawl"), str(archive_dir)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [f"batch {n}: {4 * (n + 1)} not stored, 0 spool files" for n in range(3)]
    # a copy the disk fails halfway (its fsync: a full or failing disk) leaves no part
    storage = LocalStorage(str(tmp_path / "local"))
    src = tmp_path / "object"
    src.write_bytes(b"x" * 1000)

    def failing(fd):
        raise OSError(28, "No space left on device")

    real = os.fsync
    os.fsync = failing
    try:
        with pytest.raises(OSError, match="No space left"):
            storage.put("ab/c.warc.gz", str(src))
    finally:
        os.fsync = real
    assert [p.name for p in (tmp_path / "local").rglob("*") if p.is_file()] == []


def test_archive_pointers_a_closing_worker_could_not_wait_for_are_counted_and_said(caplog):
    """The UrlStore pipeline waits at close for the archive pointers still to be written
    (their batches being stored), up to WORKER_STOP_TIMEOUT and a margin; those left then
    (their pages not acknowledged: fetched again) are counted and said in one line, not
    dropped in silence. (No time left to wait here: no reactor runs in a unit test.)"""
    import asyncio

    from scrapy.utils.test import get_crawler
    from twisted.internet.defer import Deferred

    from crawler.pipelines.urlstore import CLOSE_MARGIN, UrlStorePipeline
    from crawler.spiders.broad import BroadSpider
    from testing.services import project_settings

    crawler = get_crawler(BroadSpider, project_settings(WORKER_STOP_TIMEOUT=-CLOSE_MARGIN))
    pipeline = UrlStorePipeline(crawler, None)
    pipeline._pointers.update([Deferred(), Deferred()])  # (two pages whose batches are not stored)
    asyncio.run(pipeline.close_spider())
    assert crawler.stats.get_value("urlstore/pointers_unwritten") == 2
    assert "2 archive pointers not written at close" in caplog.text and "fetched again" in caplog.text
