"""Benchmark: the recrawl's due pass (``UrlStore.due`` to the end) on stores of growing
size with the same share due, SQLite (its index on next_fetch_at) and Cassandra (its due
index, crawler/urlstore/cassandra_due.py): the pass should grow with the rows due, not
with the table.

    python -m bench.due_rounds                              # 1,000,000 records, 1% due
    python -m bench.due_rounds --records 100000,1000000,10000000 --due 0.01

Each size gets a fresh SQLite file and a fresh keyspace on the Cassandra node at
--cassandra (``python scripts/cassandra.py start DIR`` starts one), dropped at the end.
Records hold a URL and its due time (the due ones within the last day, the others within
the next 30 days); they are loaded in bulk (SQLite: one transaction; Cassandra: the
store's own statements in unlogged batches), which is not what is measured. Figures per
store and size: the pass's seconds, and its seconds per 1,000 rows due; for Cassandra, the
scan of the whole table that a pass was before the index, in the same run.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from pathlib import Path

from bench.results import Results
from crawler.urlstore.sqlite import SqliteUrlStore

PAGE = 500  # rows a due call, as the recrawl reads them
BATCH = 50  # records an unlogged batch while loading Cassandra (two statements each)


def due_times(n: int, share: float, now: float, seed: int = 1) -> list[tuple[str, float]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        due = rnd.random() < share
        at = now - rnd.random() * 86400 if due else now + 60 + rnd.random() * 30 * 86400
        out.append((f"https://www.site{i % 50_000}.example/page/{i}", at))
    return out


def timed_pass(store, now: float, **kw) -> tuple[int, float]:
    rows, cursor, t = 0, None, time.perf_counter()
    while True:
        page, cursor = store.due(now, PAGE, cursor, **kw)
        rows += len(page)
        if cursor is None:
            return rows, time.perf_counter() - t


def sqlite_pass(records: list[tuple[str, float]], now: float) -> tuple[int, float]:
    with tempfile.TemporaryDirectory(prefix="due-rounds-") as tmp:
        store = SqliteUrlStore(str(Path(tmp) / "u.sqlite"))
        try:

            def load(db):
                with db:
                    db.executemany("INSERT INTO urls (url, next_fetch_at, fate) VALUES (?, ?, 'fetched')", records)

            store._run(lambda: load(store._db)).result()
            return timed_pass(store, now)
        finally:
            store.close()


def cassandra_pass(session, records: list[tuple[str, float]], now: float, scan: list) -> tuple[int, float]:
    from cassandra.concurrent import execute_concurrent
    from cassandra.query import BatchStatement, BatchType

    from crawler.urlstore.cassandra import CassandraUrlStore
    from crawler.urlstore.cassandra_cluster import schema_statements

    keyspace = f"bench_due_{uuid.uuid4().hex[:10]}"
    for statement in schema_statements(keyspace):
        session.execute(statement, timeout=120)
    store = CassandraUrlStore(session, keyspace)
    try:
        t, batches = time.perf_counter(), []
        for start in range(0, len(records), BATCH):
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            for url, at in records[start : start + BATCH]:
                for statement, values in [
                    store._set(url, {"next_fetch_at": at}),
                    *store.due_index.statements(url, at, now),
                ]:
                    batch.add(statement, values)
            batches.append((batch, None))
            if len(batches) == 200 or start + BATCH >= len(records):
                execute_concurrent(session, batches, concurrency=16, raise_on_first_error=True)
                batches = []
        print(f"  cassandra: {len(records):,} records loaded at {len(records) / (time.perf_counter() - t):,.0f}/s")
        found = timed_pass(store, now)
        if scan:  # the whole table read, as a due pass did before the index (none was fetched)
            scanned = timed_pass(store, now, fetched_before=now)[1]
            print(
                f"  cassandra: the table scanned in {scanned:.2f} s, the index's pass {scanned / found[1]:.1f}x faster"
            )
            scan.append(scanned)
        return found
    finally:
        store.close()
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="1000000", help="store sizes, comma-separated (default 1,000,000)")
    parser.add_argument("--due", type=float, default=0.01, help="the share of records due (default 0.01)")
    parser.add_argument("--cassandra", default="127.0.0.1:9042", help="a Cassandra node (host:port); '' for none")
    parser.add_argument("--runs", type=int, default=1, help="passes per store and size")
    args = parser.parse_args()
    results = Results("due_rounds", runs=args.runs)
    session = cluster = None
    if args.cassandra:
        from cassandra.cluster import Cluster

        host, _, port = args.cassandra.partition(":")
        cluster = Cluster([host], port=int(port or 9042))
        session = cluster.connect()
    try:
        now = time.time()
        for n in (int(x) for x in args.records.split(",")):
            records, scans = due_times(n, args.due, now), [0.0]
            expected = sum(1 for _, at in records if at <= now)
            stores = [("sqlite", lambda r=records: sqlite_pass(r, now))]
            if session is not None:
                stores.append(("cassandra", lambda r=records, s=scans: cassandra_pass(session, r, now, s)))
            for name, run in stores:
                for _ in range(args.runs):
                    rows, seconds = run()
                    check = "" if rows == expected else f"  MISMATCH: {expected:,} due"
                    print(f"{name:9} {n:>11,} records: {rows:,} due read in {seconds:.2f} s{check}", flush=True)
                    results.add(f"{name}: due pass, {n:,} records, {args.due:.0%} due", seconds, "s")
                    results.add(f"{name}: due pass a 1,000 due rows, {n:,} records", 1000 * seconds / max(rows, 1), "s")
            for scanned in scans[1:]:
                results.add(
                    f"cassandra: table scan of {n:,} records", scanned, "s", baseline="a due pass before the index"
                )
    finally:
        if cluster is not None:
            cluster.shutdown()
    results.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
