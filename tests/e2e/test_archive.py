"""The raw-page archive: WARC batches that other tools read, stored in a local directory or in
S3 (SeaweedFS's S3 gateway on loopback, scripts/s3server.py, through boto3), each page's
pointer returning exactly the bytes the site sent, through an outage of S3 too: the end-to-
end tests (commands and workers as subprocesses) (the others: tests/unit/test_archive.py,
tests/integration/test_archive.py)."""

import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import redis

from crawler.archive.warc import RawPage, WarcBatch, index_key
from crawler.demo.site import serve_site
from testing.stores import new_s3_server, s3_archive_settings
from testing.workers import (
    Worker,
    clean_env,
    crawl_command,
    log_tail,
    read_pages,
    seed_file,
    start_worker,
    stop_workers,
    until,
)

ROOT = Path(__file__).resolve().parents[2]


def warcio_check(path) -> subprocess.CompletedProcess:
    code = "import sys; from warcio.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, "check", "-v", str(path)], capture_output=True, text=True)


class ArchiveReadBack:
    """A crawl's archive in an S3 bucket, read back as ``scrapy serve`` reads it (its Crawl:
    the UrlStore opened read-only, a ranged GET through storage_from_settings for each
    body), beside every object of the bucket read whole, to check each pointer against."""

    def __init__(self, crawl_dir: Path, name: str, endpoint: str, bucket: str):
        from scrapy.settings import Settings

        from crawler.serve.server import Crawl
        from crawler.urlstore.sqlite import sqlite_path
        from testing.services import project_settings

        settings = project_settings(CRAWL_NAME=name, CRAWL_DIR=str(crawl_dir), **s3_archive_settings(endpoint, bucket))
        self.crawl = Crawl(Settings(settings))
        self.bucket = bucket
        client = self.crawl.storage().client
        self.objects: dict[str, bytes] = {}
        for listing in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in listing.get("Contents", []):
                self.objects[obj["Key"]] = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        # every record of every WARC: key -> offset -> (length, WARC-Type, WARC-Target-URI);
        # each WARC is stored with its CDXJ index, and nothing else is
        self.records = {key: _records(data) for key, data in self.objects.items() if key.endswith(".warc.gz")}
        assert {index_key(key) for key in self.records} | set(self.records) == set(self.objects), sorted(self.objects)
        con = sqlite3.connect(f"file:{sqlite_path(self.crawl.settings)}?mode=ro", uri=True)
        try:
            urls = [url for (url,) in con.execute("SELECT url FROM urls")]
        finally:
            con.close()
        store = self.crawl.store()
        self.rows = {url: store.get(url, follow_canonical=False, normalize=False) for url in urls}

    def pointed(self) -> dict[str, tuple[dict, bytes]]:
        """url -> (its row, the body its pointer reads back) for every row with an archive
        pointer; asserts that none dangles: its object is in the bucket, its range is exactly
        one response record of that object (a revisit record for an exact copy), of the
        row's final URL, and a ranged GET of it returns those bytes (an exact copy's, its
        original's)."""
        from crawler.serve.app import _read_body

        out = {}
        for url, row in self.rows.items():
            pointer = row.get("archive")
            if not pointer:
                continue
            key, offset, length = pointer["key"], pointer["offset"], pointer["length"]
            assert pointer["bucket"] == self.bucket, f"{url}: its pointer names bucket {pointer['bucket']!r}"
            assert key in self.objects, f"{url}: its pointer names {key}, which is not in the bucket"
            record = self.records[key].get(offset)
            kind = "revisit" if row["fate"] == "duplicate" else "response"
            assert record == (length, kind, row["final_url"] or url), (url, pointer, record)
            ranged = self.crawl.storage().get_range(key, offset, length)
            assert ranged == self.objects[key][offset : offset + length], url
            out[url] = (row, _read_body(self.crawl, pointer)[1])
        return out

    def content(self, url: str) -> bytes | None:
        """What /api/crawls/CRAWL/content?url=URL answers: the record of the URL (or of the
        page it is an exact copy of), its body read by a ranged GET; None without one."""
        from crawler.serve.app import _read_body

        found = self.crawl.store().get(url)
        if found is None or not found.get("archive"):
            return None
        return _read_body(self.crawl, found["archive"])[1]

    def close(self) -> None:
        self.crawl.close()


def _records(data: bytes) -> dict[int, tuple[int, str, str]]:
    from warcio.archiveiterator import ArchiveIterator

    out = {}
    it = ArchiveIterator(io.BytesIO(data))
    for record in it:
        record.content_stream().read()
        out[it.get_record_offset()] = (
            it.get_record_length(),
            record.rec_type,
            record.rec_headers.get_header("WARC-Target-URI"),
        )
    return out


def served_pages(site) -> dict[str, bytes]:
    """URL -> body of every page the site answered with 200 (robots.txt aside)."""
    out = {}
    for hit in site.page_hits():
        if hit.status == 200:
            html = site.page(site.hosts.index(hit.host), hit.path.split("?", 1)[0])
            assert html is not None, hit
            out[site.url(hit.host, hit.path)] = html.encode()
    return out


def assert_every_served_page_archived(site, archive: ArchiveReadBack) -> int:
    """Every pointer in the UrlStore reads back its own record (none dangles) holding the
    bytes the site served for its URL, and every page the site served reads back, as the
    read API answers it, byte for byte; every page recorded as fetched has its pointer.
    Returns the number of pointers checked."""
    served = served_pages(site)
    pointed = archive.pointed()
    # no page recorded as fetched is left without its pointer
    fetched = {url for url, row in archive.rows.items() if row["fate"] == "fetched" and row["status"] == 200}
    assert fetched <= set(pointed), sorted(fetched - set(pointed))[:5]
    for url, (row, body) in pointed.items():
        assert body == served[row["final_url"] or url], url
    # a redirect's target has no row of its own: its record is the redirecting URL's
    redirected = {row["final_url"]: url for url, row in archive.rows.items() if row.get("final_url") not in (None, url)}
    for url, body in served.items():
        asked = url if url in archive.rows else redirected.get(url)
        assert asked is not None, f"{url}: served, but no record has it"
        assert archive.content(asked) == body, f"{url}: served, but its archived body does not read back"
    return len(pointed)


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
        proc = subprocess.run(crawl_command(out, seeds, settings), cwd=ROOT, env=clean_env(), timeout=180)
        assert proc.returncode == 0, log_tail([tmp_path / "worker.log"], 40, "no log")
        archive = ArchiveReadBack(tmp_path / "crawl", name, endpoint, bucket)
        try:
            checked = assert_every_served_page_archived(site, archive)
        finally:
            archive.close()
        expected = site.expected_page_urls()
        # scrapy urlstore content URL reads the same bytes from S3
        page = sorted(served_pages(site))[0]
        command = [sys.executable, "-m", "scrapy", "urlstore", "content", page, "--crawl", name]
        for k, v in {"CRAWL_DIR": tmp_path / "crawl", **s3_archive_settings(endpoint, bucket)}.items():
            command += ["-s", f"{k}={v}"]
        content = subprocess.run(command, cwd=ROOT, env=clean_env(), capture_output=True, timeout=60)
        assert content.returncode == 0 and content.stdout == served_pages(site)[page], content.stderr[-2000:]
    pages = [p for p in read_pages(out) if p["status"] == 200]
    assert {p["url"] for p in read_pages(out)} >= expected
    # every page of the feed points where the UrlStore does; each object is pointed to
    keys = set()
    for page in pages:
        # (an exact copy of an earlier page: its pointer names its revisit record)
        assert page["archive"] == archive.rows[page["url"]]["archive"], page["url"]
        keys.add(page["archive"]["key"])
    assert any("duplicate_of" in p for p in pages)
    assert checked == len(pages) >= 2 * 6
    assert set(archive.records) == keys
    for key, data in archive.objects.items():
        if not key.endswith(".warc.gz"):
            continue
        path = tmp_path / key.replace("/", "_")
        path.write_bytes(data)
        assert warcio_check(path).returncode == 0
    assert not any((tmp_path / "crawl" / name / "archive-spool").rglob("*.warc.gz"))  # spool emptied


OUTAGE = 30.0  # seconds the S3 server is down, from its stop to its start

STOP_TIMEOUT = 3  # WORKER_STOP_TIMEOUT of the outage test's workers

FAILED_UPLOAD = re.compile(
    r"S3 upload of s3://[^/\s]+/(\S+) failed \(attempt (\d+): .*\); retrying in ([\d.]+) s \(back-off ([\d.]+) s\); its pages wait"
)

STORED_AFTER = re.compile(r"Stored s3://[^/\s]+/(\S+) after (\d+) attempts")


def _failed_uploads(text: str) -> list[tuple[str, int, float]]:
    """(key, attempt, back-off) of each failed S3 upload a worker logged; the wait before
    the next try is jittered within the back-off's upper half."""
    found = FAILED_UPLOAD.findall(text)
    assert all(float(b) / 2 - 0.01 <= float(w) <= float(b) + 0.01 for _, _, w, b in found), found
    return [(key, int(attempt), float(backoff)) for key, attempt, _, backoff in found]


def _stat(text: str, name: str) -> int:
    """A counter of a worker's closing stats dump (0 when absent)."""
    found = re.search(rf"'{re.escape(name)}': (\d+)", text)
    return int(found.group(1)) if found else 0


def _responses(path: Path) -> list[str]:
    """The WARC-Target-URI of each response record of a WARC file."""
    return [uri for _, kind, uri in _records(path.read_bytes()).values() if kind == "response"]


def _worker_in_own_group(directory: Path, label: str, seeds: Path, settings: dict, env: dict) -> Worker:
    """A worker in a process group of its own, as a terminal or a service manager runs it:
    a signal to the group reaches the worker and its page processes alike."""
    out, log, stdout = (directory / f"{label}{ext}" for ext in (".jsonl", ".log", ".stdout"))
    cmd = crawl_command(out, seeds, {**settings, "LOG_FILE": log})
    with open(stdout, "wb") as f:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Worker(label, proc, out, log, stdout)


UNSTORED = 15  # FRONTIER_MAX_UNSTORED in the S3 outage's crawl


def test_a_mistyped_bucket_stops_the_crawl_before_anything_is_fetched(s3, s3_server, tmp_path):
    """One line naming the setting, exit 2, and the site never asked (SeaweedFS would make
    the mistyped bucket at the first PUT, and the pointers would name it)."""
    endpoint, bucket = s3
    with serve_site(hosts=2, pages=5) as site:
        seeds = seed_file(tmp_path, site.seeds)
        settings = {
            "CRAWL_NAME": f"test-{uuid.uuid4().hex[:12]}",
            "CRAWL_DIR": tmp_path / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            **s3_archive_settings(endpoint, bucket + "-typo"),
            "LOG_FILE": tmp_path / "worker.log",
        }
        proc = subprocess.run(
            crawl_command(tmp_path / "out.jsonl", seeds, settings),
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            timeout=120,
        )
        hits = site.page_hits()
    err = proc.stderr.decode()
    assert proc.returncode == 2, err[-3000:]
    assert err.strip().splitlines() == [
        f"crawl: the archive's bucket s3://{bucket}-typo does not exist (ARCHIVE_S3_BUCKET)"
    ], err[-3000:]
    assert "ERROR: crawl: the archive's bucket" in (tmp_path / "worker.log").read_text()
    assert hits == [] and bucket + "-typo" not in {b["Name"] for b in s3_server.client().list_buckets()["Buckets"]}


def test_uploads_refused_while_the_worker_opens_close_it_once_it_has_opened(s3, s3_server, tmp_path):
    """Credentials the bucket check lets by that may not write (an identity that may read and
    list): the spool file an earlier worker left is refused while a pipeline is still
    opening (one takes 1.5 s, as a store slow to answer): the worker says why once, closes
    once everything it opened can be closed (exit 1, no error of a close that raced the
    opening), fetches nothing, and the spool file stays for the next run."""
    endpoint, bucket = s3
    name, crawl_dir = f"test-{uuid.uuid4().hex[:12]}", tmp_path / "crawl"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # (a worker of this machine that is no more: its spool file is left over)
    left = crawl_dir / name / "archive-spool" / f"{socket.gethostname()}-{gone.pid}-1a2b3c-000001.warc.gz"
    batch = WarcBatch(str(left), "left")
    page = RawPage(
        url="http://127.0.0.2/old.html",
        status=200,
        reason="OK",
        protocol="HTTP/1.1",
        headers=[("Content-Type", "text/html")],
        body=b"<html><body>fetched by the worker before</body></html>",
        request_headers=[("User-Agent", "crawler/0.1")],
        ip_address="127.0.0.2",
        fetched_at=1_700_000_000,
    )
    batch.add(page)
    batch.close()
    log = tmp_path / "worker.log"
    reader_key, reader_secret = s3_server.reader
    env = {**clean_env(), "AWS_ACCESS_KEY_ID": reader_key, "AWS_SECRET_ACCESS_KEY": reader_secret}
    with serve_site(hosts=2, pages=5) as site:
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": crawl_dir,
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            **s3_archive_settings(endpoint, bucket),
            "LOG_FILE": log,
            # after the archive (300), before the UrlStore
            "ITEM_PIPELINES": json.dumps({"testing.pipelines.SlowToOpen": 350}),
        }
        proc = subprocess.run(
            crawl_command(tmp_path / "out.jsonl", seed_file(tmp_path, site.seeds), settings),
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=120,
        )
        hits = site.page_hits()
    text = log.read_text(errors="replace")
    assert proc.returncode == 1, log_tail([log], 60, "")
    assert text.count("The archive refused this worker's uploads (") == 1, log_tail([log], 60, "")
    opened, closing = text.index("SlowToOpen opened"), text.index("Closing spider (archive_refused)")
    assert opened < closing  # (the close waited for the opening)
    assert " ERROR: " not in text.replace("ERROR: The archive refused this worker's uploads", ""), log_tail(
        [log], 60, ""
    )
    assert "Traceback" not in text
    assert hits == []
    assert left.exists()  # for the next run, with credentials that may write
    assert s3_server.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_an_s3_outage_loses_nothing_and_ctrl_c_still_stops_a_worker(tmp_path, redis_url, crawl_name, monkeypatch):
    """The S3 server (a SeaweedFS of its own) stopped for 30 s mid-crawl under two workers
    of one crawl. Worker A rides the outage out: its uploads fail and are tried again with
    a doubling delay, its pages wait without their leases expiring (FRONTIER_LEASE_SECONDS
    is 10), it goes on fetching until it holds FRONTIER_MAX_UNSTORED pages not stored, and
    it finishes by itself once the server is back. Worker
    B is stopped with Ctrl-C while the server is down: it exits within WORKER_STOP_TIMEOUT,
    its waiting pages go back to the frontier and their spool files stay; worker C, the
    same command run again, stores those files and fetches the pages again. At the end
    every page the site served has its record, every UrlStore pointer names an object in
    the bucket and exactly one response record in it, and reads back the site's bytes."""
    server = new_s3_server(tmp_path / "s3")
    workers: list[Worker] = []
    try:
        bucket = server.new_bucket()
        server.use(monkeypatch)
        env = {**clean_env(), "REDIS_URL": redis_url}
        crawl_dir = tmp_path / "crawl"
        spool = crawl_dir / crawl_name / "archive-spool"
        settings = {
            "CRAWL_NAME": crawl_name,
            "CRAWL_DIR": crawl_dir,
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 1.0,
            "FRONTIER_IDLE_SECONDS": 2,
            "FRONTIER_LEASE_SECONDS": 10,
            **s3_archive_settings(server.endpoint, bucket),
            "ARCHIVE_MAX_SECONDS": 2,
            "ARCHIVE_RETRY_MIN": 1,
            "ARCHIVE_RETRY_MAX": 8,
            "WORKER_STOP_TIMEOUT": STOP_TIMEOUT,
            "FRONTIER_MAX_UNSTORED": UNSTORED,
        }
        with serve_site(hosts=3, pages=40) as site:
            seeds = seed_file(tmp_path, site.seeds)
            a = _worker_in_own_group(tmp_path, "a", seeds, settings, env)
            b = _worker_in_own_group(tmp_path, "b", seeds, settings, env)
            workers += [a, b]
            client = server.client()

            def listed() -> set[str]:
                return {o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])}

            until(lambda: len(site.page_hits()) >= 12 and listed(), 90, a, b)
            stored_before = listed()
            fetched_before = len(site.page_hits())
            down = time.monotonic()
            # its S3 port closes at once; the process takes 16 s to end (its filer's last flush)
            stopping = threading.Thread(target=server.stop)
            stopping.start()

            # B's uploads fail and are tried again; then Ctrl-C, to its process group
            until(lambda: len(_failed_uploads(b.text())) >= 2, 30, a, b)
            os.killpg(b.pid, signal.SIGINT)
            interrupted = time.monotonic()
            b_code = b.wait(STOP_TIMEOUT + 30)
            b_took = time.monotonic() - interrupted
            given_back = {path.name: _responses(path) for path in spool.rglob(f"*-{b.pid}-*.warc.gz")}
            c = _worker_in_own_group(tmp_path, "c", seeds, settings, env)  # B's command again
            workers.append(c)

            stopping.join(timeout=60)
            assert not stopping.is_alive()
            time.sleep(max(0.0, down + OUTAGE - time.monotonic()))
            fetched_during = len(site.page_hits()) - fetched_before
            failed_during = len(_failed_uploads(a.text()))
            restarting = time.monotonic()
            server.start()  # returns once it takes writes (a restarted SeaweedFS warms up for 15 s)
            up = time.monotonic()
            stored = None  # when a worker first logged an upload stored after failures
            deadline = up + 150
            while any(w.proc.poll() is None for w in (a, c)) and time.monotonic() < deadline:
                if stored is None and "Stored s3://" in a.text() + c.text():
                    stored = time.monotonic()
                time.sleep(0.2)
            codes = a.wait(1), c.wait(1)
            ended = time.monotonic()
            expected = site.expected_page_urls()
            hits = site.page_hits()
            archive = ArchiveReadBack(crawl_dir, crawl_name, server.endpoint, bucket)
            try:
                checked = assert_every_served_page_archived(site, archive)
            finally:
                archive.close()
    finally:
        for w in workers:
            if w.proc.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
                w.proc.wait(timeout=10)
        server.stop(kill=True)  # (its data goes with the test)

    a_text, b_text, c_text = a.text(), b.text(), c.text()
    failures = {w.label: _failed_uploads(text) for w, text in ((a, a_text), (b, b_text), (c, c_text))}
    print(
        f"S3 down {restarting - down:.0f} s, then its start {up - restarting:.0f} s; {fetched_during} pages "
        f"fetched while down; failed uploads logged: A {len(failures['a'])} ({failed_during} while down), "
        f"B {len(failures['b'])}, C {len(failures['c'])}; first stored after failures "
        f"{(stored or ended) - restarting:.1f} s after the start began; A and C done {ended - up:.1f} s after it "
        f"returned; "
        f"Ctrl-C to B's exit {b_took:.1f} s (WORKER_STOP_TIMEOUT {STOP_TIMEOUT}); "
        f"{sum(map(len, given_back.values()))} pages given back by B; {checked} pointers read back"
    )
    # Ctrl-C while S3 is down: B exits within its bound, its waiting pages given back
    assert b_code == 0, b.tail(60)
    assert b_took < STOP_TIMEOUT + 15, b.tail(60)
    assert "stopping them; their pages go back to the frontier" in b_text, b.tail(60)
    # (a batch opened as the signal came may hold no page yet: nothing of it is waiting)
    assert given_back and any(given_back.values()), given_back
    # the others finish by themselves once S3 is back
    assert codes == (0, 0), a.tail(60) + c.tail(60)
    for text in (a_text, b_text, c_text):
        assert "Traceback" not in text
    assert fetched_during > 0  # the crawl went on while S3 was down
    # ... until each worker held FRONTIER_MAX_UNSTORED pages not stored (a, b, then c; a
    # download or two in flight each), and said so
    assert fetched_during <= 3 * (UNSTORED + 2), fetched_during
    # naming the store that fails, and why (S3 away: its uploads cannot connect)
    waited = re.findall(r"Waiting for the archive \(S3 (\w+)\): ", a.text())
    assert waited and "The stores caught up after" in a.text(), a.tail(60)

    # A's uploads failed and were tried again with a doubling delay up to ARCHIVE_RETRY_MAX,
    # each failure counted, each stored at last after as many attempts as were logged
    assert failed_during >= 8, a.tail(60)
    by_key: dict[str, list[tuple[int, float]]] = {}
    for key, attempt, delay in failures["a"]:
        by_key.setdefault(key, []).append((attempt, delay))
    longest = max(by_key.values(), key=len)
    assert len(longest) >= 5, by_key
    assert longest == [(i + 1, min(2**i, 8)) for i in range(len(longest))], longest
    stored_after = {key: int(n) for key, n in STORED_AFTER.findall(a_text)}
    assert stored_after == {key: len(tries) + 1 for key, tries in by_key.items()}, (stored_after, by_key)
    assert _stat(a_text, "archive/retries") == len(failures["a"])

    # C stored what B left, after the outage: each record of B's spool files
    assert _stat(c_text, "archive/recovered_records") == sum(map(len, given_back.values()))
    assert not list(spool.rglob("*.warc.gz"))
    said = re.findall(r"(Stored|Discarded) the spool file \S+ left by an earlier worker", c_text)
    assert "Stored" in said, c.tail(60)  # (each file: stored, or discarded when it holds no whole record)

    # nothing lost: every page of the site has its record; every page B gave back was
    # fetched again; no other page was fetched twice (A's leases were renewed while its
    # pages waited 30 s and more, three times FRONTIER_LEASE_SECONDS)
    assert expected <= set(archive.rows), sorted(expected - set(archive.rows))[:5]
    assert stored_before <= set(archive.objects)  # the objects stored before the outage are still there
    counts = Counter(site.url(h.host, h.path) for h in hits)
    again = {url for url, n in counts.items() if n > 1}
    refetched = {uri for uris in given_back.values() for uri in uris}
    assert refetched <= again, sorted(refetched - again)[:5]
    assert len(again - refetched) <= len(site.hosts), sorted(again - refetched)


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
