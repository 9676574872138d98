"""Benchmark: what the item pipelines cost: CPU ms a page of each pipeline stage on
realistic pages, S3 PUTs per 1,000 pages, and the pages/s of one worker with every
pipeline on against off.

    python -m bench.pipelines                               # 200 pages x 3 passes, 120 hosts x 5, 3 rounds
    python -m bench.pipelines --pages 100 --passes 2 --s3-pages 500 --hosts 60 --rounds 1
    python -m bench.pipelines --skip-crawl --skip-s3        # part 1 only

1. Stages, in this process: testing/corpus.py's ``--pages`` article pages of 50-200 KB go
   through the pipelines built from the project's settings on a redis-server of the run's
   own (content seen and its fingerprint functions, links, metadata, the archive's add and
   close, the SQLite UrlStore's caller and writer thread; the spider's outlinks as a
   reference), ``--passes`` fresh crawls; CPU of the calling thread.
2. S3: ``--s3-pages`` pages archived to a SeaweedFS of the run's own (scripts/s3server.py):
   PUTs per 1,000 pages with the size bound (target <= 2).
3. One worker on the demo site (``--hosts`` x ``--site-pages`` pages of 50-200 KB),
   pipelines off (links only) and on, ABBA, ``--rounds`` rounds, FRONTIER_HOST_INTERVAL=0:
   pages/s by the site's log, the worker's CPU a page; target on / off >= 0.70.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

import crawler.contentseen.fingerprints as fingerprints_module
from bench.results import Results
from crawler.archive.storage import S3Storage
from crawler.archive.warc import WarcBatch, object_key
from crawler.demo.site import Site
from crawler.items import Page
from crawler.pipelines.archive import _raw_page
from crawler.pipelines.contentseen import ContentSeenPipeline
from crawler.pipelines.links import FollowLinksPipeline
from crawler.pipelines.metadata import MetadataPipeline
from crawler.pipelines.urlstore import fetch_record
from crawler.spiders.broad import BroadSpider
from crawler.urlstore.backends import urlstore_from_settings
from testing.corpus import KINDS, Words, build_corpus, make_page
from testing.sampling import StageClock
from testing.servers import RedisServer
from testing.services import project_settings
from testing.stores import S3Server
from testing.workers import clean_env, crawl_demo_site

SEED, RUN_TIMEOUT, POLL_INTERVAL = 1, 120, 0.1
TARGET_PUTS, TARGET_RATIO = 2.0, 0.70  # PUTs per 1,000 pages; pages/s on / off
HTML = {"Content-Type": ["text/html; charset=utf-8"]}
# the stages, in pipeline order; "cs " rows are content seen's functions (fingerprints.py)
STAGES = ("spider: outlinks (reference)", "content seen", "cs body SHA-1", "cs parse", "cs main text", "cs words",
          "cs sketch", "cs SimHash", "cs lookup (Redis)", "links", "metadata", "archive: add", "archive: close (fsync)",
          "UrlStore: caller", "UrlStore: writer thread")  # fmt: skip
WRAPPED = {"body_digest": "cs body SHA-1", "parse": "cs parse", "main_text": "cs main text", "word_hashes": "cs words",
           "word_bag": "cs words", "minhash": "cs sketch", "sketch_bytes": "cs sketch", "band_keys": "cs sketch",
           "simhash": "cs SimHash"}  # fmt: skip
PIPELINES = ("content seen", "links", "metadata", "archive: add", "archive: close (fsync)", "UrlStore: caller")


class StubEngine:
    """crawler.engine for the links pipeline: keeps the requests."""

    scheduler = None

    def __init__(self):
        self.requests = []

    def crawl(self, request) -> None:
        self.requests.append(request)


def make_item(url: str, body: bytes) -> Page:
    return Page(
        url=url, final_url=url, redirect_chain=[], status=200, error=None, headers=HTML, body=body,
        fetch_latency=0.12, depth=0, referrer=None, outlinks=[], fetched_at=time.time(), method="GET",
        request_headers={"User-Agent": ["crawler/0.1"]}, protocol="HTTP/1.1", ip_address="203.0.113.7",
    )  # fmt: skip


def stage_pass(corpus, server: RedisServer, crawl_dir: Path) -> dict[str, float]:
    """One pass of the corpus through the pipelines on a fresh crawl: CPU ms a page by stage."""
    clock = StageClock()
    settings = project_settings(
        REDIS_URL=server.url, CRAWL_NAME=f"bench-pipes-{uuid.uuid4().hex[:10]}", CRAWL_DIR=str(crawl_dir)
    )
    crawler = get_crawler(BroadSpider, settings)
    spider = crawler.spider = BroadSpider.from_crawler(crawler)
    crawler.engine = StubEngine()
    content_seen = ContentSeenPipeline.from_crawler(crawler)
    content_seen.check = clock.wrap("cs lookup (Redis)", content_seen.check)
    links = FollowLinksPipeline.from_crawler(crawler)
    metadata = MetadataPipeline.from_crawler(crawler)
    store = urlstore_from_settings(crawler.settings)
    max_bytes = crawler.settings.getint("ARCHIVE_MAX_BYTES")
    batch, seq, items = None, 0, []
    with clock.patched(fingerprints_module, WRAPPED):
        for page in corpus:
            item = make_item(page.url, page.body)
            with clock.stage("spider: outlinks (reference)"):
                item["outlinks"] = spider._outlinks(HtmlResponse(page.url, body=page.body, headers=HTML))
            with clock.stage("content seen"):
                item = content_seen.process_now(item)
            with clock.stage("links"):
                item = links.process_item(item)
            with clock.stage("metadata"):
                item = metadata.process_now(item)
            if page.kind != "exact":  # the archive skips exact duplicates
                with clock.stage("archive: add"):
                    if batch is None:
                        seq += 1
                        key = object_key(settings["CRAWL_NAME"], "bench-worker", seq)
                        batch = WarcBatch(str(crawl_dir / "spool" / key), key)
                    offset, length = batch.add(_raw_page(item))
                    item["archive"] = {"key": batch.key, "offset": offset, "length": length}
            if batch is not None and (batch.size >= max_bytes or page is corpus[-1]):
                with clock.stage("archive: close (fsync)"):
                    batch.close()
                os.remove(batch.path)
                batch = None
            items.append(item)
    # every write submitted, then all awaited (many pages are in the pipelines at once)
    process, caller = time.process_time(), time.thread_time()
    futures = []
    for item in items:
        with clock.stage("UrlStore: caller"):
            futures.append(store.record_fetch(fetch_record(item)))
    concurrent.futures.wait(futures)
    clock.cpu["UrlStore: writer thread"] = (time.process_time() - process) - (time.thread_time() - caller)
    for f in futures:
        f.result()  # raises if a write failed
    store.close()
    return {name: 1000 * clock.cpu[name] / len(corpus) for name in STAGES}


def s3_puts(corpus, n: int, tmp: Path) -> dict:
    """``n`` pages (0: a full batch and 10% more) archived through WarcBatch + S3Storage
    into a SeaweedFS server on loopback."""
    settings = project_settings()
    max_bytes = int(settings["ARCHIVE_MAX_BYTES"])
    server = S3Server(tmp / "s3")
    try:
        server.start()
        os.environ.update({**server.credentials, "AWS_EC2_METADATA_DISABLED": "true"})  # this process only
        bucket = f"bench-archive-{uuid.uuid4().hex[:8]}"
        admin = server.client()
        admin.create_bucket(Bucket=bucket)
        storage = S3Storage(bucket, endpoint_url=server.endpoint, region="us-east-1")
        batch, seq, total, i = None, 0, 0, 0
        while i < (n or 4000):
            page = corpus[i % len(corpus)]
            if batch is None:
                seq += 1
                key = object_key("bench-s3", "bench-worker", seq, settings["ARCHIVE_PREFIX"])
                batch = WarcBatch(str(tmp / "s3-spool" / key), key)
            batch.add(_raw_page(make_item(f"{page.url}{'&' if '?' in page.url else '?'}copy={i}", page.body)))
            if not n and batch.size >= max_bytes:  # the first full batch
                n = int(1.1 * (i + 1)) + 1
            i += 1
            if batch.size >= max_bytes or i == (n or 4000):
                batch.close()
                total += os.path.getsize(batch.path)
                storage.put(batch.key, batch.path)
                os.remove(batch.path)
                batch = None
        n = i
        listed = sum(c.get("KeyCount", 0) for c in admin.get_paginator("list_objects_v2").paginate(Bucket=bucket))
    finally:
        server.stop(kill=True)
    return {
        "pages": n,
        "puts": storage.puts,
        "listed": listed,
        "per_1000": 1000 * storage.puts / n,
        "steady_per_1000": 1000 * (total / n) / max_bytes,  # the size bound in a long crawl
        "record_kb": total / n / 1024,
        "max_seconds": float(settings["ARCHIVE_MAX_SECONDS"]),
    }


class BigPageSite(Site):
    """crawler.demo.site's site with every ``/pN.html`` a 50-200 KB corpus-like page that
    carries the demo page's own links (the same crawl) and links to other pages of the
    site. ``prepare()`` after ``start()`` (absolute links carry the port)."""

    def prepare(self) -> None:
        rng, words = random.Random(SEED), Words(SEED + 1)
        n = self.n_hosts * self.n_pages
        sizes = [int((50 + 150 * i / max(1, n - 1)) * 1024) for i in range(n)]
        rng.shuffle(sizes)
        self.bodies = {}
        for h in range(self.n_hosts):
            for i in range(self.n_pages):
                path = f"/p{i}.html"
                inner = super().page(h, path).split("<body>", 1)[1].rsplit("</body>", 1)[0]
                self.bodies[(h, path)], _ = make_page(
                    random.Random(rng.random()),
                    words,
                    sizes[h * self.n_pages + i],
                    self.url(h, path),
                    self._href(),
                    KINDS[(h + i) % len(KINDS)],
                    embed=f'<div class="site-links">{inner}</div>',
                )

    def _href(self):
        def href(rng: random.Random, where: str) -> str:
            path = self._link_path(rng.randrange(self.n_pages))
            if where != "tag" and rng.random() < 0.2:
                return self.url(rng.randrange(self.n_hosts), path)
            return path + ("#comments" if rng.random() < 0.1 else "")

        return href

    def page(self, host_index: int, path: str) -> str | None:
        return getattr(self, "bodies", {}).get((host_index, path)) or super().page(host_index, path)


def run_crawl(mode: str, server: RedisServer, site: BigPageSite, tmp: Path, name: str) -> dict:
    """One worker crawling the site, pipelines ``on`` or ``off``: its pages, rate and CPU."""
    settings = {"CRAWL_NAME": name, "CRAWL_DIR": tmp / name, "NETWORK_GUARD_ALLOW": "127.0.0.0/8"}
    settings |= {"FRONTIER_HOST_INTERVAL": 0, "FRONTIER_IDLE_SECONDS": 2, "FRONTIER_POLL_INTERVAL": POLL_INTERVAL}
    settings |= {"CLOSESPIDER_TIMEOUT": RUN_TIMEOUT}
    if mode == "off":
        settings["ITEM_PIPELINES_BASE"] = json.dumps({"crawler.pipelines.links.FollowLinksPipeline": 150})
    env = clean_env() | {"REDIS_URL": server.url}
    return crawl_demo_site(site, tmp, name, settings, env, RUN_TIMEOUT + 30, feed=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=200, help="corpus pages")
    ap.add_argument("--passes", type=int, default=3, help="passes over the corpus (part 1)")
    ap.add_argument("--s3-pages", type=int, default=0, help="pages archived to S3 (default: a full batch and 10%%)")
    ap.add_argument("--hosts", type=int, default=120, help="site hosts, 2..200")
    ap.add_argument("--site-pages", type=int, default=5, help="pages per host, >= 5")
    ap.add_argument("--rounds", type=int, default=3, help="off+on rounds (part 3)")
    ap.add_argument("--skip-s3", action="store_true")
    ap.add_argument("--skip-crawl", action="store_true")
    args = ap.parse_args(argv)
    if not 2 <= args.hosts <= 200 or args.site_pages < 5:
        ap.error("--hosts must be 2..200, --site-pages at least 5")
    results = Results("pipelines", runs=args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench-pipes-") as tmp, RedisServer(tmp, socket_timeout=30) as server:
        tmp = Path(tmp)
        corpus = build_corpus(args.pages, SEED)
        mean = statistics.mean(len(p.body) for p in corpus)
        print(
            f"1. pipeline stages in process: {len(corpus)} pages of {mean / 1024:.0f} KB on average, {args.passes} passes"
        )
        passes = [stage_pass(corpus, server, tmp / f"stages-{i}") for i in range(args.passes)]
        for name in STAGES:
            cpu = statistics.median(p[name] for p in passes)
            print(f"  {('  ' if name.startswith('cs ') else '') + name:34}{cpu:8.3f} ms CPU a page")
            for p in passes:
                results.add(f"stage CPU a page: {name}", p[name], "ms")
        for p in passes:
            results.add(
                "stage CPU a page: every pipeline, both threads",
                sum(p[k] for k in PIPELINES) + p["UrlStore: writer thread"],
                "ms",
            )

        s3 = None
        if not args.skip_s3:
            try:
                s3 = s3_puts(corpus, args.s3_pages, tmp)
            except RuntimeError as exc:  # no S3 server here: the other parts still run
                print(f"2. S3: not measured: {exc}")
            else:
                print(
                    f"2. S3: {s3['puts']} PUTs ({s3['listed']} objects listed) for {s3['pages']} pages of {s3['record_kb']:.1f} KB "
                    f"of WARC: {s3['per_1000']:.2f} per 1,000 pages in this run, {s3['steady_per_1000']:.2f} in a long "
                    f"crawl (target <= {TARGET_PUTS:g})"
                )
                results.add("S3 PUTs per 1,000 pages, size bound", s3["steady_per_1000"], "PUTs")

        if not args.skip_crawl:
            site = BigPageSite(args.hosts, args.site_pages)
            site.start()
            try:
                site.prepare()
                print(f"3. one worker, pipelines off and on: {args.hosts} hosts x {args.site_pages} pages")
                for i in range(args.rounds):  # ABBA: off on on off ...
                    got = {}
                    for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
                        got[mode] = run = run_crawl(mode, server, site, tmp, f"run{i}-{mode}")
                        print(
                            f"  round {i + 1} {mode:3}: {run['pages']} pages, {run['rate']:.1f} pages/s, "
                            f"{run['cpu']:.2f} ms CPU a page, {run['missing']} missing, exit {run['exit']}"
                        )
                        results.add(f"one worker, pipelines {mode}", run["rate"], "pages/s")
                        results.add(f"one worker, pipelines {mode}: CPU a page", run["cpu"], "ms")
                    ratio = got["on"]["rate"] / got["off"]["rate"] if got["off"]["rate"] else 0.0
                    print(f"  round {i + 1}: on / off {ratio:.3f} (target >= {TARGET_RATIO})")
                    results.add("pages/s, pipelines on / off", ratio, "x", baseline="one worker, pipelines off")
                    if s3 is not None and i == 0:
                        age = 1000 / (got["on"]["rate"] * s3["max_seconds"])
                        print(f"  S3 PUTs per 1,000 pages at this rate, the age bound: {age:.2f}")
            finally:
                site.stop()
    results.write()
    return 0


if __name__ == "__main__":
    main()
