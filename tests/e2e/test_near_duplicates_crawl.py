"""Near copies in a real crawl: a site whose distinct pages share one frame (header,
menu, sidebar, cookie notice, disclaimer, footer) and carries planted near copies
(crawler.demo.site's ``framed`` option). A `scrapy crawl` worker marks every planted copy
and none of the distinct pages; the copies are archived and recorded as pages of their
own."""

import subprocess
import uuid
from pathlib import Path

from crawler.archive.storage import LocalStorage
from crawler.archive.warc import read_record
from crawler.demo.site import serve_site
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.workers import clean_env, crawl_command, log_tail, loopback_settings, read_pages, seed_file

ROOT = Path(__file__).resolve().parents[2]


def test_a_crawl_marks_the_planted_near_copies_and_no_distinct_page(tmp_path, redis_url):
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=3, pages=24, framed=True) as site:
        seeds = seed_file(tmp_path, site.seeds)
        out = tmp_path / "pages.jsonl"
        settings = loopback_settings(
            name,
            tmp_path / "worker.log",
            **{},
        )
        env = {**clean_env(), "REDIS_URL": redis_url}
        proc = subprocess.run(crawl_command(out, seeds, settings), cwd=ROOT, env=env, timeout=240)
        assert proc.returncode == 0, log_tail([tmp_path / "worker.log"], 40, "no log")
        copies = {site.url(h, copy): site.url(h, original) for h in site.hosts for original, copy in site.near_copies()}
        distinct = {site.url(h, f"/p{i}.html") for h in site.hosts for i in range(site.n_pages)}
        bodies = {
            site.url(h, path): site.page(i, path) for i, h in enumerate(site.hosts) for path in copies_paths(site)
        }

    # (/old.html redirects to /p1.html: the page is recorded under whichever was fetched first)
    pages = {url: page for page in read_pages(out) for url in (page["url"], page["final_url"])}
    assert distinct | set(copies) <= set(pages)
    wrongly = [url for url in distinct if pages[url].get("near_duplicate_of") or pages[url].get("duplicate_of")]
    assert wrongly == []
    assert len(copies) == 3 * 6
    for copy, original in copies.items():
        near = pages[copy].get("near_duplicate_of")  # (the original's URL, or the one redirected to it)
        assert near and pages[near]["final_url"] == original and 0.9 <= pages[copy]["resemblance"] < 1, copy
        assert "duplicate_of" not in pages[copy]

    store = SqliteUrlStore(str(tmp_path / "crawl" / name / "urlstore.sqlite"))
    storage = LocalStorage(str(tmp_path / "crawl" / name / "warc"))
    try:
        for copy, original in copies.items():
            row = store.get(copy)  # a near copy's record is its own: get does not leave it
            assert row["url"] == copy and row["fate"] == "fetched" and row["canonical_url"] is None
            assert pages[row["near_duplicate_of"]]["final_url"] == original and row["resemblance"] >= 0.9
            a = row["archive"]  # archived like any page: the exact bytes served
            _, body = read_record(storage.get_range(a["key"], a["offset"], a["length"]))
            assert body == bodies[copy].encode()
    finally:
        store.close()


def copies_paths(site) -> list[str]:
    return [copy for _, copy in site.near_copies()]
