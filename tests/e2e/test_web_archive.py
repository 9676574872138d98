"""A crawl's archive as a standard web archive, tried with the tools people replay and
share web archives with: a real crawl (exact copies planted across hosts, and pages
recrawled with a 304), then

- ``warcio check`` passes every WARC file;
- the CDXJ the crawler wrote, merged by ``scrapy archive index``, is line for line what
  ``cdxj-indexer`` makes of the same WARC files;
- ``scrapy archive get`` prints an exact copy's bytes (its revisit followed to the
  original) and a 304's (followed to the capture it refers to);
- ``scrapy archive export --wacz`` makes a package the ``wacz`` package validates;
- pywb (its own environment, scripts/pywb.py) replays every page from the crawler's own
  index byte for byte, an exact copy and a page at the time of its 304 included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

from crawler.archive.cdxj import parse
from crawler.demo.plan import ARTICLES
from crawler.demo.site import serve_site
from crawler.frontier.keys import Keys
from testing.servers import free_port
from testing.services import require_service
from testing.sites import ChangingSite
from testing.workers import clean_env, launch_worker, loopback_settings, seed_file

ROOT = Path(__file__).resolve().parents[2]
PYWB_BIN = Path(os.environ.get("CRAWLER_SERVICES_CACHE") or Path.home() / ".cache" / "crawler-services")
PYWB_BIN = PYWB_BIN / "pywb-2.10.0" / "bin"


def _scrapy(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env or clean_env(), capture_output=True, timeout=300
    )


@pytest.fixture(scope="module")
def crawled(tmp_path_factory, redis_url):
    """A crawl of three hosts with the article pages (exact copies across hosts), and of
    a site whose static pages answer 304 when recrawled: (settings, what the sites served
    by URL, the exact copies {copy: original}, the 304'd URLs, the crawl's time bounds)."""
    import redis

    tmp = tmp_path_factory.mktemp("web-archive")
    name = f"test-{uuid.uuid4().hex[:12]}"
    schedule = {
        "RECRAWL_INTERVAL": 100,
        "RECRAWL_MIN_INTERVAL": 10,
        "RECRAWL_SYNC_DELTA_RATE": 0,
        "CRAWL_DIR": tmp / "crawl",
    }
    env = {**clean_env(), "REDIS_URL": redis_url}
    try:
        with serve_site(hosts=3, pages=5, articles=True) as site, ChangingSite(changing=1, static=2) as changing:
            static = [changing.url(p) for p in changing.paths if "static" in p]
            seeds = seed_file(tmp, [*site.seeds, *(changing.url(p) for p in changing.paths)])
            settings = loopback_settings(name, tmp / "w0.log", REDIS_URL=redis_url, ARCHIVE_MAX_SECONDS=1, **schedule)
            worker = launch_worker(tmp, "w0", seeds, settings, env)
            assert worker.wait(120) == 0, worker.tail()
            first_done = time.time()
            time.sleep(1.1)  # the recrawl's captures a second later: another timestamp
            changing.change()
            recrawl = _scrapy("recrawl", "--crawl", name, "--all-due", "--due-within", "150", *_s(schedule), env=env)
            assert recrawl.returncode == 0, recrawl.stderr
            settings = {**settings, "LOG_FILE": tmp / "w1.log"}
            worker = launch_worker(tmp, "w1", None, settings, env)
            assert worker.wait(120) == 0, worker.tail()
            assert all(changing.fetches(p, 304) == 1 for p in changing.paths if "static" in p), (
                changing.log,
                recrawl.stdout,
                worker.tail(),
            )
            served = {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in site.page_paths()}
            served |= {site.url(h, p): site.page(i, p) for i, h in enumerate(site.hosts) for p in ARTICLES}
            served = {url: body.encode() for url, body in served.items() if body is not None}
            served |= {url: _static_body(url) for url in static}
    finally:
        client = redis.Redis.from_url(redis_url)
        leftover = list(client.scan_iter(match=Keys(name).pattern(), count=1000))
        if leftover:
            client.delete(*leftover)
    log = (tmp / "w0.log").read_text(errors="replace")
    assert "'archive/revisits'" in log  # the article's copies
    return {"dir": tmp, "name": name, "settings": settings, "served": served, "static": static, "first": first_done}


def _s(settings: dict) -> list[str]:
    return [arg for k, v in settings.items() for arg in ("-s", f"{k}={v}")]


def _static_body(url: str) -> bytes:
    """What ChangingSite serves for a static page (it never changes)."""
    path = "/" + url.split("/", 3)[3]
    words = " ".join(f"{path.strip('/')}-word{i}-v0" for i in range(80))
    return f"<html><head><title>{path}</title></head><body><p>{words}</p></body></html>".encode()


def _warc_root(crawled) -> Path:
    return crawled["dir"] / "crawl" / crawled["name"] / "warc"


def _warcs(crawled) -> list[Path]:
    return sorted(_warc_root(crawled).rglob("*.warc.gz"))


def _archive(crawled, *args) -> subprocess.CompletedProcess:
    s = crawled["settings"]
    return _scrapy("archive", *args, "--crawl", crawled["name"], "-s", f"CRAWL_DIR={s['CRAWL_DIR']}")


def test_every_file_passes_warcio_check_and_has_its_index(crawled):
    warcs = _warcs(crawled)
    assert len(warcs) >= 2
    code = "import sys; from warcio.cli import main; sys.exit(main())"
    check = subprocess.run([sys.executable, "-c", code, "check", *map(str, warcs)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert all(p.with_name(p.name.removesuffix(".warc.gz") + ".cdxj").exists() for p in warcs)


def test_the_merged_index_is_what_cdxj_indexer_makes_of_the_warcs(crawled):
    out = crawled["dir"] / "index.cdxj"
    done = _archive(crawled, "index", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert b"indexed" in done.stderr
    ours = out.read_text().splitlines()
    root = _warc_root(crawled)
    theirs = subprocess.run(
        [sys.executable, "-m", "cdxj_indexer.main", "--sort", "--dir-root", str(root), *map(str, _warcs(crawled))],
        capture_output=True,
        text=True,
    )
    assert theirs.returncode == 0, theirs.stderr
    assert ours == theirs.stdout.splitlines()
    captures = [parse(line) for line in ours]
    revisits = [c for c in captures if c.revisit]
    assert {c.fields.get("status") for c in revisits} == {"200", None}  # exact copies, and 304s (no HTTP block)
    rebuilt = crawled["dir"] / "rebuilt.cdxj"
    done = _archive(crawled, "index", "--rebuild", "-o", str(rebuilt))
    assert done.returncode == 0 and rebuilt.read_text() == out.read_text(), done.stderr


def test_get_follows_a_revisit_to_its_payload(crawled):
    served = crawled["served"]
    copies = [u for u in served if u.endswith(ARTICLES[0]) and "127.0.0.2:" not in u]
    for url in copies:
        got = _archive(crawled, "get", url)
        assert got.returncode == 0, got.stderr
        assert got.stdout == served[url]
    url = crawled["static"][0]
    latest = _archive(crawled, "get", url)  # the 304, followed to the capture it refers to
    assert latest.returncode == 0 and latest.stdout == served[url], latest.stderr
    assert b"HTTP 304" in latest.stderr and b"a revisit of" in latest.stderr
    earlier = _archive(crawled, "get", url, "--at", time.strftime("%Y%m%d%H%M%S", time.gmtime(crawled["first"] - 30)))
    assert earlier.returncode == 0 and earlier.stdout == served[url] and b"HTTP 200" in earlier.stderr
    missing = _archive(crawled, "get", "http://127.0.0.2:1/never")
    assert missing.returncode == 1 and b"was not captured" in missing.stderr


def test_the_wacz_export_passes_the_wacz_validator(crawled):
    out = crawled["dir"] / "crawl.wacz"
    done = _archive(crawled, "export", "--wacz", str(out))
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        assert {"datapackage.json", "pages/pages.jsonl"} <= set(names)
        assert all(z.getinfo(n).compress_type == zipfile.ZIP_STORED for n in names if n.endswith(".warc.gz"))
        assert len([n for n in names if n.startswith("archive/")]) == len(_warcs(crawled))
        pages = z.read("pages/pages.jsonl").decode()
        assert '"title": "/static/0"' in pages  # titled from the UrlStore
    valid = subprocess.run(
        [sys.executable, "-c", "import sys; from wacz.main import main; sys.exit(main())", "validate", "-f", str(out)],
        capture_output=True,
        text=True,
    )
    assert valid.returncode == 0 and "Validation succeeded" in valid.stdout, valid.stdout + valid.stderr


def test_pywb_replays_every_page_from_the_crawlers_index(crawled):
    if not (PYWB_BIN / "wayback").exists():
        require_service("pywb", "pywb is not built: python scripts/pywb.py build")
    work = crawled["dir"] / "pywb"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    env = {**clean_env(), "PATH": f"{PYWB_BIN}:{os.environ.get('PATH', '')}"}
    init = subprocess.run(
        [str(PYWB_BIN / "wb-manager"), "init", "crawl"], cwd=work, env=env, capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    collection = work / "collections" / "crawl"
    shutil.copytree(_warc_root(crawled), collection / "archive", dirs_exist_ok=True)  # keys as stored
    index = collection / "indexes" / "index.cdxj"
    done = _archive(crawled, "index", "-o", str(index))
    assert done.returncode == 0, done.stderr
    port = free_port()
    server = subprocess.Popen(
        [str(PYWB_BIN / "wayback"), "-b", "127.0.0.1", "-p", str(port)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}/crawl"
        _until_up(base, server)
        for url, body in crawled["served"].items():
            assert _replay(f"{base}/id_/{url}") == body, url  # the latest capture (a revisit's: its payload)
        url = crawled["static"][0]
        at = time.strftime("%Y%m%d%H%M%S", time.gmtime(crawled["first"] + 60))  # nearest the 304
        assert _replay(f"{base}/{at}id_/{url}") == crawled["served"][url]
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _replay(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200, url
        return response.read()


def _until_up(base: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"wayback exited: {server.stderr.read().decode(errors='replace')[-2000:]}")
        try:
            urllib.request.urlopen(base + "/", timeout=2).close()
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError("wayback did not answer within 60 s")
