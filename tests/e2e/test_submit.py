"""Real-time submission (`scrapy submit`, the submission list) and the fetch policy: the end-
to-end tests (commands and workers as subprocesses) (the others: tests/unit/test_submit.py,
tests/integration/test_submit.py)."""

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from crawler.demo.site import serve_site
from crawler.freshness.policy import FORCED, SKIPPED
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.keys import Keys
from crawler.urlstore.record import ArchivePointer, FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.servers import free_port
from testing.workers import clean_env, launch_worker, loopback_settings, until

ROOT = Path(__file__).resolve().parents[2]


def _submit_command(redis_url, crawl_name, *args, stdin=None) -> subprocess.CompletedProcess:
    env = {**clean_env(), "REDIS_URL": redis_url}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "submit", "--crawl", crawl_name, *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_submit_says_what_became_of_each_url(redis_url, redis_client, crawl_name):
    Frontier(redis_client, crawl_name).put([Entry(url="http://seed.example/", payload=b"x")])  # a crawl running
    out = _submit_command(
        redis_url,
        crawl_name,
        "http://A.example/x?utm_medium=y",
        "ftp://a.example/",
        "-",
        stdin=("# from a pipe\nhttp://a.example/x\n\nhttp://b.example/\n"),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "added http://a.example/x",
        "invalid ftp://a.example/",
        "promoted http://a.example/x",  # queued: not fetched yet
        "added http://b.example/",
        "4 URLs submitted: 2 added, 1 invalid, 1 promoted",
    ]
    forced = _submit_command(redis_url, crawl_name, "--force", "http://b.example/")
    assert forced.stdout.splitlines()[0] == "added http://b.example/"
    assert int(redis_client.get(Keys(crawl_name).submitted)) == 4
    assert _submit_command(redis_url, crawl_name).returncode == 2  # no URL


def test_submit_without_redis_exits_1_with_one_line(crawl_name):
    out = _submit_command(f"redis://127.0.0.1:{free_port()}/0", crawl_name, "http://a.example/")
    assert out.returncode == 1
    assert re.fullmatch(r"submit: cannot connect to Redis \(redis://127\.0\.0\.1:\d+/0\): .+", out.stderr.strip())


def test_a_running_worker_fetches_submissions_and_keeps_the_policy(tmp_path, redis_url, redis_client):
    """A worker waiting for work (nothing seeded): a URL a program pushes onto the list,
    raw or as JSON, and one `scrapy submit` adds are fetched; a URL the UrlStore says was
    fetched an hour ago is not, until it is submitted with --force."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    keys = Keys(name)
    store_path = tmp_path / "urlstore.sqlite"
    try:
        with serve_site(hosts=3, pages=5) as site:
            pushed, listed, submitted, recent = (
                site.url(0, "/p1.html"),
                site.url(1, "/p2.html"),
                site.url(2, "/p3.html"),
                site.url(1, "/p1.html"),
            )
            store = SqliteUrlStore(str(store_path))  # another crawl fetched `recent` an hour ago
            archive = ArchivePointer("ab/earlier.warc.gz", 0, 100)
            store.record_fetch(
                FetchRecord(url=recent, fate="fetched", status=200, fetched_at=time.time() - 3600, archive=archive)
            )
            store.close()
            settings = loopback_settings(
                name,
                tmp_path / "worker.log",
                REDIS_URL=redis_url,
                URLSTORE_SQLITE_PATH=store_path,
                FRONTIER_CLOSE_WHEN_IDLE=False,
                CRAWL_FOLLOW_LINKS=False,
                LOG_LEVEL="DEBUG",
            )
            env = {**clean_env(), "REDIS_URL": redis_url}
            worker = launch_worker(tmp_path, "worker", None, settings, env)
            try:
                until(lambda: "Spider opened" in worker.text(), 60, worker)
                redis_client.rpush(keys.submit, pushed, json.dumps({"url": recent}), "not a url")
                redis_client.rpush(keys.submit, json.dumps({"url": listed, "priority": 2}))
                out = _submit_command(redis_url, name, submitted)
                assert out.stdout.startswith(f"added {submitted}\n"), out.stderr
                fetched = lambda: _fetched_urls(store_path)  # noqa: E731  (a page's record: once read)
                until(lambda: {pushed, listed, submitted} <= fetched(), 30, worker)
                until(lambda: "Fetch policy: " + recent in worker.text(), 10, worker)
                assert recent not in fetched()
                out = _submit_command(redis_url, name, "--force", recent)
                assert out.stdout.startswith(f"added {recent}\n"), out.stderr
                until(lambda: recent in fetched(), 30, worker)
            finally:
                if worker.proc.poll() is None:
                    worker.proc.send_signal(signal.SIGINT)
                code = worker.wait(60)
            hits = [h.key for h in site.page_hits()]
        assert code == 0, worker.tail()
        assert sorted(hits) == sorted(_key(u) for u in (pushed, listed, submitted, recent))  # each once
        text = worker.text()
        assert f"Fetch policy: {recent} not fetched: fetched 36" in text
        assert re.search(rf"'{SKIPPED}': 1\b", text) and re.search(rf"'{FORCED}': 1\b", text)
        assert re.search(r"'submit/taken': 3\b", text) and re.search(r"'submit/invalid': 1\b", text)
    finally:
        leftover = list(redis_client.scan_iter(match=keys.pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)


def test_a_url_queued_deep_in_a_busy_hosts_queue_is_fetched_at_its_next_turn(tmp_path, redis_url, redis_client):
    """A worker crawling one host at 0.3 s an interval, its 60 pages seeded (a queue of 18
    s): `scrapy submit` of the last page and of one already fetched says `promoted` and
    `seen`; the site is asked for the last page within a few turns of the submission, not
    at the end, and for every page once."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    keys = Keys(name)
    store_path = tmp_path / "urlstore.sqlite"
    try:
        with serve_site(hosts=2, pages=60) as site:  # (one crawled)
            urls = [site.url(0, f"/p{i}.html") for i in range(60)]
            seeds = tmp_path / "seeds.txt"
            seeds.write_text("\n".join(urls) + "\n")
            settings = loopback_settings(
                name,
                tmp_path / "worker.log",
                REDIS_URL=redis_url,
                URLSTORE_SQLITE_PATH=store_path,
                FRONTIER_HOST_INTERVAL=0.3,
                CRAWL_FOLLOW_LINKS=False,
            )
            worker = launch_worker(tmp_path, "worker", seeds, settings, {**clean_env(), "REDIS_URL": redis_url})
            try:
                until(lambda: len(_fetched_urls(store_path)) >= 5, 60, worker)
                done = sorted(_fetched_urls(store_path))[0]
                out = _submit_command(redis_url, name, "-s", f"URLSTORE_SQLITE_PATH={store_path}", urls[-1], done)
                asked = time.monotonic()  # (promoted by then: the command's own start-up not counted)
                assert out.stdout.splitlines()[:2] == [f"promoted {urls[-1]}", f"seen {done}"], out.stdout + out.stderr
                until(lambda: _key(urls[-1]) in {h.key for h in site.page_hits()}, 30, worker)
                [hit] = [h for h in site.page_hits() if h.key == _key(urls[-1])]
                code = worker.wait(120)
            finally:
                if worker.proc.poll() is None:
                    worker.proc.send_signal(signal.SIGINT)
                    worker.wait(60)
            hits = [h.key for h in site.page_hits()]
        assert code == 0, worker.tail()
        assert sorted(hits) == sorted(_key(u) for u in urls)  # every page once, the promoted one too
        assert hit.start - asked < 5.0  # (its turn in the queue: some 15 s later)
        assert hits.index(_key(urls[-1])) < 40
    finally:
        leftover = list(redis_client.scan_iter(match=keys.pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)


def _fetched_urls(path: Path) -> set[str]:
    """The URLs the UrlStore records as fetched since the test began (read as any program
    would; none before the worker made the store)."""
    if not path.exists():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return {url for (url,) in db.execute("SELECT url FROM urls WHERE fate = 'fetched' AND metadata LIKE '%title%'")}
    except sqlite3.OperationalError:  # (its tables not made yet)
        return set()
    finally:
        db.close()


def _key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname, parts.path


def test_scrapy_submit_holds_a_url_to_the_running_crawls_scope(tmp_path, redis_url, redis_client):
    """A worker started with -a allowed_domains=<one host> (loopback allowed by its
    NETWORK_GUARD_ALLOW): `scrapy submit`, given no setting of its own, refuses a URL of
    another host (out-of-scope) and one at a link-local address (private address), each
    with why and what would let it in, exit code 2; a URL in scope is added and fetched.
    A value pushed onto the list outside the scope is counted and never fetched."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    keys = Keys(name)
    try:
        with serve_site(hosts=3, pages=5) as site:
            inside, outside = site.hosts[0], site.hosts[1]
            settings = loopback_settings(
                name,
                tmp_path / "worker.log",
                REDIS_URL=redis_url,
                FRONTIER_CLOSE_WHEN_IDLE=False,
                CRAWL_FOLLOW_LINKS=False,
            )
            env = {**clean_env(), "REDIS_URL": redis_url}
            worker = launch_worker(tmp_path, "worker", None, settings, env, args={"allowed_domains": inside})
            try:
                until(lambda: redis_client.exists(keys.scope), 60, worker)
                other = site.url(1, "/p4.html")
                out = _submit_command(redis_url, name, other)
                assert out.returncode == 2, out.stdout + out.stderr
                assert out.stdout.splitlines() == [
                    f"refused out-of-scope {other}: {outside} is not in the crawl's allowed domains ({inside}); "
                    f"to crawl it: run the workers with -a allowed_domains={inside},{outside} (or CRAWL_ALLOWED_DOMAINS)",
                    "1 URL submitted: 1 refused",
                ]
                metadata = "http://169.254.169.254/latest/meta-data/"
                out = _submit_command(redis_url, name, metadata)
                assert out.returncode == 2, out.stdout + out.stderr
                assert out.stdout.splitlines()[0] == (
                    f"refused private address {metadata}: 169.254.169.254 is a link-local address, which the "
                    "network guard refuses; to crawl it: run the workers with "
                    "-s NETWORK_GUARD_ALLOW=127.0.0.0/8,169.254.169.254/32"
                )
                redis_client.rpush(keys.submit, site.url(1, "/p3.html"))
                wanted = site.url(0, "/p2.html")
                out = _submit_command(redis_url, name, wanted)
                assert (out.returncode, out.stdout.splitlines()[0]) == (0, f"added {wanted}"), out.stdout + out.stderr
                until(lambda: _key(wanted) in {h.key for h in site.page_hits()}, 30, worker)
                until(lambda: "Submission refused" in worker.text(), 10, worker)
            finally:
                if worker.proc.poll() is None:
                    worker.proc.send_signal(signal.SIGINT)
                code = worker.wait(60)
            hosts = {h.host for h in site.hits()}
        assert code == 0, worker.tail()
        assert hosts == {inside}, f"requests to hosts out of the crawl's scope: {hosts}"
        assert re.search(r"'submit/refused/out_of_scope': 1\b", worker.text()), worker.tail()
    finally:
        leftover = list(redis_client.scan_iter(match=keys.pattern(), count=1000))
        if leftover:
            redis_client.delete(*leftover)
