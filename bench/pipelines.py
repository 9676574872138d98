"""Benchmark: what the item pipelines cost. CPU milliseconds per page of each pipeline
stage on realistic pages, S3 PUT requests per 1,000 pages, and the pages/s of one worker
with every pipeline on versus off, in one run.

1. Stages, in this process, no crawl. A deterministic corpus (``--seed``) of ``--pages``
   article pages, sizes spread evenly over 50-200 KB: a head with meta, Open Graph,
   Twitter card, canonical, inline CSS and tracking scripts, JSON-LD (Article, Product or
   Recipe) on 5 pages in 7; navigation, breadcrumbs, related links, tags and footer (about
   200 links in all); the article: paragraphs in wrapper elements with data attributes,
   inline links, headings, lists, quotes, ad-slot scripts; share buttons (inline SVG); a
   JSON state blob (the article's text again, as client-side frameworks ship it). Visible
   text is about a fifth of the HTML (~4,000 words a page): Zipf-distributed words from a
   5,000-word vocabulary, 30% of them from the page's own 80-word topic (see ``Words``:
   this gives unrelated pages SimHash distances like real English text's). About 8% of
   the pages are near copies of an earlier page (three words and the date changed, another
   URL), 2% exact copies under another URL. Each page becomes a Page item as the spider
   makes it (outlinks from the spider's own ``_outlinks``, timed in the first pass as a
   reference row: the spider runs in both modes of part 3), then goes through the
   pipelines in order, built from settings/base.py with ``scrapy.utils.test.get_crawler``,
   on our own redis-server:

   content seen   ``process_now`` (``process_item`` in the calling thread: the pipeline
                  runs the page part in a page worker process and the lookup in a
                  thread), split by timing wrappers put around the functions of
                  crawler/contentseen/fingerprints.py that ``page_fingerprints`` calls (in that
                  module's namespace, in this process only): body SHA-1, parse (lxml),
                  main text (``main_text``), words (``word_hashes`` + ``word_bag``),
                  sketch (``minhash`` + ``sketch_bytes`` + ``band_keys``), SimHash
                  (``simhash``), and ``check`` (the Redis script, one round trip)
   links          ``process_item`` with ``crawler.engine`` replaced by an object whose
                  ``crawl`` appends to a list (the real one hands each to the scheduler,
                  which sends the requests of one reactor turn to the frontier at once)
   metadata       ``process_now`` (crawler/pipelines/metadata.py, imported directly;
                  skipped with a note if it cannot be imported)
   archive        what ``process_item`` does: ``_raw_page`` (reactor thread) and
                  ``WarcBatch.add`` (WARC records, digests, gzip, spool file: the
                  pipeline's writer thread), called directly (the pipeline itself waits
                  for its batch's timer and storage, which need the reactor); pages that
                  are exact copies in the corpus are skipped, as the pipeline skips exact
                  duplicates (near copies are archived, their bytes differ). Batches close
                  at ARCHIVE_MAX_BYTES; ``close()`` (flush + fsync, in the writer thread
                  in the pipeline) is a row of its own, per page
   UrlStore       ``fetch_record`` + ``record_fetch`` (SQLite, outlinks as inlink rows):
                  CPU of the calling thread, CPU of the writer thread, wall per page from
                  the first write submitted to the last one done, and one write's latency

   CPU is ``time.thread_time()`` of the calling thread (the writer thread's: process CPU
   less the calling thread's), wall is ``time.perf_counter()``. Each of ``--passes``
   passes runs on a fresh crawl (new Redis keys, SQLite file and spool); figures are the
   medians of the passes, per page of the corpus; "per 100 KB" scales by 100 KB / the
   mean page size. Also counted: content seen's verdicts on the corpus's exact and near
   copies ("exact" when an item gets ``duplicate_of``, "near" when it gets
   ``near_duplicate_of``). Near-duplicate quality (precision and recall on real HTML), the
   cost of the check with its lookup against a filled index (and its target) and the
   index's Redis memory are measured by ``python -m bench.near_duplicates``, not here.

2. S3 PUTs. A SeaweedFS S3 server of the run's own (scripts/s3server.py on 127.0.0.1,
   killed at the end; built once from the Go module proxy, about 9 minutes on 2 cores) and
   crawler.archive's ``WarcBatch`` + ``S3Storage``, as the archive pipeline uses them:
   ``--s3-pages`` pages (the corpus again, each under its own URL; by default enough for
   one full batch and 10% more) are added to a batch that is closed and PUT when it
   reaches ARCHIVE_MAX_BYTES (64 MiB), the last one when the pages run out. No batch
   timer (pages come as fast as they are built): this is the size bound, one PUT per
   64 MiB of records. The age bound (a batch also closes ARCHIVE_MAX_SECONDS, 30 s, after
   it opened) is 1000 / (pages/s x 30) PUTs per 1,000 pages, shown at part 3's pages/s.
   PUTs are counted three ways: ``S3Storage.puts``, HTTP PUT requests seen by a botocore
   ``before-send`` hook, objects listed in the bucket. Target: at most 2 per 1,000 pages
   (one object per page: 1,000).

3. Pages/s of one worker, pipelines on versus off. The loopback multi-host site of
   crawler.demo.site (``--hosts`` hosts 127.0.0.2.., ``--site-pages`` pages each), every
   ``/pN.html`` served as a corpus-like page of 50-200 KB (``BigPageSite``, a subclass
   built here; demosite.py unchanged) that carries the demo page's own links in its
   article and about 200 links to pages of the site (its own host's mostly, ~50 distinct
   per page): the crawl fetches the same URLs, nothing links outside the site.
   ``--small-pages``: the demo's own ~1 KB pages. One ``scrapy crawl broad`` subprocess
   per run (testing.workers.crawl_command), alternating off and on (ABBA), each a fresh
   crawl (unique CRAWL_NAME, CRAWL_DIR in a temporary directory) on our redis-server,
   with ``FRONTIER_HOST_INTERVAL=0``, ``FRONTIER_IDLE_SECONDS=2``,
   ``NETWORK_GUARD_ALLOW=127.0.0.0/8``, ``FRONTIER_POLL_INTERVAL=0.1`` (``--poll-interval``;
   the default 1 s: when every host of the site has its one download in flight, the
   scheduler waits a whole poll interval before it asks again, however soon downloads
   end, which holds a worker on a few dozen hosts to about one page per host per second
   and leaves it idle half the time, so that the pipelines' cost hides in that idle time;
   a broad crawl has far more hosts than a worker has downloads in flight; for the same
   reason the default site has 120 hosts: with 30, one download in flight per host kept
   the worker idle a third of the time and its pages/s varied by 2x between identical
   runs), and no feed
   export (``-O`` dropped from the command: a JSON feed of base64 bodies is no part of a
   production crawl and would cost both modes alike; ``--feed`` keeps it):

     off  ``ITEM_PIPELINES_BASE={"crawler.pipelines.links.FollowLinksPipeline": 150}``
          (links are followed by that pipeline, not the spider: it stays)
     on   the defaults, with ``ARCHIVE_MAX_SECONDS=1`` (the last batch does not hold up
          the end of the crawl) and the archive in the local directory (the default); the
          metadata pipeline is added at 200 through ITEM_PIPELINES if it is importable but
          not in ITEM_PIPELINES_BASE

   pages/s = page requests the site saw (robots.txt excluded) / time from the first to
   the last page request's arrival. Medians per mode; target: on/off >= 0.70. Per run
   also: the worker's CPU time per page (os.wait4 rusage, start-up and its page worker
   process included), "others"
   (CPUs other processes kept busy, /proc/stat) and steal, WARC objects per 1,000 pages
   (the age bound at 1 s), and the pipelines' counters from the worker's log.

    python -m bench.pipelines            # 200 pages x 3 passes, S3 one full batch, 120 hosts x 5 pages, 3 rounds
    python -m bench.pipelines --quick    # 100 pages x 2 passes, 500 S3 pages, 60 hosts x 5 pages, 1 round
    python -m bench.pipelines --profile  # + one more pass under cProfile: top functions of each stage
    python -m bench.pipelines --skip-crawl --skip-s3   # part 1 only

Nothing leaves 127.0.0.0/8 (no link of the corpus is ever fetched; the site links only
itself). It exits 0 whatever the PASS/FAIL lines say: it is a report.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import cProfile
import gc
import hashlib
import io
import json
import os
import pstats
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

import crawler.contentseen.fingerprints as fingerprints_module
from crawler.archive.storage import S3Storage
from crawler.archive.warc import WarcBatch, object_key
from crawler.contentseen.fingerprints import main_text, parse, word_bag, word_hashes
from crawler.demo.site import Site, serve_site
from crawler.items import Page
from crawler.pipelines.archive import _raw_page
from crawler.pipelines.contentseen import ContentSeenPipeline
from crawler.pipelines.links import FollowLinksPipeline
from crawler.pipelines.urlstore import fetch_record
from crawler.spiders.broad import BroadSpider
from crawler.urlstore.backends import urlstore_from_settings
from testing.corpus import KINDS, CorpusPage, Words, build_corpus, make_page
from testing.sampling import cpu_seconds, machine_cpu
from testing.servers import RedisServer, free_port
from testing.workers import clean_env, crawl_command, log_tail, wait4

ROOT = Path(__file__).resolve().parents[1]

try:  # being written: may be missing or broken
    from crawler.pipelines.metadata import MetadataPipeline

    METADATA_NOTE = ""
except Exception as exc:  # noqa: BLE001 - anything that stops the import
    MetadataPipeline = None
    METADATA_NOTE = f"metadata pipeline skipped: not importable ({type(exc).__name__}: {exc})"

METADATA_PATH = "crawler.pipelines.metadata.MetadataPipeline"
LINKS_PATH = "crawler.pipelines.links.FollowLinksPipeline"
TARGET_PUTS = 2.0  # per 1,000 pages
TARGET_RATIO = 0.70  # pages/s on / off
KB100 = 100 * 1024
HTML_HEADERS = {"Content-Type": ["text/html; charset=utf-8"]}
REQUEST_HEADERS = {
    "Accept": ["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],
    "Accept-Language": ["en"],
    "User-Agent": ["crawler/0.1 (+https://example.invalid/crawler)"],
    "Accept-Encoding": ["gzip, deflate"],
}
STAT_RE = re.compile(r"'((?:contentseen|archive|metadata|urlstore|links)/[^']*)': (\d+)")


def project_settings(**overrides) -> dict:
    """settings/base.py as a dict, with ``overrides`` (as tests/conftest.py does)."""
    import settings.base

    values = {k: v for k, v in vars(settings.base).items() if k.isupper()}
    values.update(overrides)
    return values


# -- our own redis-server ------------------------------------------------------------------


def code_version() -> str:
    """A digest of crawler/ and settings/, to notice edits made while the benchmark runs."""
    digest = hashlib.sha1()
    for path in sorted([*ROOT.glob("crawler/**/*.py"), *ROOT.glob("settings/*.py")]):
        digest.update(str(path.relative_to(ROOT)).encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else 0.0


# -- part 1: the stages, in process -------------------------------------------------------

# (key, label); rows of the stage table, in pipeline order
STAGES = [
    ("spider", "spider: outlinks (reference, pass 1)"),
    ("cs_digest", "body SHA-1"),
    ("cs_parse", "parse (lxml)"),
    ("cs_text", "main text"),
    ("cs_words", "words"),
    ("cs_sketch", "sketch"),
    ("cs_simhash", "SimHash"),
    ("cs_lookup", "lookup: check (Redis script)"),
    ("cs_total", "content seen: process_item"),
    ("links", "links: process_item (stub engine)"),
    ("metadata", "metadata: process_item"),
    ("archive", "archive: _raw_page + WarcBatch.add"),
    ("archive_close", "archive: batch close (fsync)"),
    ("urlstore", "UrlStore: record_fetch, caller"),
    ("urlstore_writer", "UrlStore: writer thread"),
]
# what the worker's reactor thread spends per page in the pipelines (the writer thread aside)
PIPELINE_KEYS = ("cs_total", "links", "metadata", "archive", "archive_close", "urlstore")
PROFILED = ("spider", "cs_total", "links", "metadata", "archive", "urlstore")
# functions of crawler/contentseen/fingerprints.py that content seen's ``page_fingerprints`` calls
# (through the module's namespace), timed where the module has them (the code changes: a
# function the module no longer has is simply not timed, and the report says so). None
# of them calls another of them, so no time is counted twice.
WRAPPED = {
    "body_digest": "cs_digest",
    "parse": "cs_parse",
    "main_text": "cs_text",
    "word_hashes": "cs_words",
    "word_bag": "cs_words",
    "minhash": "cs_sketch",
    "sketch_bytes": "cs_sketch",
    "band_keys": "cs_sketch",
    "simhash": "cs_simhash",
}


class Clock:
    """CPU seconds (calling thread) and wall seconds, by stage; with ``profile``, a
    cProfile.Profile per top-level stage (a profiled pass is not a timed one)."""

    def __init__(self, profile: bool = False):
        self.cpu: Counter = Counter()
        self.wall: Counter = Counter()
        self.calls: Counter = Counter()
        self.profiles = {k: cProfile.Profile() for k in PROFILED} if profile else {}

    def add(self, name: str, cpu: float, wall: float) -> None:
        self.cpu[name] += cpu
        self.wall[name] += wall
        self.calls[name] += 1

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            c, w = time.thread_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(name, time.thread_time() - c, time.perf_counter() - w)

        return timed

    @contextlib.contextmanager
    def stage(self, name: str):
        prof = self.profiles.get(name)
        if prof is not None:
            prof.enable()
        c, w = time.thread_time(), time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.thread_time() - c, time.perf_counter() - w)
            if prof is not None:
                prof.disable()


class StubEngine:
    """Stands in for crawler.engine in the links pipeline: keeps the requests (no
    scheduler: the pipeline makes each link a Request, as with another scheduler)."""

    scheduler = None

    def __init__(self):
        self.requests = []

    def crawl(self, request) -> None:
        self.requests.append(request)


def make_item(page: CorpusPage, url: str | None = None) -> Page:
    url = url or page.url
    return Page(
        url=url,
        final_url=url,
        redirect_chain=[],
        status=200,
        error=None,
        headers=HTML_HEADERS,
        body=page.body,
        fetch_latency=0.12,
        depth=0,
        referrer=None,
        outlinks=[],
        fetched_at=time.time(),
        method="GET",
        request_headers=REQUEST_HEADERS,
        protocol="HTTP/1.1",
        ip_address="203.0.113.7",
    )


@dataclass
class PassResult:
    cpu: dict
    wall: dict
    calls: dict
    urlstore_wall: float = 0.0  # seconds, first write submitted .. last one done
    urlstore_latency: list = field(default_factory=list)  # seconds, one write alone
    verdicts: Counter = field(default_factory=Counter)  # (corpus kind, verdict) -> pages
    followed: int = 0  # requests the links pipeline made
    archived: int = 0
    archive_bytes: int = 0  # of the WARC batches
    batches: int = 0
    metadata_fields: float = 0.0  # per page read
    wrapped: dict = field(default_factory=dict)  # stage key -> content seen's functions timed there
    items: list = field(default_factory=list)  # the items (last pass only)


def stage_pass(
    corpus: list[CorpusPage], server: RedisServer, tmp: Path, index: int, clock: Clock, outlinks: dict
) -> PassResult:
    """One pass of the corpus through the pipelines, on a fresh crawl. The spider's work
    (Page outlinks) is timed in the first pass only; later passes reuse its ``outlinks``."""
    crawl_dir = tmp / f"stages-{index}"
    settings = project_settings(
        REDIS_URL=server.url, CRAWL_NAME=f"bench-pipes-{uuid.uuid4().hex[:10]}", CRAWL_DIR=str(crawl_dir)
    )
    crawler = get_crawler(BroadSpider, settings)
    spider = BroadSpider.from_crawler(crawler)
    crawler.spider = spider
    crawler.engine = engine = StubEngine()
    content_seen = ContentSeenPipeline.from_crawler(crawler)
    content_seen.check = clock.wrap("cs_lookup", content_seen.check)
    links = FollowLinksPipeline.from_crawler(crawler)
    links.open_spider()
    metadata = MetadataPipeline.from_crawler(crawler) if MetadataPipeline is not None else None
    store = urlstore_from_settings(crawler.settings)
    max_bytes = crawler.settings.getint("ARCHIVE_MAX_BYTES")
    spool = crawl_dir / "spool"
    seq, batch, archived, archive_bytes = 0, None, 0, 0
    items = []
    saved = {name: getattr(fingerprints_module, name) for name in WRAPPED if hasattr(fingerprints_module, name)}
    gc.collect()
    try:
        for name, fn in saved.items():
            setattr(fingerprints_module, name, clock.wrap(WRAPPED[name], fn))
        for page in corpus:
            item = make_item(page)
            with clock.stage("spider"):  # what the spider does for a page: not a pipeline
                response = HtmlResponse(
                    page.url, body=page.body, headers={"Content-Type": HTML_HEADERS["Content-Type"]}
                )
                item["outlinks"] = spider._outlinks(response)
            with clock.stage("cs_total"):
                item = content_seen.process_now(item)
            with clock.stage("links"):
                item = links.process_item(item)
            if metadata is not None:
                with clock.stage("metadata"):
                    item = metadata.process_now(item)
            # as ArchivePipeline, which skips exact duplicates: the corpus's exact copies (not
            # content seen's verdicts, which may be wrong: they are reported apart)
            if isinstance(item.get("status"), int) and page.kind != "exact":
                with clock.stage("archive"):
                    if batch is None:
                        seq += 1
                        key = object_key(settings["CRAWL_NAME"], "bench-worker", seq)
                        batch = WarcBatch(str(spool / key), key)
                    offset, length = batch.add(_raw_page(item))
                    item["archive"] = {"key": batch.key, "offset": offset, "length": length}
                archived += 1
                if batch.size >= max_bytes:
                    with clock.stage("archive_close"):
                        batch.close()
                    archive_bytes += os.path.getsize(batch.path)
                    os.remove(batch.path)
                    batch = None
            items.append(item)
        if batch is not None:
            with clock.stage("archive_close"):
                batch.close()
            archive_bytes += os.path.getsize(batch.path)
            os.remove(batch.path)
    finally:
        for name, fn in saved.items():
            setattr(fingerprints_module, name, fn)

    # the UrlStore: every write submitted, then all awaited (the pipeline awaits each, but
    # many pages are in the pipelines at once); then a few writes one at a time
    gc.collect()
    p0, c0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
    futures = []
    for item in items:
        with clock.stage("urlstore"):
            futures.append(store.record_fetch(fetch_record(item)))
    concurrent.futures.wait(futures)
    w1, p1, c1 = time.perf_counter(), time.process_time(), time.thread_time()
    for f in futures:
        f.result()  # raises if a write failed
    clock.cpu["urlstore_writer"] += max(0.0, (p1 - p0) - (c1 - c0))
    clock.calls["urlstore_writer"] += len(items)
    latency = []
    for item in items[:20]:
        record = fetch_record(item)
        record.url += "?latency=1"
        t = time.perf_counter()
        store.record_fetch(record).result()
        latency.append(time.perf_counter() - t)
    store.close()

    verdicts = Counter()
    for page, item in zip(corpus, items):
        got = "exact" if item.get("duplicate_of") else "near" if item.get("near_duplicate_of") else "new"
        verdicts[(page.kind, got)] += 1
    read = crawler.stats.get_value("metadata/pages", 0)
    return PassResult(
        cpu=dict(clock.cpu),
        wall=dict(clock.wall),
        calls=dict(clock.calls),
        urlstore_wall=w1 - w0,
        urlstore_latency=latency,
        verdicts=verdicts,
        followed=len(engine.requests),
        archived=archived,
        archive_bytes=archive_bytes,
        batches=seq,
        metadata_fields=crawler.stats.get_value("metadata/fields", 0) / read if read else 0.0,
        wrapped={key: [n for n in saved if WRAPPED[n] == key] for key in set(WRAPPED.values())},
        items=items,
    )


def print_profiles(clock: Clock, top: int) -> None:
    for name, prof in clock.profiles.items():
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        if not stats.total_tt:
            continue
        stats.sort_stats("tottime").print_stats(top)
        label = dict(STAGES)[name]
        print(f"\n--- cProfile: {label} (total {stats.total_tt:.2f} s; top {top} by own time) ---")
        lines = buf.getvalue().splitlines()
        start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
        for line in lines[start:]:
            if line.strip():
                print("  " + line.replace(str(ROOT) + "/", "").replace(sys.prefix + "/lib/", ""))


# -- part 2: S3 PUTs per 1,000 pages -------------------------------------------------------


@contextlib.contextmanager
def s3_server(directory: Path):
    """A SeaweedFS S3 server of scripts/s3server.py in ``directory``, on a free loopback
    port: its settings (ARCHIVE_S3_ENDPOINT_URL and the AWS_* credentials). Killed at the
    end: its data is the run's (a graceful stop takes 16 s)."""
    script = [sys.executable, str(ROOT / "scripts" / "s3server.py")]
    proc = subprocess.run(
        [*script, "start", str(directory), "--port", str(free_port())], stdout=subprocess.PIPE, text=True, timeout=900
    )
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"scripts/s3server.py start exited with {proc.returncode} (its reason is above)")
        yield dict(line.removeprefix("export ").split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    finally:
        subprocess.run([*script, "stop", str(directory), "--kill"], capture_output=True, timeout=60)


def s3_puts(corpus: list[CorpusPage], n: int, tmp: Path) -> dict:
    """``n`` pages archived through WarcBatch + S3Storage into a SeaweedFS S3 server on
    loopback, batches closed at ARCHIVE_MAX_BYTES (as ArchivePipeline.process_item does)."""
    import boto3

    with s3_server(tmp / "s3") as server:
        endpoint = server.pop("ARCHIVE_S3_ENDPOINT_URL")
        # this process only: boto3's credential chain stops there
        os.environ.update({**server, "AWS_EC2_METADATA_DISABLED": "true"})
        bucket = f"bench-archive-{uuid.uuid4().hex[:8]}"
        admin = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        admin.create_bucket(Bucket=bucket)
        settings = project_settings()
        max_bytes = int(settings["ARCHIVE_MAX_BYTES"])
        storage = S3Storage(
            bucket,
            endpoint_url=endpoint,
            region="us-east-1",
            retry_min=float(settings["ARCHIVE_RETRY_MIN"]),
            retry_max=float(settings["ARCHIVE_RETRY_MAX"]),
        )
        requests: Counter = Counter()

        def count(request, **kwargs):  # botocore before-send: must return None
            requests[request.method] += 1

        storage.client.meta.events.register("before-send.s3", count)
        crawl, worker = "bench-s3", f"bench-{os.getpid()}"
        spool = tmp / "s3-spool"
        seq, batch, in_batch = 0, None, 0
        batches: list[tuple[int, int]] = []  # (pages, bytes) of each stored batch
        put_seconds, closes = 0.0, []
        t0 = time.perf_counter()

        def store(batch: WarcBatch, pages: int) -> None:
            nonlocal put_seconds
            t = time.perf_counter()
            batch.close()  # flush + fsync: in the reactor thread in ArchivePipeline._close_batch
            size = os.path.getsize(batch.path)
            closes.append((size, time.perf_counter() - t))
            t = time.perf_counter()
            storage.put(batch.key, batch.path)
            put_seconds += time.perf_counter() - t
            os.remove(batch.path)
            batches.append((pages, size))

        for i in range(n):
            page = corpus[i % len(corpus)]
            item = make_item(page, f"{page.url}{'&' if '?' in page.url else '?'}copy={i}")
            if batch is None:
                seq += 1
                key = object_key(crawl, worker, seq, settings["ARCHIVE_PREFIX"])
                batch, in_batch = WarcBatch(str(spool / key), key), 0
            batch.add(_raw_page(item))
            in_batch += 1
            if batch.size >= max_bytes:
                store(batch, in_batch)
                batch = None
        if batch is not None:
            store(batch, in_batch)
        elapsed = time.perf_counter() - t0
        listed = 0
        for chunk in admin.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            listed += chunk.get("KeyCount", 0)
    total_bytes = sum(b for _, b in batches)
    full = [p for p, b in batches if b >= max_bytes]
    return {
        "pages": n,
        "objects": len(batches),
        "puts": storage.puts,
        "http_puts": requests["PUT"],
        "http_other": sum(v for k, v in requests.items() if k != "PUT"),
        "listed": listed,
        "max_bytes": max_bytes,
        "record_bytes": total_bytes / n if n else 0.0,
        "pages_per_full_batch": statistics.mean(full) if full else None,
        "batch_mb": [b / 2**20 for _, b in batches],
        "per_1000": 1000 * storage.puts / n if n else 0.0,
        # the size bound in a long crawl: one PUT per ARCHIVE_MAX_BYTES of records
        "steady_per_1000": 1000 * (total_bytes / n) / max_bytes if n else 0.0,
        "max_seconds": float(settings["ARCHIVE_MAX_SECONDS"]),
        "elapsed": elapsed,
        "put_seconds": put_seconds,
        "full_close_ms": max((1000 * t for size, t in closes if size >= max_bytes), default=None),
    }


# -- part 3: one worker, pipelines on versus off ----------------------------------------------


class BigPageSite(Site):
    """crawler.demo.site's site with every ``/pN.html`` served as a 50-200 KB corpus-like
    page that carries the demo page's own links (so the crawl is the same) and a few
    hundred links to other pages of the site (its own host's mostly). Pages are built by
    ``prepare()``, after ``start()`` (absolute links carry the port)."""

    def __init__(self, hosts: int, pages: int, seed: int, **options):
        super().__init__(hosts, pages, **options)
        self.seed = seed
        self.bodies: dict[tuple[int, str], str] = {}

    def prepare(self) -> None:
        rng = random.Random(self.seed)
        words = Words(self.seed + 1)
        n = self.n_hosts * self.n_pages
        sizes = [int((50 + 150 * i / max(1, n - 1)) * 1024) for i in range(n)]
        rng.shuffle(sizes)
        for h in range(self.n_hosts):
            for i in range(self.n_pages):
                path = f"/p{i}.html"
                demo = super().page(h, path)
                inner = demo.split("<body>", 1)[1].rsplit("</body>", 1)[0]
                html, _ = make_page(
                    random.Random(rng.random()),
                    words,
                    sizes[h * self.n_pages + i],
                    self.url(h, path),
                    self._href(h),
                    KINDS[(h + i) % len(KINDS)],
                    embed=f'<div class="site-links">{inner}</div>',
                )
                self.bodies[(h, path)] = html

    def _href(self, host: int):
        def href(rng: random.Random, where: str) -> str:
            path = self._link_path(rng.randrange(self.n_pages))
            if where != "tag" and rng.random() < 0.2:
                return self.url(rng.randrange(self.n_hosts), path)
            return path + ("#comments" if rng.random() < 0.1 else "")

        return href

    def page(self, host_index: int, path: str) -> str | None:
        body = self.bodies.get((host_index, path))
        return body if body is not None else super().page(host_index, path)


@dataclass
class Run:
    mode: str
    pages: int = 0  # page requests the site saw (robots.txt excluded)
    span: float = 0.0  # seconds from the first to the last page request
    missing: int = 0
    exit_code: int | None = None
    wall: float = 0.0
    cpu: float = 0.0  # user + system seconds of the worker
    others: float | None = None  # CPUs other processes kept busy, on average
    steal: float | None = None
    warc_objects: int = 0
    stats: dict = field(default_factory=dict)
    log: Path | None = None
    code: str = ""

    @property
    def rate(self) -> float:
        return self.pages / self.span if self.span > 0 else 0.0


def mode_settings(mode: str) -> dict:
    if mode == "off":
        return {"ITEM_PIPELINES_BASE": json.dumps({LINKS_PATH: 150})}
    base = project_settings()["ITEM_PIPELINES_BASE"]
    if MetadataPipeline is not None and METADATA_PATH not in base:
        return {"ITEM_PIPELINES": json.dumps({METADATA_PATH: 200})}
    return {}


def run_crawl(mode: str, args, server: RedisServer, site, tmp: Path, index: int) -> Run:
    run = Run(mode)
    name = f"run{index + 1}-{mode}"
    crawl_name = f"bench-pipes-{uuid.uuid4().hex[:10]}"
    seeds = tmp / f"{name}-seeds.txt"
    seeds.write_text("\n".join(site.seeds) + "\n")
    run.log = tmp / f"{name}.log"
    crawl_dir = tmp / name
    settings = {
        "CRAWL_NAME": crawl_name,
        "CRAWL_DIR": crawl_dir,
        "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
        "FRONTIER_HOST_INTERVAL": 0,
        "FRONTIER_IDLE_SECONDS": 2,
        "FRONTIER_POLL_INTERVAL": args.poll_interval,
        "ARCHIVE_MAX_SECONDS": 1,
        "CLOSESPIDER_TIMEOUT": args.run_timeout,
        "LOG_LEVEL": "INFO",
        "LOG_FILE": run.log,
        **mode_settings(mode),
    }
    cmd = crawl_command(tmp / f"{name}.jsonl", seeds, settings)
    if not args.feed:
        i = cmd.index("-O")
        del cmd[i : i + 2]
    env = clean_env()
    env["REDIS_URL"] = server.url
    run.code = code_version()
    seen_before = len(site.hits())
    cpu0, own0 = machine_cpu(), cpu_seconds([os.getpid(), server.proc.pid], descendants=False)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        status, usage = wait4(proc, args.run_timeout + 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    run.wall = time.monotonic() - t0
    cpu1, own1 = machine_cpu(), cpu_seconds([os.getpid(), server.proc.pid], descendants=False)
    run.exit_code = status
    run.cpu = usage.ru_utime + usage.ru_stime if usage else 0.0
    if run.wall > 0:
        run.others = max(0.0, cpu1[0] - cpu0[0] - run.cpu - (own1 - own0)) / run.wall
        run.steal = (cpu1[1] - cpu0[1]) / run.wall
    pages = [h for h in site.hits()[seen_before:] if not h.path.endswith("/robots.txt")]
    run.pages = len(pages)
    run.missing = len(site.expected_fetches() - {h.key for h in pages})
    if pages:
        run.span = max(h.start for h in pages) - pages[0].start
    run.warc_objects = sum(1 for _ in (crawl_dir / crawl_name / "warc").rglob("*.warc.gz"))
    try:
        text = run.log.read_text(errors="replace")
        run.stats = {k: int(v) for k, v in STAT_RE.findall(text[text.rfind("Dumping Scrapy stats") :])}
    except OSError:
        pass
    return run


# -- report ----------------------------------------------------------------------------------


def report_stages(corpus: list[CorpusPage], passes: list[PassResult]) -> None:
    n = len(corpus)
    sizes = [len(p.body) for p in corpus]
    mean_kb = statistics.mean(sizes) / 1024
    per100 = KB100 / statistics.mean(sizes)  # pages' mean size -> 100 KB
    w = 46  # the stage column

    def ms(kind: str, key: str) -> float:  # median over the passes that timed it, ms per page
        return median(1000 * getattr(p, kind).get(key, 0.0) / n for p in passes if p.calls.get(key) or key != "spider")

    print()
    print(
        f"1. pipeline stages in process: {n} pages, {mean_kb:.0f} KB mean ({min(sizes) // 1024}-{max(sizes) // 1024} KB), "
        f"{len(passes)} pass(es), medians; per page of the corpus (a stage that skips a page costs ~0 there)"
    )
    print(f"  {'stage':<{w}}{'CPU ms/pg':>10}{'wall ms/pg':>11}{'CPU ms/100KB':>13}{'share':>7}")
    pipelines_cpu = sum(ms("cpu", k) for k in PIPELINE_KEYS) + ms("cpu", "urlstore_writer")
    for key, label in STAGES:
        if key == "metadata" and MetadataPipeline is None:
            print(f"  {label:<{w}}{'-':>10}{'-':>11}{'-':>13}{'':>7}  (not importable)")
            continue
        cpu, wall = ms("cpu", key), ms("wall", key)
        share = f"{100 * cpu / pipelines_cpu:.0f}%" if key in (*PIPELINE_KEYS, "urlstore_writer") else ""
        wall_s = f"{wall:.3f}" if key != "urlstore_writer" else "-"
        indent = ""
        if key in passes[0].wrapped:
            if not passes[0].wrapped[key]:
                continue  # crawler/contentseen/fingerprints.py does not have that function (any more)
            label = f"{label}: {' + '.join(passes[0].wrapped[key])}"
            indent = "  "
        elif key == "cs_lookup":
            indent = "  "
        print(f"  {indent + label:<{w}}{cpu:>10.3f}{wall_s:>11}{cpu * per100:>13.3f}{share:>7}")
    missing = [n for key, names in passes[0].wrapped.items() for n in names if not passes[0].calls.get(key)]
    if missing:
        print(f"  (wrapped in crawler/contentseen/fingerprints.py but never called: {', '.join(missing)})")
    thread_cpu = sum(ms("cpu", k) for k in PIPELINE_KEYS)
    thread_wall = sum(ms("wall", k) for k in PIPELINE_KEYS)
    print(
        f"  {'all pipelines, reactor thread':<{w}}{thread_cpu:>10.3f}{thread_wall:>11.3f}{thread_cpu * per100:>13.3f}"
    )
    print(
        f"  {'all pipelines, + UrlStore writer thread':<{w}}{pipelines_cpu:>10.3f}{'':>11}"
        f"{pipelines_cpu * per100:>13.3f}"
    )
    text_bytes, words = 0, []
    for page in corpus:  # outside the timed passes (main_text changes the tree: a tree of its own)
        tree = parse(page.body)
        text = main_text(tree) if tree is not None else ""
        text_bytes += len(text.encode())
        words.append(len(word_bag(word_hashes(text))))
    print(
        f"  main text: {text_bytes / sum(sizes):.0%} of the HTML ({text_bytes / n / 1024:.0f} KB/page), "
        f"{statistics.mean(words):,.0f} words/page (stop words left out); the lookup here is against this "
        f"corpus's own index ({ms('wall', 'cs_lookup'):.3f} ms round trip per page)"
    )
    wall_us = median(1000 * p.urlstore_wall / n for p in passes)
    latency = median(1000 * x for p in passes for x in p.urlstore_latency)
    outlinks = statistics.mean(len(it.get("outlinks") or []) for it in passes[-1].items)
    print(
        f"  UrlStore: {wall_us:.3f} ms wall per page with every write submitted at once (writer thread included); "
        f"one write alone {latency:.2f} ms (median); {outlinks:.0f} outlinks (inlink rows) per page"
    )
    last = passes[-1]
    designed = Counter(p.kind for p in corpus)
    v = last.verdicts
    others = n - designed["near"] - designed["exact"]
    false_near = sum(c for (kind, got), c in v.items() if got == "near" and kind not in ("near", "exact"))
    false_exact = sum(c for (kind, got), c in v.items() if got == "exact" and kind != "exact")
    found = [
        it["resemblance"]
        for page, it in zip(corpus, last.items)
        if page.kind == "near" and it.get("near_duplicate_of") and it.get("resemblance") is not None
    ]
    print(
        f"  content seen (last pass): near copies found {v[('near', 'near')]}/{designed['near']}"
        + (f" (resemblance {min(found):.3f}-{max(found):.3f})" if found else "")
        + f", exact copies {v[('exact', 'exact')]}/{designed['exact']}, other pages flagged near "
        f"{false_near}/{others}, flagged exact {false_exact}/{n - designed['exact']}; links followed "
        f"{last.followed / n:.0f}/page; archived {last.archived} pages in {last.batches} batch(es)"
        + (f"; metadata {last.metadata_fields:.1f} fields/page" if MetadataPipeline is not None else "")
    )
    print(
        "  near-duplicate quality (precision, recall on real HTML), lookup cost against a filled index and "
        "index memory: python -m bench.near_duplicates"
    )
    if METADATA_NOTE:
        print(f"  {METADATA_NOTE}")


def report_s3(s3: dict) -> None:
    print()
    print(
        f"2. S3 PUTs: {s3['pages']} pages through WarcBatch + S3Storage into SeaweedFS (127.0.0.1), batches closed at "
        f"{s3['max_bytes'] // 2**20} MiB"
    )
    full = s3["pages_per_full_batch"]
    sizes = ", ".join(f"{mb:.1f}" for mb in s3["batch_mb"][:8]) + (" ..." if len(s3["batch_mb"]) > 8 else "")
    print(
        f"  objects {s3['objects']} ({sizes} MiB); S3Storage.puts {s3['puts']}, HTTP PUT requests {s3['http_puts']} "
        f"(other requests {s3['http_other']}), objects listed {s3['listed']}"
    )
    print(
        f"  {s3['record_bytes'] / 1024:.1f} KB of gzipped WARC (response + request records) per page; "
        + (f"{full:.0f} pages per full batch; " if full else "no batch reached the size limit; ")
        + f"{s3['elapsed']:.1f} s ({s3['put_seconds']:.1f} s in PUTs)"
    )
    if s3["full_close_ms"] is not None:
        print(
            f"  closing a full batch (flush + fsync of the spool file) took {s3['full_close_ms']:.0f} ms: "
            "the archive pipeline does it in its writer thread"
        )
    print(
        f"  PUTs per 1,000 pages: {s3['per_1000']:.2f} in this run (the last, partial batch included); "
        f"{s3['steady_per_1000']:.2f} in a long crawl (size bound); one object per page: 1000"
    )


def report_runs(runs: list[Run], args) -> dict:
    print()
    what = "demo pages (~1 KB)" if args.small_pages else "50-200 KB pages"
    print(
        f"3. one worker, pipelines off vs on: {args.hosts} hosts x {args.site_pages} {what}, runs in ABBA order, "
        f"FRONTIER_POLL_INTERVAL={args.poll_interval:g}"
    )
    print(
        f"  {'run':<8}{'pages':>7}{'span s':>8}{'pages/s':>9}{'cpu ms/pg':>10}{'wall s':>8}{'others':>8}{'steal':>7}"
        f"{'WARC/1000':>10}  complete / exit"
    )
    for i, r in enumerate(runs):
        cpu = 1000 * r.cpu / r.pages if r.pages else 0.0
        others = "-" if r.others is None else f"{r.others:.2f}"
        steal = "-" if r.steal is None else f"{r.steal:.2f}"
        warc = f"{1000 * r.warc_objects / r.pages:.1f}" if r.mode == "on" and r.pages else "-"
        done = "yes" if not r.missing else f"NO ({r.missing} missing)"
        print(
            f"  {f'{i + 1} {r.mode}':<8}{r.pages:>7}{r.span:>8.2f}{r.rate:>9.1f}{cpu:>10.2f}{r.wall:>8.1f}{others:>8}"
            f"{steal:>7}{warc:>10}  {done} / {r.exit_code}"
        )
    by_mode = {m: [r for r in runs if r.mode == m] for m in ("off", "on")}
    med = {m: median(r.rate for r in rs) for m, rs in by_mode.items()}
    cpu = {m: median(1000 * r.cpu / r.pages for r in rs if r.pages) for m, rs in by_mode.items()}
    busy = {m: median(r.cpu / r.wall for r in rs if r.wall) for m, rs in by_mode.items()}
    for m, rs in by_mode.items():
        keys = sorted({k for r in rs for k in r.stats})
        if keys:
            vals = ", ".join(f"{k} {median(r.stats.get(k, 0) for r in rs):g}" for k in keys)
            print(f"  {m:<4} worker counters (median): {vals}")
    print(
        f"  worker CPU per page (median, start-up included): off {cpu['off']:.2f} ms, on {cpu['on']:.2f} ms "
        f"(+{cpu['on'] - cpu['off']:.2f} ms): a worker that is CPU-bound would get on/off pages/s = off/on CPU "
        f"= {cpu['off'] / cpu['on'] if cpu['on'] else 0:.3f}; these kept {busy['off']:.2f} (off) and {busy['on']:.2f} "
        "(on) CPUs busy (median CPU / wall of the runs, start-up and idle end included)"
    )
    on_pipes = sorted(
        {**project_settings()["ITEM_PIPELINES_BASE"], **json.loads(mode_settings("on").get("ITEM_PIPELINES", "{}"))}
    )
    print(f"  on = {', '.join(p.rsplit('.', 1)[1] for p in on_pipes)}; off = FollowLinksPipeline")
    ratio = med["on"] / med["off"] if med["off"] else 0.0
    rounds = []
    for a, b in zip(runs[::2], runs[1::2]):
        on, off = (a, b) if a.mode == "on" else (b, a)
        if off.rate:
            rounds.append(on.rate / off.rate)
    return {"med": med, "ratio": ratio, "rounds": rounds, "cpu": cpu}


def report_targets(s3: dict | None, crawl: dict | None, runs, args) -> None:
    print()
    print("targets")
    print(
        "  near-copy check with its lookup, ms per 100 KB page, and near-duplicate quality: python -m bench.near_duplicates"
    )
    if s3 is not None:
        print(
            f"  {'S3 PUTs per 1,000 pages (size bound, long crawl)':<58}{s3['steady_per_1000']:>8.2f}  <= {TARGET_PUTS:<5}"
            f"{verdict(s3['steady_per_1000'] <= TARGET_PUTS)}  (this run {s3['per_1000']:.2f}; one object per page: 1000)"
        )
        if crawl is not None and crawl["med"]["on"] and not args.small_pages:
            rate = crawl["med"]["on"]
            age = 1000 / (rate * s3["max_seconds"])
            bound = max(age, s3["steady_per_1000"])
            print(
                f"  {'S3 PUTs per 1,000 pages, age bound at part 3 on pages/s':<58}{bound:>8.2f}  <= {TARGET_PUTS:<5}"
                f"{verdict(bound <= TARGET_PUTS)}  ({rate:.1f} pages/s x ARCHIVE_MAX_SECONDS "
                f"{s3['max_seconds']:g} = {rate * s3['max_seconds']:.0f} pages per batch)"
            )
    if crawl is not None:
        ratio = crawl["ratio"]
        print(
            f"  {'pages/s, pipelines on / off (medians)':<58}{ratio:>8.3f}  >= {TARGET_RATIO:<5}"
            f"{verdict(ratio >= TARGET_RATIO)}  (off {crawl['med']['off']:.1f}, on {crawl['med']['on']:.1f} pages/s)"
        )
        if len(crawl["rounds"]) > 1:
            print(f"  (on/off per round: {' '.join(f'{x:.3f}' for x in crawl['rounds'])}: the spread is the noise)")
        else:
            print(
                "  (one off/on pair: rounds of the full run differ by 0.1-0.4 on a shared machine; more with --rounds)"
            )
        incomplete = [i + 1 for i, r in enumerate(runs) if r.missing]
        print(f"  every run fetched every page: {'yes' if not incomplete else f'no: runs {incomplete}'}")


# -- main ------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller corpus and site, fewer passes and rounds")
    ap.add_argument("--pages", type=int, default=None, help="corpus pages (default 200; quick 100)")
    ap.add_argument("--passes", type=int, default=None, help="timed passes over the corpus (default 3; quick 2)")
    ap.add_argument("--seed", type=int, default=1, help="corpus seed")
    ap.add_argument(
        "--s3-pages",
        type=int,
        default=None,
        help="pages archived to S3 (default: enough for one full batch and 10%% more, from part 1's record size; "
        "quick 500)",
    )
    ap.add_argument("--hosts", type=int, default=None, help="site hosts, 2..200 (default 120; quick 60)")
    ap.add_argument("--site-pages", type=int, default=None, help="pages per host, >= 5 (default 5)")
    ap.add_argument("--rounds", type=int, default=None, help="off+on rounds (default 3; quick 1)")
    ap.add_argument("--run-timeout", type=int, default=None, help="CLOSESPIDER_TIMEOUT per run (default 120; quick 60)")
    ap.add_argument("--small-pages", action="store_true", help="the demo site's own ~1 KB pages in part 3")
    ap.add_argument(
        "--poll-interval",
        type=float,
        default=0.1,
        help="FRONTIER_POLL_INTERVAL of the part 3 workers (default 0.1; the project's default is 1.0)",
    )
    ap.add_argument("--feed", action="store_true", help="keep the workers' -O feed export (bodies in base64)")
    ap.add_argument("--profile", action="store_true", help="one more pass under cProfile: top functions per stage")
    ap.add_argument("--skip-s3", action="store_true")
    ap.add_argument("--skip-crawl", action="store_true")
    ap.add_argument("--keep-logs", action="store_true", help="keep the temporary directory (printed)")
    args = ap.parse_args(argv)
    q = args.quick
    args.pages = args.pages or (100 if q else 200)
    args.passes = args.passes or (2 if q else 3)
    args.s3_pages = args.s3_pages or (500 if q else 0)  # 0: from part 1
    args.hosts = args.hosts or (60 if q else 120)
    args.site_pages = args.site_pages or 5
    args.rounds = args.rounds or (1 if q else 3)
    args.run_timeout = args.run_timeout or (60 if q else 120)
    if not 2 <= args.hosts <= 200:
        ap.error("--hosts must be 2..200")
    if args.site_pages < 5:
        ap.error("--site-pages must be at least 5")

    t_start = time.perf_counter()
    version = code_version()
    tmpdir = tempfile.mkdtemp(prefix="bench-pipes-") if args.keep_logs else None
    with tempfile.TemporaryDirectory(prefix="bench-pipes-") as auto:
        tmp = Path(tmpdir or auto)
        with RedisServer(str(tmp), socket_timeout=30) as server:
            t = time.perf_counter()
            corpus = build_corpus(args.pages, args.seed)
            print(
                f"corpus: {len(corpus)} pages, {sum(len(p.body) for p in corpus) / 2**20:.1f} MiB, "
                f"{statistics.mean(p.links for p in corpus):.0f} links/page in the markup (built in "
                f"{time.perf_counter() - t:.1f} s); own redis-server on {server.url}; {os.cpu_count()} CPUs",
                flush=True,
            )
            passes, outlinks = [], {}
            for i in range(args.passes):
                t = time.perf_counter()
                passes.append(stage_pass(corpus, server, tmp, i, Clock(), outlinks))
                if len(passes) > 1:
                    passes[-2].items = []
                print(f"  stage pass {i + 1}/{args.passes}: {time.perf_counter() - t:.1f} s", flush=True)
            profiled = None
            if args.profile:
                profiled = Clock(profile=True)
                stage_pass(corpus, server, tmp, args.passes, profiled, {})
            s3 = None
            if not args.skip_s3:
                t = time.perf_counter()
                n = args.s3_pages
                if not n:  # one full batch and 10% more
                    last = passes[-1]
                    record = last.archive_bytes / last.archived if last.archived else 50_000
                    n = min(4000, int(1.1 * project_settings()["ARCHIVE_MAX_BYTES"] / record) + 1)
                try:
                    s3 = s3_puts(corpus, n, tmp)
                except RuntimeError as exc:  # no S3 server here: the other parts still run
                    print(f"  S3: not measured: {exc}", flush=True)
                else:
                    print(
                        f"  S3: {s3['puts']} PUTs for {s3['pages']} pages ({time.perf_counter() - t:.1f} s)", flush=True
                    )
            runs: list[Run] = []
            if not args.skip_crawl:
                order = []
                for i in range(args.rounds):  # ABBA: off on on off ...
                    order += ["off", "on"] if i % 2 == 0 else ["on", "off"]
                with contextlib.ExitStack() as stack:
                    t = time.perf_counter()
                    if args.small_pages:
                        site = stack.enter_context(serve_site(hosts=args.hosts, pages=args.site_pages))
                    else:
                        site = BigPageSite(args.hosts, args.site_pages, args.seed)
                        site.start()
                        stack.callback(site.stop)
                        site.prepare()
                    print(f"  site: {args.hosts} hosts x {args.site_pages} pages ({time.perf_counter() - t:.1f} s)")
                    for i, mode in enumerate(order):
                        run = run_crawl(mode, args, server, site, tmp, i)
                        runs.append(run)
                        print(
                            f"  run {i + 1} {mode:<3}: {run.pages} pages in {run.span:.2f} s = {run.rate:.1f} pages/s "
                            f"(wall {run.wall:.1f} s, exit {run.exit_code})",
                            flush=True,
                        )
                        if run.missing or run.exit_code:
                            print(log_tail([run.log], 15, "  (no worker log)"))
            report_stages(corpus, passes)
            if profiled is not None:
                print_profiles(profiled, 14)
            if s3 is not None:
                report_s3(s3)
            crawl = report_runs(runs, args) if runs else None
            report_targets(s3, crawl, runs, args)
            versions = {version, code_version(), *(r.code for r in runs)}
            if len(versions) > 1:
                print(
                    "  WARNING: code under crawler/ or settings/ changed during the benchmark: not all parts measured"
                )
                print("  the same code")
            print(f"elapsed {time.perf_counter() - t_start:.0f} s")
        if tmpdir:
            print(f"logs and files kept in {tmpdir}")
    return 0


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
