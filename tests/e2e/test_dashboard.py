"""The dashboard (crawler/serve/static/dashboard.html) in a real browser: headless Chromium
driven by Playwright, on ``scrapy serve`` for a short real crawl of loopback sites.

The page loads with its token from the address's fragment, draws the chart and the
numbers, counts pages that grow from one refresh to the next while the crawl runs, and
once the crawl has ended shows the UrlStore's count of pages; a recent page's link gives
its record; a page without the token and an API answering 503 each show a clear message.
A screenshot is saved to TEST_ARTIFACTS (default: the test's tmp_path).

Chromium is the machine's (/usr/bin/chromium, Debian's package): Playwright never
downloads a browser here. Without it, or without Playwright, the test is skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import time
import urllib.parse
from pathlib import Path

import pytest
from scrapy.settings import Settings

from crawler.demo.site import serve_site
from crawler.urlstore.sqlite import sqlite_path
from testing.services import require_service
from testing.workers import ServeProcess, clean_env, launch_worker, loopback_settings, seed_file

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None


def chromium_binary() -> str | None:
    for path in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and os.access(path, os.X_OK):
            return path
    return None


CHROMIUM = chromium_binary()


@pytest.fixture(autouse=True)
def _chromium():
    if sync_playwright is None:
        require_service("chromium", "playwright is not installed (pip install playwright)")
    if CHROMIUM is None:
        require_service("chromium", "no Chromium binary (/usr/bin/chromium: apt-get install chromium)")


TOKEN = "dash-Token-7c2e"
REFRESH_WAIT_MS = 15_000  # a refresh comes every 3 s: a few of them at most


def number(page, element_id: str) -> int | None:
    """The number an element shows (its data-value), None while it shows none."""
    raw = page.get_attribute(f"#{element_id}", "data-value")
    return int(float(raw)) if raw else None


def refreshes(page) -> int:
    return int(page.evaluate("Number(document.body.dataset.refreshes || 0)"))


def wait_refresh(page, after: int) -> int:
    """Wait for a refresh that starts after refresh number ``after`` has ended; its number."""
    page.wait_for_function(f"Number(document.body.dataset.refreshes || 0) > {after + 1}", timeout=REFRESH_WAIT_MS)
    return refreshes(page)


def store_counts(settings: Settings) -> tuple[int, int]:
    """(records, records whose fate is fetched) of the crawl's SQLite UrlStore, read only."""
    path = Path(sqlite_path(settings))
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        total = db.execute("SELECT count(*) FROM urls").fetchone()[0]
        fetched = db.execute("SELECT count(*) FROM urls WHERE fate = 'fetched'").fetchone()[0]
    finally:
        db.close()
    return total, fetched


def test_the_dashboard_follows_a_crawl_in_a_browser(tmp_path, redis_url, crawl_name):
    begun = time.monotonic()
    artifacts = Path(os.environ.get("TEST_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    crawl_dir = tmp_path / "crawl"
    env = {**clean_env(), "REDIS_URL": redis_url}
    robots = {1: "User-agent: *\nDisallow: /p3.html\n"}
    with serve_site(hosts=3, pages=40, robots=robots, routes={"/drop.html": "drop"}, articles=True) as site:
        seeds = seed_file(tmp_path, [*site.seeds, site.url(0, "/drop.html")])
        settings = loopback_settings(
            crawl_name,
            tmp_path / "worker.log",
            CRAWL_DIR=crawl_dir,
            FRONTIER_HOST_INTERVAL=0.4,
            LIVE_STATS_INTERVAL=0.5,
            URL_RETRY_ATTEMPTS=1,
        )
        worker = launch_worker(tmp_path, "w", seeds, settings, env=env)
        serve = None
        try:
            serve = ServeProcess(
                {**env, "SERVE_TOKEN": TOKEN},
                {"CRAWL_DIR": crawl_dir},
                tmp_path / "serve.log",
                ("--crawl", crawl_name, "--wait"),  # (the worker may not have made its crawl yet)
            )
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
                try:
                    check_dashboard(browser, serve, worker, site, crawl_name, crawl_dir, artifacts)
                finally:
                    browser.close()
        except BaseException:
            print(worker.tail())
            if serve is not None:
                print(serve.tail())
            raise
        finally:
            worker.kill()
            if serve is not None:
                serve.stop()
    print(f"dashboard test: {time.monotonic() - begun:.1f} s")


def check_dashboard(
    browser, serve: ServeProcess, worker, site, crawl_name: str, crawl_dir: Path, artifacts: Path
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    try:
        follow_crawl(page, problems, serve, worker, site, crawl_name, crawl_dir, artifacts)
    except BaseException:
        shot = artifacts / "dashboard-failed.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
            print(f"dashboard screenshot: {shot}")
        except Exception as exc:  # (the browser itself failed: the first error is the one to see)
            print(f"no screenshot: {exc}")
        print(f"the page's errors: {problems}")
        raise
    # without the token: the server's 401, told on the page
    bare = context.new_page()
    bare.goto(f"{serve.base}/")
    bare.wait_for_selector("#message:not([hidden])", timeout=REFRESH_WAIT_MS)
    assert "#token=" in bare.text_content("#message")
    assert bare.is_hidden("#steer")  # (no token: no pause and resume)
    context.close()


def follow_crawl(
    page, problems, serve: ServeProcess, worker, site, crawl_name: str, crawl_dir: Path, artifacts: Path
) -> None:
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    # (a request answered with an error status is logged by the browser: not a problem of the page)
    page.on(
        "console",
        lambda m: m.type == "error" and "Failed to load resource" not in m.text and problems.append(m.text),
    )

    # while the crawl runs: the chart, the numbers, pages that grow from a refresh to the next
    page.goto(f"{serve.base}/#token={TOKEN}")
    page.wait_for_selector("#chart canvas", timeout=REFRESH_WAIT_MS)
    page.wait_for_function(
        "Number(document.getElementById('pages-total').dataset.value) > 0", timeout=REFRESH_WAIT_MS + 10_000
    )
    assert page.text_content("#crawl-name") == crawl_name
    pause_and_resume(page, site)
    page.hover("#chart .u-over")  # the chart's time on the 24-hour clock, as every other time on the page
    shown = page.text_content("#chart .u-legend .u-series:first-child .u-value")
    assert re.fullmatch(r"\d\d:\d\d:\d\d", shown), shown
    assert crawl_name in page.eval_on_selector_all("#crawl option", "options => options.map(o => o.value)")
    assert page.is_hidden("#message"), page.text_content("#message")
    before, seen = number(page, "pages-total"), refreshes(page)
    grown = None
    while grown is None and worker.proc.poll() is None:
        seen = wait_refresh(page, seen)
        now = number(page, "pages-total")
        if now > before:
            grown = now
    assert grown is not None, f"the pages count stayed at {before} until the crawl ended"
    assert number(page, "queued") is not None and number(page, "hosts-ready") is not None
    # the minute's pages are the pages recorded (the crawl is younger than a minute: all of them
    # but those of a flush still to come), not the acknowledgements that wait for the archive
    assert 0 < number(page, "pages-last-minute") <= number(page, "pages-total")
    # a busiest host "due now" is one the "due now" count holds (both as read at one instant)
    rows = [row.locator("td").all_text_contents() for row in page.locator("#busiest tbody tr").all()]
    due_now = sum(1 for cells in rows if len(cells) == 6 and cells[5] == "now")
    assert due_now <= number(page, "hosts-due") <= number(page, "hosts-ready"), (rows, number(page, "hosts-due"))
    backoffs = [cells[4] for cells in rows if len(cells) == 6 and cells[4]]
    assert all(re.fullmatch(r"[a-z]+, retried (now|in [\d.]+ s)", text) for text in backoffs), backoffs
    assert number(page, "hosts-in-flight") is not None and number(page, "hosts-backed-off") is not None
    page.screenshot(path=str(artifacts / "dashboard-running.png"), full_page=True)

    # the crawl ends: the page's counts are the UrlStore's
    assert worker.wait(timeout=40) == 0, worker.tail()
    wait_refresh(page, refreshes(page))
    total, fetched = store_counts(Settings({"CRAWL_DIR": str(crawl_dir), "CRAWL_NAME": crawl_name}))
    assert fetched > 40
    assert number(page, "pages-fetched") == fetched
    assert number(page, "pages-total") == total
    assert number(page, "store-writes") == total
    assert number(page, "queued") == 0
    assert page.text_content("#state") == "finished"
    assert number(page, "robots-denied") > 0 and number(page, "dup-exact") > 0
    assert number(page, "archive-objects") > 0 and number(page, "archive-bytes") > 0
    assert number(page, "store-failures") == 0
    errors = page.locator("#errors tbody tr").all_text_contents()
    assert any("connection_error" in row for row in errors), errors
    rows = page.locator("#recent tbody tr")
    assert 0 < rows.count() <= 50
    assert page.locator("#busiest tbody tr").count() >= 1  # "no host has URLs queued"

    # a recent page's link gives its record
    cells = [row.locator("td").all_text_contents() for row in rows.all()]
    chosen = next(i for i, (_, status, fate, *_) in enumerate(cells) if status == "200" and fate == "fetched")
    link = rows.nth(chosen).locator("a.record-link")
    url = link.get_attribute("data-url")
    record_path = f"/api/crawls/{crawl_name}/record?url={urllib.parse.quote(url, safe='')}"
    assert link.evaluate("a => a.href") == serve.base + record_path  # (opened in a tab: the record too)
    link.click()
    page.wait_for_function("document.getElementById('record-json').textContent.startsWith('{')", timeout=10_000)
    record = json.loads(page.text_content("#record-json"))
    assert record["url"] == url and record["fate"] == "fetched" and record["status"] == 200
    assert record == serve.json(record_path)
    shot = artifacts / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"dashboard screenshot: {shot}")

    # the API answering 503: a clear message, and the numbers still shown
    page.route(
        "**/api/crawls/*/frontier",
        lambda route: route.fulfill(
            status=503,
            headers={"Retry-After": "2"},
            content_type="application/json",
            body=json.dumps({"error": "Redis is unavailable (ConnectionError); try again", "status": 503}),
        ),
    )
    page.wait_for_selector("#message:not([hidden])", timeout=REFRESH_WAIT_MS)
    assert "store/Redis unavailable, retrying" in page.text_content("#message")
    assert number(page, "pages-fetched") == fetched
    page.unroute("**/api/crawls/*/frontier")
    page.wait_for_selector("#message[hidden]", state="attached", timeout=REFRESH_WAIT_MS)
    assert not problems, problems


def pause_and_resume(page, site) -> None:
    """The page's pause button holds the crawl: the site is asked for nothing more once the
    worker's pages in hand are done (by the site's own log), and resume goes on."""
    assert page.is_visible("#pause") and page.is_enabled("#pause") and not page.is_enabled("#resume")
    page.click("#pause")
    page.wait_for_function("document.getElementById('state').textContent === 'paused'", timeout=REFRESH_WAIT_MS)
    time.sleep(2.0)  # (requests handed out before the pause leave within their host's interval)
    before = len(site.page_hits())
    time.sleep(3.0)
    assert len(site.page_hits()) == before  # nothing new while paused (0.4 s a host: 7 otherwise)
    assert page.is_enabled("#resume")
    page.click("#resume")
    page.wait_for_function("document.getElementById('state').textContent !== 'paused'", timeout=REFRESH_WAIT_MS)
    deadline = time.monotonic() + 10
    while len(site.page_hits()) == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(site.page_hits()) > before


def test_a_finished_crawl_whose_redis_is_gone_shows_its_stores_pages(tmp_path):
    """No frontier at all (its Redis gone), a UrlStore holding the crawl: the dashboard
    shows the store's pages, not dashes, and says where they come from."""
    from crawler.urlstore.record import FetchRecord
    from crawler.urlstore.sqlite import SqliteUrlStore

    crawl_dir, name = tmp_path / "crawl", "gone"
    store = SqliteUrlStore(str(crawl_dir / name / "urlstore.sqlite"))
    records = [FetchRecord(url=f"http://a.example/{i}", fate="fetched", status=200, fetched_at=1.0) for i in range(7)]
    records += [FetchRecord(url="http://b.example/", fate="timeout", fetched_at=1.0)]
    for future in [store.record_fetch(r) for r in records]:
        future.result(30)
    store.close()
    serve = ServeProcess(clean_env(), {"CRAWL_DIR": crawl_dir}, tmp_path / "serve.log", ("--crawl", name))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = browser.new_page()
                page.goto(f"{serve.base}/")
                page.wait_for_function("document.getElementById('pages-total').dataset.value === '8'", timeout=15_000)
                assert number(page, "pages-fetched") == 7
                assert "from the UrlStore" in page.text_content("#message")
            finally:
                browser.close()
    finally:
        serve.stop()
