"""Cassandra nodes of a benchmark's own, started and stopped through scripts/cassandra.py
(one node or a cluster of several on 127.0.0.1..N, on ports of their own: never the
shared node's 9042/7000/7199), and a generated SQLite UrlStore copied into a keyspace of
them, laid out as CassandraUrlStore writes it."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil

from testing.urlstore import SQLITE_COLUMNS, read_through
from testing.workers import ROOT

SCRIPT = ROOT / "scripts" / "cassandra.py"
CACHE_DIR = Path.home() / ".cache" / "crawler-bench" / "cassandra"  # a node whose data is kept between runs
PORTS = (9342, 7400, 7600)  # CQL, inter-node, JMX of such a node
COPY_CONCURRENCY = 64  # statements in flight while a keyspace is written
COPY_ATTEMPTS = 5  # of a statement that fails (timed out) while a keyspace is written
COPY_CHUNK = 10_000  # rows read from SQLite at a time
COPY_VERSION = 2  # of copy_to_keyspace: a copy made by another is made again
PROGRESS_EVERY = 10.0  # seconds between two progress lines
WARM_READS = 60_000  # URLs a warm-up reads each way (one at a time, and in IN reads)
ROW_NAMES = tuple(c.strip() for c in SQLITE_COLUMNS.split(","))[1:]


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class CassandraNodes:
    """``nodes`` Cassandra nodes of scripts/cassandra.py in ``directory``, node K on
    127.0.0.K with CQL ``port``, inter-node ``storage_port`` and JMX ``jmx_port`` + 100 (K-1)
    (each in a session of its own). ``start`` refuses ports another process holds; nodes of
    this directory left running by an earlier run are taken (and stopped by ``close`` like
    ones started here)."""

    def __init__(self, directory: Path, nodes: int = 1, port: int = PORTS[0], storage_port: int = PORTS[1],
                 jmx_port: int = PORTS[2], heap: str = "1G"):  # fmt: skip
        self.dir = Path(directory).expanduser().resolve()
        self.nodes = list(range(1, nodes + 1))
        self.hosts = [f"127.0.0.{k}" for k in self.nodes]
        self.port, self.storage_port, self.jmx_port, self.heap = port, storage_port, jmx_port, heap
        self.starting: list[subprocess.Popen] = []
        self.running = False

    def _command(self, *args: str) -> list[str]:
        return [sys.executable, str(SCRIPT), *args]

    def _run(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(self._command(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    def pid(self, node: int = 1) -> int | None:
        """Node ``node``'s JVM while it runs (its command line names this directory)."""
        try:
            proc = psutil.Process(int((self.dir / f"node{node}" / "cassandra.pid").read_text().strip()))
            return proc.pid if str(self.dir) in " ".join(proc.cmdline()) else None
        except (OSError, ValueError, psutil.Error):
            return None

    def ports_taken(self) -> list[str]:
        taken = [f"{h}:{p}" for h in self.hosts for p in (self.port, self.storage_port) if answers(h, p)]
        jmx = [self.jmx_port + 100 * (k - 1) for k in self.nodes]
        return taken + [f"127.0.0.1:{p}" for p in jmx if answers("127.0.0.1", p)]

    def begin(self, node: int | None = None, timeout: float = 300.0) -> subprocess.Popen:
        """Start the nodes (the first time), or node ``node`` again, without waiting:
        ``started`` waits for it."""
        args = ["start", str(self.dir), "--timeout", str(timeout)]
        if node is None:
            args += ["--nodes", str(len(self.nodes)), "--port", str(self.port), "--heap", self.heap]
            args += ["--storage-port", str(self.storage_port), "--jmx-port", str(self.jmx_port)]
        else:
            args += ["--node", str(node)]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.running = True  # stopped at the end even if the start fails halfway
        proc = subprocess.Popen(
            self._command(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.starting.append(proc)
        return proc

    def started(self, proc: subprocess.Popen, timeout: float = 420.0) -> None:
        _, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"scripts/cassandra.py start in {self.dir} failed: {err.strip()[-500:]}")

    def start(self, node: int | None = None, timeout: float = 300.0) -> float:
        """Start the nodes (or take those of this directory already running), or node
        ``node`` again, and wait for them: the seconds it took."""
        if node is None and self.pid() is None and (taken := self.ports_taken()):
            raise SystemExit(f"Cassandra: {', '.join(taken)} taken by another process; give other ports")
        t0 = time.monotonic()
        self.started(self.begin(node, timeout), timeout + 120)
        return time.monotonic() - t0

    def stop(self, node: int | None = None, kill: bool = False) -> None:
        args = ["stop", str(self.dir)] + (["--node", str(node)] if node else []) + (["--kill"] if kill else [])
        subprocess.run(self._command(*args), cwd=ROOT, capture_output=True, timeout=300, check=True)

    def stop_all_at_once(self, kill: bool) -> None:
        """Every node signalled together (SIGTERM: each shuts down on its own)."""
        args = ["--kill"] if kill else []
        commands = [self._command("stop", str(self.dir), "--node", str(k), *args) for k in self.nodes]
        procs = [subprocess.Popen(c, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in commands]
        for proc in procs:
            proc.wait(timeout=300)

    def answering(self) -> list[int]:
        return [k for k, h in zip(self.nodes, self.hosts, strict=True) if answers(h, self.port)]

    def close(self) -> None:
        """Stop whatever this run started (or took over)."""
        for proc in self.starting:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self.running:
            self._run("stop", str(self.dir), timeout=600)
            self.running = False

    def nodetool(self, *args: str, node: int = 1, timeout: float = 600.0) -> str:
        done = self._run("nodetool", str(self.dir), "--node", str(node), "--", *args, timeout=timeout)
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

    def cpu_seconds(self, node: int = 1) -> float:
        """User and system CPU seconds of a node's JVM so far."""
        times = psutil.Process(self.pid(node)).cpu_times()
        return times.user + times.system

    def cluster(self):
        from cassandra.cluster import Cluster

        return Cluster(self.hosts[:1], port=self.port)

    def settings(self, keyspace: str) -> dict:
        """A crawl's settings for ``keyspace`` of these nodes."""
        hosts = ",".join(self.hosts)
        return {"URLSTORE_BACKEND": "cassandra", "CASSANDRA_HOSTS": hosts, "CASSANDRA_PORT": self.port,
                "CASSANDRA_KEYSPACE": keyspace}  # fmt: skip

    def warm(self, keyspace: str) -> float:
        """Read the keyspace's files once into the page cache: the seconds it took."""
        t0 = time.monotonic()
        read_through(self.dir / "node1" / "data" / keyspace.lower())
        return time.monotonic() - t0

    def warm_reads(self, keyspace: str, urls: list[str], reads: int = WARM_READS) -> tuple[float, float]:
        """The record reads a server sends (one URL, and ``IN`` of several), ``reads`` URLs
        of each, as fast as the node answers: its compiler's work done before a measure, as
        on a node that has served for a while. (seconds taken, the node's CPU a URL in the
        last tenth, in microseconds)."""
        from crawler.urlstore.cassandra import CassandraUrlStore

        cluster = self.cluster()
        try:
            store = CassandraUrlStore(cluster.connect(), keyspace)  # its own statements, as a server's
            t0 = time.monotonic()
            tenth = max(1, reads // 10)
            cpu = 0.0
            for start in range(0, reads, tenth):
                cpu0 = self.cpu_seconds()
                part = [urls[i % len(urls)] for i in range(start, start + tenth)]
                store._read_all([(store._select_stmt, (u,)) for u in part], store.record_reads)
                store.get_many(part)  # (IN reads by replica set, READ_KEYS at a time)
                cpu = (self.cpu_seconds() - cpu0) / (2 * len(part))
            return time.monotonic() - t0, cpu * 1e6
        finally:
            cluster.shutdown()


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


def ensure_keyspace(node: CassandraNodes, store: Path, keyspace: str) -> None:
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
    now = time.time()

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
            yield writer._set(row[0], {column: values.get(column) for column in COLUMNS})
            yield from writer.due_index.statements(row[0], values["next_fetch_at"], now)

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
