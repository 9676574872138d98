"""The read API (``scrapy serve``) under load: how many record look-ups a second one server
answers from a UrlStore of a million records within the latency target, and how many URLs
a second the batch look-up answers; from SQLite, from Cassandra, or both in one run.

    python -m bench.serve                                  # 1,000,000 records, steps of 10 s
    python -m bench.serve --records 100000 --step-seconds 5
    python -m bench.serve --rates 500,1000,2000 --batch-rates 5,10,20 --clients 2
    python -m bench.serve --url http://127.0.0.1:6810      # a server already running on that store
    python -m bench.serve --set SERVE_PROCESSES=2           # two server processes on one port
    python -m bench.serve --backends sqlite,cassandra       # the same records from both backends

The store: --records records generated straight into the SQLite file (schema.sql, the rows
laid out as SqliteUrlStore writes them: JSON columns, signed simhash, normalized URLs),
kept at --store (CRAWL_DIR/CRAWL_NAME/urlstore.sqlite, so that the server finds it by
those two settings) and reused by later runs while it holds that many records (opened
first as a worker opens it, SqliteUrlStore, so that a store made before gets the schema's
later indexes). The URLs spread over --hosts hosts (a few large sites, many small ones)
with paths like those of blogs, news sites, shops, documentation, wikis, forums and
company sites; most records are fetched pages (title, description and other metadata, 10
to 50 outlinks, an archive pointer, a rel=canonical on some), the rest exact copies
(canonical_url: the first copy), 404s, redirects, robots.txt refusals and network errors;
a sample of the pages also has its outlinks written as inlinks.

The Cassandra backend (--backends): the same records and inlinks, copied from that SQLite
file into the keyspace serve_RECORDS (``ensure_keyspace``: crawler/urlstore/schema.cql,
CassandraUrlStore's prepared statements and values, written through the driver's
execute_concurrent with a progress line every 10 s, then flushed and compacted), of a
node of the benchmarks' own (``CassandraNode``, scripts/cassandra.py, --cassandra-heap 1G):
on 127.0.0.1 with ports of its own (CQL 9342, inter-node 7400, JMX 7600: never the shared
node's 9042/7000/7199 nor the cluster's 9142/7100/7250; ports another process holds are
refused), its data in --cassandra-dir (~/.cache/crawler-bench/cassandra), kept between
runs: the copy is reused while it was made, complete, from that same file. The node is
started when not running and stopped at the end. Its server is ``scrapy serve`` with
URLSTORE_BACKEND=cassandra on that keyspace and REDIS_URL a redis-server of the run's own
holding the crawl's frontier counters (on Cassandra a server knows a crawl by its frontier).
Both are read once into the page cache first (unless --cold). The node's CPU is a column
of its own (node), counted as the run's, not as other processes'.

The server: ``python -m scrapy serve`` from the project root with CRAWL_DIR and CRAWL_NAME
of that store and SERVE_PORT a free port on 127.0.0.1, in an environment without REDIS_URL;
stopped at the end whatever happens (SIGINT, then SIGKILL). With --url, a server already
running on 127.0.0.0/8 is measured instead (its CPU only when --server-pid names it).

The load: --clients processes (aiohttp, one session each, keep-alive, a pool of
--connections connections) send requests open-loop: each request has its time in the
schedule (the rate of the step, evenly spaced) and is sent then whatever the answers
before it did, and its latency runs from that scheduled time to the end of its answer
(so a server or client that falls behind shows in the latency instead of slowing the
load). ``GET /api/crawls/CRAWL/record?url=U``: U a random stored URL, or with the share
--unknown one not stored (same hosts; its answer is a 404). Steps of --step-seconds at
increasing rates until two steps miss the target or --max-rate; then the batch look-up
(``POST .../lookup`` of --batch URLs, the same mix) at --batch-rates batches a second.
Nothing is sent anywhere but 127.0.0.0/8. Bounded: a request gives up after --timeout s,
the whole run after --limit s.

Figures, per step: offered and achieved rate (answers as expected, 200 or 404, a second
over the step; for the batch, in URLs), p50/p90/p99/max latency from the scheduled time (a
timed-out request counts as --timeout), errors (another status, a refused or reset
connection) and timeouts; the server's CPU (its process and any children, from
/proc/PID/task/*/schedstat: % of one core on a CPU / % of the step its threads were runnable
but waited for a core), its CPU a request (or a URL); the busiest load process's CPU the same
way, and the p99 of how late it sent a request; the cores other processes kept busy meanwhile
(/proc/stat less ours); the MB the server read from storage rather than the page cache (the
store is read once into the page cache first, unless --cold). The target: p50 <= 5 ms and
p99 <= 50 ms with under 1% errors and timeouts. Printed at the end: the highest rate meeting
it (requests/s for one record, URLs/s for the batch), the most answered a second, and what
held back the first step that missed: the load (a core's worth of CPU), the server's core,
the two cores kept busy by the run itself (server, node and load), the cores shared with
other processes (the threads waited), or the server's own time per request; and for each
backend the highest rates answered with p99 <= 50 ms (p50 not counted). The record steps
end after two steps over p99 50 ms or not kept up with, the batch steps after two steps not kept up with (under 95% of the
offered rate answered).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import zlib
from array import array
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from urllib.parse import quote, urlsplit

from crawler.urls import normalize_url
from crawler.urlstore.record import signed64
from crawler.urlstore.sqlite import SCHEMA, SQLITE_FILE, SqliteUrlStore
from testing.sampling import percentile
from testing.workers import clean_env

ROOT = Path(__file__).resolve().parents[1]

TARGET_P50, TARGET_P99 = 0.005, 0.050  # seconds
TARGET_FAILED = 0.01  # share of errors and timeouts a step may have
RATES = (250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 16000)
BATCH_RATES = (5, 10, 20, 30, 40, 60)
SAMPLE = 200_000  # stored URLs the clients pick from
INLINK_BUCKETS = 16  # URLSTORE_INLINK_BUCKETS' default
CHUNK = 20_000  # rows per transaction while generating
START_TIMEOUT = 90.0  # seconds for the server to answer
WARM_UP = 10.0  # seconds of record look-ups at 100/s before the steps
CLIENT_BUSY = 0.90  # share of a core above which a load process counts as the limit
SERVER_BUSY = 0.80  # and the server (its Python code runs one thread at a time: one core at most)
OTHERS_BUSY = 0.3  # cores other processes keep busy above which they count

# -- the generated store -----------------------------------------------------------------

WORDS = """
about access account action active address advanced after agent album alpha analysis annual
answer apple archive area article artist audio author auto autumn award backup balance band
bank basic beach best beta bike black block blue board body book border bottle brand bread
bridge bright build business button cable camera camp canal capital card care career carbon
cart case castle catalog center chain chair change chart check chicken child city class
classic clean clear climate clock cloud club coach coast code coffee color column comfort
common company compare contact content cookie copper corner cotton country course cover
craft create credit cross culture custom cycle daily data date deal delta design detail
device diary digital dinner direct doctor double download draft dream dress drive early
earth east easy edge editor energy engine event every expert export fabric family farm
fashion feature field file film final finance first fish fitness flash fleet floor flower
focus folk food forest format forum frame fresh front fruit fuel garden gate gear giant
gift glass global gold golf grand graph green group growth guide guitar hand harbor health
heart help heritage highway hill history holiday home honey horse hotel house human idea
image index inside island item jazz jewel journal journey kernel kitchen label lake land
language laser leader learn legal lemon letter level library light linux list local logic
lunar machine magic main manual maple market master media medical member memory metal
method metro micro middle mobile model modern money monitor month motor mountain movie
music native nature network news night noble north note number ocean office online open
orange order organic outdoor owner ocean package paint panel paper park party pattern peak
pepper photo piano pilot pixel planet plant plastic player pocket point policy pool
portal post power press price print private product profile project public pulse quality
quick radio rail random range rapid reader recipe record region repair report research
resort review river road robot rock royal rural safety sail sales salt sample school
science screen search season secret security seed select server service shadow share
shell shop signal silver simple single site sky smart snow social software solar solid
sound source space speed spirit sport spring square stable star station steel stone
storage store story street studio style summer sun super supply support surface system
table talent task team tech tennis test text theory thread ticket tiger time tool top
total tour tower track trade trail train travel tree trend trip truck union unit update
urban user valley value vector video village vision visual voice water wave weather web
week west white wild wind window winter wire wood word work world writer yard year yellow
young zone
""".split()
TLDS = ("com",) * 8 + ("org", "org", "net", "net", "de", "de", "co.uk", "io", "fr", "nl", "info", "edu", "ca", "com.au")
KINDS = ("blog", "news", "shop", "docs", "wiki", "forum", "company")
LANGUAGES = ("en",) * 7 + ("de", "fr", "es", "nl", "it")
SECTIONS = ("world", "politics", "business", "tech", "science", "sport", "culture", "opinion", "travel", "health")
DAY = 86400.0


def _slug(rng: random.Random, low: int = 2, high: int = 6) -> str:
    return "-".join(rng.choices(WORDS, k=rng.randint(low, high)))


def _page_path(kind: str, rng: random.Random, n: int) -> str:
    """A path (and query, names in order: as normalized) of a page of a site of ``kind``;
    ``n`` is the page's number in its site."""
    r = rng.random()
    if kind == "blog":
        if r < 0.75:
            return f"/{rng.randint(2009, 2025)}/{rng.randint(1, 12):02d}/{_slug(rng, 3, 8)}/"
        if r < 0.85:
            return f"/tag/{rng.choice(WORDS)}/page/{rng.randint(2, 40)}/"
        if r < 0.95:
            return f"/category/{rng.choice(WORDS)}/{rng.choice(WORDS)}/"
        return f"/?p={n}"
    if kind == "news":
        if r < 0.85:
            section, year, month, day = (
                rng.choice(SECTIONS),
                rng.randint(2015, 2025),
                rng.randint(1, 12),
                rng.randint(1, 28),
            )
            return f"/{section}/{year}/{month:02d}/{day:02d}/{_slug(rng, 4, 10)}-{1_000_000 + n}.html"
        if r < 0.95:
            return f"/{rng.choice(SECTIONS)}/{rng.choice(WORDS)}/"
        return f"/{rng.choice(SECTIONS)}?page={rng.randint(2, 500)}"
    if kind == "shop":
        if r < 0.6:
            return f"/products/{_slug(rng, 2, 5)}-{rng.randint(10_000, 99_999)}{n}"
        if r < 0.8:
            return f"/collections/{rng.choice(WORDS)}-{rng.choice(WORDS)}?page={rng.randint(1, 30)}&sort=price-asc"
        if r < 0.9:
            return f"/search?page={rng.randint(1, 9)}&q={rng.choice(WORDS)}+{rng.choice(WORDS)}"
        return f"/en-gb/{rng.choice(WORDS)}/{_slug(rng, 1, 3)}.html"
    if kind == "docs":
        version = f"v{rng.randint(1, 9)}.{rng.randint(0, 20)}"
        if r < 0.6:
            return f"/docs/{version}/{rng.choice(WORDS)}/{_slug(rng, 1, 3)}.html"
        if r < 0.9:
            name = "".join(w.capitalize() for w in (rng.choice(WORDS), rng.choice(WORDS)))
            return f"/api/{version}/{rng.choice(WORDS)}/{name}.html"
        return f"/docs/{version}/{rng.choice(WORDS)}/index.html?highlight={rng.choice(WORDS)}"
    if kind == "wiki":
        title = "_".join(rng.choice(WORDS).capitalize() for _ in range(rng.randint(1, 4)))
        if r < 0.8:
            return f"/wiki/{title}"
        if r < 0.9:
            return f"/wiki/Talk:{title}"
        return f"/w/index.php?oldid={rng.randint(10**6, 10**9)}&title={title}"
    if kind == "forum":
        if r < 0.6:
            return f"/t/{_slug(rng, 3, 9)}/{n}"
        if r < 0.8:
            return f"/viewtopic.php?f={rng.randint(1, 60)}&start={25 * rng.randint(0, 20)}&t={n}"
        if r < 0.9:
            return f"/u/{rng.choice(WORDS)}{rng.randint(1, 9999)}"
        return f"/c/{rng.choice(WORDS)}/{rng.randint(1, 200)}"
    if r < 0.4:
        return (
            f"/{rng.choice(('en', 'de', 'fr'))}/{rng.choice(('products', 'solutions', 'services'))}/{_slug(rng, 1, 3)}/"
        )
    if r < 0.6:
        return f"/careers/{_slug(rng, 2, 4)}-{n}/"
    if r < 0.8:
        return f"/press/{rng.randint(2010, 2025)}/{_slug(rng, 3, 7)}"
    return f"/{rng.choice(('about', 'contact', 'team', 'legal', 'privacy', 'investors'))}/{_slug(rng, 1, 2)}/"


@dataclass
class Site:
    origin: str  # scheme://host
    kind: str
    name: str  # its display name, in titles
    language: str
    lo: int = 0  # its URLs: urls[lo:hi] once placed
    hi: int = 0


def _sites(rng: random.Random, count: int) -> list[Site]:
    sites, seen = [], set()
    while len(sites) < count:
        a, b, kind = rng.choice(WORDS), rng.choice(WORDS), rng.choice(KINDS)
        form = rng.random()
        tld = rng.choice(TLDS)
        if form < 0.45:
            host = f"www.{a}{b}.{tld}"
        elif form < 0.65:
            host = f"{a}-{b}.{tld}"
        elif form < 0.85:
            host = f"{kind if kind in ('blog', 'news', 'shop', 'docs', 'wiki') else 'www'}.{a}{b}.{tld}"
        else:
            host = f"{a}{b}{rng.randint(1, 99)}.{tld}"
        if host in seen:
            continue
        seen.add(host)
        scheme = "https" if rng.random() < 0.88 else "http"
        sites.append(Site(f"{scheme}://{host}", kind, f"{a.capitalize()} {b.capitalize()}", rng.choice(LANGUAGES)))
    return sites


def _urls(rng: random.Random, records: int, hosts: int) -> tuple[list[str], list[Site]]:
    """``records`` distinct normalized URLs over ``hosts`` sites (sizes Zipf-like), sorted
    (a site's URLs in a row: the order of the store's primary key, so inserts append)."""
    sites = _sites(rng, hosts)
    weights = [1.0 / (rank + 5) ** 0.9 for rank in range(hosts)]
    rng.shuffle(weights)
    total = sum(weights)
    sizes = [max(1, int(records * w / total)) for w in weights]
    biggest = sorted(range(hosts), key=lambda i: -sizes[i])
    k = 0
    while sum(sizes) != records:  # the rounding, off the largest sites
        i = biggest[k % len(biggest)]
        if sum(sizes) < records:
            sizes[i] += 1
        elif sizes[i] > 1:
            sizes[i] -= 1
        k += 1
    order = sorted(range(hosts), key=lambda i: sites[i].origin + "/")
    urls: list[str] = []
    placed = []
    for i in order:
        site, size = sites[i], sizes[i]
        paths = {"/"}
        n = 0
        while len(paths) < size:
            n += 1
            paths.add(_page_path(site.kind, rng, n))
        site.lo = len(urls)
        urls.extend(site.origin + p for p in sorted(paths))
        site.hi = len(urls)
        placed.append(site)
    return urls, placed


def _anchor(url: str) -> str:
    """Link text of a URL: the words of its last path segment (a page's title, roughly)."""
    rest = url.split("://", 1)[1]
    path = rest[rest.find("/") :].split("?", 1)[0].rstrip("/") if "/" in rest else ""
    last = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    text = last.replace("-", " ").replace("_", " ").strip()
    return text.capitalize() if text and not text.isdigit() else "Home" if not path else "Read more"


def _title(url: str, site: Site) -> str:
    return f"{site.name} - {site.kind.capitalize()}" if url == site.origin + "/" else f"{_anchor(url)} | {site.name}"


def _description(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(12, 30))).capitalize() + "."


def _metadata(rng: random.Random, url: str, site: Site, status: int, canonical: str | None) -> str:
    if status >= 400:
        return json.dumps({"title": f"{status} Not Found" if status == 404 else "Error", "charset": "utf-8"})
    meta = {
        "title": _title(url, site),
        "description": _description(rng),
        "language": site.language,
        "charset": "utf-8",
        "content_type": "text/html",
    }
    if canonical:
        meta["canonical"] = canonical
    if rng.random() < 0.4:
        meta["og:title"] = meta["title"].split(" | ")[0]
        meta["og:type"] = "article" if site.kind in ("blog", "news") else "website"
        meta["og:image"] = f"{site.origin}/static/img/{rng.randint(1, 10**6)}.jpg"
        meta["twitter:card"] = "summary_large_image"
    if site.kind in ("blog", "news"):
        meta["published_time"] = (
            f"{rng.randint(2012, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T08:00:00Z"
        )
        meta["article:author"] = f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS).capitalize()}"
    if site.kind == "shop" and "/products/" in url:
        meta["product:name"] = meta["og:title"] if "og:title" in meta else _anchor(url)
        meta["product:price"] = f"{rng.randint(3, 900)}.{rng.randint(0, 99):02d}"
        meta["product:currency"] = "EUR" if site.origin.endswith((".de", ".fr", ".nl")) else "USD"
        meta["product:availability"] = rng.choice(("InStock", "InStock", "OutOfStock"))
    return json.dumps(meta)


def generate_store(path: Path, records: int, hosts: int, seed: int) -> None:
    """Writes ``records`` records to a new SQLite UrlStore at ``path`` (built beside it and
    renamed at the end, so that an interrupted run leaves no store to reuse)."""
    rng = random.Random(seed)
    hosts = max(1, min(hosts, records // 20))
    t0 = time.perf_counter()
    urls, sites = _urls(rng, records, hosts)
    for url in rng.sample(urls, min(2000, len(urls))):  # generated normalized: the store's keys
        if normalize_url(url) != url:
            raise SystemExit(f"generated URL not normalized: {url!r} -> {normalize_url(url)!r}")
    # every URL's outlink entry, as json.dumps writes it (plain ASCII: nothing to escape)
    links = [f'{{"url": "{u}", "text": "{_anchor(u)}", "nofollow": false}}' for u in urls]
    print(f"  {len(urls):,} URLs over {len(sites):,} hosts in {time.perf_counter() - t0:.1f} s; writing ...")
    building = path.with_name(path.name + ".building")
    building.unlink(missing_ok=True)
    db = sqlite3.connect(building)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-262144")
    db.executescript(SCHEMA.read_text(encoding="utf-8"))
    columns = (
        "url, canonical_url, near_duplicate_of, resemblance, status, fate, fetched_at, error, next_fetch_at, "
        "final_url, redirect_chain, content_digest, simhash, metadata, archive_key, archive_offset, "
        "archive_length, outlinks, fetch_interval, etag, last_modified"
    )
    insert = f"INSERT INTO urls ({columns}) VALUES ({', '.join('?' * 21)})"
    insert_inlink = (
        "INSERT OR REPLACE INTO inlinks (target_url, bucket, source_url, anchor_text, nofollow) VALUES (?, ?, ?, ?, ?)"
    )
    now = time.time()
    random_ = rng.random
    rows: list[tuple] = []
    inlinks: list[tuple] = []
    object_seq, object_offset = 0, 0
    for site in sites:
        nav = list(range(site.lo, min(site.hi, site.lo + 8)))  # the site's menu: its first pages
        for i in range(site.lo, site.hi):
            url = urls[i]
            r = rng.random()
            status: int | None = 200
            fate, error, canonical, final_url, chain = "fetched", None, None, None, "[]"
            if r < 0.05 and i > site.lo:
                fate, canonical = "duplicate", urls[rng.randrange(site.lo, i)]  # the first copy
            elif r < 0.07:
                fate, status = "robots_disallowed", None
            elif r < 0.085:
                fate, status, error = (
                    "dns_error",
                    None,
                    f"DNSLookupError: DNS lookup failed: no results for hostname lookup: {urlsplit(url).hostname}.",
                )
            elif r < 0.105:
                fate, status, error = (
                    "timeout",
                    None,
                    "TimeoutError: Getting " + url + " took longer than 30.0 seconds.",
                )
            elif r < 0.115:
                fate, status, error = (
                    "connection_error",
                    None,
                    "ConnectionRefusedError: Connection was refused by other side: 111: Connection refused.",
                )
            elif r < 0.12:
                fate, status, error = (
                    "error",
                    None,
                    "ResponseNeverReceived: [<twisted.python.failure.Failure twisted.internet.error.ConnectionLost>]",
                )
            elif r < 0.15:
                status = 404
            elif r < 0.155:
                status = 503
            elif r < 0.175 and site.hi - site.lo > 1:
                target = urls[rng.randrange(site.lo, site.hi)]
                final_url, chain = target, json.dumps([url])
            elif r < 0.215 and site.hi - site.lo > 1:
                canonical = urls[rng.randrange(site.lo, site.hi)]  # rel=canonical elsewhere
            elif r < 0.4:
                canonical = url  # rel=canonical to itself
            fetched_at = now - rng.uniform(0, 30 * DAY)
            answered = status is not None and status < 500
            interval = rng.choice((DAY, 2 * DAY, 7 * DAY, 14 * DAY, 30 * DAY)) if answered else None
            next_fetch_at = (
                fetched_at + interval if interval else fetched_at + 3600 if fate != "robots_disallowed" else None
            )
            outlinks, digest, simhash, metadata = "[]", None, None, "{}"
            archive = (None, None, None)
            etag = last_modified = None
            if fate == "duplicate":
                digest = hashlib.sha1(canonical.encode()).hexdigest()
                metadata = _metadata(rng, url, site, 200, None)
            elif status is not None:
                digest = hashlib.sha1(url.encode()).hexdigest()
                simhash = signed64(rng.getrandbits(64))
                metadata = _metadata(rng, url, site, status, canonical)
                if status == 200:
                    count = rng.randint(10, 50)
                    chosen = [links[j] for j in nav]
                    start = i + 1 if i + count < site.hi else max(site.lo, i - count)
                    chosen += links[start : min(site.hi, start + count - len(nav) - 3)]
                    chosen += [
                        links[int(random_() * len(urls))].replace("false}", "true}" if random_() < 0.3 else "false}")
                        for _ in range(count - len(chosen))
                    ]
                    outlinks = "[" + ", ".join(chosen) + "]"
                    if rng.random() < 0.02:  # a sample of the pages' links as inlinks too
                        for entry in json.loads(outlinks):
                            inlinks.append(
                                (
                                    entry["url"],
                                    zlib.crc32(url.encode()) % INLINK_BUCKETS,
                                    url,
                                    entry["text"],
                                    int(entry["nofollow"]),
                                )
                            )
                length = rng.randint(4_000, 60_000)
                if object_offset > 64 << 20:
                    object_seq, object_offset = object_seq + 1, 0
                name = f"bench/w{object_seq % 4}-{object_seq // 4:06d}.warc.gz"
                archive = (f"{hashlib.sha1(name.encode()).hexdigest()[:4]}/{name}", object_offset, length)
                object_offset += length + rng.randint(300, 600)  # and the request record
                if rng.random() < 0.35:
                    etag = f'"{digest[:16]}"'
                if rng.random() < 0.25:
                    last_modified = formatdate(fetched_at - rng.uniform(0, 400 * DAY), usegmt=True)
            rows.append(
                (
                    url,
                    canonical,
                    None,
                    None,
                    status,
                    fate,
                    fetched_at,
                    error,
                    next_fetch_at,
                    final_url,
                    chain,
                    digest,
                    simhash,
                    metadata,
                    *archive,
                    outlinks,
                    interval,
                    etag,
                    last_modified,
                )
            )
            if len(rows) >= CHUNK:
                with db:
                    db.executemany(insert, rows)
                    db.executemany(insert_inlink, inlinks)
                rows, inlinks = [], []
    with db:
        db.executemany(insert, rows)
        db.executemany(insert_inlink, inlinks)
    db.execute("PRAGMA journal_mode=WAL")  # as SqliteUrlStore keeps it
    db.close()
    os.replace(building, path)


def stored_count(path: Path) -> int | None:
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return db.execute("SELECT count(*) FROM urls").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return None


def sample_urls(path: Path, count: int, seed: int) -> list[str]:
    """``count`` stored URLs at random (by rowid)."""
    rng = random.Random(seed + 1)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        top = db.execute("SELECT max(rowid) FROM urls").fetchone()[0] or 0
        ids = rng.sample(range(1, top + 1), min(count, top))
        urls = []
        for k in range(0, len(ids), 500):
            part = ids[k : k + 500]
            marks = ",".join("?" * len(part))
            urls += [u for (u,) in db.execute(f"SELECT url FROM urls WHERE rowid IN ({marks})", part)]
    finally:
        db.close()
    rng.shuffle(urls)
    return urls


def unknown_urls(known: list[str], count: int, seed: int) -> list[str]:
    """URLs of the stored hosts that are not stored (the generator writes no /unknown/ path)."""
    rng = random.Random(seed + 2)
    out = []
    for _ in range(count):
        parts = urlsplit(rng.choice(known))
        out.append(f"{parts.scheme}://{parts.netloc}/unknown/{_slug(rng, 1, 3)}-{rng.randrange(10**9)}")
    return out


# -- the same records in Cassandra -----------------------------------------------------------

CASSANDRA_DIR = Path.home() / ".cache" / "crawler-bench" / "cassandra"  # the node's data: kept between runs
CASSANDRA_PORTS = (9342, 7400, 7600)  # CQL, inter-node, JMX: none of the shared nodes' (9042, 9142, ...)
CASSANDRA_SCRIPT = ROOT / "scripts" / "cassandra.py"
COPY_CONCURRENCY = 64  # statements in flight while a keyspace is written
COPY_ATTEMPTS = 5  # of a statement that fails (timed out) while a keyspace is written
COPY_CHUNK = 10_000  # rows read from SQLite at a time
COPY_VERSION = 2  # of copy_to_keyspace: a copy made by another is made again
PROGRESS_EVERY = 10.0  # seconds between two progress lines


def port_taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class CassandraNode:
    """One Cassandra node of the benchmarks' own (scripts/cassandra.py) on 127.0.0.1, its
    data in ``directory`` (kept between runs: a generated keyspace is reused), on ports of
    its own. ``start`` refuses ports another process holds; a node of this directory left
    running by an earlier run is used (and stopped at the end like one started here)."""

    def __init__(
        self,
        directory: Path = CASSANDRA_DIR,
        port: int = CASSANDRA_PORTS[0],
        storage_port: int = CASSANDRA_PORTS[1],
        jmx_port: int = CASSANDRA_PORTS[2],
        heap: str = "1G",
    ):
        self.dir = Path(directory).expanduser().resolve()
        self.port, self.storage_port, self.jmx_port, self.heap = port, storage_port, jmx_port, heap
        self.pid_file = self.dir / "node1" / "cassandra.pid"
        self.started = False

    def _script(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(CASSANDRA_SCRIPT), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    @property
    def pid(self) -> int | None:
        """The node's JVM while it runs (its command line names this directory)."""
        try:
            pid = int(self.pid_file.read_text().strip())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                alive = str(self.dir).encode() in f.read()
        except (OSError, ValueError):
            return None
        return pid if alive else None

    def start(self, timeout: float = 300.0) -> float:
        """Start the node (or take the one of this directory already running): the seconds
        it took."""
        if self.pid is None:
            taken = [p for p in (self.port, self.storage_port, self.jmx_port) if port_taken(p)]
            if taken:
                raise SystemExit(
                    f"Cassandra: port(s) {', '.join(map(str, taken))} on 127.0.0.1 are taken by another process; "
                    "give others (--cassandra-port, --cassandra-storage-port, --cassandra-jmx-port)"
                )
        self.dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        self.started = True  # stopped at the end even if the start fails halfway
        ports = ["--port", str(self.port), "--storage-port", str(self.storage_port), "--jmx-port", str(self.jmx_port)]
        done = self._script(
            "start", str(self.dir), *ports, "--heap", self.heap, "--timeout", str(timeout), timeout=timeout + 120
        )
        if done.returncode != 0:
            raise SystemExit(f"Cassandra did not start in {self.dir}: {done.stderr.strip()[-500:]}")
        return time.monotonic() - t0

    def stop(self) -> None:
        if self.started:
            self._script("stop", str(self.dir), timeout=180)
            self.started = False

    def nodetool(self, *args: str, timeout: float = 600.0) -> str:
        done = self._script("nodetool", str(self.dir), "--", *args, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"nodetool {' '.join(args)}: {done.stderr.strip()[-300:]}")
        return done.stdout

    def settle(self, session, keyspace: str | None = None, timeout: float = 1800.0) -> float:
        """Flush the memtables (nodetool) and wait until no compaction runs or waits (the
        node's virtual tables, through ``session``): the seconds it took."""
        t0 = time.monotonic()
        self.nodetool("flush", *([keyspace] if keyspace else []))
        while time.monotonic() - t0 < timeout:
            pool = session.execute(
                "SELECT active_tasks, pending_tasks FROM system_views.thread_pools WHERE name = 'CompactionExecutor'"
            ).one()
            running = list(session.execute("SELECT kind FROM system_views.sstable_tasks"))
            if not running and (pool is None or pool.active_tasks + pool.pending_tasks == 0):
                break
            time.sleep(2.0)
        return time.monotonic() - t0

    def cpu_seconds(self) -> float:
        """User and system CPU seconds of the node's JVM so far (/proc/PID/stat)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def cluster(self):
        from cassandra.cluster import Cluster

        return Cluster(["127.0.0.1"], port=self.port)

    def settings(self, keyspace: str) -> dict:
        """A crawl's settings for this node's ``keyspace``."""
        return {
            "URLSTORE_BACKEND": "cassandra",
            "CASSANDRA_HOSTS": "127.0.0.1",
            "CASSANDRA_PORT": self.port,
            "CASSANDRA_KEYSPACE": keyspace,
        }

    def warm(self, keyspace: str) -> float:
        """Read the keyspace's files once into the page cache: the seconds it took."""
        t0 = time.monotonic()
        for path in (self.dir / "node1" / "data" / keyspace.lower()).rglob("*"):
            if path.is_file():
                with open(path, "rb") as f:
                    while f.read(8 << 20):
                        pass
        return time.monotonic() - t0


def keyspace_name(records: int) -> str:
    return f"serve_{records}"


def source_signature(store: Path) -> str:
    """What a keyspace copied from the SQLite store ``store`` must have been copied from."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        urls = db.execute("SELECT count(*) FROM urls").fetchone()[0]
        inlinks = db.execute("SELECT count(*) FROM inlinks").fetchone()[0]
    finally:
        db.close()
    return f"{urls} urls, {inlinks} inlinks, file {store} inode {store.stat().st_ino}, copy {COPY_VERSION}"


def copied_from(session, keyspace: str) -> str | None:
    """The source_signature a complete copy in ``keyspace`` was made from (None: none)."""
    from cassandra import InvalidRequest

    try:
        row = session.execute(f"SELECT signature FROM {keyspace}.bench_source WHERE id = 0").one()
    except InvalidRequest:  # no such keyspace or table
        return None
    return row.signature if row else None


def ensure_keyspace(node: CassandraNode, store: Path, keyspace: str) -> None:
    """The SQLite store's records and inlinks in ``keyspace`` of ``node``: reused when a
    complete copy of this store is there, else copied anew (``copy_to_keyspace``)."""
    cluster = node.cluster()
    try:
        session = cluster.connect()
        want = source_signature(store)
        if copied_from(session, keyspace) == want:
            print(f"cassandra: keyspace {keyspace} (a copy of {want.split(', file')[0]}), reused")
            return
        print(f"cassandra: copying {store} into keyspace {keyspace} ...", flush=True)
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=300)
        t0 = time.monotonic()
        rows, links = copy_to_keyspace(session, store, keyspace)
        took = time.monotonic() - t0
        settled = node.settle(session, keyspace)
        session.execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.bench_source (id int PRIMARY KEY, signature text)")
        session.execute(f"INSERT INTO {keyspace}.bench_source (id, signature) VALUES (0, %s)", (want,))
        node.nodetool("flush", keyspace)
        print(
            f"cassandra: {rows:,} records and {links:,} inlinks in {took:.0f} s ({(rows + links) / took:,.0f} rows/s), "
            f"flushed and compacted in {settled:.0f} s more"
        )
    finally:
        cluster.shutdown()


def copy_to_keyspace(session, store: Path, keyspace: str) -> tuple[int, int]:
    """Write every record and inlink of the SQLite store into a new keyspace, laid out as
    CassandraUrlStore writes them (its schema, its prepared statements and their values:
    empty values for what a record lacks), through the driver's execute_concurrent with a
    progress line every PROGRESS_EVERY seconds: (records, inlinks)."""
    from cassandra.concurrent import execute_concurrent

    from crawler.urlstore.cassandra import CassandraUrlStore
    from crawler.urlstore.cassandra_cluster import COLUMNS, schema_statements

    for statement in schema_statements(keyspace):
        session.execute(statement, timeout=120)
    writer = CassandraUrlStore(session, keyspace)  # its statements and execution profiles only
    slow = session.execution_profile_clone_update(writer.writes, request_timeout=60.0)
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    total = (
        db.execute("SELECT count(*) FROM urls").fetchone()[0] + db.execute("SELECT count(*) FROM inlinks").fetchone()[0]
    )
    counts = [0, 0]
    t0 = last = time.monotonic()

    def progress() -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY:
            last = now
            done = sum(counts)
            print(
                f"  {counts[0]:,} records, {counts[1]:,} inlinks written ({done / total:.0%}, "
                f"{done / (now - t0):,.0f} rows/s)",
                flush=True,
            )

    def records(rows):
        for row in rows:
            values = dict(zip(ROW_NAMES, row[1:], strict=True))
            values["redirect_chain"] = json.loads(values["redirect_chain"] or "[]")
            values["metadata"] = json.loads(values["metadata"] or "{}")
            values["outlinks"] = [(o["url"], o["text"], o["nofollow"]) for o in json.loads(values["outlinks"] or "[]")]
            yield writer._set(row[0], {column: values[column] for column in COLUMNS})

    def inlinks(rows):
        for target, bucket, source, text, nofollow in rows:
            yield writer._inlink_stmt, (target, bucket, source, text or "", bool(nofollow))

    try:
        for n, (query, statements) in enumerate(
            (
                (f"SELECT {SQLITE_COLUMNS} FROM urls", records),
                ("SELECT target_url, bucket, source_url, anchor_text, nofollow FROM inlinks", inlinks),
            )
        ):
            cursor = db.execute(query)
            while rows := cursor.fetchmany(COPY_CHUNK):  # read here, not on the driver's thread
                todo = list(statements(rows))
                for attempt in range(COPY_ATTEMPTS):  # a node that stalls (GC, flushes): the failed ones again
                    results = execute_concurrent(
                        session, todo, concurrency=COPY_CONCURRENCY, raise_on_first_error=False, execution_profile=slow
                    )
                    failed = [(statement, r.result_or_exc) for statement, r in zip(todo, results) if not r.success]
                    if not failed:
                        break
                    if attempt == COPY_ATTEMPTS - 1:
                        raise RuntimeError(f"{len(failed)} writes failed {COPY_ATTEMPTS} times: {failed[0][1]}")
                    print(f"  {len(failed)} writes failed ({failed[0][1]!r:.120}); again in 10 s", flush=True)
                    todo = [statement for statement, _ in failed]
                    time.sleep(10)
                counts[n] += len(rows)
                progress()
    finally:
        db.close()
    return counts[0], counts[1]


SQLITE_COLUMNS = (
    "url, canonical_url, near_duplicate_of, resemblance, status, fate, fetched_at, error, next_fetch_at, "
    "final_url, redirect_chain, content_digest, simhash, metadata, archive_key, archive_offset, "
    "archive_length, outlinks, fetch_interval, etag, last_modified"
)
ROW_NAMES = tuple(c.strip() for c in SQLITE_COLUMNS.split(","))[1:]


class FrontierRedis:
    """A redis-server of the run's own holding the crawl's frontier counters, and nothing
    else: a server on the Cassandra backend knows a crawl by its frontier (it has no file
    under CRAWL_DIR), as in a distributed crawl."""

    def __init__(self, directory: Path, crawl: str):
        from crawler.frontier.keys import Keys
        from testing.servers import RedisServer

        self.server = RedisServer(directory).start()
        self.server.client.hset(Keys(crawl).counters, mapping={"queued": 0})

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.kill()


# -- the server ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(pid: int) -> list[int]:
    """A process and its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def sched_seconds(pids: list[int]) -> tuple[float, float]:
    """Seconds on a CPU, and seconds runnable but waiting for one, of every thread of these
    processes and of their descendants (/proc/PID/task/TID/schedstat)."""
    run = wait = 0
    for p in {p for pid in pids for p in _tree(pid)}:
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    fields = f.read().split()
            except OSError:
                continue
            run += int(fields[0])
            wait += int(fields[1])
    return run / 1e9, wait / 1e9


def disk_read(pid: int) -> int:
    """Bytes a process and its descendants have read from storage (not the page cache)."""
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/io") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))
        except (OSError, StopIteration):
            continue
    return total


def machine_busy() -> float:
    """Seconds of CPU the whole machine has spent busy (all cores, /proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Server:
    """``scrapy serve`` on the store's crawl, in its own process group."""

    def __init__(self, crawl_dir: Path, crawl: str, log: Path, settings: list[str] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = clean_env()
        command = [
            sys.executable,
            "-m",
            "scrapy",
            "serve",
            "-s",
            f"CRAWL_DIR={crawl_dir}",
            "-s",
            f"CRAWL_NAME={crawl}",
            "-s",
            "SERVE_HOST=127.0.0.1",
            "-s",
            f"SERVE_PORT={self.port}",
        ]
        for setting in settings:  # --set NAME=VALUE
            command += ["-s", setting]
        self.out = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.pid = self.proc.pid

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGINT)
                self.proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self.out.close()


def wait_answering(url: str, server: Server | None, timeout: float) -> float:
    """Seconds until GET /api/crawls answers 200."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    start = time.monotonic()
    while True:
        if server is not None and server.proc.poll() is not None:
            raise SystemExit(f"the server exited ({server.proc.returncode}):\n{server.tail()}")
        try:
            with opener.open(url + "/api/crawls", timeout=2) as answer:
                if answer.status == 200:
                    return time.monotonic() - start
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() - start > timeout:
            raise SystemExit(
                f"the server did not answer in {timeout:.0f} s" + (f":\n{server.tail()}" if server else "")
            )
        time.sleep(0.2)


# -- the load --------------------------------------------------------------------------------


@dataclass
class Plan:
    kind: str  # "record" or "lookup"
    rate: float  # requests a second (this client's share)
    seconds: float
    start: float  # time.time() of the first scheduled request
    timeout: float


async def _step(
    session,
    base: str,
    crawl: str,
    plan: Plan,
    known: list[str],
    unknown: list[str],
    share: float,
    batch: int,
    seed: int,
) -> dict:
    import aiohttp
    from yarl import URL

    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    latencies, lates = array("d"), array("d")
    outcome = {"ok": 0, "errors": 0, "timeouts": 0, "statuses": {}, "error_kinds": {}}
    last_done = [0.0]
    record_base = f"{base}/api/crawls/{quote(crawl, safe='')}/record?url="
    lookup_url = URL(f"{base}/api/crawls/{quote(crawl, safe='')}/lookup")
    timeout = aiohttp.ClientTimeout(total=plan.timeout)

    def pick() -> tuple[str, bool]:
        if rng.random() < share:
            return rng.choice(unknown), False
        return rng.choice(known), True

    async def one(due: float) -> None:
        lates.append(loop.time() - due)
        try:
            if plan.kind == "record":
                url, stored = pick()
                expect = 200 if stored else 404
                async with session.get(URL(record_base + quote(url, safe=""), encoded=True), timeout=timeout) as answer:
                    await answer.read()
                    status = answer.status
            else:
                expect = 200
                body = json.dumps({"urls": [pick()[0] for _ in range(batch)]})
                async with session.post(
                    lookup_url, data=body, headers={"Content-Type": "application/json"}, timeout=timeout
                ) as answer:
                    await answer.read()
                    status = answer.status
        except TimeoutError:
            outcome["timeouts"] += 1
            latencies.append(plan.timeout)
            return
        except (aiohttp.ClientError, OSError) as exc:
            outcome["errors"] += 1
            outcome["error_kinds"][type(exc).__name__] = outcome["error_kinds"].get(type(exc).__name__, 0) + 1
            latencies.append(loop.time() - due)
            return
        now = loop.time()
        latencies.append(now - due)
        outcome["statuses"][status] = outcome["statuses"].get(status, 0) + 1
        if status == expect:
            outcome["ok"] += 1
            last_done[0] = max(last_done[0], now)
        else:
            outcome["errors"] += 1

    count = max(1, round(plan.rate * plan.seconds))
    start = loop.time() + (plan.start - time.time())
    tasks: set[asyncio.Task] = set()
    i = 0
    while i < count:
        now = loop.time()
        while i < count and start + i / plan.rate <= now:
            task = loop.create_task(one(start + i / plan.rate))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            i += 1
        if i < count:
            await asyncio.sleep(max(0.0, start + i / plan.rate - loop.time()))
    if tasks:
        await asyncio.wait(set(tasks), timeout=plan.timeout + 1.0)
    for task in list(tasks):  # not even sent in time: counted as timed out
        task.cancel()
        outcome["timeouts"] += 1
        latencies.append(plan.timeout)
    outcome.update(
        latencies=latencies,
        lates=lates,
        sent=count,
        done_after=(last_done[0] - start) if last_done[0] else 0.0,
    )
    return outcome


def client_main(
    conn,
    base: str,
    crawl: str,
    known: list[str],
    unknown: list[str],
    share: float,
    batch: int,
    connections: int,
    seed: int,
) -> None:
    """A load process: runs the plans it is sent, answers each with its figures."""
    import aiohttp

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    # a session of its own: with the kernel's autogroup scheduling, a share of the CPUs as
    # large as the server's (in its own session too), whatever shell started the benchmark
    os.setsid()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def open_session():
        connector = aiohttp.TCPConnector(limit=connections, limit_per_host=0, ttl_dns_cache=None, use_dns_cache=True)
        return aiohttp.ClientSession(connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar())

    session = loop.run_until_complete(open_session())
    n = 0
    try:
        while True:
            plan = conn.recv()
            if plan is None:
                break
            n += 1
            conn.send(
                loop.run_until_complete(
                    _step(session, base, crawl, plan, known, unknown, share, batch, seed * 1000 + n)
                )
            )
    finally:
        loop.run_until_complete(session.close())
        loop.close()


@dataclass
class StepResult:
    kind: str
    offered: float
    achieved: float
    p50: float
    p90: float
    p99: float
    max: float
    sent: int
    errors: int
    timeouts: int
    server_cpu: float  # % of one core
    server_wait: float  # % of the step the server's threads waited for a CPU (runnable)
    server_per: float  # seconds of the server's CPU a request
    disk: float  # MB the server read from storage (not from the page cache)
    client_cpu: float  # % of one core, the busiest load process
    client_wait: float
    others: float  # cores kept busy by other processes meanwhile
    late_p99: float  # seconds the load sent a request after its scheduled time, p99
    statuses: dict
    node_cpu: float = float("nan")  # % of one core, the Cassandra node (the Cassandra backend)
    node_wait: float = float("nan")

    @property
    def failed_share(self) -> float:
        return (self.errors + self.timeouts) / max(1, self.sent)

    @property
    def met(self) -> bool:
        return self.p50 <= TARGET_P50 and self.p99 <= TARGET_P99 and self.failed_share < TARGET_FAILED

    @property
    def kept_up(self) -> bool:
        return self.achieved >= 0.95 * self.offered and self.failed_share < TARGET_FAILED

    def limit(self, unit: int = 1) -> str:
        """What held this step back, by the CPU figures."""
        cost = f"{self.server_per / unit * 1e6:,.0f} us of server CPU a {'URL' if unit > 1 else 'request'}"
        if self.client_cpu >= CLIENT_BUSY * 100:
            return f"the load process ({self.client_cpu:.0f}% of a core)"
        if self.server_cpu >= SERVER_BUSY * 100:
            return f"the server's CPU ({self.server_cpu:.0f}% of a core, {cost})"
        node = "" if self.node_cpu != self.node_cpu else f", the Cassandra node {self.node_cpu:.0f}%"
        if self.server_cpu + self.client_cpu + (0 if node == "" else self.node_cpu) >= 170:
            return (
                f"the two cores, kept busy by the run itself (the server {self.server_cpu:.0f}% of one{node}, "
                f"the load {self.client_cpu:.0f}%; {cost})"
            )
        if self.others >= OTHERS_BUSY and (self.server_wait >= 20 or self.client_wait >= 20):
            return (
                f"the two cores, shared: other processes kept {self.others:.1f} cores busy, the server got "
                f"{self.server_cpu:.0f}% of one ({cost}) and its threads waited {self.server_wait:.0f}% of the time"
            )
        if self.late_p99 > self.p99 / 2:
            return f"the load process sending late (p99 {self.late_p99 * 1000:.0f} ms)"
        return f"the server's time per request ({cost}; {self.server_cpu:.0f}% of a core)"


class Load:
    """--clients load processes (forked: the URL lists are shared, not copied)."""

    def __init__(self, count: int, base: str, crawl: str, known, unknown, share, batch, connections, seed):
        context = multiprocessing.get_context("fork")
        self.pipes, self.procs = [], []
        for n in range(count):
            parent, child = context.Pipe()
            proc = context.Process(
                target=client_main,
                args=(child, base, crawl, known, unknown, share, batch, connections, seed + 10 * n),
                daemon=True,
            )
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)

    def run(
        self,
        kind: str,
        rate: float,
        seconds: float,
        timeout: float,
        server_pid: int | None,
        node_pid: int | None = None,
    ) -> StepResult:
        """One step; ``node_pid``: the Cassandra node the server reads from (its CPU is
        the run's, not another process's)."""
        start = time.time() + 0.3
        share = rate / len(self.pipes)
        for pipe in self.pipes:
            pipe.send(Plan(kind, share, seconds, start, timeout))
        time.sleep(max(0.0, start - time.time()))
        server0 = sched_seconds([server_pid]) if server_pid else (0.0, 0.0)
        disk0 = disk_read(server_pid) if server_pid else 0
        clients0 = [sched_seconds([p.pid]) for p in self.procs]
        ours_pids = [os.getpid(), server_pid] if server_pid else [os.getpid()]  # and the load processes
        if node_pid:
            ours_pids.append(node_pid)
        node0 = sched_seconds([node_pid]) if node_pid else (float("nan"), float("nan"))
        ours0, busy0, wall0 = sched_seconds(ours_pids)[0], machine_busy(), time.monotonic()
        results = []
        for pipe in self.pipes:
            if not pipe.poll(seconds + 2 * timeout + 30):
                raise SystemExit("a load process did not report")
            results.append(pipe.recv())
        wall = time.monotonic() - wall0
        server1 = sched_seconds([server_pid]) if server_pid else (float("nan"), float("nan"))
        node1 = sched_seconds([node_pid]) if node_pid else (float("nan"), float("nan"))
        clients = [
            [(b - a) / wall * 100 for a, b in zip(before, sched_seconds([p.pid]))]
            for before, p in zip(clients0, self.procs)
        ]
        ours = sched_seconds(ours_pids)[0] - ours0
        latencies = [x for r in results for x in r["latencies"]]
        lates = [x for r in results for x in r["lates"]]
        ok = sum(r["ok"] for r in results)
        span = max([seconds] + [r["done_after"] for r in results])
        statuses: dict = {}
        for r in results:
            for k, v in r["statuses"].items():
                statuses[k] = statuses.get(k, 0) + v
            for k, v in r["error_kinds"].items():
                statuses[k] = statuses.get(k, 0) + v
        busiest = max(clients, key=lambda c: c[0])
        return StepResult(
            kind=kind,
            offered=rate,
            achieved=ok / span,
            p50=percentile(latencies, 0.50),
            p90=percentile(latencies, 0.90),
            p99=percentile(latencies, 0.99),
            max=max(latencies) if latencies else float("nan"),
            sent=sum(r["sent"] for r in results),
            errors=sum(r["errors"] for r in results),
            timeouts=sum(r["timeouts"] for r in results),
            server_cpu=(server1[0] - server0[0]) / wall * 100,
            server_wait=(server1[1] - server0[1]) / wall * 100,
            server_per=(server1[0] - server0[0]) / max(1, sum(r["sent"] for r in results)),
            disk=(disk_read(server_pid) - disk0) / 1e6 if server_pid else float("nan"),
            client_cpu=busiest[0],
            client_wait=busiest[1],
            others=max(0.0, (machine_busy() - busy0 - ours) / wall),
            late_p99=percentile(lates, 0.99),
            statuses=statuses,
            node_cpu=(node1[0] - node0[0]) / wall * 100,
            node_wait=(node1[1] - node0[1]) / wall * 100,
        )

    def close(self) -> None:
        for pipe in self.pipes:
            try:
                pipe.send(None)
            except OSError:
                pass
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)


# -- the report ------------------------------------------------------------------------------


def header(per: str) -> str:
    return (
        f"{'offered':>8} {'achieved':>8} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6} {'err':>4} {'t/o':>5} "
        f"{'server':>9} {'cpu':>6} {'disk':>5} {'node':>9} {'load':>9} {'late':>6} {'others':>6}  target\n"
        f"{'/s':>8} {'/s':>8} {'ms':>6} {'ms':>6} {'ms':>6} {'ms':>6} {'':>4} {'':>5} "
        f"{'cpu/wait%':>9} {'us/' + per:>6} {'MB':>5} {'cpu/wait%':>9} {'cpu/wait%':>9} {'p99 ms':>6} {'cores':>6}"
    )


def row(r: StepResult, unit: int = 1) -> str:
    return (
        f"{r.offered * unit:>8,.0f} {r.achieved * unit:>8,.0f} {r.p50 * 1000:>6.1f} {r.p90 * 1000:>6.1f} "
        f"{r.p99 * 1000:>6.1f} {r.max * 1000:>6.0f} {r.errors:>4} {r.timeouts:>5} "
        f"{f'{r.server_cpu:.0f}/{r.server_wait:.0f}':>9} {r.server_per / unit * 1e6:>6,.0f} {r.disk:>5.0f} "
        f"{'-' if r.node_cpu != r.node_cpu else f'{r.node_cpu:.0f}/{r.node_wait:.0f}':>9} "
        f"{f'{r.client_cpu:.0f}/{r.client_wait:.0f}':>9} {r.late_p99 * 1000:>6.1f} {r.others:>6.1f}  "
        f"{'met' if r.met else 'missed'}"
    )


def summary(results: list[StepResult], what: str, unit: int = 1) -> str:
    met = [r for r in results if r.met]
    best = max(met, key=lambda r: r.offered) if met else None
    text = (
        f"{what}: {best.offered * unit:,.0f}/s met the target (p50 {best.p50 * 1000:.1f} ms, "
        f"p99 {best.p99 * 1000:.1f} ms, server {best.server_cpu:.0f}% of a core)"
        if best
        else f"{what}: no rate met the target"
    )
    most = max(results, key=lambda r: r.achieved)
    text += (
        f"; the most answered: {most.achieved * unit:,.0f}/s (offered {most.offered * unit:,.0f}/s, "
        f"p50 {most.p50 * 1000:,.0f} ms, p99 {most.p99 * 1000:,.0f} ms)"
    )
    missed = [r for r in results if not r.met and (best is None or r.offered > best.offered)]
    if missed:
        first = missed[0]
        text += (
            f"; {first.offered * unit:,.0f}/s missed it (p50 {first.p50 * 1000:,.1f} ms, "
            f"p99 {first.p99 * 1000:,.0f} ms), held back by {first.limit(unit)}"
        )
    return text


def p99_rate(results: list[StepResult], unit: int = 1) -> StepResult | None:
    """The step of the highest rate answered with p99 <= TARGET_P99, under TARGET_FAILED
    failed and at least 95% of the offered rate answered (p50 not counted)."""
    good = [r for r in results if r.p99 <= TARGET_P99 and r.kept_up]
    return max(good, key=lambda r: r.offered) if good else None


class Overdue(Exception):
    """The run took longer than --limit."""


BACKENDS = ("sqlite", "cassandra")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument(
        "--store",
        type=Path,
        default=Path("/tmp/bench-serve/bench") / SQLITE_FILE,
        help="the store: CRAWL_DIR/CRAWL_NAME/urlstore.sqlite (generated when missing or of another size)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--backends",
        default="sqlite",
        help="the UrlStore backends the server reads, one after the other: sqlite, cassandra or sqlite,cassandra",
    )
    parser.add_argument("--cassandra-dir", type=Path, default=CASSANDRA_DIR, help="the Cassandra node's directory")
    parser.add_argument("--cassandra-port", type=int, default=CASSANDRA_PORTS[0], help="its CQL port")
    parser.add_argument("--cassandra-storage-port", type=int, default=CASSANDRA_PORTS[1])
    parser.add_argument("--cassandra-jmx-port", type=int, default=CASSANDRA_PORTS[2])
    parser.add_argument("--cassandra-heap", default="1G")
    parser.add_argument("--cold", action="store_true", help="do not read the store into the page cache first")
    parser.add_argument(
        "--url", help="measure this server (http://127.x.x.x:PORT, serving --store) instead of starting one"
    )
    parser.add_argument("--server-pid", type=int, help="with --url: the server's process, for its CPU")
    parser.add_argument("--step-seconds", type=float, default=10.0)
    parser.add_argument("--rates", help="requests/s of the steps, comma-separated (default: 250 up to --max-rate)")
    parser.add_argument("--max-rate", type=float, default=16000)
    parser.add_argument("--batch-rates", default=",".join(map(str, BATCH_RATES)), help="batches/s ('' for none)")
    parser.add_argument("--batch", type=int, default=100, help="URLs per batch look-up")
    parser.add_argument("--unknown", type=float, default=0.2, help="share of URLs not in the store")
    parser.add_argument("--clients", type=int, default=1, help="load processes")
    parser.add_argument("--connections", type=int, default=256, help="connection pool of each load process")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds a request waits for its answer")
    parser.add_argument("--limit", type=float, default=1800.0, help="seconds the whole run may take")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of the server (SERVE_PROCESSES=2)"
    )
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    args.store = args.store.resolve()
    if args.store.name != SQLITE_FILE:
        parser.error(f"--store must be CRAWL_DIR/CRAWL_NAME/{SQLITE_FILE}")
    if args.url and not (urlsplit(args.url).hostname or "").startswith("127."):
        parser.error("--url must be on 127.0.0.0/8")
    args.backend_list = [b.strip().lower() for b in args.backends.split(",") if b.strip()]
    if not args.backend_list or any(b not in BACKENDS for b in args.backend_list):
        parser.error(f"--backends: one or more of {', '.join(BACKENDS)}")
    if args.url and len(args.backend_list) > 1:
        parser.error("--url measures one server: one backend")


def prepare_store(args: argparse.Namespace) -> None:
    """The SQLite store of --records records (generated, or reused), read once into the page cache."""
    store = args.store
    store.parent.mkdir(parents=True, exist_ok=True)
    have = stored_count(store)
    if have == args.records:
        print(f"store: {store} ({have:,} records, {store.stat().st_size / 1e9:.2f} GB), reused")
    else:
        print(f"store: generating {args.records:,} records at {store} ...", flush=True)
        t0 = time.perf_counter()
        generate_store(store, args.records, args.hosts, args.seed)
        took = time.perf_counter() - t0
        size = store.stat().st_size
        print(
            f"store: {args.records:,} records in {took:.1f} s ({args.records / took:,.0f}/s), "
            f"{size / 1e9:.2f} GB ({size / args.records:,.0f} bytes a record)"
        )
    t0 = time.perf_counter()
    SqliteUrlStore(str(store)).close()  # as a worker opens it: a store made before gets the schema's changes
    if time.perf_counter() - t0 > 1.0:
        print(f"store: brought to the current schema (crawler/urlstore/schema.sql) in {time.perf_counter() - t0:.1f} s")
    if not args.cold:
        t0 = time.perf_counter()
        with open(store, "rb") as f:  # the page cache, as a store in use keeps it
            while f.read(8 << 20):
                pass
        print(f"store: read once into the page cache in {time.perf_counter() - t0:.1f} s")


def node_of(args: argparse.Namespace) -> CassandraNode:
    return CassandraNode(
        args.cassandra_dir,
        args.cassandra_port,
        args.cassandra_storage_port,
        args.cassandra_jmx_port,
        args.cassandra_heap,
    )


Results = dict  # backend -> (record steps, batch steps)


def run(args: argparse.Namespace, node: CassandraNode | None = None) -> Results:
    """Every backend of --backends measured in turn (the SQLite store prepared first): its
    server started, the record steps, then the batch steps. ``node``: the Cassandra node,
    running; without one a node is started here and stopped at the end."""
    crawl_dir, crawl = args.store.parent.parent, args.store.parent.name
    rates = [float(x) for x in args.rates.split(",")] if args.rates else [r for r in RATES if r <= args.max_rate]
    batch_rates = [float(x) for x in args.batch_rates.split(",") if x.strip()]
    own_node = None
    keyspace = keyspace_name(args.records)
    results: Results = {}
    try:
        if "cassandra" in args.backend_list:
            if node is None:
                node = own_node = node_of(args)
                took = node.start()
                print(f"cassandra: node in {node.dir} on 127.0.0.1:{node.port} (pid {node.pid}), up in {took:.0f} s")
            ensure_keyspace(node, args.store, keyspace)
            if not args.cold:
                print(f"cassandra: keyspace {keyspace} read once into the page cache in {node.warm(keyspace):.1f} s")
        known = sample_urls(args.store, SAMPLE, args.seed)
        unknown = unknown_urls(known, SAMPLE // 4, args.seed)
        for backend in args.backend_list:
            results[backend] = measure(args, backend, crawl_dir, crawl, known, unknown, rates, batch_rates, node)
    finally:
        if own_node is not None:
            own_node.stop()
    return results


def measure(args, backend, crawl_dir, crawl, known, unknown, rates, batch_rates, node) -> tuple[list, list]:
    """One backend's steps: (record steps, batch steps)."""
    server = load = redis = None
    node_pid = node.pid if backend == "cassandra" else None
    try:
        if args.url:
            base, server_pid = args.url.rstrip("/"), args.server_pid
            wait_answering(base, None, 10)
        else:
            extra = []
            if backend == "cassandra":
                redis = FrontierRedis(crawl_dir.parent / f"{crawl_dir.name}-redis", crawl)
                keyspace = keyspace_name(args.records)
                extra = [f"{k}={v}" for k, v in node.settings(keyspace).items()] + [f"REDIS_URL={redis.url}"]
            server = Server(crawl_dir, crawl, crawl_dir / f"serve-{backend}.log", [*extra, *args.set])
            base, server_pid = server.url, server.pid
            took = wait_answering(base, server, START_TIMEOUT)
            print(
                f"\n[{backend}] server: python -m scrapy serve on {base} (pid {server.pid}), answering after {took:.1f} s"
            )
        load = Load(args.clients, base, crawl, known, unknown, args.unknown, args.batch, args.connections, args.seed)
        load.run("record", 100, WARM_UP, args.timeout, None)  # warm-up: connections, caches, a JVM's compiler
        read0 = disk_read(server_pid) if server_pid else 0
        where = f"keyspace {keyspace_name(args.records)} of the Cassandra node" if backend == "cassandra" else "SQLite"
        print(
            f"\n[{backend}] GET /api/crawls/{crawl}/record?url=U from {where}, {args.unknown:.0%} unknown URLs, "
            f"open-loop steps of {args.step_seconds:g} s, {args.clients} load process(es) x {args.connections} "
            "connections\n(server, node, load: % of a core on a CPU / waiting for one; cpu: the server's CPU a "
            "request; late: how late the load sent a request; others: cores other processes kept busy)"
        )
        print(header("req"))
        singles: list[StepResult] = []
        for rate in rates:
            result = load.run("record", rate, args.step_seconds, args.timeout, server_pid, node_pid)
            singles.append(result)
            print(row(result), flush=True)
            # two steps past the p99 target (p50 not counted: a backend slower at the median
            # may still answer more within p99 50 ms) or not kept up with
            if sum(not (r.met or (r.p99 <= TARGET_P99 and r.kept_up)) for r in singles) >= 2:
                break
            time.sleep(1.0)
        batches: list[StepResult] = []
        if batch_rates:
            print(f"\n[{backend}] POST /api/crawls/{crawl}/lookup of {args.batch} URLs: figures in URLs/s")
            print(header("URL"))
            for rate in batch_rates:
                result = load.run("lookup", rate, args.step_seconds, args.timeout, server_pid, node_pid)
                batches.append(result)
                print(row(result, args.batch), flush=True)
                if sum(not r.kept_up for r in batches) >= 2:
                    break
                time.sleep(1.0)
        odd = {k: v for r in singles + batches for k, v in r.statuses.items() if k not in (200, 404)}
        if odd:
            print(f"\n[{backend}] unexpected answers: {odd}")
        if server_pid:
            print(
                f"[{backend}] the server read {(disk_read(server_pid) - read0) / 1e6:,.1f} MB from storage during "
                "the steps (the rest from the page cache)"
            )
        return singles, batches
    finally:
        if load is not None:
            load.close()
        if server is not None:
            server.stop()
        if redis is not None:
            redis.stop()


def print_summary(results: Results, batch: int) -> None:
    for backend, (singles, batches) in results.items():
        print(f"[{backend}] " + summary(singles, "record look-up (requests/s)"))
        if batches:
            print(f"[{backend}] " + summary(batches, f"batch look-up of {batch} (URLs/s)", batch))
    print(f"\nthe highest rate answered with p99 <= {TARGET_P99 * 1000:.0f} ms (p50 not counted):")
    for backend, (singles, batches) in results.items():
        parts = []
        for steps, what, unit in ((singles, "record look-ups/s", 1), (batches, "URLs/s in batches", batch)):
            if steps:
                best = p99_rate(steps, unit)
                parts.append(
                    f"{best.offered * unit:,.0f} {what} (p99 {best.p99 * 1000:.1f} ms)" if best else f"no {what} rate"
                )
        print(f"  {backend:10} " + "; ".join(parts))


def main() -> int:
    parser = build_parser()
    args = parser.parse_args()
    check_args(parser, args)

    def overdue(signum, frame):
        raise Overdue(f"stopped: the run took longer than --limit {args.limit:.0f} s")

    signal.signal(signal.SIGALRM, overdue)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
    signal.alarm(int(args.limit))
    try:
        prepare_store(args)
        results = run(args)
        print(f"\nload average (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
        print_summary(results, args.batch)
    except Overdue as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
