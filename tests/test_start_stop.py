"""Start, stop and resume as a user meets them: exit codes, seeds that wait for a Redis
that starts late, Ctrl-C while the archive target is unreachable, a resumed crawl's
output, and a small crawl that ends soon after its last page.

Every worker is a real ``scrapy crawl broad`` subprocess against the loopback site of
crawler/demosite.py, bounded by a timeout and killed at teardown if still running.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

from crawler.demosite import serve_site
from crawler.frontier.frontier import Frontier
from tests.test_e2e_crawl import _redis_servers_in, _stop_leftover_redis
from tests.test_redis_outage import PrivateRedis, _free_port
from tests.workers import clean_env, crawl_command, log_tail, read_pages, start_worker

ROOT = Path(__file__).resolve().parents[1]
SITE = {"NETWORK_GUARD_ALLOW": "127.0.0.0/8", "FRONTIER_HOST_INTERVAL": 0.2}


def _seeds(tmp_path: Path, site) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_text("\n".join(site.seeds) + "\n")
    return path


def _run(cmd, env=None, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=ROOT, env=env or clean_env(), capture_output=True, text=True, timeout=timeout, **kwargs
    )


def test_an_unreadable_seed_file_exits_non_zero_with_one_line(tmp_path):
    out = tmp_path / "out.jsonl"
    started = time.monotonic()
    proc = _run(crawl_command(out, tmp_path / "nonexistent.txt", {"CRAWL_DIR": tmp_path / "crawl"}), timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "nonexistent.txt" in line]
    assert len(lines) == 1 and "seeds not readable" in lines[0] and "No such file" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - started < 20  # no idling before it says so


def test_seeds_wait_for_a_redis_that_starts_late(tmp_path):
    """Redis is down while the seeds are read and comes up 6 s later: the seeds are
    added then, and the crawl runs to its end."""
    server = PrivateRedis(tmp_path / "redis")
    server.port = _free_port()
    with serve_site(hosts=2, pages=6) as site:
        env = clean_env()
        env["REDIS_URL"] = server.url
        out = tmp_path / "out.jsonl"
        settings = {**SITE, "CRAWL_DIR": tmp_path / "crawl", "CRAWL_NAME": "late", "FRONTIER_IDLE_SECONDS": 1}
        proc = start_worker(crawl_command(out, _seeds(tmp_path, site), settings), env, tmp_path / "worker.log")
        try:
            time.sleep(6)
            assert proc.poll() is None, log_tail([tmp_path / "worker.log"], 40, "")
            server.start()
            rc = proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            server.stop()
        logs = log_tail([tmp_path / "worker.log"], 60, "(no log)")
        assert rc == 0, logs
        assert "Redis unreachable" in (tmp_path / "worker.log").read_text(), logs
        urls = {p["url"] for p in read_pages(out)}
        assert site.seeds[0] in urls, logs
        assert urls >= site.expected_page_urls(), f"missing {sorted(site.expected_page_urls() - urls)[:5]}\n{logs}"


def test_ctrl_c_stops_within_the_bound_when_the_archive_target_is_unreachable(tmp_path, monkeypatch):
    """S3 endpoint refusing connections: uploads retry forever, yet Ctrl-C stops the
    worker within WORKER_STOP_TIMEOUT (plus start-up and the close itself); its pages'
    leases go back, the spool stays on disk, the embedded Redis stops with it."""
    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(k, v)
    crawl_dir = tmp_path / "crawl"
    name = f"test-{uuid.uuid4().hex[:8]}"
    stop_timeout = 3
    with serve_site(hosts=2, pages=8) as site:
        settings = {
            **SITE,
            "CRAWL_DIR": crawl_dir,
            "CRAWL_NAME": name,
            "ARCHIVE_S3_BUCKET": "nowhere",
            "ARCHIVE_S3_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}",  # nothing listens there
            "ARCHIVE_RETRY_MIN": 0.2,
            "ARCHIVE_RETRY_MAX": 1,
            "WORKER_STOP_TIMEOUT": stop_timeout,
        }
        env = {**clean_env(), "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
        log = tmp_path / "worker.log"
        proc = start_worker(crawl_command(tmp_path / "out.jsonl", _seeds(tmp_path, site), settings), env, log)
        try:
            deadline = time.monotonic() + 60
            while len(site.page_hits()) < 4 and time.monotonic() < deadline:
                assert proc.poll() is None, log_tail([log], 40, "")
                time.sleep(0.1)
            assert len(site.page_hits()) >= 4, log_tail([log], 40, "")
            time.sleep(1)  # pages now wait for their batch, whose upload keeps failing
            proc.send_signal(signal.SIGINT)
            interrupted = time.monotonic()
            rc = proc.wait(timeout=stop_timeout + 30)
            took = time.monotonic() - interrupted
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text()
        left = _stop_leftover_redis(crawl_dir, "after the worker")
        print(f"Ctrl-C to exit: {took:.1f} s (WORKER_STOP_TIMEOUT {stop_timeout} s)")
        assert not left, f"the embedded redis-server outlived its worker: {left}"
        assert rc == 0, text[-3000:]
        assert took < stop_timeout + 15, text[-3000:]
        assert "S3 upload" in text and "stopping them" in text, text[-3000:]
        spools = list((crawl_dir / name / "archive-spool").rglob("*.warc.gz"))
        assert spools, "the unstored batches' spool files are gone"
        # the pages that waited were given back, not acknowledged without their record
        from crawler.frontier.connection import embedded_redis

        client = embedded_redis(str(crawl_dir / name / "redis.db"))
        try:
            outlook = Frontier(client, name).outlook(60)
        finally:
            client._cleanup()
        _stop_leftover_redis(crawl_dir, "teardown")
        assert outlook["leased"] == 0 and outlook["queued"] >= 4, outlook
        assert not _redis_servers_in(crawl_dir)


def test_a_resumed_crawl_keeps_every_page_in_its_output(tmp_path, redis_url, crawl_name):
    with serve_site(hosts=2, pages=8) as site:
        out = tmp_path / "pages.jsonl"
        env = {**clean_env(), "REDIS_URL": redis_url}
        settings = {**SITE, "CRAWL_DIR": tmp_path / "crawl", "CRAWL_NAME": crawl_name, "FRONTIER_IDLE_SECONDS": 1}
        first = _run(crawl_command(out, _seeds(tmp_path, site), {**settings, "CLOSESPIDER_PAGECOUNT": 5}, True), env)
        assert first.returncode == 0, first.stderr[-2000:]
        after_first = {p["url"] for p in read_pages(out)}
        assert 3 <= len(after_first) < len(site.expected_page_urls())
        second = _run(crawl_command(out, None, settings, append=True), env)
        assert second.returncode == 0, second.stderr[-2000:]
    urls = [p["url"] for p in read_pages(out)]
    assert set(urls) >= site.expected_page_urls() and after_first <= set(urls)
    for line in out.read_text().splitlines():
        json.loads(line)  # one page per line, none torn


def test_a_small_crawl_ends_within_seconds_of_its_last_page(tmp_path, redis_url, crawl_name):
    """12 pages, default archive batching (30 s): the batch is stored as soon as the
    frontier has nothing due, and the worker closes a few seconds after its last page."""
    with serve_site(hosts=2, pages=5) as site:
        out = tmp_path / "out.jsonl"
        env = {**clean_env(), "REDIS_URL": redis_url}
        settings = {**SITE, "CRAWL_DIR": tmp_path / "crawl", "CRAWL_NAME": crawl_name, "ARCHIVE_MAX_SECONDS": 30}
        started = time.monotonic()
        proc = _run(crawl_command(out, _seeds(tmp_path, site), settings), env)
        ended = time.monotonic()
        hits = site.page_hits()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(read_pages(out)) == len(site.expected_page_urls())
    last = max(h.end for h in hits)
    print(f"small crawl: {len(hits)} pages in {last - started:.1f} s; exit {ended - last:.1f} s after the last page")
    assert ended - last < 8, proc.stderr[-3000:]
    assert "Crawl summary (finished)" in proc.stderr and "Frontier: finished" in proc.stderr
