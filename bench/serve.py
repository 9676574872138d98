"""The read API (``scrapy serve``) under open-loop load on loopback (testing/load.py): the
record look-ups a second one server answers from a UrlStore of a million records within
p50 5 ms and p99 50 ms (under 1% failed), and the URLs a second of batch look-ups; from
SQLite, a Cassandra node of its own (testing/cassandra.py), or both (``--backends``).

    python -m bench.serve                                  # 1,000,000 records, steps of 10 s
    python -m bench.serve --records 100000 --step-seconds 5
    python -m bench.serve --set SERVE_PROCESSES=2           # two server processes on one port

Each step prints the rates offered and answered, latency p50/p90/p99/max, failures, the
CPU of the server, node and load (% of a core: on a CPU / waiting), the server's CPU a
request, MB read from storage, the load's lateness and the other processes' cores.
Recorded: each backend's highest rate within the target, and at p99 <= 50 ms. Before the
steps: record and batch look-ups at a low rate, and a Cassandra node's reads warmed
(testing/cassandra.py ``warm_reads``: its compiler's work done, as on a node that has served
for a while).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from bench.results import Results
from crawler.urlstore.sqlite import SQLITE_FILE
from testing.cassandra import CACHE_DIR, PORTS, CassandraNodes, FrontierRedis, ensure_keyspace, keyspace_name
from testing.load import Load, StepResult
from testing.sampling import disk_read
from testing.urlstore import prepare_store, sample_urls, unknown_urls
from testing.workers import ServeProcess, clean_env

TARGET_P50, TARGET_P99 = 0.005, 0.050  # seconds
TARGET_FAILED = 0.01  # share of errors and timeouts a step may have
RATES = (250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 16000)
BATCH_RATES = (5, 10, 20, 30, 40, 60)
SAMPLE = 200_000  # stored URLs the clients pick from
START_TIMEOUT = 90.0  # seconds for the server to answer
WARM_UP = 10.0  # seconds of record look-ups at 100/s before the steps (and half as long of batch look-ups)


class Step(StepResult):
    """A step's figures (testing/load.py), judged against the target."""

    @property
    def failed_share(self) -> float:
        return (self.errors + self.timeouts) / max(1, self.sent)

    @property
    def met(self) -> bool:
        return self.p50 <= TARGET_P50 and self.p99 <= TARGET_P99 and self.failed_share < TARGET_FAILED

    @property
    def kept_up(self) -> bool:
        return self.achieved >= 0.95 * self.offered and self.failed_share < TARGET_FAILED


# -- the report ------------------------------------------------------------------------------


def header(per: str) -> str:
    return (
        f"{'offered':>8} {'achieved':>8} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6} {'err':>4} {'t/o':>5} "
        f"{'server':>9} {'cpu':>6} {'disk':>5} {'node':>9} {'load':>9} {'late':>6} {'others':>6}  target\n"
        f"{'/s':>8} {'/s':>8} {'ms':>6} {'ms':>6} {'ms':>6} {'ms':>6} {'':>4} {'':>5} "
        f"{'cpu/wait%':>9} {'us/' + per:>6} {'MB':>5} {'cpu/wait%':>9} {'cpu/wait%':>9} {'p99 ms':>6} {'cores':>6}"
    )


def row(r: Step, unit: int = 1) -> str:
    return (
        f"{r.offered * unit:>8,.0f} {r.achieved * unit:>8,.0f} {r.p50 * 1000:>6.1f} {r.p90 * 1000:>6.1f} "
        f"{r.p99 * 1000:>6.1f} {r.max * 1000:>6.0f} {r.errors:>4} {r.timeouts:>5} "
        f"{f'{r.server_cpu:.0f}/{r.server_wait:.0f}':>9} {r.server_per / unit * 1e6:>6,.0f} {r.disk:>5.0f} "
        f"{'-' if r.node_cpu != r.node_cpu else f'{r.node_cpu:.0f}/{r.node_wait:.0f}':>9} "
        f"{f'{r.client_cpu:.0f}/{r.client_wait:.0f}':>9} {r.late_p99 * 1000:>6.1f} {r.others:>6.1f}  "
        f"{'met' if r.met else 'missed'}"
    )


def p99_rate(results: list[Step], unit: int = 1) -> Step | None:
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
    store = Path("/tmp/bench-serve/bench") / SQLITE_FILE
    parser.add_argument("--store", type=Path, default=store, help=f"the store: CRAWL_DIR/CRAWL_NAME/{SQLITE_FILE}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backends", default="sqlite", help="sqlite, cassandra or sqlite,cassandra: read in turn")
    parser.add_argument("--cassandra-dir", type=Path, default=CACHE_DIR, help="the Cassandra node's directory")
    parser.add_argument("--cassandra-port", type=int, default=PORTS[0], help="its CQL port")
    parser.add_argument("--cassandra-storage-port", type=int, default=PORTS[1])
    parser.add_argument("--cassandra-jmx-port", type=int, default=PORTS[2])
    parser.add_argument("--cassandra-heap", default="1G")
    parser.add_argument("--cold", action="store_true", help="do not read the store into the page cache first")
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
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of the server")
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    args.store = args.store.resolve()
    if args.store.name != SQLITE_FILE:
        parser.error(f"--store must be CRAWL_DIR/CRAWL_NAME/{SQLITE_FILE}")
    args.backend_list = [b.strip().lower() for b in args.backends.split(",") if b.strip()]
    if not args.backend_list or any(b not in BACKENDS for b in args.backend_list):
        parser.error(f"--backends: one or more of {', '.join(BACKENDS)}")


Steps = dict  # backend -> (record steps, batch steps)


def run(args: argparse.Namespace, node: CassandraNodes | None = None) -> Steps:
    """Every backend of --backends measured in turn (the SQLite store prepared first): its
    server started, the record steps, then the batch steps. ``node``: the Cassandra node,
    running; without one a node is started here and stopped at the end."""
    crawl_dir, crawl = args.store.parent.parent, args.store.parent.name
    rates = [float(x) for x in args.rates.split(",")] if args.rates else [r for r in RATES if r <= args.max_rate]
    batch_rates = [float(x) for x in args.batch_rates.split(",") if x.strip()]
    own_node = None
    keyspace = keyspace_name(args.records)
    results: Steps = {}
    try:
        if "cassandra" in args.backend_list:
            if node is None:
                ports = (args.cassandra_port, args.cassandra_storage_port, args.cassandra_jmx_port)
                node = own_node = CassandraNodes(args.cassandra_dir, 1, *ports, heap=args.cassandra_heap)
                took = node.start()
                print(f"cassandra: node in {node.dir} on 127.0.0.1:{node.port} (pid {node.pid()}), up in {took:.0f} s")
            ensure_keyspace(node, args.store, keyspace)
            if not args.cold:
                print(f"cassandra: keyspace {keyspace} read once into the page cache in {node.warm(keyspace):.1f} s")
        known = sample_urls(args.store, SAMPLE, args.seed)
        unknown = unknown_urls(known, SAMPLE // 4, args.seed)
        for backend in args.backend_list:
            results[backend] = measure(args, backend, crawl_dir, crawl, known, unknown, rates, batch_rates, node)
    finally:
        if own_node is not None:
            own_node.close()
    return results


def measure(args, backend, crawl_dir, crawl, known, unknown, rates, batch_rates, node) -> tuple[list, list]:
    """One backend's steps: (record steps, batch steps)."""
    server = load = redis = None
    node_pid = node.pid() if backend == "cassandra" else None
    try:
        settings = {"CRAWL_DIR": crawl_dir, "CRAWL_NAME": crawl, "SERVE_HOST": "127.0.0.1"}
        if backend == "cassandra":
            redis = FrontierRedis(crawl_dir.parent / f"{crawl_dir.name}-redis", crawl)
            settings |= node.settings(keyspace_name(args.records)) | {"REDIS_URL": redis.url}
        settings |= dict(s.split("=", 1) for s in args.set)
        server = ServeProcess(clean_env(), settings, crawl_dir / f"serve-{backend}.log", start_timeout=START_TIMEOUT)
        server_pid = server.proc.pid
        load = Load(args.clients, server.base, crawl, known, unknown, args.unknown, args.batch, args.connections,
                    args.seed, Step)  # fmt: skip
        if backend == "cassandra":
            took, per_url = node.warm_reads(keyspace_name(args.records), known)
            print(f"cassandra: the node's reads warmed in {took:.0f} s (at the end {per_url:,.0f} us of its CPU a URL)")
        load.run("record", 100, WARM_UP, args.timeout, None)  # warm-up: connections, caches
        if batch_rates:  # and the batch look-up's path, its first large answers
            load.run("lookup", min(batch_rates), WARM_UP / 2, args.timeout, None)
        read0 = disk_read(server_pid) if server_pid else 0
        where = f"keyspace {keyspace_name(args.records)} of the Cassandra node" if backend == "cassandra" else "SQLite"
        print(f"\n[{backend}] GET /api/crawls/{crawl}/record?url=U from {where}, {args.unknown:.0%} unknown URLs")
        print(header("req"))
        singles: list[Step] = []
        for rate in rates:
            result = load.run("record", rate, args.step_seconds, args.timeout, server_pid, node_pid)
            singles.append(result)
            print(row(result), flush=True)
            # two steps past the p99 target (p50 not counted: a backend slower at the median
            # may still answer more within p99 50 ms) or not kept up with
            if sum(not (r.met or (r.p99 <= TARGET_P99 and r.kept_up)) for r in singles) >= 2:
                break
            time.sleep(1.0)
        batches: list[Step] = []
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


def print_summary(results: Steps, batch: int, out: Results | None = None, prefix: str = "") -> None:
    """Each backend's highest rates within the target and at p99 <= 50 ms (p50 not counted),
    added to ``out`` when given; ``prefix``: of the names, and the p99 rates only."""
    print(f"\nthe highest rates within the target, and answered with p99 <= {TARGET_P99 * 1000:.0f} ms:")
    for backend, (singles, batches) in results.items():
        best = max((r for r in singles if r.met), key=lambda r: r.offered, default=None)
        most = max(singles, key=lambda r: r.achieved)
        print(
            f"[{backend}] record look-up (requests/s): "
            + (f"{best.offered:,.0f}/s met the target" if best else "no rate met the target")
            + f"; the most answered {most.achieved:,.0f}/s (p99 {most.p99 * 1000:,.0f} ms)"
        )
        within = f"{backend}: record look-ups/s within p50 5 ms, p99 50 ms"
        figures = {} if prefix else {within: best.offered if best else 0}
        for steps, what, unit in ((singles, "record look-ups/s", 1), (batches, "URLs/s in batch look-ups", batch)):
            if steps:
                good = p99_rate(steps, unit)
                figures[f"{backend}: {prefix}{what} at p99 <= 50 ms"] = good.offered * unit if good else 0
        print("  " + "; ".join(f"{name.split(': ', 1)[1]}: {value:,.0f}" for name, value in figures.items()))
        for name, value in figures.items():
            if out is not None:
                out.add(name, value, "/s")


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
        out = Results("serve")
        prepare_store(args.store, args.records, args.hosts, args.seed, args.cold)
        results = run(args)
        print(f"\nload average (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print_summary(results, args.batch, out)
        out.write()
    except Overdue as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
