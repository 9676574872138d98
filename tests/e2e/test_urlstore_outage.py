"""The UrlStore refusing writes for a while, mid-crawl: the pages it could not take give
their leases back and are fetched again, nothing is lost, and no record ends with an
archive pointer to a WARC record that is not there.

The store is the SQLite one; another connection holds its write lock (BEGIN EXCLUSIVE)
for a few seconds, longer than the worker waits for it (URLSTORE_SQLITE_TIMEOUT), so the
worker's writes fail as they would with a store that is down."""

from __future__ import annotations

import re
import sqlite3
import time
import uuid

from crawler.archive.warc import read_record
from crawler.demo.site import serve_site
from crawler.urlstore.sqlite import SQLITE_FILE
from testing.workers import clean_env, launch_worker, loopback_settings, seed_file

OUTAGE = 3.0  # seconds the store refuses writes


def test_a_store_that_refuses_writes_for_a_while_loses_nothing(tmp_path, redis_url):
    name = f"test-{uuid.uuid4().hex[:12]}"
    crawl_dir = tmp_path / "crawl"
    settings = loopback_settings(
        name,
        tmp_path / "worker.log",
        CRAWL_DIR=crawl_dir,
        FRONTIER_HOST_INTERVAL=0.1,
        ARCHIVE_MAX_SECONDS=0.5,
        URLSTORE_SQLITE_TIMEOUT=0.2,
        FRONTIER_LEASE_SECONDS=10,
    )
    store = crawl_dir / name / SQLITE_FILE
    with serve_site(hosts=3, pages=10) as site:
        env = {**clean_env(), "REDIS_URL": redis_url}
        worker = launch_worker(tmp_path, "worker", seed_file(tmp_path, site.seeds), settings, env)
        try:
            deadline = time.monotonic() + 60
            while (len(site.page_hits()) < 6 or not store.exists()) and time.monotonic() < deadline:
                time.sleep(0.05)
            hits_before = len(site.page_hits())
            lock = sqlite3.connect(store, timeout=10, isolation_level=None)
            lock.execute("BEGIN EXCLUSIVE")
            time.sleep(OUTAGE)
            lock.execute("COMMIT")
            lock.close()
            hits_during = len(site.page_hits()) - hits_before
            code = worker.wait(120)
        finally:
            worker.kill()
        expected = site.expected_page_urls()
    assert code == 0, worker.tail(60)
    assert hits_during > 0  # the crawl went on while the store was away
    failed = re.search(r"'urlstore/failed': (\d+)", worker.text())  # the closing stats
    assert failed and int(failed.group(1)) > 0, "the store never refused a write: the outage did not matter"
    assert "Traceback" not in worker.text(), worker.tail(60)

    db = sqlite3.connect(store)
    rows = {
        url: (fate, key, offset, length, final)
        for url, fate, key, offset, length, final in db.execute(
            "SELECT url, fate, archive_key, archive_offset, archive_length, final_url FROM urls"
        )
    }
    missing = sorted(u for u in expected if u not in rows)
    assert not missing, missing[:5]
    root = crawl_dir / name / "warc"
    warcs = {p.relative_to(root).as_posix(): p for p in root.rglob("*.warc.gz")}
    for url in expected:
        fate, key, offset, length, final = rows[url]
        assert fate == "fetched" or fate.startswith("duplicate"), (url, fate)
        if not key:  # an exact copy of an archived page: no bytes of its own
            continue
        assert key in warcs, (url, key, sorted(warcs)[:3])  # no pointer to an object not stored
        with open(warcs[key], "rb") as f:
            f.seek(offset)
            headers, _ = read_record(f.read(length))
        assert headers["WARC-Target-URI"] == (final or url)  # a redirect's record is its last hop's
