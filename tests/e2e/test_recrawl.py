"""Recrawl and freshness: due URLs back into the frontier (scrapy recrawl, the running
crawl's periodic round), conditional refetches and the adaptive schedule they feed.

Here: the end-to-end tests (commands and workers as subprocesses); the others of this
subject: tests/unit/test_recrawl.py, tests/integration/test_recrawl.py."""

import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from crawler.frontier.keys import Keys
from crawler.urlstore.record import FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.sites import ChangingSite
from testing.workers import clean_env, launch_worker, loopback_settings, seed_file

ROOT = Path(__file__).resolve().parents[2]


def _recrawl(redis_url, name, settings, *args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "scrapy", "recrawl", "--crawl", name, *args]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    return subprocess.run(
        cmd, cwd=ROOT, env={**clean_env(), "REDIS_URL": redis_url}, capture_output=True, text=True, timeout=60
    )


def _rows(path: Path) -> dict[str, dict]:
    db = sqlite3.connect(path, timeout=30)
    db.row_factory = sqlite3.Row
    try:
        return {r["url"]: dict(r) for r in db.execute("SELECT * FROM urls")}
    finally:
        db.close()


def _stat(text: str, name: str) -> int:
    found = re.findall(rf"'{re.escape(name)}': (\d+)", text)
    return int(found[-1]) if found else 0


def test_changing_pages_are_refetched_more_often_and_304s_are_archived_as_revisits(tmp_path, redis_url, redis_client):
    """Four workers in turn, with `scrapy recrawl` before each of the last three: the
    changing pages' intervals shrink (100 -> 80 -> 64 -> 51.2 s) and the static ones' grow
    (100 -> 140 -> 196 s), so the second round (pages due within 100 s) refetches only
    the changing ones; the static ones answer 304 to their conditional requests, counted,
    their records and archive pointers kept (on the capture with the payload), and only a
    revisit record archived for them."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    store_path = tmp_path / "crawl" / name / "urlstore.sqlite"
    schedule = {
        "RECRAWL_INTERVAL": 100,
        "RECRAWL_MIN_INTERVAL": 10,
        "RECRAWL_MAX_INTERVAL": 10000,
        "RECRAWL_SYNC_DELTA_RATE": 0,
        "RECRAWL_PROGRESS_INTERVAL": 0.01,
        "CRAWL_DIR": tmp_path / "crawl",
    }
    try:
        with ChangingSite() as site:
            changing = [site.url(p) for p in site.paths if "change" in p]
            static = [site.url(p) for p in site.paths if "static" in p]
            seeds = seed_file(tmp_path, changing + static)
            env = {**clean_env(), "REDIS_URL": redis_url}

            def run(label, with_seeds=None):
                settings = loopback_settings(
                    name, tmp_path / f"{label}.log", REDIS_URL=redis_url, CRAWL_FOLLOW_LINKS=False, **schedule
                )
                worker = launch_worker(tmp_path, label, with_seeds, settings, env)
                assert worker.wait(60) == 0, worker.tail()
                return worker.log.read_text(errors="replace")

            first = run("w0", seeds)
            assert _stat(first, "archive/records") == 4
            rows = _rows(store_path)
            pointers = {u: (rows[u]["archive_key"], rows[u]["archive_offset"]) for u in static}
            assert all(rows[u]["fetch_interval"] == 100 and rows[u]["etag"] for u in changing + static)

            logs = []
            for label, ahead in (("w1", 150), ("w2", 100), ("w3", 150)):
                site.change()
                out = _recrawl(redis_url, name, schedule, "--all-due", "--due-within", str(ahead))
                assert out.returncode == 0, out.stderr
                assert re.search(r"\[\d+ due URLs read, \d+ put back \(\d+ URLs/s\)\]$", out.stdout), out.stdout
                logs.append((label, out.stdout, run(label)))

            rows = _rows(store_path)
        # what the site saw: changing pages 4 times (each a new version), static ones 3
        for path in site.paths:
            if "change" in path:
                assert site.fetches(path) == 4 and site.fetches(path, 200) == 4
            else:
                assert site.fetches(path) == 3 and site.fetches(path, 304) == 2
        assert logs[1][1].splitlines()[-1].startswith("2 due URLs read: 2 added")  # only the changing pages
        for u in changing:
            assert rows[u]["fetch_interval"] == pytest.approx(51.2)
        for u in static:
            assert rows[u]["fetch_interval"] == pytest.approx(196.0)
            assert (rows[u]["archive_key"], rows[u]["archive_offset"]) == pointers[u]  # kept
            assert rows[u]["status"] == 200 and rows[u]["fate"] == "fetched"
            assert rows[u]["next_fetch_at"] == pytest.approx(rows[u]["fetched_at"] + 196.0, abs=0.01)
        texts = {label: text for label, _, text in logs}
        assert _stat(texts["w1"], "recrawl/not_modified") == 2 and _stat(texts["w3"], "recrawl/not_modified") == 2
        assert _stat(texts["w2"], "recrawl/not_modified") == 0
        # the worker's summary counts a 304 as not modified, not as fetched
        assert "this worker recorded 4 pages: 2 fetched" in texts["w1"], texts["w1"][-3000:]
        [own] = [line for line in texts["w2"].splitlines() if "Crawl summary" in line]  # (its totals: the crawl's)
        assert ", 2 not modified (304)" in texts["w1"] and "not modified" not in own
        for label in ("w1", "w2", "w3"):
            revisits = 2 if label != "w2" else 0  # the static pages' 304s
            assert _stat(texts[label], "archive/records") == 2 + revisits
            assert _stat(texts[label], "archive/revisits") == revisits
            assert _stat(texts[label], "recrawl/changed") == 2
            assert _stat(texts[label], "fetchpolicy/recrawl") == (4 if label != "w2" else 2)
    finally:
        leftover = list(redis_client.scan_iter(match=Keys(name).pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)


def test_a_running_crawl_puts_due_urls_back_by_itself(tmp_path, redis_url, redis_client):
    """A worker that waits for work, with the recrawl every second: pages due two seconds
    after their fetch are fetched again without anyone putting them (the second time with
    a conditional request, answered 304)."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    try:
        with ChangingSite(changing=1, static=1) as site:
            seeds = seed_file(tmp_path, [site.url(p) for p in site.paths])
            settings = loopback_settings(
                name,
                tmp_path / "worker.log",
                REDIS_URL=redis_url,
                CRAWL_FOLLOW_LINKS=False,
                FRONTIER_CLOSE_WHEN_IDLE=False,
                RECRAWL_CHECK_INTERVAL=1,
                RECRAWL_INTERVAL=2,
                RECRAWL_MIN_INTERVAL=1,
                RECRAWL_SYNC_DELTA_RATE=0,
                CRAWL_DIR=tmp_path / "crawl",
            )
            worker = launch_worker(tmp_path, "worker", seeds, settings, {**clean_env(), "REDIS_URL": redis_url})
            try:
                deadline = time.monotonic() + 45
                while site.fetches("/static/0", 304) < 2 or site.fetches("/change/0") < 3:
                    assert worker.proc.poll() is None, worker.tail()
                    assert time.monotonic() < deadline, f"{site.log}\n{worker.tail()}"
                    if site.fetches("/change/0") > site.version:
                        site.change()
                    time.sleep(0.1)
                assert redis_client.get(Keys(name).recrawl_lock) is not None
            finally:
                if worker.proc.poll() is None:
                    worker.proc.send_signal(signal.SIGINT)
                code = worker.wait(60)
        assert code == 0, worker.tail()
        text = worker.log.read_text(errors="replace")
        assert _stat(text, "recrawl/rounds") >= 2 and _stat(text, "recrawl/not_modified") >= 2
    finally:
        leftover = list(redis_client.scan_iter(match=Keys(name).pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)


def test_scrapy_recrawl_shows_progress_and_filters(tmp_path, redis_url, redis_client):
    name = f"test-{uuid.uuid4().hex[:12]}"
    path = tmp_path / "urlstore.sqlite"
    store = SqliteUrlStore(str(path))
    now = time.time()
    futures = [
        store.record_fetch(
            FetchRecord(
                url=f"http://h{i % 2}.example/{i}",
                fate="fetched",
                status=200,
                fetched_at=now - 7200,
                next_fetch_at=now - 1 if i % 3 else now + 3600,
            )
        )
        for i in range(6000)
    ]
    for f in futures:
        f.result(60)
    store.close()
    settings = {"URLSTORE_SQLITE_PATH": path, "RECRAWL_PROGRESS_INTERVAL": 0.02}
    try:
        out = _recrawl(redis_url, name, settings, "--host", "h0.example")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        progress = [line for line in lines if line.startswith("Recrawl: ")]
        assert progress and all(
            re.fullmatch(r"Recrawl: \d+ due URLs read, \d+ put back \(\d+ URLs/s\)", p) for p in progress
        )
        assert lines[-1].startswith("2000 due URLs read: 2000 added")  # h0's due ones
        out = _recrawl(redis_url, name, settings, "--older-than", "3600", "--limit", "1500")
        assert out.returncode == 0 and out.stdout.splitlines()[-1].startswith("1500 due URLs read: 1500 added"), out
        bad = _recrawl(redis_url, name, settings, "--all-due", "--older-than", "5")
        assert bad.returncode == 2 and "give one" in bad.stderr
        away = _recrawl("redis://127.0.0.1:1/0", name, settings)
        assert away.returncode == 1 and away.stderr.startswith("recrawl: cannot connect to Redis"), away.stderr
        assert len(away.stderr.splitlines()) == 1
    finally:
        leftover = list(redis_client.scan_iter(match=Keys(name).pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)
