"""A generated SQLite UrlStore of many records (a million for bench/serve.py and
bench/urlstore.py), laid out as SqliteUrlStore writes them: JSON columns, signed simhash,
normalized URLs, over hosts of a few large sites and many small ones with the paths of
blogs, news sites, shops, documentation, wikis, forums and company sites. Most records are
fetched pages (metadata, 10 to 50 outlinks, an archive pointer, a rel=canonical on some),
the rest exact copies, 404s, redirects, robots.txt refusals and network errors; a sample of
the pages has its outlinks written as inlinks. ``prepare_store`` makes one or reuses it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import time
import zlib
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from urllib.parse import urlsplit

from crawler.urls import normalize_url
from crawler.urlstore.record import signed64
from crawler.urlstore.sqlite import SCHEMA, SqliteUrlStore

INLINK_BUCKETS = 16  # URLSTORE_INLINK_BUCKETS' default
CHUNK = 20_000  # rows per transaction while generating
SQLITE_COLUMNS = (  # of the urls table, in the order the generator writes them
    "url, canonical_url, near_duplicate_of, resemblance, status, fate, fetched_at, error, next_fetch_at, "
    "final_url, redirect_chain, content_digest, simhash, metadata, archive_key, archive_offset, "
    "archive_length, outlinks, fetch_interval, etag, last_modified"
)

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
    insert = f"INSERT INTO urls ({SQLITE_COLUMNS}) VALUES ({', '.join('?' * 21)})"
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


def prepare_store(store: Path, records: int, hosts: int, seed: int, cold: bool = False) -> None:
    """The SQLite store of ``records`` records at ``store`` (generated, or reused while it
    holds that many), opened once as a worker opens it (a store made before gets the
    schema's later indexes), and read once into the page cache unless ``cold``."""
    store.parent.mkdir(parents=True, exist_ok=True)
    have = stored_count(store)
    if have == records:
        print(f"store: {store} ({have:,} records, {store.stat().st_size / 1e9:.2f} GB), reused")
    else:
        print(f"store: generating {records:,} records at {store} ...", flush=True)
        t0 = time.perf_counter()
        generate_store(store, records, hosts, seed)
        took, size = time.perf_counter() - t0, store.stat().st_size
        print(f"store: {records:,} records in {took:.1f} s, {size / 1e9:.2f} GB ({size / records:,.0f} bytes a record)")
    SqliteUrlStore(str(store)).close()
    if not cold:
        t0 = time.perf_counter()
        read_through(store)
        print(f"store: read once into the page cache in {time.perf_counter() - t0:.1f} s")


def read_through(path: Path) -> None:
    """Read a file (or every file under a folder) once, into the page cache."""
    for file in [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]:
        with open(file, "rb") as f:
            while f.read(8 << 20):
                pass
