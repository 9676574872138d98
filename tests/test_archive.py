"""The raw-page archive: WARC batches that other tools read, stored in a local directory
or in S3 (moto's standalone server on loopback, through boto3), each page's pointer
returning exactly the bytes the site sent."""

import gzip
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import redis

from crawler.archive.storage import LocalStorage, S3Storage
from crawler.archive.warc import RawPage, WarcBatch, object_key, read_record, recover
from crawler.demosite import serve_site
from tests.conftest import CREDENTIALS, moto_servers, s3_archive_settings
from tests.harness import clean_env, crawl_command, log_tail, read_pages, start_worker, stop_workers

ROOT = Path(__file__).resolve().parents[1]


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
    no copy of the record (it is compressed 16 KB at a time into the spool file)."""
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


def test_object_keys_are_deterministic_and_spread():
    assert object_key("c", "w", 1) == object_key("c", "w", 1)
    keys = [object_key("news", "host-1-abc", seq, prefix="warc/") for seq in range(200)]
    assert all(k.split("/", 1)[1].startswith("warc/news/host-1-abc-") for k in keys)
    assert len({k[:2] for k in keys}) > 50  # the leading hash spreads keys over the key space


def test_local_storage_put_and_ranged_read(tmp_path):
    src = tmp_path / "f.warc.gz"
    src.write_bytes(b"0123456789")
    storage = LocalStorage(str(tmp_path / "warc"))
    storage.put("ab/c/f.warc.gz", str(src))
    assert storage.get_range("ab/c/f.warc.gz", 3, 4) == b"3456"


# -- against S3 (moto's server on loopback) --------------------------------------------------


def test_s3_storage_puts_once_and_reads_a_range(s3, tmp_path):
    endpoint, bucket = s3
    src = tmp_path / "f.warc.gz"
    src.write_bytes(b"abcdefghij")
    storage = S3Storage(bucket, endpoint_url=endpoint, region="us-east-1")
    storage.put("12/x/f.warc.gz", str(src))
    assert storage.puts == 1
    assert storage.get_range("12/x/f.warc.gz", 2, 3) == b"cde"


def test_a_crawl_archives_every_page_to_s3(s3, tmp_path):
    endpoint, bucket = s3
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=2, pages=6) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        out = tmp_path / "pages.jsonl"
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": tmp_path / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 0.05,
            "FRONTIER_IDLE_SECONDS": 2,
            **s3_archive_settings(endpoint, bucket),
            "ARCHIVE_MAX_SECONDS": 1,
            "LOG_FILE": tmp_path / "worker.log",
        }
        env = {**clean_env(), **CREDENTIALS}
        proc = subprocess.run(crawl_command(out, seeds, settings), cwd=ROOT, env=env, timeout=180)
        html = {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in site.page_paths()}
    assert proc.returncode == 0, log_tail([tmp_path / "worker.log"], 40, "no log")
    pages = [p for p in read_pages(out) if p["status"] == 200]
    assert len(pages) >= 2 * 6
    storage = S3Storage(bucket, endpoint_url=endpoint, region="us-east-1")
    keys = set()
    archived = {page["url"] for page in pages if "duplicate_of" not in page}
    for page in pages:
        if "duplicate_of" in page:  # the same content as an earlier page: not archived again
            assert "archive" not in page and page["duplicate_of"] in archived
            continue
        pointer = page["archive"]
        assert pointer, page["url"]
        keys.add(pointer["key"])
        headers, body = read_record(storage.get_range(pointer["key"], pointer["offset"], pointer["length"]))
        assert headers["WARC-Target-URI"] == page["final_url"]
        assert body == html[page["final_url"]].encode()  # exactly what the site sent
    listed = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").list_objects_v2(Bucket=bucket)
    assert {o["Key"] for o in listed["Contents"]} == keys
    for key in keys:
        path = tmp_path / key.replace("/", "_")
        path.write_bytes(storage.client.get_object(Bucket=bucket, Key=key)["Body"].read())
        assert warcio_check(path).returncode == 0
    assert not any((tmp_path / "crawl" / name / "archive-spool").rglob("*.warc.gz"))  # spool emptied


def test_s3_going_away_mid_crawl_loses_nothing(s3, tmp_path):
    from moto.server import ThreadedMotoServer

    endpoint, bucket = s3
    port = int(endpoint.rsplit(":", 1)[1])
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=2, pages=8) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        out = tmp_path / "pages.jsonl"
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": tmp_path / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 0.2,
            "FRONTIER_IDLE_SECONDS": 2,
            **s3_archive_settings(endpoint, bucket),
            "ARCHIVE_MAX_SECONDS": 0.5,
            "ARCHIVE_RETRY_MIN": 0.5,
            "ARCHIVE_RETRY_MAX": 1,
            "LOG_FILE": tmp_path / "worker.log",
        }
        env = {**clean_env(), **CREDENTIALS}
        proc = subprocess.Popen(crawl_command(out, seeds, settings), cwd=ROOT, env=env)
        try:
            deadline = time.monotonic() + 60
            while len(site.page_hits()) < 4 and time.monotonic() < deadline:
                time.sleep(0.1)
            # S3 goes away for a while, mid-crawl (its objects are kept: moto keeps state in this process)
            moto_servers[port].stop()
            time.sleep(4)
            replacement = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            replacement.start()
            moto_servers[port] = replacement
            assert proc.wait(timeout=180) == 0, log_tail([tmp_path / "worker.log"], 40, "no log")
        finally:
            if proc.poll() is None:
                proc.kill()
        html = {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in site.page_paths()}
    pages = [p for p in read_pages(out) if p["status"] == 200]
    assert len(pages) >= 2 * 8
    storage = S3Storage(bucket, endpoint_url=endpoint, region="us-east-1")
    for page in pages:
        if "duplicate_of" in page:
            continue
        pointer = page["archive"]
        _, body = read_record(storage.get_range(pointer["key"], pointer["offset"], pointer["length"]))
        assert body == html[page["final_url"]].encode()


def test_records_are_readable_at_once_and_get_their_pointer_when_the_batch_is_stored(tmp_path, redis_url):
    # A page's record is in the UrlStore as soon as the page is read, without its archive
    # pointer; its lease is held until its batch is stored and the pointer written. Pages
    # do not wait in Scrapy for their batch, so a batch that waits for its age (here: an
    # hour) never stops the crawl, even with Scrapy's limit on held responses at 8 KB.
    name = f"test-{uuid.uuid4().hex[:12]}"
    client = redis.Redis.from_url(redis_url)
    with serve_site(hosts=2, pages=12) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        out = tmp_path / "pages.jsonl"
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": tmp_path / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 0.4,
            "FRONTIER_IDLE_SECONDS": 2,
            "ARCHIVE_DIR": tmp_path / "warc",
            "ARCHIVE_MAX_BYTES": 2**30,
            "ARCHIVE_MAX_SECONDS": 3600,
            "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 8 * 1024,
            "LOG_FILE": tmp_path / "worker.log",
        }
        env = {**clean_env(), "REDIS_URL": redis_url}
        started = time.monotonic()
        proc = start_worker(crawl_command(out, seeds, settings), env, tmp_path / "out.txt")
        try:
            db = tmp_path / "crawl" / name / "urlstore.sqlite"
            rows, leased = [], 0
            while time.monotonic() - started < 120 and proc.poll() is None:
                rows = _fetched_rows(db)
                if len(rows) >= 6:
                    leased = client.zcard(f"crawl:{{{name}}}:leases")
                    rows = _fetched_rows(db)
                    break
                time.sleep(0.1)
            proc.wait(timeout=300)
        finally:
            stop_workers([proc])
            took = time.monotonic() - started
            keys = list(client.scan_iter(match=f"crawl:\\{{{name}\\}}:*", count=1000))
            if keys:
                client.delete(*keys)
    assert proc.returncode == 0, log_tail([tmp_path / "worker.log"], 40, "no log")
    # mid-crawl: records there, no pointer yet, their leases held
    assert len(rows) >= 6 and all(key is None for _, key in rows), rows
    assert leased >= len(rows) - 2, (leased, len(rows))  # (a page or two may be in flight too)
    # at the end: every fetched page's record points to its record in the one batch
    pages = [p for p in read_pages(out) if p["status"] == 200 and "duplicate_of" not in p]
    assert len(pages) >= 2 * 12 and all(p.get("archive") for p in pages)
    final = dict(_fetched_rows(db))
    assert all(final[p["url"]] == p["archive"]["key"] for p in pages)
    assert len({p["archive"]["key"] for p in pages}) == 1
    assert (tmp_path / "warc" / pages[0]["archive"]["key"]).is_file()
    assert took < 120, took


def _fetched_rows(db: Path) -> list[tuple[str, str | None]]:
    """(url, archive key) of the fetched pages in a worker's SQLite UrlStore (read while it writes)."""
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute("SELECT url, archive_key FROM urls WHERE fate = 'fetched' AND status = 200").fetchall()
    except sqlite3.OperationalError:  # the table is not created yet
        return []
    finally:
        con.close()


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
