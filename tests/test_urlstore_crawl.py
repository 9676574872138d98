"""A crawl through the archive and UrlStore pipelines (local WARC directory, SQLite), then
``scrapy urlstore get|content|links`` on what it stored."""

import json
import subprocess
import sys
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from crawler.demosite import serve_site
from tests.harness import clean_env, crawl_command, log_tail, read_pages

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory, redis_url):
    tmp = tmp_path_factory.mktemp("urlstore-crawl")
    name = f"test-{uuid.uuid4().hex[:12]}"
    robots = {1: "User-agent: *\nDisallow: /p3.html\n"}
    with serve_site(hosts=2, pages=6, robots=robots, routes={"/drop.html": "drop"}) as site:
        # a private address (no request is made), and a page whose connection is dropped
        refused, closed = "http://10.0.0.1/private", site.url(0, "/drop.html")
        seeds = tmp / "seeds.txt"
        seeds.write_text("\n".join([*site.seeds, refused, closed]) + "\n")
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": tmp / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 0.05,
            "FRONTIER_IDLE_SECONDS": 2,
            "ARCHIVE_MAX_SECONDS": 1,
            "RETRY_TIMES": 0,
            "RECRAWL_INTERVAL": 3600,
            "RECRAWL_RETRY_INTERVAL": 60,
            "LOG_FILE": tmp / "worker.log",
        }
        env = {**clean_env(), "REDIS_URL": redis_url}
        out = tmp / "pages.jsonl"
        proc = subprocess.run(crawl_command(out, seeds, settings), cwd=ROOT, env=env, timeout=180)
        html = {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in site.page_paths()}
    assert proc.returncode == 0, log_tail([tmp / "worker.log"], 40, "no log")

    def urlstore(*args) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "scrapy", "urlstore", *args, "-s", f"CRAWL_NAME={name}"]
        cmd += ["-s", f"CRAWL_DIR={tmp / 'crawl'}"]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=60)

    return {
        "site": site,
        "pages": read_pages(out),
        "html": html,
        "urlstore": urlstore,
        "refused": refused,
        "closed": closed,
    }


def test_every_page_has_a_record_with_its_fate(crawled):
    urlstore = crawled["urlstore"]
    fates, due = {}, {}
    for page in crawled["pages"]:
        got = urlstore("get", page["url"])
        assert got.returncode == 0, got.stderr
        record = json.loads(got.stdout)
        fates[page["url"]] = record["fate"]
        fetched_at = datetime.fromisoformat(record["fetched_at"])  # times are ISO 8601, UTC
        assert record["fetched_at"].endswith("Z") and fetched_at.tzinfo is not None
        due[page["url"]] = (
            None
            if record["next_fetch_at"] is None
            else (datetime.fromisoformat(record["next_fetch_at"]) - fetched_at).total_seconds()
        )
        if isinstance(page["status"], int):
            assert record["status"] == page["status"] and record["archive"], page["url"]
    site = crawled["site"]
    assert fates[site.url(1, "/p3.html")] == "robots_disallowed"
    assert fates[crawled["refused"]] == "refused"
    assert fates[crawled["closed"]] == "connection_error"
    assert fates[site.url(0, "/p2.html")] == "fetched"
    # when each is due again: RECRAWL_INTERVAL after an answer, RECRAWL_RETRY_INTERVAL after
    # a failure, never for a refused address
    assert due[site.url(0, "/p2.html")] == pytest.approx(3600)
    assert due[crawled["closed"]] == pytest.approx(60)
    assert due[site.url(1, "/p3.html")] == pytest.approx(60)
    assert due[crawled["refused"]] is None


def test_content_returns_exactly_the_bytes_the_site_sent(crawled):
    urlstore, html = crawled["urlstore"], crawled["html"]
    checked = 0
    for page in crawled["pages"]:
        if page["status"] != 200:
            continue
        got = urlstore("content", page["url"])
        assert got.returncode == 0, got.stderr
        assert got.stdout == html[page["final_url"]].encode()
        checked += 1
    assert checked >= 10
    missing = urlstore("content", crawled["refused"])
    assert missing.returncode == 1 and b"no archived body" in missing.stderr
    unknown = urlstore("get", "http://unknown.example/")
    assert unknown.returncode == 1 and b"not in the store" in unknown.stderr


def test_outlinks_and_inlinks_agree(crawled):
    urlstore, site = crawled["urlstore"], crawled["site"]
    seed = site.url(0, "/p0.html")
    links = json.loads(urlstore("links", seed).stdout)
    targets = {link["url"] for link in links["outlinks"]}
    assert site.url(1, "/p0.html") in targets
    for target in targets & {page["url"] for page in crawled["pages"]}:
        inlinks = json.loads(urlstore("links", target).stdout)["inlinks"]
        assert seed in {link["url"] for link in inlinks}, target


def test_read_commands_refuse_what_is_not_there_and_create_nothing(crawled, tmp_path):
    urlstore, site = crawled["urlstore"], crawled["site"]
    bad = urlstore("get", "not-a-url")
    assert bad.returncode == 2 and b"'not-a-url' is not a valid URL" in bad.stderr
    unknown = urlstore("links", "http://unknown.example/")
    assert unknown.returncode == 1 and b"not in the store" in unknown.stderr
    # a URL that was only linked to (never fetched) still has its inlinks
    linked = urlstore("links", site.url(1, "/p3.html"))
    assert linked.returncode == 0 and json.loads(linked.stdout)["inlinks"]
    # another crawl directory: nothing is created there, and the answer names what is
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cmd = [sys.executable, "-m", "scrapy", "urlstore", "get", "http://a.example/", "--crawl", "nosuchcrawl"]
    env = clean_env()
    got = subprocess.run([*cmd, "-s", f"CRAWL_DIR={elsewhere}"], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert got.returncode == 1 and b"crawl 'nosuchcrawl' has no UrlStore" in got.stderr
    assert b"none has one yet" in got.stderr and not any(elsewhere.iterdir())
    frontier = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "-s", f"CRAWL_DIR={elsewhere}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert frontier.returncode == 1 and b"no crawl 'default' under" in frontier.stderr
    assert not any(elsewhere.iterdir())
