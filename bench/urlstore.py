"""The Cassandra UrlStore on a node of the run's own (testing/cassandra.py), beside the SQLite one.

    python -m bench.urlstore                       # every part, 1,000,000-row tables, a 60 s crawl
    python -m bench.urlstore --only lookups,scan --rows 100000

Needs scripts/cassandra.py's Cassandra, and for the writes the documentation sites of
testing/docsites.py. The tables: bench/serve.py's generated SQLite store of --rows records,
with --popular inlinks to its first URL, copied into the node (kept in --cassandra-dir).
Each part warms the node up first (--warm s). Parts (``--only``):

writes  the records of a --seconds crawl (its records a second: the page rate) written
        again by 1 and 2 processes as the UrlStore pipeline writes them, --window in
        flight, for --write-seconds, into Cassandra and SQLite: records/s, / the page
        rate (goal 2x), the writers' and the node's CPU a record.
lookups ``get`` of a stored URL and ``last_fetched`` of 100 URLs: p50/p99, CPU a call.
scan    the recrawl's due scan to the end, and the popular URL's inlinks by 1,000.
serve   bench/serve.py on both backends: the highest rates answered with p99 <= 50 ms.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import re
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, fields, replace
from pathlib import Path

from bench import serve
from bench.doc_crawl import crawl
from bench.results import Results
from crawler.urlstore.record import ArchivePointer, FetchRecord
from testing.cassandra import CACHE_DIR, PORTS, CassandraNodes, ensure_keyspace, keyspace_name
from testing.docsites import served_sites
from testing.sampling import percentile
from testing.urlstore import prepare_store, sample_urls, unknown_urls

PARTS = ("writes", "lookups", "scan", "serve")
WRITES_KEYSPACE = "bench_writes"
SCAN_PAGE, INLINKS_PAGE, INLINK_BUCKETS = 500, 1000, 16  # recrawl.py's page; inlink buckets' default
SERVE_RATES = "25,50,100,250,500,750,1000,1250,1500,2000,2500,3000,4000,5000,6000,8000"
SERVE_BATCH_RATES = "1,2,5,10,20,30,40,60"
READY_TIMEOUT, WRITE_TIMEOUT = 120.0, 900.0  # seconds


def open_store(backend: str, node_settings: dict | None = None, path: Path | None = None, readonly: bool = False):
    """A store as the crawl (or with ``readonly`` scrapy serve) opens it."""
    from scrapy.settings import Settings

    from crawler.urls import url_options
    from crawler.urlstore.backends import urlstore_from_settings
    from crawler.urlstore.sqlite_reader import SqliteReader

    settings = Settings()
    settings.setmodule("settings.local", priority="project")
    overrides = node_settings if backend == "cassandra" else {"URLSTORE_SQLITE_PATH": str(path)}
    for name, value in overrides.items():
        settings.set(name, value, priority="cmdline")
    if backend == "sqlite" and readonly:
        return SqliteReader(str(path), url_options(settings))
    return urlstore_from_settings(settings, readonly=readonly)


def read_records(path: Path) -> list[FetchRecord]:
    """Every record of an SQLite UrlStore as the crawl wrote it."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    names = {f.name for f in fields(FetchRecord)}
    out = []
    try:
        for row in db.execute("SELECT * FROM urls ORDER BY fetched_at"):
            r = {k: row[k] for k in row.keys() if k in names}
            for k, empty in (("redirect_chain", "[]"), ("metadata", "{}"), ("outlinks", "[]")):
                r[k] = json.loads(r[k] or empty)
            if r["simhash"] is not None and r["simhash"] < 0:
                r["simhash"] += 1 << 64
            pointer = ArchivePointer(row["archive_key"], row["archive_offset"], row["archive_length"])
            out.append(FetchRecord(**r, archive=pointer if row["archive_key"] else None))
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
        **{k: move(getattr(record, k)) for k in ("url", "final_url", "canonical_url", "near_duplicate_of")},
        redirect_chain=[move(u) for u in record.redirect_chain],
        outlinks=[{**link, "url": move(link["url"])} for link in record.outlinks],
    )


# -- the write path, in processes of its own -------------------------------------------------


def writer_main(conn, backend: str, node_settings: dict | None, path: str | None, plan: dict):
    """A worker's write path: record_fetch without the pointer, then set_archive once it is
    done, at most ``plan["window"]`` pages in flight, for ``plan["seconds"]`` or
    ``plan["cap"]`` pages. Reports records, seconds, its own CPU and failures."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    store = open_store(backend, node_settings, Path(path) if path else None)
    pages, records = [], plan["records"]
    for n in range(plan["cap"] // len(records) + 1):
        for record in records[: plan["cap"] - len(pages)]:
            record = renamed(record, f"{plan['prefix']}r{n}")
            pointer, record.archive = record.archive, None
            pages.append((record, pointer))
    conn.send("ready")
    conn.recv()
    slots, lock, finished = threading.Semaphore(plan["window"]), threading.Lock(), threading.Event()
    state = {"in flight": 0, "sent": 0, "stopped": False}
    failed: list[str] = []

    def page_done(future):
        if future.exception() is not None:
            failed.append(repr(future.exception()))
        slots.release()
        with lock:
            state["in flight"] -= 1
            if state["in flight"] == 0 and state["stopped"]:
                finished.set()

    def recorded(future, url, pointer, fetched_at):
        if future.exception() is not None or pointer is None:
            page_done(future)
        else:
            store.set_archive(url, pointer, fetched_at).add_done_callback(page_done)

    cpu0, t0 = time.process_time(), time.perf_counter()
    for record, pointer in pages:
        slots.acquire()
        if time.perf_counter() - t0 > plan["seconds"]:
            break
        with lock:
            state["in flight"] += 1
        state["sent"] += 1
        store.record_fetch(record).add_done_callback(
            lambda f, u=record.url, p=pointer, at=record.fetched_at: recorded(f, u, p, at)
        )
    with lock:
        state["stopped"] = True
        if state["in flight"] == 0:
            finished.set()
    finished.wait(WRITE_TIMEOUT)
    took, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    store.close()
    conn.send({"records": state["sent"] - state["in flight"], "seconds": took, "cpu": cpu, "failed": failed})


@dataclass
class Writes:
    records: int
    seconds: float
    worker_cpu: float
    node_cpu: float  # the node's CPU seconds over the test (nan for SQLite)
    failed: list

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def write_test(backend: str, workers: int, plan: dict, node: CassandraNodes, path: Path | None) -> Writes:
    """``workers`` processes write at once, each under a prefix of its own."""
    context = multiprocessing.get_context("spawn")
    node_settings = node.settings(WRITES_KEYSPACE) | {"CASSANDRA_APPLY_SCHEMA": False}
    procs, pipes = [], []
    try:
        for n in range(workers):
            parent, child = context.Pipe()
            mine = {**plan, "prefix": f"{plan['prefix']}k{n}"}
            args = (child, backend, node_settings, str(path) if path else None, mine)
            procs.append(context.Process(target=writer_main, args=args, daemon=True))
            procs[-1].start()
            pipes.append(parent)
        for pipe in pipes:
            if not pipe.poll(READY_TIMEOUT) or pipe.recv() != "ready":
                raise SystemExit(f"a {backend} write process did not get ready in {READY_TIMEOUT:.0f} s")
        node0 = node.cpu_seconds()
        for pipe in pipes:
            pipe.send("go")
        got = [pipe.recv() for pipe in pipes if pipe.poll(WRITE_TIMEOUT + 60)]
        if len(got) < workers:
            raise SystemExit(f"a {backend} write process did not report in {WRITE_TIMEOUT:.0f} s")
        node_cpu = node.cpu_seconds() - node0 if backend == "cassandra" else float("nan")
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    return Writes(
        records=sum(r["records"] for r in got),
        seconds=max(r["seconds"] for r in got),
        worker_cpu=sum(r["cpu"] for r in got),
        node_cpu=node_cpu,
        failed=[e for r in got for e in r["failed"]],
    )


def run_writes(args, records: list[FetchRecord], page_rate: float, node: CassandraNodes, work: Path, results) -> None:
    from crawler.urlstore.cassandra_cluster import schema_statements

    cluster = node.cluster()
    try:
        session = cluster.connect()
        session.execute(f"DROP KEYSPACE IF EXISTS {WRITES_KEYSPACE}", timeout=300)
        for statement in schema_statements(WRITES_KEYSPACE):
            session.execute(statement, timeout=120)
    finally:
        cluster.shutdown()
    plan = {"records": records, "window": args.window, "seconds": args.write_seconds, "cap": args.write_records}
    warm = write_test("cassandra", 1, {**plan, "seconds": 3 * args.warm, "prefix": "warm"}, node, None)
    print(f"\nwrites: (warm-up, not counted: {warm.records:,} records in {warm.seconds:.0f} s)")
    for test, (backend, workers) in enumerate([("cassandra", 1), ("cassandra", 2), ("sqlite", 1), ("sqlite", 2)]):
        path = work / f"writes-{test}.sqlite" if backend == "sqlite" else None
        w = write_test(backend, workers, {**plan, "prefix": f"w{test}"}, node, path)
        what = f"{backend}, {workers} worker{'s' * (workers > 1)}"
        node_part = f", node {w.node_cpu / w.records * 1000:.2f} ms" if backend == "cassandra" else ""
        print(
            f"  {what}: {w.records:,} records in {w.seconds:.1f} s = {w.rate:,.1f}/s ({w.rate / page_rate:.2f}x the "
            f"page rate); CPU a record: writers {w.worker_cpu / w.records * 1000:.2f} ms{node_part}"
            + (f"; {len(w.failed)} FAILED: {w.failed[:1]}" if w.failed else ""),
            flush=True,
        )
        results.add(f"write path, {what}", w.rate, "records/s")
        results.add(f"write path, {what}, / the page rate", w.rate / page_rate, "x", baseline="the page rate")
        results.add(f"write path, {what}, writers' CPU a record", w.worker_cpu / w.records * 1000, "ms")
        if backend == "cassandra":
            results.add(f"write path, {what}, node's CPU a record", w.node_cpu / w.records * 1000, "ms")


# -- the tables: look-ups and scans -----------------------------------------------------------


def ensure_popular(store: Path, count: int, seed: int) -> tuple[str, int]:
    """``count`` inlinks to the store's first URL from as many stored pages, added unless
    there: (the URL, its inlinks)."""
    db = sqlite3.connect(store, timeout=60)
    try:
        target = db.execute("SELECT url FROM urls ORDER BY rowid LIMIT 1").fetchone()[0]
        have = db.execute("SELECT count(*) FROM inlinks WHERE target_url = ?", (target,)).fetchone()[0]
        if have < count:
            top = db.execute("SELECT max(rowid) FROM urls").fetchone()[0]
            ids = random.Random(seed + 3).sample(range(2, top + 1), min(count, top - 1))
            with db:
                for k in range(0, len(ids), 500):
                    part = ids[k : k + 500]
                    query = f"SELECT url FROM urls WHERE rowid IN ({','.join('?' * len(part))})"
                    db.executemany(
                        "INSERT OR REPLACE INTO inlinks (target_url, bucket, source_url, anchor_text, nofollow) "
                        "VALUES (?, ?, ?, ?, 0)",
                        [
                            (target, zlib.crc32(s.encode()) % INLINK_BUCKETS, s, "Home")
                            for (s,) in db.execute(query, part)
                        ],
                    )
            have = db.execute("SELECT count(*) FROM inlinks WHERE target_url = ?", (target,)).fetchone()[0]
        return target, have
    finally:
        db.close()


def serve_args(args) -> argparse.Namespace:
    """bench/serve.py's options for this run."""
    argv = ["--records", args.rows, "--store", args.store, "--backends", "sqlite,cassandra", "--step-seconds",
            args.step_seconds, "--unknown", args.unknown, "--cassandra-dir", args.cassandra_dir, "--cassandra-port",
            args.port, "--cassandra-storage-port", args.storage_port, "--cassandra-jmx-port", args.jmx_port,
            "--rates", args.rates, "--batch-rates", args.batch_rates]  # fmt: skip
    parser = serve.build_parser()
    parsed = parser.parse_args([str(a) for a in argv])
    serve.check_args(parser, parsed)
    return parsed


def timed(call, calls: list, node: CassandraNodes | None) -> tuple[list[float], float, float]:
    """``call(arg)`` for each of ``calls`` in turn: each one's seconds, this process's CPU
    and the node's over them."""
    node0, cpu0 = node.cpu_seconds() if node else float("nan"), time.process_time()
    times = []
    for arg in calls:
        t0 = time.perf_counter()
        call(arg)
        times.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu0
    return times, cpu, (node.cpu_seconds() - node0) if node else float("nan")


def run_lookups(args, node: CassandraNodes, results) -> None:
    known = sample_urls(args.store, 50_000, args.seed)
    unknown = unknown_urls(known, 10_000, args.seed)
    rng = random.Random(args.seed + 5)
    gets = [rng.choice(known) for _ in range(args.lookups)]
    batches = [
        [rng.choice(unknown) if rng.random() < args.unknown else rng.choice(known) for _ in range(100)]
        for _ in range(args.batches)
    ]
    print(f"\nlook-ups on {args.rows:,} rows: get x {args.lookups:,}, last_fetched of 100 URLs x {args.batches:,}")
    for backend in ("cassandra", "sqlite"):
        store = open_store(backend, node.settings(keyspace_name(args.rows)), args.store, readonly=True)
        of = node if backend == "cassandra" else None
        try:
            for call, pool in ((store.get, known[-5000:]), (store.last_fetched, batches)):
                deadline = time.monotonic() + args.warm  # connections, statements, caches, the JIT
                while time.monotonic() < deadline:
                    call(rng.choice(pool))
            if (found := sum(store.get(url) is not None for url in gets[:200])) != 200:
                raise SystemExit(f"{backend}: {200 - found} of 200 stored URLs not found by get")
            for what, call, calls in (("get", store.get, gets), ("last_fetched of 100", store.last_fetched, batches)):
                times, cpu, node_cpu = timed(call, calls, of)
                p50, p99 = percentile(times, 0.5) * 1000, percentile(times, 0.99) * 1000
                print(
                    f"  {backend:9} {what:20}: p50 {p50:.2f} ms, p99 {p99:.2f} ms; CPU a call {cpu / len(times) * 1000:.2f} ms"
                )
                results.add(f"{backend}: {what}, p50", p50, "ms")
                results.add(f"{backend}: {what}, p99", p99, "ms")
                results.add(f"{backend}: {what}, the caller's CPU a call", cpu / len(times) * 1000, "ms")
                if of:
                    results.add(f"{backend}: {what}, the node's CPU a call", node_cpu / len(times) * 1000, "ms")
        finally:
            store.close()


def run_scan(args, node: CassandraNodes, target: str, inlinks: int, results) -> None:
    before = time.time()
    db = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
    due = db.execute("SELECT count(*) FROM urls WHERE next_fetch_at <= ?", (before,)).fetchone()[0]
    db.close()
    print(f"\nscan: due(now, {SCAN_PAGE}, cursor) to the end ({due:,} of {args.rows:,} rows due); {inlinks:,} inlinks")
    for backend in ("cassandra", "sqlite"):
        store = open_store(backend, node.settings(keyspace_name(args.rows)), args.store, readonly=True)
        try:
            t0, rows, cursor = time.perf_counter(), 0, None
            while True:
                page, cursor = store.due(before, SCAN_PAGE, cursor)
                rows += len(page)
                if cursor is None or time.perf_counter() - t0 > args.scan_seconds:
                    break
            took = time.perf_counter() - t0
            check = "" if rows == due else f" MISMATCH or stopped: {due:,} due"
            print(f"  {backend:9} due scan: {rows:,} rows in {took:.1f} s = {rows / took:,.0f} due rows/s{check}")
            results.add(f"{backend}: due scan of {args.rows:,} rows", took, "s")
            results.add(f"{backend}: due scan, due rows", rows / took, "rows/s")
            t0, links, pages, after = time.perf_counter(), 0, 0, None
            while len(page := store.inlinks(target, INLINKS_PAGE, after)) == INLINKS_PAGE:
                links, pages, after = links + len(page), pages + 1, page[-1]["url"]
            links, pages, took = links + len(page), pages + 1, time.perf_counter() - t0
            check = "" if links == inlinks else f"  MISMATCH: {inlinks:,} stored"
            print(
                f"  {backend:9} inlinks: {links:,} in {pages} pages in {took:.2f} s = {pages / took:,.1f} pages/s{check}"
            )
            results.add(f"{backend}: inlinks paging of {inlinks:,} by {INLINKS_PAGE:,}", took, "s")
        finally:
            store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(PARTS), help=f"parts, comma-separated: {', '.join(PARTS)}")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the look-up, scan and serve tables")
    parser.add_argument("--seconds", type=float, default=60.0, help="the crawl's CLOSESPIDER_TIMEOUT")
    parser.add_argument("--interval", type=float, default=0.05, help="the crawl's FRONTIER_HOST_INTERVAL")
    parser.add_argument("--write-seconds", type=float, default=30.0, help="seconds of writes a test")
    parser.add_argument("--write-records", type=int, default=5000, help="records a writer writes at most a test")
    parser.add_argument("--window", type=int, default=64, help="pages in flight per writer")
    parser.add_argument("--lookups", type=int, default=3000, help="gets timed per backend")
    parser.add_argument("--batches", type=int, default=500, help="last_fetched batches timed per backend")
    parser.add_argument("--unknown", type=float, default=0.2, help="share of URLs not stored (batches, serve)")
    parser.add_argument("--popular", type=int, default=100_000, help="inlinks of the popular URL")
    parser.add_argument("--scan-seconds", type=float, default=3000.0, help="a due scan stops after this")
    parser.add_argument("--warm", type=float, default=20.0, help="seconds of each warm-up (writes: three times)")
    parser.add_argument("--step-seconds", type=float, default=10.0, help="serve: seconds a step")
    parser.add_argument("--rates", default=SERVE_RATES, help="serve: record look-ups/s of the steps")
    parser.add_argument("--batch-rates", default=SERVE_BATCH_RATES, help="serve: batches/s of the batch steps")
    parser.add_argument("--store", type=Path, default=Path("/tmp/bench-serve/bench/urlstore.sqlite"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cassandra-dir", type=Path, default=CACHE_DIR, help="the node's directory")
    parser.add_argument("--port", type=int, default=PORTS[0], help="the node's CQL port")
    parser.add_argument("--storage-port", type=int, default=PORTS[1])
    parser.add_argument("--jmx-port", type=int, default=PORTS[2])
    args = parser.parse_args()
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    if not parts or parts - set(PARTS):
        parser.error(f"--only: some of {', '.join(PARTS)}")
    args.store = args.store.resolve()
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
    results = Results("urlstore")
    node = CassandraNodes(args.cassandra_dir, 1, args.port, args.storage_port, args.jmx_port, "1G")
    work = Path(tempfile.mkdtemp(prefix="bench-urlstore-"))
    try:
        if "writes" in parts:  # first, before the node runs: the crawl has the machine
            with served_sites(False, "bench-urlstore-crawl-") as (sites, crawl_work):
                ended, cpu = crawl(sites, 1, args.seconds, args.interval, crawl_work)
                path = crawl_work / "crawl" / "doc-crawl" / "urlstore.sqlite"
                if not path.exists():
                    raise SystemExit(f"the crawl wrote no UrlStore ({ended}); its log: {crawl_work / 'worker-0.log'}")
                records = read_records(path)
            times = sorted(r.fetched_at for r in records if r.fetched_at)
            page_rate = len(records) / (times[-1] - times[0])
            links = sum(len(r.outlinks) for r in records) / len(records)
            print(
                f"crawl: {len(records):,} records = {page_rate:.1f} records/s (the page rate), {links:.0f} outlinks a record"
            )
            results.add("the page rate: records a second of one worker's crawl", page_rate, "records/s")
        took = node.start()
        print(f"\ncassandra: node in {node.dir} on 127.0.0.1:{node.port} (pid {node.pid()}), up in {took:.0f} s")
        if parts & {"lookups", "scan", "serve"}:
            sargs = serve_args(args)
            prepare_store(sargs.store, sargs.records, sargs.hosts, sargs.seed, sargs.cold)
            target, inlinks = ensure_popular(args.store, args.popular, args.seed)
            ensure_keyspace(node, args.store, keyspace_name(args.rows))
            node.warm(keyspace_name(args.rows))
        if "writes" in parts:
            run_writes(args, records, page_rate, node, work, results)
            cluster = node.cluster()
            try:
                print(f"  (flushed and compacted after the writes in {node.settle(cluster.connect()):.0f} s)")
            finally:
                cluster.shutdown()
        if "lookups" in parts:
            run_lookups(args, node, results)
        if "scan" in parts:
            run_scan(args, node, target, inlinks, results)
        if "serve" in parts:
            served = serve.run(sargs, node)
            serve.print_summary(served, sargs.batch, results, "scrapy serve ")
        results.write()
    finally:
        node.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
