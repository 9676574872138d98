"""``scrapy serve`` on a real crawl's UrlStore, archive and frontier: records (normalized,
followed to their canonical, or raw), archived bodies byte for byte, outlinks and inlinks
paged, batch lookups, the frontier's numbers; bad requests get 4xx with a JSON error, a
store or a Redis that is down 503 with Retry-After in bounded time; the token; a
non-loopback address without one is refused."""

import json
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from redis import Redis

from crawler.demo.site import serve_site
from crawler.frontier.keys import Keys
from crawler.urlstore.record import FetchRecord
from crawler.urlstore.sqlite import SqliteUrlStore
from testing.servers import free_port
from testing.workers import ServeProcess, clean_env, crawl_command, log_tail, loopback_settings

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "serve-Token-5e1b"


def q(url: str) -> str:
    return urllib.parse.quote(url, safe="")


@pytest.fixture(scope="module")
def crawled(tmp_path_factory, redis_url):
    """A finished crawl of two loopback sites (one page disallowed by robots.txt, one
    whose connection drops), plus two records written beside it: a page and a copy whose
    canonical URL names it."""
    tmp = tmp_path_factory.mktemp("serve")
    name = f"test-{uuid.uuid4().hex[:12]}"
    robots = {1: "User-agent: *\nDisallow: /p3.html\n"}
    with serve_site(hosts=2, pages=6, robots=robots) as site:
        seeds = tmp / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        settings = loopback_settings(name, tmp / "worker.log")  # (crawl_command: CRAWL_DIR tmp / "crawl")
        env = {**clean_env(), "REDIS_URL": redis_url}
        proc = subprocess.run(crawl_command(tmp / "pages.jsonl", seeds, settings), cwd=ROOT, env=env, timeout=180)
        pages = ((site.url(h, p), site.page(i, p)) for i, h in enumerate(site.hosts) for p in site.page_paths())
        recorded = site.expected_page_urls()  # (a redirect's target is recorded under the URL linked)
        html = {url: body for url, body in pages if body is not None and url in recorded}
    assert proc.returncode == 0, log_tail([tmp / "worker.log"], 40, "no log")
    path = tmp / "crawl" / name / "urlstore.sqlite"
    writer = SqliteUrlStore(str(path))
    now = time.time()
    for url, canonical in (
        ("http://canon.example/main", None),
        ("http://canon.example/copy", "http://canon.example/main"),
    ):
        record = FetchRecord(url=url, fate="fetched", fetched_at=now, status=200, canonical_url=canonical)
        writer.record_fetch(record).result(30)
    writer.close()
    served = ServeProcess(env, {"CRAWL_NAME": name, "CRAWL_DIR": tmp / "crawl"}, tmp / "serve.log")
    yield {"name": name, "tmp": tmp, "html": html, "site": site, "env": env, "served": served, "store": path}
    served.stop()


def test_records_are_normalized_followed_to_their_canonical_or_raw(crawled):
    served, name, html = crawled["served"], crawled["name"], crawled["html"]
    assert name in served.json("/api/crawls")["crawls"]
    page = next(u for u in html if u.endswith("/p2.html"))
    record = served.json(f"/api/crawls/{name}/record?url={q(page.replace('http://', 'HTTP://'))}")
    assert record["url"] == page and record["fate"] == "fetched" and record["status"] == 200
    assert record["metadata"]["title"] and record["archive"]["key"]
    assert record["fetched_at"].endswith("Z")  # ISO 8601
    copy = served.json(f"/api/crawls/{name}/record?url={q('http://CANON.example/copy')}")
    assert copy["url"] == "http://canon.example/main" and copy["requested_url"] == "http://canon.example/copy"
    raw = served.json(f"/api/crawls/{name}/record?url={q('http://canon.example/copy')}&raw=1")
    assert raw["url"] == "http://canon.example/copy"
    assert (
        served.json(f"/api/crawls/{name}/record?url={q('http://CANON.example/copy')}&raw=1", expect=404)["status"]
        == 404
    )
    site = crawled["site"]
    disallowed = served.json(f"/api/crawls/{name}/record?url={q(site.url(site.hosts[1], '/p3.html'))}")
    assert disallowed["fate"] == "robots_disallowed" and disallowed["archive"] is None


def test_the_archived_body_comes_back_byte_for_byte_with_its_type(crawled):
    served, name, html = crawled["served"], crawled["name"], crawled["html"]
    site = crawled["site"]
    for url, body in html.items():
        status, headers, got = served.get(f"/api/crawls/{name}/content?url={q(url)}")
        if url == site.url(site.hosts[1], "/p3.html"):  # robots.txt kept it out: never archived
            assert status == 404 and "no archived body" in json.loads(got)["error"]
            continue
        assert status == 200 and got == (body.encode() if isinstance(body, str) else body), url
        assert headers["Content-Type"].startswith("text/html")


def test_links_are_paged_and_agree_with_the_store(crawled):
    served, name, html = crawled["served"], crawled["name"], crawled["html"]
    store = SqliteUrlStore(str(crawled["store"]))
    try:
        target = max(html, key=lambda u: len(store.inlinks(u)))
        expected = [link["url"] for link in store.inlinks(target)]
        source = next(u for u in html if store.outlinks(u))
        outlinks = store.outlinks(source)
    finally:
        store.close()
    assert len(expected) >= 3
    got, after = [], ""
    for _ in range(50):
        page = served.json(f"/api/crawls/{name}/inlinks?url={q(target)}&limit=2&after={q(after)}")
        assert len(page["inlinks"]) <= 2
        got += [link["url"] for link in page["inlinks"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert got == expected
    first = served.json(f"/api/crawls/{name}/outlinks?url={q(source)}&limit=1")
    assert first["total"] == len(outlinks) and first["outlinks"] == outlinks[:1]
    rest = served.json(f"/api/crawls/{name}/outlinks?url={q(source)}&offset=1&limit=1000")
    assert first["outlinks"] + rest["outlinks"] == outlinks and rest["next"] is None


def test_a_batch_lookup_answers_each_url(crawled):
    served, name, html = crawled["served"], crawled["name"], crawled["html"]
    known = list(html)[:3]
    asked = [*known, "http://unknown.example/x", "not a url"]
    results = served.json(f"/api/crawls/{name}/lookup", {"urls": asked})["results"]
    assert [r["url"] for r in results] == asked
    assert all(r["record"] and r["record"]["url"] == u for r, u in zip(results[:3], known, strict=True))
    assert results[3]["record"] is None and "error" not in results[3]
    assert results[4]["record"] is None and "not a valid URL" in results[4]["error"]
    too_many = served.json(f"/api/crawls/{name}/lookup", {"urls": known * 34}, expect=413)
    assert "at most 100" in too_many["error"]


def test_bad_requests_get_a_json_error(crawled):
    served, name = crawled["served"], crawled["name"]
    cases = {
        f"/api/crawls/{name}/record?url={q('http://exa mple.com:99999/')}": 400,
        f"/api/crawls/{name}/record": 400,
        f"/api/crawls/{name}/record?url={q('http://nowhere.example/')}": 404,
        f"/api/crawls/nosuchcrawl-{uuid.uuid4().hex[:6]}/record?url={q('http://a.example/')}": 404,
        f"/api/crawls/{name}/inlinks?url={q('http://a.example/')}&limit=0": 400,
        f"/api/crawls/{name}/outlinks?url={q('http://a.example/')}&offset=x": 400,
        "/api/nothing/here": 404,
    }
    for path, expected in cases.items():
        status, headers, body = served.get(path)
        assert status == expected, (path, status, body)
        assert headers["Content-Type"].startswith("application/json")
        assert json.loads(body)["status"] == expected and json.loads(body)["error"]
    unknown = json.loads(served.get(f"/api/crawls/nosuchcrawl/record?url={q('http://a.example/')}")[2])
    assert name in unknown["error"]  # names the crawls there are
    status, _, body = served.get(f"/api/crawls/{name}/lookup", data=b"{not json")
    assert status == 400 and "JSON" in json.loads(body)["error"]


def test_the_stores_totals_are_its_records_by_fate(crawled):
    """What a crawl whose Redis is gone still shows (the dashboard falls back on it)."""
    served, name = crawled["served"], crawled["name"]
    got = served.json(f"/api/crawls/{name}/store")
    with sqlite3.connect(crawled["store"]) as db:
        expected = dict(db.execute("SELECT fate, COUNT(*) FROM urls WHERE fate IS NOT NULL GROUP BY fate"))
    assert got["fates"] == expected and got["records"] == sum(expected.values()) and expected["fetched"] >= 10


def test_the_frontier_numbers_are_those_of_scrapy_frontier(crawled):
    served, name, env, tmp = crawled["served"], crawled["name"], crawled["env"], crawled["tmp"]
    numbers = served.json(f"/api/crawls/{name}/frontier")
    cli = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "stats", "--json", "-s", f"CRAWL_NAME={name}"]
        + ["-s", f"CRAWL_DIR={tmp / 'crawl'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    expected = json.loads(cli.stdout)
    assert numbers["status"]["state"] == expected["status"]["state"] == "finished"
    for key in ("queued", "leased", "pushed", "popped", "acked", "hosts_seen"):
        assert numbers[key] == expected[key], key
    assert numbers["acked"] >= len(crawled["html"]) - 1


def test_the_activity_is_what_the_workers_published(crawled):
    served, name, html = crawled["served"], crawled["name"], crawled["html"]
    numbers = served.json(f"/api/crawls/{name}/activity?minutes=10")
    assert numbers["bucket_seconds"] == 10 and len(numbers["series"]) == 60
    fetched = sum(b["fates"].get("fetched", 0) for b in numbers["series"])
    assert fetched == numbers["totals"]["pages/fate/fetched"] >= len(html) - 2
    assert numbers["recent"] and all(r["url"] and r["fate"] for r in numbers["recent"])
    assert served.json(f"/api/crawls/{name}/activity?minutes=0", expect=400)["status"] == 400


def test_a_store_or_redis_that_is_down_gives_503_in_bounded_time(crawled, tmp_path):
    """Redis away: the store still answers, the frontier's numbers are 503; the store
    held exclusively by another process: 503 within SERVE_TIMEOUT, then answers again."""
    name = crawled["name"]
    copy = tmp_path / "crawl" / name / "urlstore.sqlite"  # (a copy of the crawl's store, to hold)
    copy.parent.mkdir(parents=True)
    source, target = sqlite3.connect(str(crawled["store"])), sqlite3.connect(str(copy))
    source.backup(target)
    source.close()
    target.execute("PRAGMA journal_mode=WAL")
    target.close()
    holder = sqlite3.connect(str(copy), timeout=5)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    url = next(iter(crawled["html"]))
    holder.execute("UPDATE urls SET error = error WHERE url = ?", (url,))
    env = {**crawled["env"], "REDIS_URL": "redis://127.0.0.1:1/0"}
    settings = {"CRAWL_NAME": name, "CRAWL_DIR": tmp_path / "crawl", "SERVE_TIMEOUT": 1}
    served = ServeProcess(env, settings, tmp_path / "s.log")
    try:
        started = time.monotonic()
        status, headers, body = served.get(f"/api/crawls/{name}/record?url={q(url)}")
        took = time.monotonic() - started
        assert status == 503 and headers["Retry-After"] == "1" and "UrlStore" in json.loads(body)["error"], body
        assert took < 4
        holder.rollback()
        holder.close()
        deadline = time.monotonic() + 10
        while (answer := served.get(f"/api/crawls/{name}/record?url={q(url)}"))[0] != 200:
            assert time.monotonic() < deadline, f"the store did not answer again: {answer}"
            time.sleep(0.2)
        assert json.loads(answer[2])["url"] == url
        started = time.monotonic()
        status, headers, body = served.get(f"/api/crawls/{name}/frontier")
        assert status == 503 and headers["Retry-After"] == "1" and "Redis" in json.loads(body)["error"], body
        assert time.monotonic() - started < 5
    finally:
        served.stop()
    log = (tmp_path / "s.log").read_text()
    assert "UrlStore" in log and "Redis" in log  # each said in the log


def test_a_token_guards_the_api_and_another_address_needs_one(crawled, tmp_path):
    name, tmp = crawled["name"], crawled["tmp"]
    env = {**crawled["env"], "SERVE_TOKEN": TOKEN}
    served = ServeProcess(env, {"CRAWL_NAME": name, "CRAWL_DIR": tmp / "crawl"}, tmp_path / "t.log")
    try:
        assert served.get("/api/crawls")[0] == 200
        served.token = None
        status, _, body = served.get("/api/crawls")
        assert status == 401 and "token" in json.loads(body)["error"]
        assert served.get("/api/crawls", token="wrong")[0] == 401
        # the writes: pause and resume, the crawl or a host, with the token
        served.token = TOKEN
        base = f"/api/crawls/{name}"
        host = crawled["site"].hosts[0]
        assert served.json(f"{base}/pause", {})["paused"]["crawl"] is not None
        numbers = served.json(f"{base}/frontier")  # (finished: nothing queued to hold, but held)
        assert numbers["paused"]["crawl"] is not None and numbers["status"]["state"] == "finished"
        assert served.json(f"{base}/pause", {})["changed"] is False
        paused = served.json(f"{base}/pause", {"host": f"http://{host}/any"})
        assert paused["changed"] and paused["host"] == host and host in paused["paused"]["hosts"]
        assert served.json(f"{base}/pause", {"host": "not a host"}, expect=400)["error"]
        assert served.json(f"{base}/pause", {"host": 5}, expect=400)["error"]
        assert served.json(f"{base}/resume", {"host": host})["paused"]["hosts"] == {}
        assert served.json(f"{base}/resume", {})["paused"] == {"crawl": None, "hosts": {}, "dropped": {}}
        assert served.json(f"{base}/frontier")["paused"]["crawl"] is None
    finally:
        served.stop()
    assert TOKEN not in (tmp_path / "t.log").read_text()
    # without a token the writes are refused, whatever the address
    served = crawled["served"]
    answer = served.json(f"/api/crawls/{name}/pause", {}, expect=403)
    assert "SERVE_TOKEN" in answer["error"]
    assert served.json(f"/api/crawls/{name}/frontier")["status"]["state"] == "finished"
    refused = subprocess.run(
        [sys.executable, "-m", "scrapy", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        cwd=ROOT,
        env=crawled["env"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
    assert "SERVE_TOKEN" in refused.stderr and "loopback" in refused.stderr


def test_several_processes_serve_one_port_and_stop_with_the_first(crawled, tmp_path):
    name, tmp, html = crawled["name"], crawled["tmp"], crawled["html"]
    settings = {"CRAWL_NAME": name, "CRAWL_DIR": tmp / "crawl", "SERVE_PROCESSES": 3}
    served = ServeProcess(crawled["env"], settings, tmp_path / "p.log")
    try:
        children = [
            int(c) for c in Path(f"/proc/{served.proc.pid}/task/{served.proc.pid}/children").read_text().split()
        ]
        assert len(children) == 2
        for url in list(html)[:20]:  # (new connections: the kernel spreads them)
            assert served.json(f"/api/crawls/{name}/record?url={q(url)}")["requested_url"] == url
    finally:
        served.stop()
    assert served.proc.returncode == 0
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{c}").exists() and "zombie" not in _state(c) for c in children):
        assert time.monotonic() < deadline, "the forked servers outlived the first"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].splitlines()[0].lower()
    except (OSError, IndexError):
        return "gone"


def test_the_cassandra_backend_serves_the_same_api(tmp_path, redis_url, cassandra_session, cassandra_keyspace):
    """Both UrlStore backends serve the API: the same records, links and lookups from a
    Cassandra keyspace (on the cluster CASSANDRA_HOSTS names: tests/conftest.py)."""
    from crawler.urlstore.cassandra import CassandraUrlStore
    from crawler.urlstore.cassandra_cluster import schema_statements
    from testing.stores import cassandra_hosts, cassandra_port

    for statement in schema_statements(cassandra_keyspace):
        cassandra_session.execute(statement)
    store = CassandraUrlStore(cassandra_session, cassandra_keyspace)
    name = f"test-{uuid.uuid4().hex[:12]}"
    client, counters = Redis.from_url(redis_url), Keys(name).counters
    served = None
    try:
        now = time.time()
        sources = [f"http://c{i}.example/page" for i in range(5)]
        for src in sources:
            link = {"url": "http://target.example/", "text": src, "nofollow": False}
            store.record_fetch(FetchRecord(url=src, fate="fetched", fetched_at=now, status=200, outlinks=[link]))
        store.record_fetch(
            FetchRecord(url="http://target.example/", fate="fetched", fetched_at=now, status=200)
        ).result(30)
        store.close()
        client.hset(counters, "queued", 0)
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": tmp_path / "crawl",
            "URLSTORE_BACKEND": "cassandra",
            "CASSANDRA_KEYSPACE": cassandra_keyspace,
            "CASSANDRA_PORT": cassandra_port(),
        }
        env = {**clean_env(), "REDIS_URL": redis_url, "CASSANDRA_HOSTS": ",".join(cassandra_hosts())}
        served = ServeProcess(env, settings, tmp_path / "serve.log")
        assert served.json(f"/api/crawls/{name}/record?url={q('http://TARGET.example/')}")["fate"] == "fetched"
        got, after = [], ""
        while True:
            page = served.json(f"/api/crawls/{name}/inlinks?url={q('http://target.example/')}&limit=2&after={q(after)}")
            got += [link["url"] for link in page["inlinks"]]
            if page["next"] is None:
                break
            after = page["next"]
        assert got == sorted(sources)
        results = served.json(f"/api/crawls/{name}/lookup", {"urls": [sources[0], "http://none.example/"]})["results"]
        assert results[0]["record"]["url"] == sources[0] and results[1]["record"] is None
        # look-ups at once are read together (decision 0057): each answered with its own record
        asked = [*sources, "http://none.example/", "http://target.example/"] * 6
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda u: served.get(f"/api/crawls/{name}/record?url={q(u)}"), asked))
        for url, (status, _, body) in zip(asked, answers, strict=True):
            if url == "http://none.example/":
                assert status == 404, body
            else:
                assert status == 200 and json.loads(body)["url"] == url, body
    finally:
        if served is not None:
            served.stop()
        client.delete(counters)
        client.close()


def test_a_taken_port_is_one_line_before_anything_says_serving(tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "scrapy", "serve", "--port", str(port), "-s", f"CRAWL_DIR={tmp_path}"],
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"serve: cannot listen on 127.0.0.1:{port}: Address already in use"]
    assert "Serving" not in proc.stdout + proc.stderr


def test_a_pointer_at_no_record_and_bodies_that_are_no_json_get_a_4xx_at_once(crawled):
    """An archive pointer past its object's end, or of no length, is a 404 at once (it hung
    for SERVE_TIMEOUT and said 503, try again: the reading's StopIteration never reached
    the loop); a lookup body in an unknown charset or nested past the parser's depth is a
    400 (500 before)."""
    from crawler.urlstore.record import ArchivePointer

    served, name = crawled["served"], crawled["name"]
    key = (
        sqlite3.connect(crawled["store"])
        .execute("SELECT archive_key FROM urls WHERE archive_key IS NOT NULL")
        .fetchone()[0]
    )
    writer = SqliteUrlStore(str(crawled["store"]))
    for url, pointer in (("http://canon.example/past", (10**9, 100)), ("http://canon.example/empty", (0, 0))):
        record = FetchRecord(url=url, fate="fetched", fetched_at=time.time(), status=200)
        writer.record_fetch(record).result(30)
        writer.set_archive(url, ArchivePointer(key, *pointer), record.fetched_at).result(30)
    writer.close()
    for url in ("http://canon.example/past", "http://canon.example/empty"):
        started = time.monotonic()
        status, _, body = served.get(f"/api/crawls/{name}/content?url={q(url)}")
        assert status == 404 and "points at no record" in json.loads(body)["error"], (status, body)
        assert time.monotonic() - started < 1.5
    for data, headers in (
        (b'{"urls": []}', {"Content-Type": "application/json; charset=bogus"}),
        (b"[" * 100_000, {"Content-Type": "application/json"}),
    ):
        status, _, body = served.get(f"/api/crawls/{name}/lookup", data=data, headers=headers)
        assert status == 400 and "JSON" in json.loads(body)["error"], (status, body[:200])
