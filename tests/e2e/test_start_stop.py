"""Start, stop and resume as a user meets them: exit codes, seeds that wait for a Redis
that starts late, Ctrl-C while the archive target is unreachable, a resumed crawl's
output, and a small crawl that ends soon after its last page.

Every worker is a real ``scrapy crawl broad`` subprocess against the loopback site of
crawler/demo/site.py, bounded by a timeout and killed at teardown if still running.

Here: the end-to-end tests (commands and workers as subprocesses); the others of this
subject: tests/integration/test_start_stop.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import redis

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Frontier
from testing.servers import RedisServer, free_port, redis_servers_in, stop_leftover_redis
from testing.workers import clean_env, crawl_command, log_tail, read_pages, start_worker

ROOT = Path(__file__).resolve().parents[2]

SITE = {"NETWORK_GUARD_ALLOW": "127.0.0.0/8", "FRONTIER_HOST_INTERVAL": 0.2}


def _seeds(tmp_path: Path, site) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_text("\n".join(site.seeds) + "\n")
    return path


def _wait_for_pages(proc: subprocess.Popen, site, pages: int, log: Path) -> None:
    """Until the site has answered ``pages`` pages (60 s at most), the worker running."""
    deadline = time.monotonic() + 60
    while len(site.page_hits()) < pages:
        assert proc.poll() is None and time.monotonic() < deadline, log_tail([log], 40, "")
        time.sleep(0.1)


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
    """Redis is down while the seeds are read and comes up once the worker has said it is
    unreachable (a fixed 6 s was sometimes less than a loaded machine's start-up): the seeds
    are added then, and the crawl runs to its end."""
    server = RedisServer(tmp_path / "redis")
    with serve_site(hosts=2, pages=6) as site:
        env = clean_env()
        env["REDIS_URL"] = server.url
        out = tmp_path / "out.jsonl"
        settings = {**SITE, "CRAWL_DIR": tmp_path / "crawl", "CRAWL_NAME": "late", "FRONTIER_IDLE_SECONDS": 1}
        proc = start_worker(crawl_command(out, _seeds(tmp_path, site), settings), env, tmp_path / "worker.log")
        log = tmp_path / "worker.log"
        try:
            deadline = time.monotonic() + 60
            while "Redis unreachable" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
                assert proc.poll() is None, log_tail([log], 40, "")
                time.sleep(0.2)
            time.sleep(2)  # (a retry or two more while it waits)
            assert proc.poll() is None, log_tail([log], 40, "")
            server.start()
            rc = proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            server.kill()
        logs = log_tail([tmp_path / "worker.log"], 60, "(no log)")
        assert rc == 0, logs
        assert "Redis unreachable" in (tmp_path / "worker.log").read_text(), logs
        urls = {p["url"] for p in read_pages(out)}
        assert site.seeds[0] in urls, logs
        assert urls >= site.expected_page_urls(), f"missing {sorted(site.expected_page_urls() - urls)[:5]}\n{logs}"


def test_ctrl_c_while_seeds_wait_for_redis_says_they_were_not_added_and_exits_1(tmp_path):
    """REDIS_URL at a dead port, seeds given, Ctrl-C while they wait: one line saying the
    seeds were not added (run the same command again), exit code 1, not 0."""
    env = {**clean_env(), "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.2:9/\n")
    log = tmp_path / "worker.log"
    settings = {**SITE, "CRAWL_DIR": tmp_path / "crawl", "CRAWL_NAME": "waiting"}
    proc = start_worker(crawl_command(tmp_path / "out.jsonl", seeds, settings), env, log)
    try:
        deadline = time.monotonic() + 60
        while "during seed ingestion" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            assert proc.poll() is None, log_tail([log], 40, "")
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert rc == 1, text[-3000:]
    assert "Seeds not added: Redis unreachable" in text and "run the same command again" in text, text[-3000:]


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
            "ARCHIVE_S3_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens there
            "ARCHIVE_RETRY_MIN": 0.2,
            "ARCHIVE_RETRY_MAX": 1,
            "WORKER_STOP_TIMEOUT": stop_timeout,
        }
        env = {**clean_env(), "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
        log = tmp_path / "worker.log"
        proc = start_worker(crawl_command(tmp_path / "out.jsonl", _seeds(tmp_path, site), settings), env, log)
        try:
            _wait_for_pages(proc, site, 4, log)
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
        left = stop_leftover_redis(crawl_dir, "after the worker")
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
        stop_leftover_redis(crawl_dir, "teardown")
        assert outlook["leased"] == 0 and outlook["queued"] >= 4, outlook
        assert not redis_servers_in(crawl_dir)


def test_a_worker_redis_refuses_at_its_start_closes_once_the_rest_of_it_has_opened(tmp_path):
    """Redis refuses the worker's password while its pipelines are still opening (one takes
    1.5 s, as a store slow to answer): the worker says why, closes once everything it opened
    can be closed, and exits 1, with no error of a close that raced the opening."""
    with RedisServer(str(tmp_path / "redis"), password="right-one") as server:
        env = {**clean_env(), "REDIS_URL": server.url.replace("right-one", "wrong-one")}
        log = tmp_path / "worker.log"
        settings = {"LOG_FILE": log, "ITEM_PIPELINES": json.dumps({"testing.pipelines.SlowToOpen": 1})}
        proc = _run(crawl_command(tmp_path / "out.jsonl", None, settings), env=env, timeout=60)
    text = log.read_text(errors="replace")
    assert proc.returncode == 1, log_tail([log], 40, "")
    assert "Redis refused this worker (AuthenticationError" in text
    opened, closing = text.index("SlowToOpen opened"), text.index("Closing spider (redis_refused)")
    assert opened < closing  # (the close waited for the opening)
    assert " ERROR: " not in text.replace("ERROR: Redis refused this worker", ""), log_tail([log], 60, "")
    assert "Traceback" not in text


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
    frontier has nothing due, and the worker closes a few seconds after its last page (some
    4 s on a quiet machine, 10 s seen under the suite's load; a worker that waited for the
    batch's age would take 30 s)."""
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
    assert ended - last < 15, proc.stderr[-3000:]
    assert "Crawl summary (finished)" in proc.stderr and "Frontier: finished" in proc.stderr


def _start_in_own_group(cmd, env, output: Path) -> subprocess.Popen:
    """A worker in a process group of its own, as a service manager starts it: a signal
    to the group reaches the worker and its page processes alike."""
    with open(output, "wb") as f:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )


def _terminate_after(proc: subprocess.Popen, site, pages: int, log: Path, timeout: float) -> tuple[int, float]:
    """Once the site has answered ``pages`` pages, SIGTERM to the worker's process group;
    (exit code, seconds from the signal to the exit)."""
    deadline = time.monotonic() + 60
    while len(site.page_hits()) < pages:
        assert proc.poll() is None, log_tail([log], 40, "")
        assert time.monotonic() < deadline, log_tail([log], 40, "")
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    sent = time.monotonic()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(
            f"still running {timeout:.0f} s after SIGTERM (killed)\n{log_tail([log], 60, '')}"
        ) from None
    return rc, time.monotonic() - sent


def test_sigterm_gives_the_leases_back_and_the_same_command_resumes(tmp_path, redis_url, crawl_name):
    """SIGTERM to the worker's process group mid-crawl (what systemd or `docker stop`
    sends): the worker stops within seconds, exit code 0, every lease acknowledged or
    given back; the same command run again crawls the rest, refetching at most the pages
    that were in flight."""
    with serve_site(hosts=3, pages=10, delay=0.1) as site:
        seeds = _seeds(tmp_path, site)
        env = {**clean_env(), "REDIS_URL": redis_url}
        settings = {**SITE, "CRAWL_DIR": tmp_path / "crawl", "CRAWL_NAME": crawl_name, "FRONTIER_IDLE_SECONDS": 1}
        first_out, first_log = tmp_path / "first.jsonl", tmp_path / "first.log"
        proc = _start_in_own_group(crawl_command(first_out, seeds, settings), env, first_log)
        rc, took = _terminate_after(proc, site, 6, first_log, timeout=40)
        text = first_log.read_text(errors="replace")
        assert rc == 0, text[-3000:]
        assert "Received SIGTERM" in text, text[-3000:]
        assert "Traceback" not in text and "page worker process died" not in text, text[-3000:]
        assert took < 15, f"{took:.1f} s from SIGTERM to exit\n{text[-3000:]}"
        outlook = Frontier(redis.Redis.from_url(redis_url), crawl_name).outlook(60)
        assert outlook["leased"] == 0 and outlook["queued"] > 0, outlook
        fetched_first = len(site.page_hits())

        second = _run(crawl_command(tmp_path / "second.jsonl", seeds, settings), env)
        hits = site.page_hits()
    assert second.returncode == 0, second.stderr[-3000:]
    urls = {p["url"] for p in read_pages(first_out) + read_pages(tmp_path / "second.jsonl")}
    assert urls >= site.expected_page_urls(), sorted(site.expected_page_urls() - urls)[:5]
    twice = [key for key, n in Counter(h.key for h in hits).items() if n > 1]
    print(
        f"SIGTERM: exit {took:.1f} s after; {fetched_first} pages before, {len(hits)} in all, {len(twice)} fetched twice"
    )
    assert len(twice) <= len(site.hosts), twice  # at most one in flight per host


def test_sigterm_with_redis_gone_still_stops_within_the_bound(tmp_path):
    """Redis dies mid-crawl, then SIGTERM: nothing can be given back, yet the worker exits
    within WORKER_STOP_TIMEOUT and a margin, saying why, without a traceback."""
    stop_timeout = 3
    with RedisServer(tmp_path / "redis") as server, serve_site(hosts=2, pages=30, delay=0.1) as site:
        env = {**clean_env(), "REDIS_URL": server.url}
        settings = {**SITE, "CRAWL_DIR": tmp_path / "crawl", "CRAWL_NAME": "gone", "WORKER_STOP_TIMEOUT": stop_timeout}
        log = tmp_path / "worker.log"
        proc = _start_in_own_group(crawl_command(tmp_path / "out.jsonl", _seeds(tmp_path, site), settings), env, log)
        deadline = time.monotonic() + 60
        while len(site.page_hits()) < 4:
            assert proc.poll() is None and time.monotonic() < deadline, log_tail([log], 40, "")
            time.sleep(0.05)
        server.kill()
        time.sleep(1)
        rc, took = _terminate_after(proc, site, 0, log, timeout=stop_timeout + 40)
    text = log.read_text(errors="replace")
    print(f"SIGTERM with Redis gone: exit {took:.1f} s after (WORKER_STOP_TIMEOUT {stop_timeout} s), code {rc}")
    assert "Redis unreachable" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert took < stop_timeout + 15, text[-3000:]


def test_a_second_ctrl_c_ends_the_worker_at_once(tmp_path):
    """Ctrl-C twice mid-crawl (Scrapy's forced, unclean shutdown): the worker ends within
    seconds, its archive writer's thread stopped with the reactor, and its embedded
    redis-server stops with it; the crawl's frontier is still there for the next run."""
    crawl_dir = tmp_path / "crawl"
    name = f"test-{uuid.uuid4().hex[:8]}"
    with serve_site(hosts=2, pages=30, delay=4) as site:  # slow pages: the first Ctrl-C's close waits for them
        settings = {**SITE, "CRAWL_DIR": crawl_dir, "CRAWL_NAME": name, "FRONTIER_HOST_INTERVAL": 0.05}
        log = tmp_path / "worker.log"
        proc = start_worker(crawl_command(tmp_path / "out.jsonl", _seeds(tmp_path, site), settings), clean_env(), log)
        try:
            _wait_for_pages(proc, site, 2, log)
            time.sleep(1)  # pages in flight
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            interrupted = time.monotonic()
            try:
                rc = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                rc = None
            took = time.monotonic() - interrupted
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text()
        left = stop_leftover_redis(crawl_dir, "after the worker")
    assert rc is not None, f"still running 20 s after the second Ctrl-C\n{text[-3000:]}"
    assert "forcing unclean shutdown" in text, text[-3000:]
    print(f"second Ctrl-C to exit: {took:.1f} s, exit code {rc}")
    assert not left, f"the embedded redis-server outlived its worker: {left}"
    assert list((crawl_dir / name).glob("redis.db*")) or (crawl_dir / name / "appendonlydir").exists()


def test_a_closed_port_leaves_the_other_ports_of_its_host_alone(tmp_path):
    """Seeds on a closed port of 127.0.0.2 and on the live site at another port of the
    same address: the closed one is recorded as refused and backed off alone (its key is
    host:port); every page of the live site is fetched."""
    crawl_dir = tmp_path / "crawl"
    name = f"test-{uuid.uuid4().hex[:8]}"
    closed = free_port("127.0.0.2")
    with serve_site(hosts=2, pages=5) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"http://127.0.0.2:{closed}/\n" + "\n".join(site.seeds) + "\n")
        settings = {**SITE, "CRAWL_DIR": crawl_dir, "CRAWL_NAME": name, "FRONTIER_MAX_WAIT": 5}  # ends with it waiting
        proc = _run(crawl_command(tmp_path / "out.jsonl", seeds, settings), timeout=180)
        fetched = {h.path for h in site.page_hits() if h.host == "127.0.0.2"}
    stop_leftover_redis(crawl_dir, "after the worker")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert fetched == set(site.page_paths()), proc.stderr[-3000:]
    # the closed port's seed waits for its robots.txt, and the summary names it by host:port
    assert f"robots.txt of http://127.0.0.2:{closed} unreachable" in proc.stderr, proc.stderr[-3000:]
    assert re.search(rf"host down: 1 host, 1 URL, .*\(e\.g\. 127\.0\.0\.2:{closed}\)", proc.stderr), proc.stderr[-3000:]


def test_a_crawl_whose_worker_was_killed_is_found_by_its_append_only_files(tmp_path):
    """SIGKILL to a worker (and to its embedded redis-server) before any snapshot: only
    the append-only files are on disk, and ``scrapy frontier --crawl NAME`` still finds
    the crawl, with its URLs queued."""
    crawl_dir = tmp_path / "crawl"
    name = f"test-{uuid.uuid4().hex[:8]}"
    with serve_site(hosts=2, pages=30, delay=1) as site:
        settings = {**SITE, "CRAWL_DIR": crawl_dir, "CRAWL_NAME": name}
        log = tmp_path / "worker.log"
        proc = start_worker(crawl_command(tmp_path / "out.jsonl", _seeds(tmp_path, site), settings), clean_env(), log)
        try:
            _wait_for_pages(proc, site, 3, log)
        finally:
            proc.kill()
            proc.wait()
        for server in redis_servers_in(crawl_dir):
            server.kill()
            server.wait(10)
    (crawl_dir / name / "redis.db").unlink(missing_ok=True)
    assert {p.name for p in (crawl_dir / name).iterdir()} & {"appendonly.aof", "appendonlydir"}
    env = clean_env()
    out = _run([sys.executable, "-m", "scrapy", "frontier", "--crawl", name, "-s", f"CRAWL_DIR={crawl_dir}"], env)
    listed = _run([sys.executable, "-m", "scrapy", "frontier", "--crawl", "nope", "-s", f"CRAWL_DIR={crawl_dir}"], env)
    stop_leftover_redis(crawl_dir, "teardown")
    assert out.returncode == 0, out.stderr
    assert re.search(r"queued +[1-9]", out.stdout), out.stdout
    assert listed.returncode != 0 and name in listed.stderr, listed.stderr


def test_clearing_the_frontier_says_the_store_is_kept_and_a_crawl_of_fetched_seeds_says_why(tmp_path):
    """A crawl, then ``frontier clear``: the line says the UrlStore is kept; the same seeds
    again fetch nothing (fetched within FETCH_POLICY_MAX_AGE) and the summary says so with
    the ways out; ``clear --store`` deletes the UrlStore too, and the next run fetches the
    site again."""
    crawl_dir = tmp_path / "crawl"
    name = f"test-{uuid.uuid4().hex[:8]}"
    env = clean_env()
    with serve_site(hosts=2, pages=5) as site:
        seeds = _seeds(tmp_path, site)
        settings = {**SITE, "CRAWL_DIR": crawl_dir, "CRAWL_NAME": name, "FRONTIER_HOST_INTERVAL": 0.05}

        def crawl(run: int) -> subprocess.CompletedProcess:
            proc = _run(crawl_command(tmp_path / f"out{run}.jsonl", seeds, settings), env, timeout=120)
            assert proc.returncode == 0, proc.stderr[-3000:]
            return proc

        def frontier(*args) -> subprocess.CompletedProcess:
            return _run(
                [
                    sys.executable,
                    "-m",
                    "scrapy",
                    "frontier",
                    "clear",
                    *args,
                    "--crawl",
                    name,
                    "-s",
                    f"CRAWL_DIR={crawl_dir}",
                ],
                env,
            )

        crawl(1)
        first = len(site.page_hits())
        cleared = frontier("--yes")
        assert cleared.returncode == 0, cleared.stderr
        assert "its UrlStore" in cleared.stdout and "are kept" in cleared.stdout and "clear --store" in cleared.stdout
        again = crawl(2)
        assert len(site.page_hits()) == first  # nothing fetched
        assert "Nothing fetched: the UrlStore says the 1 URL handed out was fetched within FETCH_POLICY_MAX_AGE" in (
            again.stderr
        ), again.stderr[-3000:]
        assert frontier("--store").returncode == 2  # without --yes: nothing deleted
        wiped = frontier("--store", "--yes")
        assert wiped.returncode == 0 and "and its UrlStore" in wiped.stdout, wiped.stdout + wiped.stderr
        assert not (crawl_dir / name / "urlstore.sqlite").exists()
        crawl(3)
        assert len(site.page_hits()) == 2 * first
    stop_leftover_redis(crawl_dir, "teardown")


def test_pairs_of_workers_started_at_once_share_one_embedded_redis_each(tmp_path):
    """Two local workers of one crawl directory, started at the same moment (``cmd & cmd &``),
    share one embedded redis-server: one socket in both logs, every page at the site once,
    and the server stopped by the last of the two. Eight pairs at once, each pair with a
    crawl directory and User-Agent of its own."""
    pairs = 8
    with serve_site(hosts=2, pages=5) as site:
        seeds = _seeds(tmp_path, site)
        procs = []
        try:
            for pair in range(pairs):
                for side in "ab":
                    settings = {
                        **SITE,
                        "CRAWL_DIR": tmp_path / f"crawl{pair}",
                        "CRAWL_NAME": "race",
                        "USER_AGENT": f"crawler/0.1 (pair-{pair})",
                        "FRONTIER_IDLE_SECONDS": 2,
                        "LOG_FILE": tmp_path / f"{pair}{side}.log",
                    }
                    out = tmp_path / f"{pair}{side}.jsonl"
                    cmd = crawl_command(out, seeds, settings)
                    procs.append(start_worker(cmd, clean_env(), tmp_path / f"{pair}{side}.stdout"))
            codes = [proc.wait(timeout=180) for proc in procs]
            left = [server for pair in range(pairs) for server in redis_servers_in(tmp_path / f"crawl{pair}")]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for pair in range(pairs):
                stop_leftover_redis(tmp_path / f"crawl{pair}", "teardown")
        hits = Counter((h.user_agent, h.key) for h in site.page_hits())
        expected = site.expected_fetches()
    logs = {f"{pair}{side}": (tmp_path / f"{pair}{side}.log").read_text() for pair in range(pairs) for side in "ab"}
    assert codes == [0] * 2 * pairs, (codes, {k: v[-2000:] for k, v in logs.items()})
    assert not left, f"embedded redis-servers outlived both workers of their pair: {left}"
    for pair in range(pairs):
        sockets = {
            label: set(re.findall(r"Embedded Redis for \S+ on (unix://\S+)", logs[label]))
            for label in (f"{pair}a", f"{pair}b")
        }
        assert len(sockets[f"{pair}a"] | sockets[f"{pair}b"]) == 1, f"pair {pair}: two embedded servers {sockets}"
        agent = f"crawler/0.1 (pair-{pair})"
        counts = {key: hits[(agent, key)] for key in expected}
        assert all(n == 1 for n in counts.values()), f"pair {pair}: pages not fetched once each: {counts}"


def test_a_crawl_whose_cassandra_is_not_there_says_so_in_one_line(tmp_path):
    """URLSTORE_BACKEND=cassandra with nothing listening at CASSANDRA_HOSTS: a warning line
    a try while CASSANDRA_CONNECT_TIMEOUT lasts, then one line saying where and why, exit
    code 1; none of the driver's tracebacks."""
    port = free_port()
    settings = {
        **SITE,
        "CRAWL_DIR": tmp_path / "crawl",
        "URLSTORE_BACKEND": "cassandra",
        "CASSANDRA_HOSTS": "127.0.0.1",
        "CASSANDRA_PORT": port,
        "CASSANDRA_CONNECT_TIMEOUT": 4,
    }
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"http://127.0.0.2:{free_port('127.0.0.2')}/\n")
    proc = _run(crawl_command(tmp_path / "out.jsonl", seeds, settings), timeout=120)
    text = proc.stdout + proc.stderr
    stop_leftover_redis(tmp_path / "crawl", "teardown")
    assert proc.returncode == 1, text[-3000:]
    assert "Traceback" not in text, text[-5000:]
    tries = [line for line in text.splitlines() if "Cassandra not reachable at" in line]
    # tried at 0, 1, 3 and 4 s (the last wait cut to the timeout's end; fewer on a loaded machine)
    assert 2 <= len(tries) <= 3 and all(line.endswith(" s") and "Connection refused" in line for line in tries), tries
    [line] = [line for line in text.splitlines() if "Crawl not started" in line]
    assert re.search(
        rf"Crawl not started: Cassandra unreachable at 127\.0\.0\.1:{port} for [45] s \(CASSANDRA_CONNECT_TIMEOUT 4 s\): "
        rf"127\.0\.0\.1:{port}: Connection refused$",
        line,
    ), line


def test_scrapy_urlstore_says_each_try_to_reach_an_absent_cassandra(tmp_path):
    """A read command on a Cassandra that is not there says each try as it happens (a person
    does not wait CASSANDRA_CONNECT_TIMEOUT in silence), then one last line; no traceback."""
    port = free_port()
    settings = ["-s", "URLSTORE_BACKEND=cassandra", "-s", "CASSANDRA_HOSTS=127.0.0.1", "-s", f"CASSANDRA_PORT={port}"]
    settings += ["-s", "CASSANDRA_CONNECT_TIMEOUT=4", "-s", f"CRAWL_DIR={tmp_path / 'crawl'}"]
    proc = _run([sys.executable, "-m", "scrapy", "urlstore", "get", "http://a.example/", *settings], timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    where = f"127.0.0.1:{port}"
    tried = f"urlstore: Cassandra not reachable at {where} ({where}: Connection refused); trying again in "
    # waits of 1 s, 2 s and what is left of the 4 s (on a loaded machine: 1 s and what is left)
    assert 2 <= len(lines[:-1]) <= 3 and lines[0] == tried + "1 s", lines
    assert all(line.startswith(tried) and line.endswith(" s") for line in lines[:-1]), lines
    assert re.match(
        rf"urlstore: Cassandra unreachable at {re.escape(where)} for [45] s \(CASSANDRA_CONNECT_TIMEOUT 4 s\)",
        lines[-1],
    ), lines


def test_a_crawl_whose_every_seed_is_refused_ends_at_once_with_exit_2(tmp_path):
    """Seeds at loopback and private addresses without NETWORK_GUARD_ALLOW, and a line that
    is no URL: the worker says in one line that no seed was added and why (the setting
    that would let them in), names the bad line with its reason, and exits 2 at once,
    without a request."""
    with serve_site(hosts=2, pages=5) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{site.seeds[0]}\nhttp://10.1.2.3/private\nftp://not.http.example/\n")
        settings = {"CRAWL_DIR": tmp_path / "crawl", "FRONTIER_IDLE_SECONDS": 30, "FRONTIER_HOST_INTERVAL": 0.2}
        proc = _run(crawl_command(tmp_path / "out.jsonl", seeds, settings), timeout=120)
        hits = site.hits()
    stop_leftover_redis(tmp_path / "crawl", "teardown")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-3000:]
    assert not hits, hits
    assert "'finish_reason': 'seeds_refused'" in text, text[-3000:]  # (closed for it, not idle for 30 s)
    [line] = [line for line in text.splitlines() if "No seed added" in line]
    assert "added 0, already seen 0, invalid 1 (first at " in line and "refused 2" in line, line
    assert line.endswith("to crawl them, -s NETWORK_GUARD_ALLOW=NETWORKS (e.g. 127.0.0.0/8,192.168.0.0/16)"), line
    [bad] = [line for line in text.splitlines() if "Seed line invalid" in line]
    assert bad.endswith(f"Seed line invalid: {seeds}:3: not an http(s) URL: 'ftp://not.http.example/'"), bad


def test_what_scrapy_loads_before_its_reactor_installs_none():
    """Scrapy loads the project's settings, its commands (COMMANDS_MODULE) and its spiders
    before it installs its reactor: none of them may install one on import (the Cassandra
    driver's modules do, through their choice of a connection class), else every command
    stops with "The installed reactor ... does not match the requested one"."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import settings, crawler.commands, crawler.spiders.broad\n"
        "for m in pkgutil.iter_modules(crawler.commands.__path__):\n"
        "    importlib.import_module('crawler.commands.' + m.name)\n"
        "print(sorted(n for n in sys.modules if n == 'twisted.internet.reactor' or n.startswith('cassandra.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
