"""Every pipeline together, end to end: a loopback multi-host site with exact and near
duplicate pages, the archive on S3 (a SeaweedFS server of the test's own, killed mid-crawl
and started again), the SQLite UrlStore."""

import subprocess
import time
import uuid
from pathlib import Path

from crawler.archive.storage import S3Storage
from crawler.archive.warc import read_payload, read_record
from crawler.demo.plan import ARTICLES
from crawler.demo.site import serve_site
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.stores import new_s3_server, s3_archive_settings
from testing.workers import clean_env, crawl_command, log_tail, loopback_settings, read_pages, seed_file
from tests.e2e.test_archive import ArchiveReadBack, assert_every_served_page_archived

ROOT = Path(__file__).resolve().parents[2]


def test_pages_stored_archived_and_deduplicated_through_an_s3_crash(tmp_path, redis_url, monkeypatch):
    server = new_s3_server(tmp_path / "s3")
    try:
        bucket = server.new_bucket()
        server.use(monkeypatch)
        _crawl_through_a_crash(server, bucket, tmp_path, redis_url)
    finally:
        server.stop(kill=True)


def _crawl_through_a_crash(server, bucket: str, tmp_path: Path, redis_url: str) -> None:
    endpoint = server.endpoint
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=3, pages=8, articles=True) as site:
        seeds = seed_file(tmp_path, site.seeds)
        out = tmp_path / "pages.jsonl"
        settings = loopback_settings(
            name,
            tmp_path / "worker.log",
            FRONTIER_HOST_INTERVAL=0.1,
            **s3_archive_settings(endpoint, bucket),
            ARCHIVE_MAX_SECONDS=0.5,
            ARCHIVE_RETRY_MIN=0.5,
            ARCHIVE_RETRY_MAX=1,
        )
        env = {**clean_env(), "REDIS_URL": redis_url}
        proc = subprocess.Popen(crawl_command(out, seeds, settings), cwd=ROOT, env=env)
        try:
            deadline = time.monotonic() + 60
            while len(site.page_hits()) < 6 and time.monotonic() < deadline:
                time.sleep(0.1)
            server.stop(kill=True)  # S3 crashes (SIGKILL) mid-crawl; its objects are on its disk
            # away until uploads have really failed and been tried again (at most 30 s)
            log, deadline = tmp_path / "worker.log", time.monotonic() + 30
            while time.monotonic() < deadline and _failed_uploads(log) < 2:
                time.sleep(0.2)
            failed_during_outage = _failed_uploads(log)
            server.start()  # the same ports and data
            assert proc.wait(timeout=180) == 0, log_tail([tmp_path / "worker.log"], 40, "no log")
        finally:
            if proc.poll() is None:
                proc.kill()
        html = {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in site.page_paths()}
        html |= {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in ARTICLES}
        fetched = {site.url(hit.host, hit.path) for hit in site.page_hits()}
        # every pointer names one response record of an object in the bucket; every page
        # served reads back as the read API answers it
        archive = ArchiveReadBack(tmp_path / "crawl", name, endpoint, bucket)
        try:
            assert assert_every_served_page_archived(site, archive) >= 3 * 8
        finally:
            archive.close()

    assert failed_during_outage >= 2  # the outage mattered: uploads failed and were retried
    pages = read_pages(out)
    store = SqliteUrlStore(str(tmp_path / "crawl" / name / "urlstore.sqlite"))
    storage = S3Storage(bucket, endpoint_url=endpoint, region="us-east-1")
    try:
        # every fetched page has a row; an archived page's pointer returns exactly the bytes sent
        archived = 0
        for page in pages:
            row = store.get(page["url"], follow_canonical=False)
            assert row is not None and row["status"] == page["status"], page["url"]
            if row["fate"] == "fetched" and row["status"] == 200:
                _, body = read_record(storage.get_range(**_pointer(row)))
                assert body == html[row["final_url"]].encode(), row["url"]
                archived += 1
        assert archived >= 3 * 8
        assert fetched <= {page[k] for page in pages for k in ("url", "final_url")}

        # the article and its printed version (a near copy of it, one word changed) are
        # archived once each; every exact copy points to the page with its bytes
        articles = [store.get(site.url(h, path), follow_canonical=False) for h in range(3) for path in ARTICLES]
        originals = [row for row in articles if row["fate"] == "fetched"]
        assert len(originals) == 2 and all(row["archive"] for row in originals)
        first, near = sorted(originals, key=lambda row: row["near_duplicate_of"] is not None)
        assert first["near_duplicate_of"] is None and near["near_duplicate_of"] == first["url"]
        assert 0.9 <= near["resemblance"] < 1 and near["canonical_url"] is None
        duplicates = [row for row in articles if row["fate"] == "duplicate"]
        assert len(duplicates) == 4
        for row in duplicates:
            same = first if row["content_digest"] == first["content_digest"] else near
            assert row["content_digest"] == same["content_digest"]
            assert row["canonical_url"] == same["url"]
            # its pointer names its revisit record, which reads back as the original's bytes
            headers, _ = read_record(storage.get_range(**_pointer(row)))
            assert headers["WARC-Type"] == "revisit" and headers["WARC-Refers-To-Target-URI"] == same["url"]
            assert read_payload(storage.get_range, row["archive"], lambda u: store.get(u)["archive"]) == read_payload(
                storage.get_range, same["archive"], None
            )
            assert store.get(row["url"])["url"] == same["url"]  # get follows canonical_url

        # outlinks and inlinks agree
        for page in pages:
            for link in store.outlinks(page["url"]):
                if store.get(link["url"], follow_canonical=False) is not None:
                    sources = {inlink["url"] for inlink in store.inlinks(link["url"])}
                    assert page["url"] in sources, (page["url"], link["url"])
    finally:
        store.close()


def _pointer(row) -> dict:
    a = row["archive"]
    return {"key": a["key"], "offset": a["offset"], "length": a["length"]}


def _failed_uploads(log: Path) -> int:
    """Failed S3 upload attempts the worker logged (each is tried again)."""
    try:
        return log.read_text(errors="replace").count("S3 upload of s3://")
    except FileNotFoundError:
        return 0
