"""The Cassandra UrlStore measured on a live node of the run's own, beside the SQLite one.

    python -m bench.urlstore                       # every part, 1,000,000-row tables, a 60 s crawl
    python -m bench.urlstore --only writes --seconds 30
    python -m bench.urlstore --only lookups,scan --rows 100000
    python -m bench.urlstore --only serve --step-seconds 5

Needs what scripts/cassandra.py needs (Java 11 or 17; Cassandra 5.0, downloaded once by
Maven) and, for the writes, Debian's documentation packages (python3-doc nodejs-doc
rust-doc: bench/doc_crawl.py's sites). Nothing is sent anywhere but 127.0.0.0/8; every
part is bounded in time (--limit for the whole run, 3 hours by default).

What it runs:
- one Cassandra node of its own (bench/serve.py CassandraNode: scripts/cassandra.py,
  --heap 1G) on 127.0.0.1 with ports of its own (CQL --port 9342, inter-node
  --storage-port 7400, JMX --jmx-port 7600: none of the shared node's 9042/7000/7199 nor
  the cluster's 9142/7100/7250+), refused when another process holds them; its data in
  --cache/cassandra, kept between runs so that the generated keyspace is reused. Started
  after the crawl (which has the machine to itself), stopped at the end, on failure too
  (try/finally), with everything else the run started (the sites, the workers, the write
  processes, redis-servers, scrapy serve). A node just started runs cold (its JIT
  compiler): each part warms it up first, uncounted (60 + 20 s of writes, 20 s of each
  look-up, 10 s of serve's look-ups);
- the ROWS-row tables (``--rows``, 1,000,000): bench/serve.py's SQLite store (generated
  there once and reused: realistic records over 10,000 hosts of several kinds, fetched_at
  spread over the 30 days before it was made and next_fetch_at 1-30 days after that, so
  that a known share is due, counted by SQLite), plus --popular inlinks (100,000) to one
  URL (the first site's home page) from as many stored pages, added to it once; and the
  same records copied into the keyspace serve_ROWS of the node (bench/serve.py
  ensure_keyspace: CassandraUrlStore's schema, statements and values, through
  execute_concurrent, with progress lines), reused while a complete copy of that file is
  there. Both read once into the page cache before they are measured.

Parts (``--only`` some of them, comma-separated):

writes  One worker crawls the documentation sites for --seconds as bench/doc_crawl.py runs
        it (every pipeline, the SQLite UrlStore, FRONTIER_HOST_INTERVAL --interval): the
        records it wrote a second (every URL it fetched, by the fetched_at of its store's
        rows, first to last) is the page rate. Its records are read back from its store
        (outlinks and archive pointers as the crawl made them) and written again by 1 and
        by 2 worker processes (spawned, each its own store, started together) as the
        UrlStore pipeline writes them: ``record_fetch`` without the archive pointer, then
        once that write is done ``set_archive`` with it, at most --window pages in flight
        a process, for --write-seconds (then the pages in flight are waited for and
        counted), the records pass after pass under new paths (/wTkWrN/...: new rows, new
        inlinks), at most --write-records a process. Into Cassandra (keyspace
        bench_writes, made anew each run) and into SQLite (a new file a test, shared by
        both processes as workers share a crawl directory); with --unbatched (the
        default) also OneByOne, the store with a statement for each inlink instead
        of its batches, beside it. Figures: records/s, records/s over the page rate (the goal:
        2x or more), the node's CPU (utime + stime of the JVM, /proc/PID/stat, over the
        test) and the write processes' own CPU (getrusage) a record.
lookups ``get`` of a stored URL (the read API's record, following canonical_url) and
        ``last_fetched`` of 100 URLs (the fetch policy's batch; --unknown of them not
        stored), one call after the other, p50/p99/mean, on the ROWS-row tables, and the
        CPU a call of the caller (this process) and of the node; Cassandra through
        CassandraUrlStore as scrapy serve opens it (CASSANDRA_APPLY_SCHEMA off), SQLite
        through SqliteReader.
scan    The recrawl's due scan: ``UrlStore.due(now, 500, cursor)`` called to the end as
        crawler/freshness/recrawl.py does (without the frontier's put): seconds, due rows/s, table
        rows/s, the first, median and slowest call, both stores' counts checked against
        SQLite's count of due rows (a scan is stopped after --scan-seconds, and reported
        so); then the popular URL's inlinks paged by 1000 with the cursor
        (``inlinks(url, 1000, after)``) to the end.
serve   bench/serve.py on both backends in one run: ``scrapy serve`` on the SQLite store,
        then on the keyspace, open-loop steps of record look-ups and of batch look-ups
        (from 25/s and 1 batch/s: Cassandra answers slower); the highest rates with
        p99 <= 50 ms.

At the end, the command, the load average and one table of every figure, Cassandra beside
SQLite with their ratio (C / S).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import resource
import shlex
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench import serve
from crawler.urlstore.record import ArchivePointer, FetchRecord
from testing.cassandra import PORTS, CassandraNodes, ensure_keyspace, keyspace_name
from testing.sampling import percentile
from testing.urlstore import prepare_store, sample_urls, unknown_urls

ROOT = Path(__file__).resolve().parents[1]

PARTS = ("writes", "lookups", "scan", "serve")
CACHE = Path.home() / ".cache" / "crawler-bench"
WRITES_KEYSPACE = "bench_writes"
SCAN_PAGE = 500  # crawler/freshness/recrawl.py PAGE
INLINKS_PAGE = 1000
INLINK_BUCKETS = 16
# serve's steps: bench/serve.py's, with lower ones first (Cassandra's answers are slower)
SERVE_RATES = "25,50,100,250,500,750,1000,1250,1500,2000,2500,3000,4000,5000,6000,8000"
SERVE_BATCH_RATES = "1,2,5,10,20,30,40,60"
READY_TIMEOUT = 120.0  # seconds for a write process to connect and prepare its records
WRITE_TIMEOUT = 900.0  # seconds a write test may take
WARM_SECONDS = 60.0  # of writes to the node before the write tests (its JIT compiler; and a third more one by one)
WARM_LOOKUPS = 20.0  # seconds of each kind of look-up before they are timed


def project_settings(**overrides):
    """The project's default settings (settings/local.py), with ``overrides``."""
    from scrapy.settings import Settings

    settings = Settings()
    settings.setmodule("settings.local", priority="project")
    for name, value in overrides.items():
        settings.set(name, value, priority="cmdline")
    return settings


def open_store(backend: str, node_settings: dict | None = None, path: Path | None = None, readonly: bool = False):
    """A store as the crawl opens it: Cassandra from settings (``node_settings``), or SQLite
    at ``path`` (SqliteReader when ``readonly``)."""
    from crawler.urls import url_options
    from crawler.urlstore.backends import urlstore_from_settings

    if backend == "cassandra":
        return urlstore_from_settings(project_settings(**node_settings), readonly=readonly)
    if backend == "one-by-one":  # the store without its batches of inlinks, for comparison
        settings = project_settings(**node_settings)
        return OneByOne.from_settings(settings, url_options(settings))
    settings = project_settings(URLSTORE_SQLITE_PATH=str(path))
    if readonly:
        from crawler.urlstore.sqlite_reader import SqliteReader

        return SqliteReader(str(path), url_options(settings))
    return urlstore_from_settings(settings)


class OneByOne:
    """CassandraUrlStore with a statement for each inlink of a page instead of its UNLOGGED
    batches (``_inlink_batches``): what the batches save, measured beside them. Made a
    subclass at first use (the driver is imported then)."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("use OneByOne.from_settings")

    @classmethod
    def from_settings(cls, settings, url_options):
        from crawler.urlstore.cassandra import CassandraUrlStore

        class Unbatched(CassandraUrlStore):
            def _inlink_batches(self, rows):
                return [(self._inlink_stmt, row) for row in rows]

        return Unbatched.from_settings(settings, url_options)


# -- the crawl and its records -------------------------------------------------------------


@dataclass
class CrawlResult:
    records: list[FetchRecord]
    pointers: int  # records with an archive pointer
    span: float  # seconds from the first fetch to the last
    pages_200: int
    cpu: tuple[float, float]  # the worker's CPU seconds (user, system)
    exit: str

    @property
    def rate(self) -> float:
        """Records the crawl wrote a second (every URL it fetched, whatever its answer)."""
        return len(self.records) / self.span if self.span else float("nan")

    @property
    def rate_200(self) -> float:
        return self.pages_200 / self.span if self.span else float("nan")


def run_crawl(seconds: float, interval: float) -> CrawlResult:
    """One worker on the documentation sites (bench/doc_crawl.py's crawl), its records read
    back from its SQLite UrlStore."""
    from doc_crawl import crawl, served_sites

    with served_sites(False, "bench-urlstore-crawl-") as (sites, work):
        print(f"crawl: 1 worker, {seconds:g} s, FRONTIER_HOST_INTERVAL {interval:g} s, the SQLite UrlStore", flush=True)
        ended, cpu = crawl(sites, 1, seconds, interval, work)
        took, code = ended[0]
        store = work / "crawl" / "doc-crawl" / "urlstore.sqlite"
        if not store.exists():
            raise SystemExit(f"the crawl wrote no UrlStore (worker: {code}); its log: {work / 'worker-0.log'}")
        records = read_records(store)
    times = sorted(r.fetched_at for r in records if r.fetched_at)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return CrawlResult(
        records=records,
        pointers=sum(r.archive is not None for r in records),
        span=span,
        pages_200=sum(r.status == 200 for r in records),
        cpu=cpu,
        exit=f"ended after {took:.0f} s, " + (f"exit code {code}" if code is not None else "killed"),
    )


def read_records(path: Path) -> list[FetchRecord]:
    """Every record of an SQLite UrlStore as the crawl wrote it."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    out = []
    try:
        for row in db.execute("SELECT * FROM urls ORDER BY fetched_at"):
            r = dict(row)
            archive = ArchivePointer(r["archive_key"], r["archive_offset"], r["archive_length"])
            out.append(
                FetchRecord(
                    url=r["url"],
                    fate=r["fate"],
                    fetched_at=r["fetched_at"],
                    status=r["status"],
                    error=r["error"],
                    final_url=r["final_url"],
                    redirect_chain=json.loads(r["redirect_chain"] or "[]"),
                    canonical_url=r["canonical_url"],
                    near_duplicate_of=r["near_duplicate_of"],
                    resemblance=r["resemblance"],
                    content_digest=r["content_digest"],
                    simhash=r["simhash"] + (1 << 64) if r["simhash"] is not None and r["simhash"] < 0 else r["simhash"],
                    metadata=json.loads(r["metadata"] or "{}"),
                    archive=archive if r["archive_key"] else None,
                    outlinks=json.loads(r["outlinks"] or "[]"),
                    next_fetch_at=r["next_fetch_at"],
                    fetch_interval=r["fetch_interval"],
                    etag=r["etag"],
                    last_modified=r["last_modified"],
                )
            )
    finally:
        db.close()
    return out


_ORIGIN = re.compile(r"^(https?://[^/]+)/")


def renamed(record: FetchRecord, prefix: str) -> FetchRecord:
    """The record with every URL of its site moved under /PREFIX/ (a new row, new inlinks)."""

    def move(url):
        return _ORIGIN.sub(rf"\1/{prefix}/", url, count=1) if url else url

    return replace(
        record,
        url=move(record.url),
        final_url=move(record.final_url),
        canonical_url=move(record.canonical_url),
        near_duplicate_of=move(record.near_duplicate_of),
        redirect_chain=[move(u) for u in record.redirect_chain],
        outlinks=[{**link, "url": move(link["url"])} for link in record.outlinks],
    )


# -- the write path, in processes of its own -------------------------------------------------


def writer_main(conn, backend: str, node_settings: dict | None, path: str | None, plan: dict):
    """A worker's write path: the UrlStore pipeline's two writes per page (record_fetch
    without the pointer, then set_archive once it is done), at most ``plan["window"]`` pages
    in flight, for ``plan["seconds"]`` (then the pages in flight are waited for) or
    ``plan["cap"]`` pages: the crawl's records, pass after pass under /PREFIXrN/ (made
    before the start). Reports records, seconds and its own CPU."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    store = open_store(backend, node_settings, Path(path) if path else None)
    pages = []
    for n in range(plan["cap"] // len(plan["records"]) + 1):
        for record in plan["records"][: plan["cap"] - len(pages)]:
            record = renamed(record, f"{plan['prefix']}r{n}")
            pointer, record.archive = record.archive, None
            pages.append((record, pointer))
    window, seconds = plan["window"], plan["seconds"]
    conn.send("ready")
    if conn.recv() != "go":
        store.close()
        return
    slots = threading.Semaphore(window)
    lock = threading.Lock()
    finished = threading.Event()
    stopped = threading.Event()  # no more pages
    left = [0]  # pages in flight
    sent = 0
    failed: list[str] = []

    def page_done(future):
        if future.exception() is not None:
            failed.append(repr(future.exception()))
        slots.release()
        with lock:
            left[0] -= 1
            if left[0] == 0 and stopped.is_set():
                finished.set()

    def recorded(future, url, pointer):
        if future.exception() is not None or pointer is None:
            page_done(future)
        else:
            store.set_archive(url, pointer).add_done_callback(page_done)

    usage0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for record, pointer in pages:
        slots.acquire()
        if time.perf_counter() - t0 > seconds:
            break
        with lock:
            left[0] += 1
        sent += 1
        store.record_fetch(record).add_done_callback(lambda f, u=record.url, p=pointer: recorded(f, u, p))
    with lock:
        stopped.set()
        if left[0] == 0:
            finished.set()
    finished.wait(WRITE_TIMEOUT)
    took = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage1.ru_utime - usage0.ru_utime + usage1.ru_stime - usage0.ru_stime
    store.close()
    conn.send({"records": sent - left[0], "seconds": took, "cpu": cpu, "failed": len(failed), "error": failed[:1]})


@dataclass
class WriteResult:
    backend: str
    workers: int
    records: int
    seconds: float
    worker_cpu: float
    node_cpu: float  # the Cassandra node's CPU seconds over the test (nan for SQLite)
    failed: int
    errors: list = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def write_test(
    backend: str,
    workers: int,
    plan: dict,
    node: CassandraNodes | None,
    path: Path | None,
) -> WriteResult:
    """``workers`` processes write at once, each as ``plan`` says (writer_main) under a
    prefix of its own."""
    context = multiprocessing.get_context("spawn")
    node_settings = node.settings(WRITES_KEYSPACE) if backend != "sqlite" else None
    if node_settings:
        node_settings["CASSANDRA_APPLY_SCHEMA"] = False  # made before (no two processes making it at once)
    procs, pipes = [], []
    try:
        for n in range(workers):
            parent, child = context.Pipe()
            mine = {**plan, "prefix": f"{plan['prefix']}k{n}"}
            proc = context.Process(
                target=writer_main,
                args=(child, backend, node_settings, str(path) if path else None, mine),
                daemon=True,
            )
            proc.start()
            procs.append(proc)
            pipes.append(parent)
        for pipe in pipes:
            if not pipe.poll(READY_TIMEOUT) or pipe.recv() != "ready":
                raise SystemExit(f"a {backend} write process did not get ready in {READY_TIMEOUT:.0f} s")
        node0 = node.cpu_seconds() if backend != "sqlite" else float("nan")
        for pipe in pipes:
            pipe.send("go")
        results = []
        for pipe in pipes:
            if not pipe.poll(WRITE_TIMEOUT + 60):
                raise SystemExit(f"a {backend} write process did not report in {WRITE_TIMEOUT:.0f} s")
            results.append(pipe.recv())
        node1 = node.cpu_seconds() if backend != "sqlite" else float("nan")
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(10)
    written = sum(r["records"] for r in results)
    return WriteResult(
        backend=backend,
        workers=workers,
        records=written,
        seconds=max(r["seconds"] for r in results),
        worker_cpu=sum(r["cpu"] for r in results),
        node_cpu=node1 - node0,
        failed=sum(r["failed"] for r in results),
        errors=[e for r in results for e in r["error"]],
    )


def run_writes(args, crawl: CrawlResult, node: CassandraNodes, work: Path) -> list[WriteResult]:
    records = crawl.records
    links = sum(len(r.outlinks) for r in records) / len(records)
    print(
        f"\nwrites: the crawl's {len(records):,} records ({links:.1f} outlinks a record, {crawl.pointers:,} with an "
        f"archive pointer), pass after pass under new paths, for {args.write_seconds:g} s (or {args.write_records:,} "
        f"records) a worker, at most {args.window} pages in flight per worker"
    )
    cluster = node.cluster()
    try:
        session = cluster.connect()
        from crawler.urlstore.cassandra_cluster import schema_statements

        session.execute(f"DROP KEYSPACE IF EXISTS {WRITES_KEYSPACE}", timeout=300)
        for statement in schema_statements(WRITES_KEYSPACE):
            session.execute(statement, timeout=120)
    finally:
        cluster.shutdown()
    plan = {"records": records, "window": args.window, "seconds": args.write_seconds, "cap": args.write_records}
    warm = [write_test("cassandra", 1, {**plan, "seconds": WARM_SECONDS, "prefix": "warm"}, node, None)]
    if args.unbatched:
        warm.append(write_test("one-by-one", 1, {**plan, "seconds": WARM_SECONDS / 3, "prefix": "warmb"}, node, None))
    print(
        f"  (warm-up of the node, its JIT compiler: {sum(w.records for w in warm):,} records in "
        f"{sum(w.seconds for w in warm):.0f} s, not counted)"
    )
    results = []
    tests = [("cassandra", 1), ("cassandra", 2), ("sqlite", 1), ("sqlite", 2)]
    if args.unbatched:
        tests += [("one-by-one", 1), ("one-by-one", 2)]
    for test, (backend, workers) in enumerate(tests, 1):
        path = work / f"writes-{test}.sqlite" if backend == "sqlite" else None
        result = write_test(backend, workers, {**plan, "prefix": f"w{test}"}, node, path)
        results.append(result)
        node_part = (
            f", node {result.node_cpu / result.records * 1000:.2f} ms CPU a record" if backend != "sqlite" else ""
        )
        label = backend
        print(
            f"  {label:10} {workers} worker(s): {result.records:,} records in {result.seconds:.1f} s = "
            f"{result.rate:,.1f}/s ({result.rate / crawl.rate:.1f}x the crawl's {crawl.rate:.1f}/s); "
            f"workers {result.worker_cpu / result.records * 1000:.2f} ms CPU a record{node_part}"
            + (f"; {result.failed} FAILED: {result.errors[:1]}" if result.failed else ""),
            flush=True,
        )
        if path is not None:
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
    return results


# -- the 1M-row tables ---------------------------------------------------------------------


def popular_target(store: Path) -> str:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return db.execute("SELECT url FROM urls ORDER BY rowid LIMIT 1").fetchone()[0]
    finally:
        db.close()


def ensure_popular(store: Path, count: int, seed: int) -> tuple[str, int]:
    """--popular inlinks to the store's first URL (its first site's home page) from as many
    stored pages, added to the SQLite store unless there: (the URL, its inlinks)."""
    target = popular_target(store)
    db = sqlite3.connect(store, timeout=60)
    try:
        have = db.execute("SELECT count(*) FROM inlinks WHERE target_url = ?", (target,)).fetchone()[0]
        if have >= count:
            return target, have
        top = db.execute("SELECT max(rowid) FROM urls").fetchone()[0]
        rng = random.Random(seed + 3)
        ids = rng.sample(range(2, top + 1), min(count, top - 1))
        t0 = time.monotonic()
        with db:
            for k in range(0, len(ids), 500):
                part = ids[k : k + 500]
                marks = ",".join("?" * len(part))
                sources = [u for (u,) in db.execute(f"SELECT url FROM urls WHERE rowid IN ({marks})", part)]
                db.executemany(
                    "INSERT OR REPLACE INTO inlinks (target_url, bucket, source_url, anchor_text, nofollow) "
                    "VALUES (?, ?, ?, ?, 0)",
                    [(target, zlib.crc32(s.encode()) % INLINK_BUCKETS, s, "Home") for s in sources],
                )
        have = db.execute("SELECT count(*) FROM inlinks WHERE target_url = ?", (target,)).fetchone()[0]
        print(f"store: {have:,} inlinks to {target} added in {time.monotonic() - t0:.1f} s")
        return target, have
    finally:
        db.close()


def serve_args(args) -> argparse.Namespace:
    """bench/serve.py's options for this run."""
    argv = [
        "--records",
        str(args.rows),
        "--store",
        str(args.store),
        "--backends",
        "sqlite,cassandra",
        "--step-seconds",
        str(args.step_seconds),
        "--cassandra-dir",
        str(args.cache / "cassandra"),
        "--cassandra-port",
        str(args.port),
        "--cassandra-storage-port",
        str(args.storage_port),
        "--cassandra-jmx-port",
        str(args.jmx_port),
        "--cassandra-heap",
        args.heap,
        "--unknown",
        str(args.unknown),
    ]
    argv += ["--rates", args.rates or SERVE_RATES, "--batch-rates", args.batch_rates or SERVE_BATCH_RATES]
    parser = serve.build_parser()
    parsed = parser.parse_args(argv)
    serve.check_args(parser, parsed)
    return parsed


# -- look-ups and scans ----------------------------------------------------------------------


@dataclass
class Timing:
    times: list[float]
    node_cpu: float = float("nan")  # seconds of the node's CPU over them
    cpu: float = float("nan")  # seconds of this process's CPU over them (the caller's: a worker, a server)

    @property
    def p50(self) -> float:
        return percentile(self.times, 0.5)

    @property
    def p99(self) -> float:
        return percentile(self.times, 0.99)

    @property
    def mean(self) -> float:
        return sum(self.times) / len(self.times)


def timed(call, args: list, node: CassandraNodes | None) -> Timing:
    """``call(arg)`` for each of ``args``, one after the other, each timed."""
    node0 = node.cpu_seconds() if node else float("nan")
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    times = []
    for arg in args:
        t0 = time.perf_counter()
        call(arg)
        times.append(time.perf_counter() - t0)
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage1.ru_utime - usage0.ru_utime + usage1.ru_stime - usage0.ru_stime
    return Timing(times, (node.cpu_seconds() - node0) if node else float("nan"), cpu)


def run_lookups(args, node: CassandraNodes) -> dict:
    """get and last_fetched(100) on each backend: {(backend, what): Timing}."""
    known = sample_urls(args.store, 50_000, args.seed)
    unknown = unknown_urls(known, 10_000, args.seed)
    rng = random.Random(args.seed + 5)
    gets = [rng.choice(known) for _ in range(args.lookups)]
    batches = [
        [rng.choice(unknown) if rng.random() < args.unknown else rng.choice(known) for _ in range(100)]
        for _ in range(args.batches)
    ]
    out = {}
    print(
        f"\nlook-ups on {args.rows:,} rows, one at a time: get x {args.lookups:,} (stored URLs), "
        f"last_fetched of 100 URLs x {args.batches:,} ({args.unknown:.0%} not stored)"
    )
    for backend in ("cassandra", "sqlite"):
        store = open_store(backend, node.settings(keyspace_name(args.rows)), args.store, readonly=True)
        of = node if backend == "cassandra" else None
        try:
            for call, pool in ((store.get, known[-5000:]), (store.last_fetched, batches)):
                deadline = time.monotonic() + WARM_LOOKUPS  # warm-up: connections, statements, caches, JIT
                while time.monotonic() < deadline:
                    call(rng.choice(pool))
            found = sum(store.get(url) is not None for url in gets[:200])
            if found != 200:
                raise SystemExit(f"{backend}: {200 - found} of 200 stored URLs not found by get")
            out[backend, "get"] = timed(store.get, gets, of)
            out[backend, "last_fetched"] = timed(store.last_fetched, batches, of)
        finally:
            store.close()
        for what in ("get", "last_fetched"):
            t = out[backend, what]
            node_part = f", node {t.node_cpu / len(t.times) * 1e6:,.0f} us" if of else ""
            print(
                f"  {backend:9} {what:12}: p50 {t.p50 * 1000:.2f} ms, p99 {t.p99 * 1000:.2f} ms, "
                f"mean {t.mean * 1000:.2f} ms; CPU a call: caller {t.cpu / len(t.times) * 1e6:,.0f} us{node_part}",
                flush=True,
            )
    return out


def expected_due(store: Path, before: float) -> int:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM urls WHERE next_fetch_at <= ?", (before,)).fetchone()[0]
    finally:
        db.close()


def run_scan(args, node: CassandraNodes, target: str, inlinks: int) -> dict:
    """The due scan and the inlinks paging on each backend: {(backend, what): (seconds,
    rows, calls, node CPU seconds)}."""
    before = time.time()
    due = expected_due(args.store, before)
    print(
        f"\nscan: UrlStore.due(now, {SCAN_PAGE}, cursor) to the end ({due:,} of {args.rows:,} rows due, "
        f"by SQLite's count); inlinks({target}, {INLINKS_PAGE}, after) to the end ({inlinks:,} inlinks)"
    )
    out = {}
    for backend in ("cassandra", "sqlite"):
        store = open_store(backend, node.settings(keyspace_name(args.rows)), args.store, readonly=True)
        of = node if backend == "cassandra" else None
        try:
            node0 = of.cpu_seconds() if of else float("nan")
            t0, rows, calls, cursor, times = time.perf_counter(), 0, 0, None, []
            complete = True
            while True:
                c0 = time.perf_counter()
                page, cursor = store.due(before, SCAN_PAGE, cursor)
                times.append(time.perf_counter() - c0)
                rows, calls = rows + len(page), calls + 1
                if cursor is None:
                    break
                if time.perf_counter() - t0 > args.scan_seconds:  # bounded: what it read so far
                    complete = False
                    break
            took = time.perf_counter() - t0
            out[backend, "due"] = (took, rows, calls, (of.cpu_seconds() - node0) if of else float("nan"), complete)
            if complete:
                check = "" if rows == due else f"  MISMATCH: {due:,} due by SQLite's count"
                rates = f"{rows / took:,.0f} due rows/s, {args.rows / took:,.0f} table rows/s{check}"
            else:
                rates = (
                    f"STOPPED after --scan-seconds {args.scan_seconds:g}: {rows:,} of {due:,} due rows read, "
                    f"{rows / took:,.0f} due rows/s so far"
                )
            print(
                f"  {backend:9} due scan: {rows:,} due rows in {took:.1f} s ({calls:,} calls: the first "
                f"{times[0] * 1000:,.0f} ms, median {percentile(times, 0.5) * 1000:,.0f} ms, slowest "
                f"{max(times) * 1000:,.0f} ms) = {rates}",
                flush=True,
            )
            node0 = of.cpu_seconds() if of else float("nan")
            t0, links, pages, after = time.perf_counter(), 0, 0, None
            while True:
                page = store.inlinks(target, INLINKS_PAGE, after)
                links, pages = links + len(page), pages + 1
                if len(page) < INLINKS_PAGE:
                    break
                after = page[-1]["url"]
            took = time.perf_counter() - t0
            out[backend, "inlinks"] = (took, links, pages, (of.cpu_seconds() - node0) if of else float("nan"))
            check = "" if links == inlinks else f"  MISMATCH: {inlinks:,} stored"
            print(
                f"  {backend:9} inlinks: {links:,} in {pages} pages in {took:.2f} s = {pages / took:,.1f} pages/s, "
                f"{links / took:,.0f} inlinks/s{check}",
                flush=True,
            )
        finally:
            store.close()
    return out


# -- the report -----------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    if a != a or b != b or not b:
        return "-"
    return f"{a / b:.2f}x"


def report(args, crawl, writes, lookups, scans, served) -> None:
    def cell(value) -> str:
        return value if isinstance(value, str) else "-" if value is None or value != value else f"{value:,.0f}"

    lines: list[tuple[str, str, str, str]] = []  # what, Cassandra, SQLite, Cassandra / SQLite

    def add(what, c, s, r=None):
        lines.append((what, cell(c), cell(s), r if r is not None else "-"))

    if crawl is not None and writes:
        add(
            f"crawl, 1 worker: records/s ({crawl.rate_200:.1f} pages/s answered 200) = the page rate",
            f"{crawl.rate:.1f}",
            f"{crawl.rate:.1f}",
        )
        by = {(w.backend, w.workers): w for w in writes}
        for workers in (1, 2):
            c, s = by[("cassandra", workers)], by[("sqlite", workers)]
            add(
                f"write path, {workers} worker(s): records/s", f"{c.rate:,.1f}", f"{s.rate:,.1f}", ratio(c.rate, s.rate)
            )
            add("  / the page rate (goal >= 2x)", f"{c.rate / crawl.rate:.2f}x", f"{s.rate / crawl.rate:.2f}x")
            add("  Cassandra node CPU a record (ms)", f"{c.node_cpu / c.records * 1000:.2f}", "-")
            add(
                "  worker CPU a record (ms)",
                f"{c.worker_cpu / c.records * 1000:.2f}",
                f"{s.worker_cpu / s.records * 1000:.2f}",
                ratio(c.worker_cpu / c.records, s.worker_cpu / s.records),
            )
        for workers in (1, 2):
            b, c = by.get(("one-by-one", workers)), by[("cassandra", workers)]
            if b is None:
                continue
            add(
                f"inlinks a statement each, {workers} worker(s): records/s (C / S: vs. the batches)",
                f"{b.rate:,.1f}",
                "-",
                ratio(b.rate, c.rate),
            )
            add("  / the page rate (goal >= 2x)", f"{b.rate / crawl.rate:.2f}x", "-")
            add(
                "  Cassandra node CPU a record (ms)",
                f"{b.node_cpu / b.records * 1000:.2f}",
                "-",
                ratio(b.node_cpu / b.records, c.node_cpu / c.records),
            )
            add(
                "  worker CPU a record (ms)",
                f"{b.worker_cpu / b.records * 1000:.2f}",
                "-",
                ratio(b.worker_cpu / b.records, c.worker_cpu / c.records),
            )
    if lookups:
        for what, label in (("get", "get by URL"), ("last_fetched", "last_fetched of 100 URLs")):
            c, s = lookups["cassandra", what], lookups["sqlite", what]
            add(f"{label}: p50 (ms)", f"{c.p50 * 1000:.2f}", f"{s.p50 * 1000:.2f}", ratio(c.p50, s.p50))
            add(f"{label}: p99 (ms)", f"{c.p99 * 1000:.2f}", f"{s.p99 * 1000:.2f}", ratio(c.p99, s.p99))
            add(
                "  the caller's CPU a call (ms)",
                f"{c.cpu / len(c.times) * 1000:.2f}",
                f"{s.cpu / len(s.times) * 1000:.2f}",
                ratio(c.cpu, s.cpu),
            )
            add("  the node's CPU a call (ms)", f"{c.node_cpu / len(c.times) * 1000:.2f}", "-")
    if served:
        for index, label, unit in ((0, "scrapy serve record look-ups/s at p99 <= 50 ms", 1), (1, "", args.batch)):
            label = label or f"scrapy serve batch look-ups ({args.batch} URLs), URLs/s at p99 <= 50 ms"
            steps = {b: served.get(b, ([], []))[index] for b in serve.BACKENDS}
            best = {b: serve.p99_rate(steps[b], unit) for b in serve.BACKENDS}
            rates = {b: best[b].offered * unit if best[b] else float("nan") for b in best}
            shown = {
                b: f"{rates[b]:,.0f}" if best[b] else f"< {min(r.offered for r in steps[b]) * unit:,.0f}"
                for b in serve.BACKENDS
                if steps[b]
            }
            if shown:
                add(label, shown.get("cassandra"), shown.get("sqlite"), ratio(rates["cassandra"], rates["sqlite"]))
    if scans:
        c, s = scans["cassandra", "due"], scans["sqlite", "due"]

        def secs(d):
            return f"{d[0]:.1f}" if d[4] else f"> {d[0]:.0f} (stopped)"

        add(f"due scan of {args.rows:,} rows: seconds", secs(c), secs(s), ratio(c[0], s[0]) if c[4] and s[4] else "-")
        add("  due rows/s", c[1] / c[0], s[1] / s[0], ratio(c[1] / c[0], s[1] / s[0]))
        add(
            "  table rows/s",
            args.rows / c[0] if c[4] else None,
            args.rows / s[0] if s[4] else None,
            ratio(s[0], c[0]) if c[4] and s[4] else "-",
        )
        c, s = scans["cassandra", "inlinks"], scans["sqlite", "inlinks"]
        add(f"inlinks paging, {c[1]:,} by {INLINKS_PAGE}: seconds", f"{c[0]:.2f}", f"{s[0]:.2f}", ratio(c[0], s[0]))
        add("  pages/s", f"{c[2] / c[0]:.1f}", f"{s[2] / s[0]:.1f}", ratio(c[2] / c[0], s[2] / s[0]))
    if not lines:
        return
    width = max(len(line[0]) for line in lines)
    print(f"\n{'':{width}}  {'Cassandra':>12}  {'SQLite':>12}  {'C / S':>7}")
    for what, c, s, r in lines:
        print(f"{what:{width}}  {c:>12}  {s:>12}  {r:>7}")


class Overdue(Exception):
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(PARTS), help=f"parts, comma-separated: {', '.join(PARTS)}")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the look-up, scan and serve tables")
    parser.add_argument("--seconds", type=float, default=60.0, help="the crawl's CLOSESPIDER_TIMEOUT")
    parser.add_argument("--interval", type=float, default=0.05, help="the crawl's FRONTIER_HOST_INTERVAL")
    parser.add_argument("--write-seconds", type=float, default=30.0, help="seconds of writes a test")
    parser.add_argument("--write-records", type=int, default=5000, help="records a worker writes at most a test")
    parser.add_argument("--window", type=int, default=64, help="pages in flight per write process")
    parser.add_argument("--lookups", type=int, default=3000, help="gets timed per backend")
    parser.add_argument("--batches", type=int, default=500, help="last_fetched batches timed per backend")
    parser.add_argument("--unknown", type=float, default=0.2, help="share of URLs not stored (batches, serve)")
    parser.add_argument("--popular", type=int, default=100_000, help="inlinks of the popular URL")
    parser.add_argument(
        "--scan-seconds", type=float, default=3000.0, help="scan: a due scan stops after this (reported as stopped)"
    )
    parser.add_argument("--step-seconds", type=float, default=10.0, help="serve: seconds a step")
    parser.add_argument("--rates", help=f"serve: record look-ups/s of the steps (default {SERVE_RATES})")
    parser.add_argument("--batch-rates", help=f"serve: batches/s of the batch steps (default {SERVE_BATCH_RATES})")
    parser.add_argument("--batch", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, default=CACHE, help="the node's data: CACHE/cassandra")
    parser.add_argument(
        "--store", type=Path, default=Path("/tmp/bench-serve/bench/urlstore.sqlite"), help="bench/serve.py's store"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=PORTS[0], help="the node's CQL port")
    parser.add_argument("--storage-port", type=int, default=PORTS[1])
    parser.add_argument("--jmx-port", type=int, default=PORTS[2])
    parser.add_argument("--heap", default="1G")
    parser.add_argument(
        "--unbatched",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="writes: also the store with a statement for each inlink (OneByOne), 1 and 2 workers",
    )
    parser.add_argument("--keep-node", action="store_true", help="leave the node running at the end (for the next run)")
    parser.add_argument("--limit", type=float, default=3 * 3600.0, help="seconds the whole run may take")
    args = parser.parse_args()
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    if not parts or parts - set(PARTS):
        parser.error(f"--only: some of {', '.join(PARTS)}")
    args.cache = args.cache.expanduser().resolve()
    args.store = args.store.resolve()
    if args.store.name != "urlstore.sqlite":
        parser.error("--store must be CRAWL_DIR/CRAWL_NAME/urlstore.sqlite")

    def overdue(signum, frame):
        raise Overdue(f"stopped: the run took longer than --limit {args.limit:.0f} s")

    signal.signal(signal.SIGALRM, overdue)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
    signal.alarm(int(args.limit))
    command = "python -m bench.urlstore " + shlex.join(sys.argv[1:])
    print(f"$ {command}")
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} cores, load average "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    node = CassandraNodes(args.cache / "cassandra", 1, args.port, args.storage_port, args.jmx_port, args.heap)
    work = Path(tempfile.mkdtemp(prefix="bench-urlstore-"))
    crawl = None
    writes = lookups = scans = served = None
    target, inlinks = "", 0
    try:
        if "writes" in parts:  # first, before the node runs: the crawl has the machine
            crawl = run_crawl(args.seconds, args.interval)
            print(
                f"crawl: {len(crawl.records):,} records ({crawl.pages_200:,} answered 200, {crawl.pointers:,} with an "
                f"archive pointer) over {crawl.span:.1f} s: {crawl.rate:.1f} records/s, {crawl.rate_200:.1f} pages/s "
                f"answered 200; worker {crawl.exit}, CPU {crawl.cpu[0]:.0f} s user + {crawl.cpu[1]:.0f} s system; "
                f"{sum(len(r.outlinks) for r in crawl.records) / max(1, len(crawl.records)):.0f} outlinks a record "
                "(an inlink row each)"
            )
            if not crawl.records:
                raise SystemExit("the crawl wrote no record")
        took = node.start()
        print(f"\ncassandra: node in {node.dir} on 127.0.0.1:{node.port} (pid {node.pid()}), up in {took:.0f} s")
        if parts & {"lookups", "scan", "serve"}:
            sargs = serve_args(args)
            prepare_store(sargs.store, sargs.records, sargs.hosts, sargs.seed, sargs.cold)
            target, inlinks = ensure_popular(args.store, args.popular, args.seed)
            ensure_keyspace(node, args.store, keyspace_name(args.rows))
            print(
                f"cassandra: keyspace {keyspace_name(args.rows)} read once into the page cache in "
                f"{node.warm(keyspace_name(args.rows)):.1f} s"
            )
        if "writes" in parts:
            writes = run_writes(args, crawl, node, work)
            cluster = node.cluster()
            try:
                print(f"  (flushed and compacted after the writes in {node.settle(cluster.connect()):.0f} s)")
            finally:
                cluster.shutdown()
        if "lookups" in parts:
            lookups = run_lookups(args, node)
        if "scan" in parts:
            scans = run_scan(args, node, target, inlinks)
        if "serve" in parts:
            print("\nserve: bench/serve.py on both backends")
            served = serve.run(sargs, node)
            print()
            serve.print_summary(served, sargs.batch)
        print(f"\n$ {command}")
        print(
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}, load average at the end "
            + ", ".join(f"{x:.2f}" for x in os.getloadavg())
            + f" on {os.cpu_count()} cores"
        )
        report(args, crawl, writes, lookups, scans, served)
    except Overdue as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
        if not args.keep_node:
            node.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
