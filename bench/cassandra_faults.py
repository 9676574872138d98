"""A crawl that survives Cassandra node failures: two workers crawl the demo site into a
three-node Cassandra cluster of its own (replication factor 3, writes at LOCAL_QUORUM);
node 2 is SIGKILLed mid-crawl and started again (scenario 1), then all three are stopped
for a while (scenario 2). Every page the site answered 200 must then have its row, read at
QUORUM and at ALL, with an archive pointer that reads back its WARC record.

    python -m bench.cassandra_faults                        # about 12 minutes on 2 cores
    python -m bench.cassandra_faults --outage-signal term   # scenario 2 by SIGTERM
    python -m bench.cassandra_faults --hosts 40 --pages 100 --interval 2 --s1-at 0.05 \
        --node-down 20 --settle 5 --s2-at 0.3 --outage 20   # a smaller crawl

Needs scripts/cassandra.py's Cassandra (Java); nodes on 127.0.0.1-3 on ports of their own.
Figures: pages, rows and lost pages at QUORUM and ALL, pointers read back, records written
and writes failed in each scenario (the workers' tally in Redis), refetches, when the nodes
and the writes came back, warning lines, the crawl's duration, the smallest gap between two
requests to a host; and checks (exit code 1 when one fails).
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import redis

from bench.results import Results
from crawler.archive.storage import LocalStorage
from crawler.archive.warc import read_record
from crawler.demo.site import Site
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import Keys
from crawler.urls import normalize_url
from testing.cassandra import CassandraNodes, answers
from testing.sampling import arrival_gaps
from testing.servers import RedisServer
from testing.workers import clean_env, launch_worker, loopback_settings, read_pages, seed_file

NODES = (1, 2, 3)
CRAWL, KEYSPACE, DATACENTER = "cassandra-faults", "faults", "datacenter1"
WORKERS = 2
SITE_DELAY = 0.01  # seconds per page answer
TOLERANCE = 0.010  # seconds a gap may fall short of the interval (clock and site jitter)
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \[([^\]]+)\] (WARNING|ERROR|CRITICAL): (.*)$")


class Sampler(threading.Thread):
    """Every second, the workers' live tally in Redis: (time, records written, writes failed)."""

    def __init__(self, client: redis.Redis):
        super().__init__(daemon=True)
        self.client, self.samples, self.done = client, [], threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            try:
                tally = {k.decode(): int(v) for k, v in self.client.hgetall(Keys(CRAWL).tally).items()}
            except redis.RedisError:
                continue
            written = sum(v for k, v in tally.items() if k.startswith("urlstore/written/"))
            self.samples.append((time.time(), written, tally.get("urlstore/failed", 0)))

    def between(self, start: float, end: float) -> tuple[int, int]:
        """(records written, writes failed) between two times."""
        a, b = ([s for s in self.samples if s[0] <= t][-1:] or [(t, 0, 0)] for t in (start, end))
        return b[0][1] - a[0][1], b[0][2] - a[0][2]


def wait_until(check, timeout: float, what: str, workers=()) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if workers and all(w.proc.poll() is not None for w in workers):
            raise RuntimeError(f"the workers ended before {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def scan(session, consistency) -> dict[str, dict]:
    """The urls table, whole, read at ``consistency``: url -> row."""
    from cassandra.query import SimpleStatement

    query = (
        "SELECT url, status, fate, final_url, canonical_url, archive_key, archive_offset, archive_length,"
        f" writetime(fate) AS written FROM {KEYSPACE}.urls"
    )
    statement = SimpleStatement(query, fetch_size=5000, consistency_level=consistency)
    return {row.url: row._asdict() for row in session.execute(statement, timeout=120)}


def lost_pages(served: set[str], rows: dict[str, dict]) -> list[str]:
    """The URLs answered 200 without a row of status 200 with an archive pointer: their own,
    a redirect's whose final URL they are, or for an exact copy (fate duplicate, not
    archived twice) its canonical_url's."""
    by_final = {r["final_url"]: r for r in rows.values() if r["final_url"]}
    lost = []
    for url in sorted(served):
        row = rows.get(url)
        if row is None or row["status"] != 200:
            row = by_final.get(url)
        if row is not None and row["status"] == 200 and row["fate"] == "duplicate" and row["canonical_url"]:
            row = rows.get(normalize_url(row["canonical_url"]))
        if row is None or row["status"] != 200 or not row["archive_key"] or row["archive_length"] is None:
            lost.append(url)
    return lost


def bad_pointers(rows: dict[str, dict], archive: Path) -> list[str]:
    """The rows whose archive pointer does not read back a WARC record of their URL (or final URL)."""
    storage, bad = LocalStorage(str(archive)), []
    for url, row in rows.items():
        if not row["archive_key"]:
            continue
        try:
            headers, _ = read_record(
                storage.get_range(row["archive_key"], row["archive_offset"], row["archive_length"])
            )
            target = normalize_url(headers.get("WARC-Target-URI", ""))
        except Exception as exc:  # a file or record that is not there
            bad.append(f"{url}: {type(exc).__name__}: {exc}")
            continue
        if target not in (url, row["final_url"]):
            bad.append(f"{url}: the record is of {target}")
    return bad


def warning_lines(logs: list[Path]) -> list[tuple[float, str]]:
    """(time, kind) of every WARNING, ERROR or CRITICAL line; kind: logger, level and
    message with URLs and numbers masked."""
    out = []
    for log in logs:
        for m in filter(None, map(LOG_LINE.match, log.read_text(errors="replace").splitlines())):
            message = re.sub(r"\d+(\.\d+)?", "N", re.sub(r"https?://\S+", "URL", m.group(4)))
            when = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
            out.append((when, f"[{m.group(2)}] {m.group(3)}: {message[:110]}"))
    return out


def run(args) -> dict:
    """The crawl and its faults; what the report needs."""
    work = Path(tempfile.mkdtemp(prefix="cassandra-faults-"))
    cluster = CassandraNodes(work / "cassandra", len(NODES), args.port, args.storage_port, args.jmx_port, "512M")
    if taken := cluster.ports_taken():
        raise SystemExit(f"ports taken: {', '.join(taken)}; choose others (--port, --storage-port, --jmx-port)")
    site = Site(args.hosts, args.pages, SITE_DELAY)
    workers, ev, redis_server, sampler = [], {}, None, None
    print(f"work directory {work}")

    def say(what: str, when: float) -> None:
        print(f"{when - ev['crawl']:5.0f} s  {what}", flush=True)

    try:
        t0 = time.monotonic()
        cluster.started(cluster.begin(), timeout=600)
        print(f"cluster: 3 nodes on {','.join(cluster.hosts)}:{args.port}, started in {time.monotonic() - t0:.0f} s")
        site.start()
        expected = site.expected_fetches()
        redis_server = RedisServer(work / "redis").start()
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        store = {"URLSTORE_BACKEND": "cassandra", "CASSANDRA_HOSTS": ",".join(cluster.hosts)}
        store |= {"CASSANDRA_PORT": args.port, "CASSANDRA_WRITE_CONSISTENCY": "LOCAL_QUORUM"}
        store |= {"CASSANDRA_KEYSPACE": KEYSPACE, "CASSANDRA_REPLICATION_FACTOR": 3, "CASSANDRA_DATACENTER": DATACENTER}
        seeds = seed_file(work, site.seeds)
        sampler = Sampler(redis_server.client)
        ev["crawl"] = time.time()
        for n in range(WORKERS):
            settings = loopback_settings(CRAWL, work / f"worker-{n}.log", FRONTIER_HOST_INTERVAL=args.interval, **store)
            workers.append(launch_worker(work, f"worker-{n}", seeds if n == 0 else None, settings, env))
            if n == 0:  # the keyspace made once, before the second worker starts
                wait_until(lambda: "Cassandra UrlStore: keyspace" in workers[0].text(), 120, "the keyspace", workers)
        sampler.start()

        def progress() -> float:
            return len({h.key for h in site.page_hits() if h.status is not None}) / len(expected)

        wait_until(lambda: progress() >= args.s1_at, args.timeout, f"{args.s1_at:.0%} of the pages", workers)
        ev["s1_progress"], ev["s1_kill"] = progress(), time.time()
        cluster.stop(node=2, kill=True)
        say(f"node 2 SIGKILLed ({ev['s1_progress']:.0%} done)", ev["s1_kill"])
        time.sleep(max(ev["s1_kill"] + args.node_down - time.time(), 0))
        ev["s1_start"] = time.time()
        cluster.started(cluster.begin(node=2))
        ev["s1_back"] = time.time()
        say(f"node 2 answers again (started in {ev['s1_back'] - ev['s1_start']:.0f} s)", ev["s1_back"])

        time.sleep(args.settle)
        wait_until(lambda: progress() >= args.s2_at, args.timeout, f"{args.s2_at:.0%} of the pages", workers)
        ev["s2_progress"], ev["s2_stop"] = progress(), time.time()
        cluster.stop_all_at_once(kill=args.outage_signal == "kill")
        ev["s2_down"] = time.time()
        say(f"all nodes stopped by SIG{args.outage_signal.upper()} ({ev['s2_progress']:.0%} done)", ev["s2_stop"])
        time.sleep(args.outage)
        ev["s2_start"] = time.time()
        up: dict[int, float] = {}  # node -> when it answered CQL again

        def look() -> bool:
            for k in cluster.answering():
                up.setdefault(k, time.time())
            return len(up) == len(NODES)

        first = cluster.begin(node=1)  # nodes 2 and 3 do not start while the seed does not gossip
        wait_until(lambda: look() or answers("127.0.0.1", args.storage_port) or first.poll() is not None, 300, "node 1")
        if first.poll() is not None:
            cluster.started(first)  # (raises when it failed)
        others = [cluster.begin(node=2)]
        for _ in range(8):  # (each start rewrites DIR/cluster.json: not at the same moment)
            look()
            time.sleep(0.25)
        others.append(cluster.begin(node=3))
        wait_until(look, 400, "the three nodes' return")
        for proc in (first, *others):
            cluster.started(proc)
        ev["s2_first"], ev["s2_quorum"], ev["s2_all"] = sorted(up.values())
        say("all nodes answer again", ev["s2_all"])

        ends = {}  # worker -> (exit code, None when killed; when)
        while len(ends) < len(workers):
            for n, w in enumerate(workers):
                if n not in ends and w.proc.poll() is not None:
                    ends[n] = (w.proc.returncode, time.time())
                elif n not in ends and time.time() > ev["crawl"] + args.timeout:
                    w.kill()
                    ends[n] = (None, time.time())
            time.sleep(0.2)
        ev["end"] = max(t for _, t in ends.values())
        time.sleep(2.5)  # the sampler's last look
        frontier = Frontier(redis_server.client, CRAWL).stats()
        tally = {k.decode(): int(v) for k, v in redis_server.client.hgetall(Keys(CRAWL).tally).items()}

        from cassandra import ConsistencyLevel
        from cassandra.cluster import Cluster

        driver = Cluster(cluster.hosts, port=args.port, protocol_version=5)
        try:
            session = driver.connect()
            replication = session.execute(
                "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (KEYSPACE,)
            ).one()
            rows = {level: scan(session, getattr(ConsistencyLevel, level)) for level in ("QUORUM", "ALL")}
        finally:
            driver.shutdown()
    finally:
        for w in workers:
            w.kill()
        if sampler is not None:
            sampler.done.set()
        site.stop()
        if redis_server is not None:
            redis_server.kill()
        cluster.close()
        if not args.keep:
            for k in NODES:
                for part in ("data", "commitlog", "hints", "saved_caches", "cdc_raw"):
                    shutil.rmtree(cluster.dir / f"node{k}" / part, ignore_errors=True)
            shutil.rmtree(work / "redis", ignore_errors=True)
    return {
        "site": site, "expected": expected, "workers": workers, "ends": ends, "ev": ev, "sampler": sampler,
        "frontier": frontier, "tally": tally, "replication": replication, "rows": rows, "work": work,
    }  # fmt: skip


def report(args, got: dict, results: Results) -> int:
    """Figures and checks; 0 when every check holds, else 1."""
    ev, rows, workers, tally, sampler = got["ev"], got["rows"], got["workers"], got["tally"], got["sampler"]
    hits = got["site"].hits()
    pages = [h for h in hits if not h.path.endswith("/robots.txt")]
    served = {normalize_url(got["site"].url(*h.key)) for h in pages if h.status == 200}
    requested = {h.key for h in pages if h.status is not None}
    figures, checks = [], []

    def figure(name: str, value: float, unit: str) -> None:
        figures.append((name, value, unit))
        results.add(name, value, unit)

    replication = dict(got["replication"].replication) if got["replication"] else {}
    checks.append(("3 replicas in datacenter1", replication.get(DATACENTER) == "3"))
    levels = {m for w in workers for m in re.findall(r"Cassandra UrlStore: .*; writes (\w+), reads \w+", w.text())}
    checks.append(("the workers write at LOCAL_QUORUM", levels == {"LOCAL_QUORUM"}))
    figure("pages answered 200 (distinct URLs)", len(served), "pages")
    for level, found in rows.items():
        lost = lost_pages(served, found)
        figure(f"rows read back at {level}", len(found), "rows")
        figure(f"pages lost at {level}", len(lost), "pages")
        checks.append((f"lost 0 at {level}", not lost))
    bad = bad_pointers(rows["QUORUM"], got["work"] / "crawl" / CRAWL / "warc")
    figure(
        "archive pointers that read back their page",
        sum(1 for r in rows["QUORUM"].values() if r["archive_key"]) - len(bad),
        "pointers",
    )
    checks.append(("every archive pointer reads back its page", not bad))
    feed = {p["url"] for w in workers for p in read_pages(w.out)}
    checks.append(("every page in the feeds has its row", all(normalize_url(u) in rows["QUORUM"] for u in feed)))
    checks.append(("every page of the site requested", got["expected"] <= requested))

    windows = {
        "before the faults": (ev["crawl"], ev["s1_kill"]),
        "scenario 1": (ev["s1_kill"], ev["s2_stop"]),
        "scenario 2 and after": (ev["s2_stop"], ev["end"] + 1),
    }
    seen, again = set(), Counter()
    for h in sorted(pages, key=lambda h: h.start):
        if h.status == 200:
            if h.key in seen:
                again[next(name for name, (a, b) in windows.items() if a <= h.wall < b)] += 1
            seen.add(h.key)
    given_back = tally.get("frontier/lease/given_back", 0)
    figure("pages refetched", sum(again.values()), "pages")
    figure("leases given back by the workers", given_back, "leases")
    checks.append(("every refetch is a page whose lease was given back", sum(again.values()) <= given_back))

    down_written, _ = sampler.between(ev["s1_kill"], ev["s1_back"])
    _, s1_failed = sampler.between(ev["s1_kill"], ev["s2_stop"])
    _, s2_failed = sampler.between(ev["s2_stop"], ev["end"] + 3)
    figure("scenario 1: records written while node 2 was down", down_written, "records")
    figure("scenario 1: writes failed", s1_failed, "writes")
    checks.append(("scenario 1: writes went on with node 2 down", down_written > 0))
    checks.append(("scenario 1: no write failed", s1_failed == 0))
    figure("scenario 2: writes failed", s2_failed, "writes")
    for which in ("first", "quorum", "all"):
        figure(f"scenario 2: nodes answering after the stop, {which}", ev[f"s2_{which}"] - ev["s2_down"], "s")
    times = sorted(r["written"] / 1e6 for r in rows["QUORUM"].values() if r["written"])
    after = [t for t in times if t > ev["s2_stop"]]
    if after:
        figure("scenario 2: first write after all three nodes answered", after[0] - ev["s2_all"], "s")
    checks.append((f"scenario 2: writes resumed within {args.max_resume:g} s of the nodes' return",
                   bool(after) and after[0] - ev["s2_all"] <= args.max_resume))  # fmt: skip
    checks.append(("scenario 2: the crawl went on after the outage", ev["end"] > ev["s2_all"] and bool(after)))
    checks.append(("the faults came with pages still to fetch", ev["s2_progress"] < 0.95))

    lines = warning_lines([w.log for w in workers])
    figure("the workers' warning and error lines", len(lines), "lines")
    for kind, count in Counter(k for _, k in lines).most_common(10):
        print(f"  {count:6d}  {kind}")
    checks.append((f"at most {args.max_warnings} warning lines", len(lines) <= args.max_warnings))
    figure("crawl duration", ev["end"] - ev["crawl"], "s")
    checks.append(("the workers ended by themselves, exit code 0", all(c == 0 for c, _ in got["ends"].values())))
    frontier = got["frontier"]
    checks.append(("nothing left in the frontier", frontier["queued"] == 0 and frontier["leased"] == 0))
    gaps = sorted(min(g) for g in arrival_gaps(hits).values() if g)
    figure("politeness: smallest gap between two requests to a host", gaps[0], "s")
    checks.append(("politeness: no gap below the interval", gaps[0] >= args.interval - TOLERANCE))

    for name, value, unit in figures:
        print(f"{name}: {value:,.6g} {unit}")
    print()
    for name, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'}  {name}")
    held = sum(ok for _, ok in checks)
    results.add("checks that hold", held, f"of {len(checks)}")
    print(f"{held} of {len(checks)} checks hold; logs in {got['work']}")
    return 0 if held == len(checks) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages", type=int, default=55, help="pages per host")
    parser.add_argument("--interval", type=float, default=5.0, help="FRONTIER_HOST_INTERVAL, seconds")
    parser.add_argument("--port", type=int, default=9242, help="the nodes' CQL port")
    parser.add_argument("--storage-port", type=int, default=7300)
    parser.add_argument("--jmx-port", type=int, default=7550, help="node 1's; node K: + 100 (K - 1)")
    parser.add_argument("--s1-at", type=float, default=0.1, help="share of the pages requested when node 2 is killed")
    parser.add_argument("--node-down", type=float, default=60.0, help="seconds node 2 stays down")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds from node 2's return to scenario 2")
    parser.add_argument("--s2-at", type=float, default=0.45, help="share of the pages requested at scenario 2")
    parser.add_argument("--outage", type=float, default=30.0, help="seconds all three nodes stay down")
    parser.add_argument("--outage-signal", choices=("kill", "term"), default="kill")
    parser.add_argument("--max-resume", type=float, default=30.0, help="seconds from the nodes' return to a write")
    parser.add_argument("--max-warnings", type=int, default=100, help="warning and error lines, at most")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds the crawl may take; then it is killed")
    parser.add_argument("--keep", action="store_true", help="keep the nodes' data")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the cleanup runs on SIGTERM too
    results = Results("cassandra_faults")
    try:
        code = report(args, run(args), results)
    except RuntimeError as exc:  # a scenario that could not be run (everything is stopped)
        print(f"benchmark aborted: {exc}")
        return 1
    results.write()
    return code


if __name__ == "__main__":
    sys.exit(main())
