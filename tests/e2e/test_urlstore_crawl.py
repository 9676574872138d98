"""A crawl through the archive and UrlStore pipelines (local WARC directory), stored in
SQLite by one worker, then ``scrapy urlstore get|content|links`` on what it stored; and
the same crawl stored in Cassandra by two workers (a keyspace of its own, on the cluster
CASSANDRA_HOSTS names): the same pages, records, links and archived bodies, no tombstone
in its tables, and ``scrapy urlstore`` and ``scrapy recrawl`` on it."""

import json
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import Keys
from testing.stores import cassandra_hosts, cassandra_port, cells_read
from testing.workers import clean_env, crawl_command, launch_worker, log_tail, read_pages, seed_file

ROOT = Path(__file__).resolve().parents[2]
REFUSED = "http://10.0.0.1/private"  # a private address: refused when seeded, no request made
SETTINGS = {
    "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
    "FRONTIER_HOST_INTERVAL": 0.05,
    "FRONTIER_IDLE_SECONDS": 2,
    "ARCHIVE_MAX_SECONDS": 1,
    "RETRY_TIMES": 0,
    "URL_RETRY_ATTEMPTS": 1,  # a dropped connection is recorded at once (not tried again 15 s later)
    "RECRAWL_INTERVAL": 3600,
    "RECRAWL_RETRY_INTERVAL": 60,
}


@pytest.fixture(scope="module")
def site():
    """Two hosts; robots.txt of the second disallows /p3.html; /drop.html closes the
    connection unanswered."""
    robots = {1: "User-agent: *\nDisallow: /p3.html\n"}
    with serve_site(hosts=2, pages=6, robots=robots, routes={"/drop.html": "drop"}) as s:
        yield s


def _seeds(directory: Path, site) -> Path:
    return seed_file(directory, [*site.seeds, REFUSED, site.url(0, "/drop.html")])


def _html(site) -> dict[str, str]:
    return {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in site.page_paths()}


def _forget(redis_url: str, name: str) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=Keys(name).pattern(), count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory, redis_url, site):
    tmp = tmp_path_factory.mktemp("urlstore-crawl")
    name = f"test-{uuid.uuid4().hex[:12]}"
    settings = {"CRAWL_NAME": name, "CRAWL_DIR": tmp / "crawl", "LOG_FILE": tmp / "worker.log", **SETTINGS}
    env = {**clean_env(), "REDIS_URL": redis_url}
    out = tmp / "pages.jsonl"
    proc = subprocess.run(crawl_command(out, _seeds(tmp, site), settings), cwd=ROOT, env=env, timeout=180)
    assert proc.returncode == 0, log_tail([tmp / "worker.log"], 40, "no log")

    def urlstore(*args) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "scrapy", "urlstore", *args, "-s", f"CRAWL_NAME={name}"]
        cmd += ["-s", f"CRAWL_DIR={tmp / 'crawl'}"]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=60)

    yield {
        "site": site,
        "pages": read_pages(out),
        "html": _html(site),
        "urlstore": urlstore,
        "refused": REFUSED,
        "closed": site.url(0, "/drop.html"),
        "sqlite": tmp / "crawl" / name / "urlstore.sqlite",
    }
    _forget(redis_url, name)


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
    assert crawled["refused"] not in fates  # refused by the network guard when seeded: never queued
    assert fates[crawled["closed"]] == "connection_error"
    assert fates[site.url(0, "/p2.html")] == "fetched"
    # when each is due again: RECRAWL_INTERVAL after an answer, RECRAWL_RETRY_INTERVAL after
    # a failure
    assert due[site.url(0, "/p2.html")] == pytest.approx(3600)
    assert due[crawled["closed"]] == pytest.approx(60)
    assert due[site.url(1, "/p3.html")] == pytest.approx(60)


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
    missing = urlstore("content", crawled["closed"])  # no answer: no body
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
    assert frontier.returncode == 2 and b"no crawl 'default' under" in frontier.stderr
    assert not any(elsewhere.iterdir())


# -- the same crawl on Cassandra, by two workers -----------------------------------------


@pytest.fixture(scope="module")
def on_cassandra(tmp_path_factory, redis_url, site, cassandra_session):
    """The crawl of ``site`` stored in a fresh keyspace by two workers, one after the other
    (each applies the schema at start): the first seeds the frontier and crawls alone until
    it has had a few pages answered; the crawl is then paused (``scrapy frontier pause``),
    the first stopped (SIGTERM: its leases given back), and the second started; the crawl
    resumed, the second finishes it. (Started side by side, either could take the two
    hosts each time they fell due and leave the other nothing.)"""
    tmp = tmp_path_factory.mktemp("urlstore-cassandra-crawl")
    name, keyspace = f"test-{uuid.uuid4().hex[:12]}", f"test_{uuid.uuid4().hex[:12]}"
    cassandra = {
        "URLSTORE_BACKEND": "cassandra",
        "CASSANDRA_KEYSPACE": keyspace,
        "CASSANDRA_PORT": cassandra_port(),
    }
    env = {**clean_env(), "REDIS_URL": redis_url, "CASSANDRA_HOSTS": ",".join(cassandra_hosts())}
    # half a second between two requests to a host: the crawl lasts a few seconds
    settings = {"CRAWL_NAME": name, "CRAWL_DIR": tmp / "crawl", **SETTINGS, "FRONTIER_HOST_INTERVAL": 0.5, **cassandra}
    client = redis.Redis.from_url(redis_url)
    frontier = Frontier(client, name)
    workers = [launch_worker(tmp, "a", _seeds(tmp, site), {**settings, "USER_AGENT": f"crawler ({_AGENT_A})"}, env)]
    try:
        # its own pages, by their User-Agent (the site's count alone would take b's for a's)
        _wait(lambda: _answered(site, _AGENT_A) >= 4, workers[0], "worker a had no pages answered")
        assert frontier.pause()
        workers[0].proc.send_signal(signal.SIGTERM)
        assert workers[0].wait(120) == 0, workers[0].tail()
        workers.append(launch_worker(tmp, "b", None, settings, env))
        _wait(lambda: "Spider opened" in workers[1].text(), workers[1], "worker b did not start")
        assert frontier.resume()
        client.close()
        assert workers[1].wait(120) == 0, workers[1].tail()

        def command(*args, **overrides) -> subprocess.CompletedProcess:
            """``scrapy ARGS`` on this crawl and keyspace (``overrides``: other settings)."""
            cmd = [sys.executable, "-m", "scrapy", *args, "-s", f"CRAWL_NAME={name}"]
            for key, value in {"CRAWL_DIR": tmp / "crawl", **cassandra, **overrides}.items():
                cmd += ["-s", f"{key}={value}"]
            return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=60)

        yield {
            "keyspace": keyspace,
            "hosts": f"{', '.join(cassandra_hosts())}:{cassandra_port()}",
            "pages": [page for w in workers for page in w.pages()],
            "workers": workers,
            "command": command,
        }
    finally:
        for w in workers:
            w.kill()
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
        _forget(redis_url, name)


_AGENT_A = "worker-a"


def _answered(site, user_agent: str) -> int:
    """The pages (robots.txt aside) ``site`` has answered to a User-Agent with ``user_agent`` in it."""
    return sum(1 for h in site.page_hits() if h.end is not None and user_agent in h.user_agent)


def _wait(condition, worker, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert worker.proc.poll() is None, f"worker {worker.label} exited: {what}\n{worker.tail()}"
        assert time.monotonic() < deadline, f"{what} after {timeout:.0f} s\n{worker.tail()}"
        time.sleep(0.05)


def _records(store, urls) -> dict[str, dict]:
    """What a crawl's store says of each URL, the parts that do not depend on when or by
    which worker it was fetched (the archive pointer: whether there is one)."""
    out = {}
    for url in urls:
        r = store.get(url, follow_canonical=False)
        due = None if r["next_fetch_at"] is None else round(r["next_fetch_at"] - r["fetched_at"])
        out[url] = {
            **{k: r[k] for k in ("fate", "status", "final_url", "redirect_chain", "canonical_url", "content_digest")},
            **{k: r[k] for k in ("outlinks", "etag", "last_modified")},
            "error": (r["error"] or "").split(":", 1)[0],
            "due": due,
            "archived": r["archive"] is not None,
            "inlinks": store.inlinks(url),
        }
    return out


def _order_free(records: dict[str, dict]) -> dict[str, dict]:
    """``records`` with what depends on which copy of a page was fetched first taken out:
    of pages with the same body, one is ``fetched`` and each other a ``duplicate`` whose
    canonical URL is that one (checked here); which one came first is up to the workers."""
    groups: dict[str, list[str]] = {}
    for url, r in records.items():
        if r["fate"] in ("fetched", "duplicate") and r["content_digest"]:
            groups.setdefault(r["content_digest"], []).append(url)
    out = dict(records)
    for copies in (g for g in groups.values() if len(g) > 1):
        first = [url for url in copies if records[url]["fate"] == "fetched"]
        assert len(first) == 1, {url: records[url]["fate"] for url in copies}
        for url in copies:
            assert url == first[0] or records[url]["canonical_url"] == first[0], records[url]
            out[url] = {**records[url], "fate": "one copy", "canonical_url": tuple(sorted(copies))}
    return out


def test_cassandra_holds_what_sqlite_holds_without_a_tombstone(crawled, on_cassandra, cassandra_session):
    from crawler.urlstore.cassandra import CassandraUrlStore
    from crawler.urlstore.sqlite import SqliteUrlStore

    pages = {(p["url"], str(p["status"])) for p in crawled["pages"]}
    # (a page in flight when the first worker stopped is in both workers' output)
    assert {(p["url"], str(p["status"])) for p in on_cassandra["pages"]} == pages
    urls = sorted(url for url, _ in pages)
    sqlite = SqliteUrlStore(str(crawled["sqlite"]))
    cassandra = CassandraUrlStore(cassandra_session, on_cassandra["keyspace"])
    try:
        expected, got = _records(sqlite, urls), _records(cassandra, urls)
    finally:
        sqlite.close()
        cassandra.close()
    expected, got = _order_free(expected), _order_free(got)
    for url in urls:
        assert got[url] == expected[url], url
    assert sum(r["archived"] for r in got.values()) >= 10
    assert {r["fate"] for r in got.values()} >= {"fetched", "robots_disallowed", "connection_error"}
    # both workers wrote; Cassandra reads every row back without meeting a tombstone
    workers = on_cassandra["workers"]
    assert all(w.pages() for w in workers), "\n".join(
        f"{w.label}: {len(w.pages())} pages\n{w.tail(80)}" for w in workers
    )
    rows, live, tombstones = cells_read(cassandra_session, f"{on_cassandra['keyspace']}.urls")
    assert rows == live >= len(urls) and tombstones == 0
    inlinks = cells_read(cassandra_session, f"{on_cassandra['keyspace']}.inlinks")
    assert inlinks[0] == inlinks[1] > 0 and inlinks[2] == 0


def test_the_read_commands_and_recrawl_work_on_cassandra(crawled, on_cassandra, cassandra_session):
    command, html, site = on_cassandra["command"], crawled["html"], crawled["site"]
    page = site.url(0, "/p2.html")
    got = command("urlstore", "get", page)
    assert got.returncode == 0, got.stderr
    record = json.loads(got.stdout)
    assert (record["fate"], record["status"], record["archive"] is not None) == ("fetched", 200, True)
    content = command("urlstore", "content", page)
    assert content.returncode == 0 and content.stdout == html[page].encode(), content.stderr
    links = json.loads(command("urlstore", "links", site.url(1, "/p0.html")).stdout)
    assert site.url(0, "/p0.html") in {link["url"] for link in links["inlinks"]}
    unknown = command("urlstore", "get", "http://unknown.example/")
    assert unknown.returncode == 1 and b"not in the store" in unknown.stderr
    # a keyspace that is not there: one line naming the setting, exit 2, and nothing is created
    missing = f"test_{uuid.uuid4().hex[:12]}"
    nowhere = command("urlstore", "get", page, CASSANDRA_KEYSPACE=missing)
    assert nowhere.returncode == 2, nowhere.stderr
    assert nowhere.stderr.decode().splitlines() == [
        f"urlstore: the UrlStore's keyspace {missing} does not exist on the Cassandra cluster at "
        f"{on_cassandra['hosts']} (CASSANDRA_KEYSPACE; with CASSANDRA_APPLY_SCHEMA off no worker makes it)"
    ]
    cassandra_session.cluster.refresh_schema_metadata()
    assert missing not in cassandra_session.cluster.metadata.keyspaces
    # the URLs due within two hours (answers: in an hour, failures: in a minute) put back,
    # each held an hour
    rows = cassandra_session.execute(f"SELECT next_fetch_at FROM {on_cassandra['keyspace']}.urls")
    due = sum(
        1 for r in rows if r.next_fetch_at and r.next_fetch_at.replace(tzinfo=UTC).timestamp() < time.time() + 7000
    )
    assert due >= 10
    recrawl = command("recrawl", "--due-within", "7200", RECRAWL_HOLD=3600)
    assert recrawl.returncode == 0, recrawl.stderr
    assert recrawl.stdout.decode().splitlines()[-1].startswith(f"{due} due URLs read: {due} added")
    held = json.loads(command("urlstore", "get", page).stdout)
    assert datetime.fromisoformat(held["next_fetch_at"]).timestamp() > time.time() + 3000
    assert cells_read(cassandra_session, f"{on_cassandra['keyspace']}.urls")[2] == 0  # reschedules too
    # the recrawl read the due index, whole since the first worker started on the empty table
    indexed = command("urlstore", "index-due")
    assert indexed.returncode == 0 and indexed.stdout.decode().strip() == "urlstore: the due index is whole already"


def test_nothing_fetched_on_cassandra_gives_the_fresh_start_that_works_there(tmp_path, redis_url, cassandra_session):
    """A crawl whose every URL the Cassandra UrlStore holds as fetched ends saying so, with
    a way to fetch again that works on Cassandra (not ``clear --store``, which refuses
    there); followed as it is written, it fetches the site again."""
    keyspaces = [f"test_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    name = f"test-{uuid.uuid4().hex[:12]}"
    env = {**clean_env(), "REDIS_URL": redis_url, "CASSANDRA_HOSTS": ",".join(cassandra_hosts())}
    try:
        with serve_site(hosts=2, pages=5) as small:
            seeds = seed_file(tmp_path, small.seeds)
            base = {**SETTINGS, "CRAWL_DIR": tmp_path / "crawl", "URLSTORE_BACKEND": "cassandra"}
            base.update(CASSANDRA_PORT=cassandra_port(), CRAWL_FOLLOW_LINKS=False)

            def crawl(label: str, crawl_name: str, keyspace: str):
                settings = {**base, "CRAWL_NAME": crawl_name, "CASSANDRA_KEYSPACE": keyspace}
                worker = launch_worker(tmp_path, label, seeds, settings, env)
                assert worker.wait(120) == 0, worker.tail()
                return worker

            crawl("first", name, keyspaces[0])
            hits = len(small.page_hits())
            again = crawl("again", f"{name}-b", keyspaces[0])  # a fresh frontier, the same UrlStore
            assert len(small.page_hits()) == hits, "fetched again within FETCH_POLICY_MAX_AGE"
            [line] = [line for line in again.text().splitlines() if "Nothing fetched" in line]
            assert "clear --store" not in line, line
            assert line.endswith(
                "scrapy frontier clear --yes, then crawl with -s CASSANDRA_KEYSPACE=<a new keyspace> "
                f"(the UrlStore in keyspace {keyspaces[0]} is shared by every crawl of it, and kept)"
            ), line
            cleared = subprocess.run(
                [sys.executable, "-m", "scrapy", "frontier", "clear", "--yes", "-s", f"CRAWL_NAME={name}-b"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert cleared.returncode == 0, cleared.stderr
            crawl("fresh", f"{name}-b", keyspaces[1])
            assert len(small.page_hits()) == 2 * hits
    finally:
        for keyspace in keyspaces:
            cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
        for crawl_name in (name, f"{name}-b"):
            _forget(redis_url, crawl_name)


def test_urlstore_get_read_by_a_reader_that_stops_early_is_not_an_error(tmp_path):
    """``scrapy urlstore get URL | head -1``: the reader closes the pipe after one byte of a
    record larger than a pipe holds; the command ends with exit code 0 and no traceback."""
    from crawler.urlstore.record import FetchRecord
    from crawler.urlstore.sqlite import SqliteUrlStore

    path = str(tmp_path / "store.sqlite")
    store = SqliteUrlStore(path)
    big = {f"field{i}": "x" * 1000 for i in range(300)}  # 300 KB of JSON: more than a pipe holds
    record = FetchRecord(url="http://example.com/big", fate="fetched", fetched_at=1.0, status=200, metadata=big)
    store.record_fetch(record).result(30)
    store.close()
    cmd = [sys.executable, "-m", "scrapy", "urlstore", "get", "http://example.com/big"]
    cmd += ["-s", f"URLSTORE_SQLITE_PATH={path}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(1) == b"{"
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and b"Traceback" not in err, err


def test_a_mistyped_keyspace_stops_the_crawl_before_anything_is_fetched(tmp_path, redis_url, cassandra_session):
    """CASSANDRA_APPLY_SCHEMA off (the keyspace made by an operator) and a keyspace that is
    not there: one line naming the setting, exit 2, no traceback, the site never asked and
    no keyspace made."""
    missing = f"test_{uuid.uuid4().hex[:12]}"
    env = {**clean_env(), "REDIS_URL": redis_url, "CASSANDRA_HOSTS": ",".join(cassandra_hosts())}
    settings = {
        **SETTINGS,
        "CRAWL_NAME": f"test-{uuid.uuid4().hex[:12]}",
        "CRAWL_DIR": tmp_path / "crawl",
        "URLSTORE_BACKEND": "cassandra",
        "CASSANDRA_PORT": cassandra_port(),
        "CASSANDRA_KEYSPACE": missing,
        "CASSANDRA_APPLY_SCHEMA": False,
        "LOG_FILE": tmp_path / "worker.log",
    }
    with serve_site(hosts=2, pages=5) as small:
        seeds = seed_file(tmp_path, small.seeds)
        proc = subprocess.run(
            crawl_command(tmp_path / "out.jsonl", seeds, settings), cwd=ROOT, env=env, capture_output=True, timeout=120
        )
        hits = small.hits()
    err = proc.stderr.decode()
    assert proc.returncode == 2, err[-3000:]
    assert err.strip().splitlines() == [
        f"crawl: the UrlStore's keyspace {missing} does not exist on the Cassandra cluster at "
        f"{', '.join(cassandra_hosts())}:{cassandra_port()} "
        "(CASSANDRA_KEYSPACE; with CASSANDRA_APPLY_SCHEMA off no worker makes it)"
    ], err[-3000:]
    log = (tmp_path / "worker.log").read_text()
    assert "Traceback" not in log and "Crawl not started: the UrlStore's keyspace" in log, log[-3000:]
    assert hits == []
    cassandra_session.cluster.refresh_schema_metadata()
    assert missing not in cassandra_session.cluster.metadata.keyspaces
