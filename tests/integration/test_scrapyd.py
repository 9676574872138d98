"""The crawler deployed to a real scrapyd, as docs/OPERATIONS.md's "Deploying to scrapyd" does it.

A scrapyd runs on 127.0.0.1 in a directory outside the source tree (its eggs, logs, items
and databases there); ``scrapyd-deploy env`` builds the egg from setup.py and uploads it;
jobs are scheduled, listed and cancelled with curl against schedule.json, listjobs.json
and cancel.json, their arguments those of docs/OPERATIONS.md. The jobs crawl the loopback site of
crawler/demo/site.py with a Redis frontier, a shared SQLite UrlStore and a shared local
archive. Skipped only when scrapyd or scrapyd-client is not installed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

import pytest
import redis

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Frontier
from crawler.frontier.words import FINISHED
from testing.servers import free_port
from testing.workers import ROOT, clean_env, log_tail, seed_file

HOST_INTERVAL = 0.3
PROJECT = "crawler"
JOB_TIMEOUT = 60  # seconds for a job to end


class Scrapyd:
    """A scrapyd on 127.0.0.1 whose configuration, eggs, logs, items and databases are in
    ``directory``, started there; its own log in ``directory/scrapyd.log``."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / "scrapyd.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Scrapyd:
        (self.dir / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            "bind_address = 127.0.0.1\n"
            f"http_port = {self.port}\n"
            f"eggs_dir = {self.dir / 'eggs'}\n"
            f"logs_dir = {self.dir / 'logs'}\n"
            f"items_dir = {self.dir / 'items'}\n"
            f"dbs_dir = {self.dir / 'dbs'}\n"
            "poll_interval = 0.2\n"
            "max_proc = 4\n"
        )
        env = {k: v for k, v in clean_env().items() if k != "PYTHONPATH"}  # the jobs import the egg only
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scrapyd"],
                cwd=self.dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its jobs too: stop() ends the whole group
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.get("daemonstatus.json")["status"] == "ok":
                    return self
            except OSError:
                pass
            assert self.proc.poll() is None, f"scrapyd exited at start\n{self.tail()}"
            assert time.monotonic() < deadline, f"scrapyd did not answer in 30 s\n{self.tail()}"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL)  # scrapyd and any job still running
        self.proc.wait(timeout=10)

    def deploy(self) -> dict:
        """``scrapyd-deploy env`` in the source tree (the [deploy:env] target of scrapy.cfg,
        at $SCRAPYD_URL): the server's answer."""
        script = Path(sys.executable).with_name("scrapyd-deploy")
        command = [str(script) if script.exists() else "scrapyd-deploy", "env"]
        env = {**clean_env(), "SCRAPYD_URL": self.url}
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.url}/{path}", timeout=10) as answer:
            return json.loads(answer.read())

    def curl(self, endpoint: str, *fields: str) -> dict:
        """``curl -s $SCRAPYD_URL/<endpoint> -d FIELD ...`` (a GET without fields): the
        JSON answer."""
        command = ["curl", "-s", f"{self.url}/{endpoint}"]
        for field in fields:
            command += ["-d", field]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def schedule(self, *fields: str) -> str:
        """A job of the broad spider with ``fields`` (``crawl=``, ``seeds=``,
        ``setting=NAME=VALUE``...): its id."""
        answer = self.curl("schedule.json", f"project={PROJECT}", "spider=broad", *fields)
        assert answer["status"] == "ok", answer
        return answer["jobid"]

    def cancel(self, job: str) -> str:
        answer = self.curl("cancel.json", f"project={PROJECT}", f"job={job}")
        assert answer["status"] == "ok", answer
        return answer["prevstate"]

    def jobs(self) -> dict[str, tuple[str, dict]]:
        """Each job's id: (pending, running or finished, its listjobs.json entry)."""
        listed = self.curl(f"listjobs.json?project={PROJECT}")
        return {job["id"]: (state, job) for state in ("pending", "running", "finished") for job in listed[state]}

    def wait(self, jobs: list[str], state: str = "finished", timeout: float = JOB_TIMEOUT) -> dict[str, dict]:
        """Wait until every job of ``jobs`` is in ``state``: their listjobs.json entries."""
        deadline = time.monotonic() + timeout
        while True:
            listed = self.jobs()
            if all(listed.get(job, ("",))[0] == state for job in jobs):
                return {job: listed[job][1] for job in jobs}
            if time.monotonic() > deadline:
                logs = "\n".join(self.job_log(job)[-3000:] for job in jobs)
                raise AssertionError(f"jobs not {state} after {timeout:.0f} s: {listed}\n{logs}\n{self.tail()}")
            time.sleep(0.2)

    def job_log(self, job: str) -> str:
        """The job's log as scrapyd serves it (its log_url)."""
        try:
            with urllib.request.urlopen(f"{self.url}/logs/{PROJECT}/broad/{job}.log", timeout=10) as answer:
                return answer.read().decode(errors="replace")
        except OSError:
            return f"(no log for job {job})"

    def outcome(self, job: str) -> str:
        """How scrapyd saw the job's process end: "finished" (exit code 0) or
        "died: exitstatus=N"."""
        for line in reversed(self.log.read_text(errors="replace").splitlines()):
            if f"job='{job}'" in line:
                found = re.search(r"Process (finished|died: exitstatus=\d+)", line)
                if found:
                    return found.group(1)
        return "(no end in scrapyd's log)"

    def tail(self) -> str:
        return log_tail([self.log], 30, "(no scrapyd log)")


@pytest.fixture(scope="module")
def scrapyd(tmp_path_factory):
    pytest.importorskip("scrapyd", reason="scrapyd is not installed (pip install -r requirements-deploy.txt)")
    pytest.importorskip("scrapyd_client", reason="scrapyd-client is not installed (requirements-deploy.txt)")
    directory = tmp_path_factory.mktemp("scrapyd")
    assert ROOT not in directory.resolve().parents
    setup_py = (ROOT / "setup.py").read_text()
    server = Scrapyd(directory).start()
    try:
        answer = server.deploy()
        assert answer["status"] == "ok" and answer["project"] == PROJECT and answer["spiders"] == 1, answer
        assert (ROOT / "setup.py").read_text() == setup_py, "scrapyd-deploy wrote a setup.py of its own"
        yield server
    finally:
        server.stop()


def _job_settings(redis_url: str, **overrides) -> list[str]:
    """``setting=NAME=VALUE`` fields of a job crawling the loopback site."""
    settings = {
        "REDIS_URL": redis_url,
        "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
        "FRONTIER_HOST_INTERVAL": HOST_INTERVAL,
        "FRONTIER_IDLE_SECONDS": 1,
        "ARCHIVE_MAX_SECONDS": 1,
        **overrides,
    }
    return [f"setting={name}={value}" for name, value in settings.items()]


def _assert_clean(scrapyd: Scrapyd, job: str) -> str:
    """The job ended with exit code 0 and an error-free log: its log."""
    log = scrapyd.job_log(job)
    assert scrapyd.outcome(job) == "finished", f"{scrapyd.outcome(job)}\n{log[-3000:]}\n{scrapyd.tail()}"
    assert " ERROR: " not in log and "Traceback" not in log, log[-3000:]
    return log


def test_the_deployed_egg_carries_the_package_data(scrapyd):
    (egg,) = (scrapyd.dir / "eggs" / PROJECT).glob("*.egg")
    with zipfile.ZipFile(egg) as z:
        names = set(z.namelist())
        info = z.read("EGG-INFO/PKG-INFO").decode()
        entry_points = z.read("EGG-INFO/entry_points.txt").decode()
    assert {"crawler/urlstore/schema.sql", "crawler/urlstore/schema.cql", "settings/distributed.py"} <= names
    assert "Name: crawler" in info.splitlines()
    assert "settings = settings.local" in entry_points
    assert not any(name.startswith(("tests/", "bench/")) for name in names)


def test_two_jobs_of_one_crawl_share_the_frontier_and_its_politeness(scrapyd, tmp_path, redis_url, crawl_name):
    """One job seeded from a file, the other from a URL list, both on one crawl with one
    SQLite UrlStore and one archive directory: each ends by itself; every page is fetched
    once, by one job or the other, recorded once and archived; no host's requests closer
    than its interval at the site."""
    store, archive = tmp_path / "urlstore.sqlite", tmp_path / "warc"
    settings = _job_settings(redis_url, URLSTORE_SQLITE_PATH=store, ARCHIVE_DIR=archive)
    started = time.monotonic()
    with serve_site(hosts=6, pages=10) as site:
        seeds = seed_file(tmp_path, site.seeds)
        urls = f"{site.url(1, '/p0.html')},{site.url(2, '/p0.html')}"
        first = scrapyd.schedule(f"crawl={crawl_name}", f"seeds={seeds}", *settings)
        second = scrapyd.schedule(f"crawl={crawl_name}", f"seeds={urls}", *settings)
        jobs = scrapyd.wait([first, second])
        hits = site.page_hits()
    took = time.monotonic() - started
    logs = [_assert_clean(scrapyd, job) for job in (first, second)]
    for log in logs:
        assert "Crawl summary (finished)" in log, log[-3000:]
    # the first job's seed is new; the second's are too unless the first has reached them already
    assert "Seeds: added 1, already seen 0, invalid 0, refused 0, 1 lines" in logs[0], logs[0][-3000:]
    assert re.search(r"Seeds: added \d, already seen \d, invalid 0, refused 0, 2 lines", logs[1]), logs[1][-3000:]

    counts = Counter(h.key for h in hits)
    assert set(counts) == site.expected_fetches(), sorted(site.expected_fetches() - set(counts))[:5]
    assert max(counts.values()) == 1, [key for key, n in counts.items() if n > 1]
    by_host = defaultdict(list)
    for h in hits:
        by_host[h.host].append(h.start)
    gaps = [b - a for starts in by_host.values() for a, b in pairwise(sorted(starts))]
    assert min(gaps) >= HOST_INTERVAL - 0.01, sorted(gaps)[:5]

    items = {job: _feed(scrapyd, entry) for job, entry in jobs.items()}
    assert all(items.values()), {job: len(pages) for job, pages in items.items()}  # both did work
    with sqlite3.connect(store) as db:
        query = "SELECT url, status, archive_key, canonical_url FROM urls"
        rows = {url: (status, key, canonical) for url, status, key, canonical in db.execute(query)}
    expected = site.expected_page_urls()
    assert expected <= set(rows), sorted(expected - set(rows))[:5]
    # each page archived, but an exact copy of another (recorded with its canonical_url)
    unarchived = {url: rows[url] for url in expected if rows[url][0] != 200 or not (rows[url][1] or rows[url][2])}
    assert not unarchived, unarchived
    stored = {str(path.relative_to(archive)) for path in archive.rglob("*.warc.gz")}
    assert {rows[url][1] for url in expected if rows[url][1]} <= stored, sorted(stored)[:5]
    outlook = Frontier(redis.Redis.from_url(redis_url), crawl_name).outlook(60)
    assert outlook["state"] == FINISHED and outlook["leased"] == 0, outlook
    print(
        f"scrapyd: 2 jobs, {len(hits)} pages ({', '.join(str(len(p)) for p in items.values())} by job) in {took:.1f} s; "
        f"smallest gap between a host's requests {min(gaps):.3f} s"
    )


def _feed(scrapyd: Scrapyd, entry: dict) -> list[dict]:
    """The Pages of a finished job's feed (scrapyd's items_dir)."""
    path = scrapyd.dir / "items" / PROJECT / "broad" / f"{entry['id']}.jl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cancel_gives_the_leases_back_and_the_distributed_profile_waits_for_work(
    scrapyd, tmp_path, redis_url, crawl_name
):
    """A job on the distributed profile, cancelled mid-crawl (cancel.json): it stops with
    exit code 0 and every lease back in the frontier. A second one takes the rest, then
    waits for new work instead of ending (the local profile's jobs end by themselves, the
    test above), until it is cancelled too."""
    settings = _job_settings(redis_url, CRAWL_DIR=tmp_path / "crawl")
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name)
    with serve_site(hosts=2, pages=12, delay=0.1) as site:
        seeds = seed_file(tmp_path, site.seeds)
        first = scrapyd.schedule(f"crawl={crawl_name}", "profile=distributed", f"seeds={seeds}", *settings)
        deadline = time.monotonic() + JOB_TIMEOUT
        while len(site.page_hits()) < 6:
            assert time.monotonic() < deadline, scrapyd.job_log(first)[-3000:]
            time.sleep(0.05)
        assert scrapyd.cancel(first) == "running"
        scrapyd.wait([first], timeout=30)
        log = _assert_clean(scrapyd, first)
        assert "Settings profile distributed (settings.distributed)" in log, log[-3000:]
        assert "Received SIGINT" in log, log[-3000:]
        outlook = frontier.outlook(60)
        assert outlook["leased"] == 0 and outlook["queued"] > 0, outlook
        fetched_first = len(site.page_hits())

        second = scrapyd.schedule(f"crawl={crawl_name}", "profile=distributed", *settings)
        deadline = time.monotonic() + JOB_TIMEOUT
        while {h.key for h in site.page_hits()} != site.expected_fetches():
            assert time.monotonic() < deadline, scrapyd.job_log(second)[-3000:]
            time.sleep(0.1)
        time.sleep(5)  # a local job would have ended by now (FRONTIER_IDLE_SECONDS=1)
        assert scrapyd.jobs()[second][0] == "running", scrapyd.job_log(second)[-3000:]
        assert frontier.outlook(60)["state"] == FINISHED
        assert scrapyd.cancel(second) == "running"
        scrapyd.wait([second], timeout=30)
        hits = site.page_hits()
    _assert_clean(scrapyd, second)
    twice = [key for key, n in Counter(h.key for h in hits).items() if n > 1]
    assert len(twice) <= len(site.hosts), twice  # at most what was in flight at the cancel
    print(f"scrapyd cancel: {fetched_first} pages before, {len(hits)} in all, {len(twice)} fetched twice")


def test_a_job_that_cannot_start_fails_visibly(scrapyd, tmp_path, redis_url, crawl_name):
    """A seeds file that cannot be read, a UrlStore that cannot be opened: scrapyd lists
    both jobs as finished (it lists every ended job so), but their processes died with a
    non-zero exit code, and each job's log says why in one line."""
    settings = _job_settings(redis_url, CRAWL_DIR=tmp_path / "crawl")
    missing = tmp_path / "missing-seeds.txt"
    unreadable = scrapyd.schedule(f"crawl={crawl_name}", f"seeds={missing}", *settings)
    store = _job_settings(redis_url, URLSTORE_SQLITE_PATH="/proc/no-such-dir/urlstore.sqlite")
    failing = scrapyd.schedule(f"crawl={crawl_name}", "seeds=http://127.0.0.2:9/", *store)
    scrapyd.wait([unreadable, failing])
    assert scrapyd.outcome(unreadable) == "died: exitstatus=2", scrapyd.tail()
    assert scrapyd.outcome(failing) == "died: exitstatus=1", scrapyd.tail()
    log = scrapyd.job_log(unreadable)
    (line,) = [line for line in log.splitlines() if "missing-seeds.txt" in line]
    assert "ERROR: crawl: seeds not readable" in line and "No such file" in line, log
    log = scrapyd.job_log(failing)
    (line,) = [line for line in log.splitlines() if "Crawl not started" in line]
    assert "ERROR: Crawl not started: FileNotFoundError" in line and "/proc/no-such-dir" in line, log
    assert "Task exception was never retrieved" not in log, log
