"""A crawl that survives Cassandra node failures, measured: two workers crawl 200 loopback
hosts into a three-node Cassandra cluster (the UrlStore); one node is SIGKILLed mid-crawl
and started again a minute later, then all three are stopped for 30 s. At the end every
page the site answered 200 must have its row, with its archive pointer.

    python -m bench.cassandra_faults                        # 10-16 minutes on 2 shared cores
    python -m bench.cassandra_faults --outage-signal term   # scenario 2 by SIGTERM
    python -m bench.cassandra_faults --hosts 40 --pages 100 --interval 2 --s1-at 0.05 \
        --node-down 20 --settle 5 --s2-at 0.3 --outage 20   # a smaller crawl, some 8 minutes

Needs what scripts/cassandra.py needs (Java 11 or 17; Cassandra 5.0, downloaded once by
Maven). Everything runs on 127.0.0.0/8 and is stopped at the end, on failure and on
SIGTERM too. Most of the time goes to the nodes' starts (30 s each on a quiet machine,
two minutes and more on a busy one, replaying their commit logs after a SIGKILL).

What it runs:
- a Cassandra cluster of its own (scripts/cassandra.py): nodes on 127.0.0.1-3, CQL port
  --port (9242), inter-node port --storage-port (7300), JMX --jmx-port (7550, +100 per
  node), data in a new directory under /tmp (removed at the end, logs kept). It does not
  start when any of those ports is taken (a node on 9042/7000/7199 is never touched);
- the demo site (crawler/demo/site.py): --hosts hosts (127.0.0.2 ...) of --pages pages, with
  its own request log (arrival time, host, path and status of every request);
- a private redis-server and two ``scrapy crawl broad`` workers (testing/servers.py):
  URLSTORE_BACKEND=cassandra, the keyspace made by the workers with 3 replicas in
  datacenter1 (CASSANDRA_REPLICATION_FACTOR, CASSANDRA_DATACENTER: NetworkTopologyStrategy),
  CASSANDRA_WRITE_CONSISTENCY=LOCAL_QUORUM, FRONTIER_HOST_INTERVAL=--interval, the WARC
  archive in a local directory, the other settings the project's. Worker 1 starts once
  worker 0 has made the keyspace.

Scenario 1: once --s1-at of the site's pages were requested, node 2 is SIGKILLed, and
started again (with its data) --node-down seconds later. Scenario 2: --settle seconds after
node 2 answers again (and once --s2-at of the pages were requested), all three nodes are
stopped at once (--outage-signal kill: SIGKILL, the default; term: SIGTERM) and left down
--outage seconds; then node 1 (the seed) is started, and nodes 2 and 3 once node 1 gossips
(a node does not start while no seed answers). The workers are left to end by themselves
(killed after --timeout seconds). Then the urls table is read back whole at QUORUM and at
ALL, and every archive pointer is read from the WARC files.

Checks (exit code 0 when all hold, 1 otherwise):
- the keyspace has 3 replicas in datacenter1, and the workers say they write at LOCAL_QUORUM;
- lost 0: every URL the site answered 200 (by its own log) has its row, read at QUORUM and
  at ALL: its own (or a redirect's, by final_url) with status 200 and an archive pointer,
  or for an exact copy of another page (fate duplicate, not archived twice) one whose
  canonical_url's row has the pointer; every pointer reads back a WARC record of its URL;
  every page in the workers' feeds (written once stored) has its row;
- every page of the site was requested, and every page fetched twice had its lease given
  back by a worker (refetched pages <= the workers' leases given back);
- scenario 1: writes went on while node 2 was down, and none failed;
- scenario 2: the faults came with some of the crawl still to do, writes resumed at most
  --max-resume seconds after the three nodes answered CQL again, and went on after;
- the workers ended by themselves (exit code 0) and left nothing in the frontier (queued
  or leased);
- the workers' warning and error lines: at most --max-warnings in all;
- politeness by the site's arrival log: no two requests to one host (robots.txt
  included) closer than the interval less 10 ms.

Figures printed: pages (distinct URLs answered 200), records (rows at QUORUM and ALL, how
the pages map to them), lost, archive pointers read back, the workers' own counts
(records written, writes failed, leases given back), refetched pages (answers 200 past the
first of each URL, by scenario), each scenario's timeline, the time from the nodes' return
to the first write (the rows' own write times, the driver's client-side timestamps), the
site's answers meanwhile, the warning lines by scenario and kind, how the workers ended,
the crawl's duration, what was left in the frontier, and the politeness figures.
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
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

import redis

from crawler.archive.storage import LocalStorage
from crawler.archive.warc import read_record
from crawler.demo.site import Site
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import Keys
from crawler.urls import normalize_url
from testing.cassandra import CassandraNodes, answers
from testing.servers import RedisServer
from testing.workers import clean_env, launch_worker, loopback_settings, read_pages, seed_file

ROOT = Path(__file__).resolve().parents[1]

NODES = (1, 2, 3)
CRAWL = "cassandra-faults"
KEYSPACE = "faults"
DATACENTER = "datacenter1"  # scripts/cassandra.py's
WORKERS = 2
SITE_DELAY = 0.01  # seconds per page answer
TOLERANCE = 0.010  # seconds a gap may fall short of the interval (the clocks' and the site's jitter)
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \[([^\]]+)\] (WARNING|ERROR|CRITICAL): (.*)$")


class Sampler(threading.Thread):
    """Every second, the workers' live tally in Redis (crawler/observe/livestats.py, which each
    worker adds to every LIVE_STATS_INTERVAL, 2 s): records written, writes failed."""

    def __init__(self, client: redis.Redis):
        super().__init__(daemon=True)
        self.client, self.key = client, Keys(CRAWL).tally
        self.samples: list[tuple[float, int, int]] = []  # (time, written, failed)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            try:
                tally = {k.decode(): int(v) for k, v in self.client.hgetall(self.key).items()}
            except redis.RedisError:
                continue
            written = sum(v for k, v in tally.items() if k.startswith("urlstore/written/"))
            self.samples.append((time.time(), written, tally.get("urlstore/failed", 0)))

    def between(self, start: float, end: float) -> tuple[int, int]:
        """(records written, writes failed) between two times."""

        def at(when: float) -> tuple[float, int, int]:
            before = [s for s in self.samples if s[0] <= when]
            return before[-1] if before else (when, 0, 0)

        a, b = at(start), at(end)
        return b[1] - a[1], b[2] - a[2]


def wait_until(check, timeout: float, what: str, workers=()) -> None:
    """Poll ``check`` until true; RuntimeError past ``timeout``, or once ``workers`` (any
    given) have all ended."""
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


def lost_pages(served: set[str], rows: dict[str, dict]) -> tuple[list[str], int]:
    """The URLs answered 200 without their record: a row of status 200 (their own, or a
    redirect's whose final URL they are) with an archive pointer; for an exact copy of
    another page (fate duplicate: not archived again) its canonical_url's row has the
    pointer. And how many were such copies."""

    def archived(row) -> bool:
        return (
            row is not None and row["status"] == 200 and bool(row["archive_key"]) and row["archive_length"] is not None
        )

    by_final = {r["final_url"]: r for r in rows.values() if r["final_url"]}
    lost, copies = [], 0
    for url in sorted(served):
        row = rows.get(url)
        if row is None or row["status"] != 200:
            row = by_final.get(url)
        if row is not None and row["status"] == 200 and row["fate"] == "duplicate" and row["canonical_url"]:
            copies += 1
            row = rows.get(normalize_url(row["canonical_url"]))
        if not archived(row):
            lost.append(url)
    return lost, copies


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
    """(time, kind) of every WARNING, ERROR or CRITICAL line of the workers' logs; kind:
    the logger, level and message with URLs and numbers masked."""
    out = []
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            m = LOG_LINE.match(line)
            if m:
                when = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
                message = re.sub(r"\d+(\.\d+)?", "N", re.sub(r"https?://\S+", "URL", m.group(4)))
                out.append((when, f"[{m.group(2)}] {m.group(3)}: {message[:110]}"))
    return out


def reconnected(log: Path, node: str, since: float) -> float | None:
    """When the worker of ``log`` had its connections to ``node`` again (the driver's
    "Connection pools established" line) at or after ``since`` (the log's whole seconds)."""
    pattern = re.compile(rf"^(\S+ \S+) \[cassandra\.cluster\] INFO: Connection pools established for node {node}:")
    for line in log.read_text(errors="replace").splitlines():
        m = pattern.match(line)
        if m:
            when = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
            if when >= int(since):
                return when
    return None


def run(args) -> int:
    work = Path(tempfile.mkdtemp(prefix="cassandra-faults-"))
    cluster = CassandraNodes(work / "cassandra", len(NODES), args.port, args.storage_port, args.jmx_port, "512M")
    taken = cluster.ports_taken()
    if taken:
        print(f"ports taken: {', '.join(taken)}; choose others (--port, --storage-port, --jmx-port)")
        return 2
    site = Site(args.hosts, args.pages, SITE_DELAY)
    workers, events, redis_server, sampler = [], {}, None, None
    print(f"work directory {work}")
    try:
        began = time.monotonic()
        cluster.started(cluster.begin(), timeout=600)
        print(f"cluster: 3 nodes on {','.join(cluster.hosts)}:{args.port}, started in {time.monotonic() - began:.0f} s")
        site.start()
        expected = site.expected_fetches()
        print(f"site: {args.hosts} hosts x {args.pages} pages ({len(expected)} page requests) on port {site.port}")
        redis_server = RedisServer(work / "redis").start()
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        store = {
            "URLSTORE_BACKEND": "cassandra",
            "CASSANDRA_HOSTS": ",".join(cluster.hosts),
            "CASSANDRA_PORT": args.port,
            "CASSANDRA_KEYSPACE": KEYSPACE,
            "CASSANDRA_REPLICATION_FACTOR": 3,
            "CASSANDRA_DATACENTER": DATACENTER,
            "CASSANDRA_WRITE_CONSISTENCY": "LOCAL_QUORUM",
        }
        seeds = seed_file(work, site.seeds)
        sampler = Sampler(redis_server.client)
        events["crawl"] = time.time()
        for n in range(WORKERS):
            log = work / f"worker-{n}.log"
            settings = loopback_settings(CRAWL, log, FRONTIER_HOST_INTERVAL=args.interval, **store)
            workers.append(launch_worker(work, f"worker-{n}", seeds if n == 0 else None, settings, env))
            if n == 0:  # the keyspace made once, before the second worker starts
                wait_until(lambda: "Cassandra UrlStore: keyspace" in workers[0].text(), 120, "the keyspace", workers)
        sampler.start()

        def progress() -> float:
            return len({h.key for h in site.page_hits() if h.status is not None}) / len(expected)

        # scenario 1: node 2 SIGKILLed, started again --node-down seconds later
        wait_until(lambda: progress() >= args.s1_at, args.timeout, f"{args.s1_at:.0%} of the pages", workers)
        events["s1_progress"] = progress()
        events["s1_kill"] = time.time()
        cluster.stop(node=2, kill=True)
        print(f"{events['s1_kill'] - events['crawl']:5.0f} s  node 2 SIGKILLed ({events['s1_progress']:.0%} done)")
        time.sleep(max(events["s1_kill"] + args.node_down - time.time(), 0))
        events["s1_start"] = time.time()
        cluster.started(cluster.begin(node=2))
        events["s1_back"] = time.time()
        print(
            f"{events['s1_back'] - events['crawl']:5.0f} s  node 2 answers again (started in "
            f"{events['s1_back'] - events['s1_start']:.0f} s)"
        )

        # scenario 2: all three nodes down for --outage seconds
        time.sleep(args.settle)
        wait_until(lambda: progress() >= args.s2_at, args.timeout, f"{args.s2_at:.0%} of the pages", workers)
        events["s2_progress"] = progress()
        events["s2_stop"] = time.time()
        cluster.stop_all_at_once(kill=args.outage_signal == "kill")
        events["s2_down"] = time.time()
        signal_name = "SIGKILL" if args.outage_signal == "kill" else "SIGTERM"
        print(
            f"{events['s2_stop'] - events['crawl']:5.0f} s  all nodes stopped by {signal_name} "
            f"(down {events['s2_down'] - events['s2_stop']:.0f} s later; {events['s2_progress']:.0%} done)"
        )
        time.sleep(args.outage)
        events["s2_start"] = time.time()
        up: dict[int, float] = {}  # node -> when it answered CQL again

        def look() -> None:
            for k in cluster.answering():
                up.setdefault(k, time.time())

        def node1_gossips() -> bool:  # (nodes 2 and 3 do not start while the seed does not gossip)
            look()
            return answers("127.0.0.1", args.storage_port) or first.poll() is not None

        def all_answer() -> bool:
            look()
            return len(up) == len(NODES)

        first = cluster.begin(node=1)
        wait_until(node1_gossips, 300, "node 1")
        if first.poll() is not None:
            cluster.started(first)  # (raises when it failed)
        others = [cluster.begin(node=2)]
        for _ in range(8):  # (each start rewrites DIR/cluster.json: not at the same moment)
            look()
            time.sleep(0.25)
        others.append(cluster.begin(node=3))
        wait_until(all_answer, 400, "the three nodes' return")
        for proc in (first, *others):
            cluster.started(proc)
        events["s2_first"], events["s2_quorum"], events["s2_all"] = sorted(up.values())
        events["s2_node1"] = up[1]
        print(
            f"{events['s2_all'] - events['crawl']:5.0f} s  all nodes answer again (down "
            f"{events['s2_start'] - events['s2_down']:.0f} s; answering {events['s2_first'] - events['s2_start']:.0f}, "
            f"{events['s2_quorum'] - events['s2_start']:.0f} and {events['s2_all'] - events['s2_start']:.0f} s "
            "after the restart began)"
        )

        # the end of the crawl
        ends = {}  # worker -> (exit code, None when killed; when)
        while len(ends) < len(workers):
            for n, w in enumerate(workers):
                if n not in ends and w.proc.poll() is not None:
                    ends[n] = (w.proc.returncode, time.time())
            if time.time() > events["crawl"] + args.timeout:
                for n, w in enumerate(workers):
                    if n not in ends:
                        w.kill()
                        ends[n] = (None, time.time())
            time.sleep(0.2)
        events["end"] = max(t for _, t in ends.values())
        time.sleep(2.5)  # the sampler's last look
        sampler.done.set()
        frontier = Frontier(redis_server.client, CRAWL).stats()
        tally = {k.decode(): int(v) for k, v in redis_server.client.hgetall(Keys(CRAWL).tally).items()}

        # read back
        from cassandra import ConsistencyLevel
        from cassandra.cluster import Cluster as Driver

        driver = Driver(cluster.hosts, port=args.port, protocol_version=5)
        try:
            session = driver.connect()
            replication = session.execute(
                "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (KEYSPACE,)
            ).one()
            rows = {"QUORUM": scan(session, ConsistencyLevel.QUORUM), "ALL": scan(session, ConsistencyLevel.ALL)}
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
    got = {"site": site, "expected": expected, "workers": workers, "ends": ends, "events": events}
    got.update(sampler=sampler, frontier=frontier, tally=tally, replication=replication, rows=rows, work=work)
    return report(args, got)


def report(args, got: dict) -> int:
    """Print the figures and the checks; 0 when every check holds, else 1."""
    site, events, rows, workers = got["site"], got["events"], got["rows"], got["workers"]
    checks: list[tuple[str, bool]] = []
    hits = site.hits()
    pages = [h for h in hits if not h.path.endswith("/robots.txt")]
    answered = Counter(h.key for h in pages if h.status == 200)
    served = {normalize_url(site.url(host, path)) for host, path in answered}
    requested = {h.key for h in pages if h.status is not None}
    unrequested = sorted(got["expected"] - requested)
    at = {name: when - events["crawl"] for name, when in events.items() if not name.endswith("_progress")}
    print()

    # lost, at QUORUM and at ALL; the archive pointers; the feeds
    replication = dict(got["replication"].replication) if got["replication"] else {}
    print(f"keyspace {KEYSPACE}: {replication}")
    checks.append(("3 replicas in datacenter1", replication.get(DATACENTER) == "3"))
    levels = {m for w in workers for m in re.findall(r"Cassandra UrlStore: .*; writes (\w+), reads \w+", w.text())}
    print(f"the workers' writes: {', '.join(sorted(levels)) or 'no UrlStore line in their logs'}")
    checks.append(("the workers write at LOCAL_QUORUM", levels == {"LOCAL_QUORUM"}))
    print(
        f"pages: {len(served)} URLs answered 200 ({sum(answered.values())} answers 200 in all); "
        f"{len(requested)} of the site's {len(got['expected'])} page requests made"
    )
    lost = {}
    for level, found in rows.items():
        lost[level], copies = lost_pages(served, found)
        own = sum(1 for u in served if u in found)
        print(
            f"records at {level}: {len(found)} rows, {sum(1 for r in found.values() if r['status'] == 200)} of status "
            f"200; the pages answered 200: {own} under their own URL, {len(served) - own} under a redirect's; "
            f"{copies} exact copies (their original's row has the pointer); lost {len(lost[level])}"
            + (f", e.g. {lost[level][:3]}" if lost[level] else "")
        )
    bad = bad_pointers(rows["QUORUM"], got["work"] / "crawl" / CRAWL / "warc")
    pointers = sum(1 for r in rows["QUORUM"].values() if r["archive_key"])
    print(
        f"archive pointers: {pointers - len(bad)} read back their page, {len(bad)} did not"
        + (f", e.g. {bad[:2]}" if bad else "")
    )
    feed = {p["url"] for w in workers for p in read_pages(w.out)}
    not_in_store = sorted(u for u in feed if normalize_url(u) not in rows["QUORUM"])
    print(f"feeds (pages once stored): {len(feed)} URLs, {len(not_in_store)} without a row")
    checks.append(("lost 0 at QUORUM", not lost["QUORUM"]))
    checks.append(("lost 0 at ALL", not lost["ALL"]))
    checks.append(("every archive pointer reads back its page", not bad))
    checks.append(("every page in the feeds has its row", not not_in_store))
    checks.append(("every page of the site requested", not unrequested))
    if unrequested:
        print(f"  never requested: {len(unrequested)}, e.g. {unrequested[:3]}")

    # the workers' own counts, and the refetches by the site's log
    tally = got["tally"]
    written = {k.split("/", 2)[2]: v for k, v in tally.items() if k.startswith("urlstore/written/")}
    given_back = tally.get("frontier/lease/given_back", 0)
    print(
        f"workers' counts: records written {sum(written.values())} "
        f"({', '.join(f'{k} {v}' for k, v in sorted(written.items()))}), writes failed "
        f"{tally.get('urlstore/failed', 0)}, leases given back {given_back}, answers 200 "
        f"{tally.get('downloader/response_status_count/200', 0)}, archive records {tally.get('archive/records', 0)}"
    )
    windows = [
        ("before the faults", events["crawl"], events["s1_kill"]),
        ("scenario 1", events["s1_kill"], events["s2_stop"]),
        ("scenario 2 and after", events["s2_stop"], events["end"] + 1),
    ]
    seen, again = set(), Counter()
    for h in sorted(pages, key=lambda h: h.start):
        if h.status == 200:
            if h.key in seen:
                again[next(name for name, a, b in windows if a <= h.wall < b)] += 1
            seen.add(h.key)
    refetched = sum(again.values())
    print(
        f"refetched pages: {refetched} ({', '.join(f'{n} {again[n]}' for n, _, _ in windows)}); "
        f"leases given back by the workers: {given_back}"
    )
    checks.append(("every refetch is a page whose lease was given back", refetched <= given_back))

    # scenario 1
    down_answers = sum(1 for h in pages if h.status == 200 and events["s1_kill"] <= h.wall < events["s1_back"])
    down_written, _ = got["sampler"].between(events["s1_kill"], events["s1_back"])
    _, s1_failed = got["sampler"].between(events["s1_kill"], events["s2_stop"])
    print(
        f"scenario 1: node 2 SIGKILLed at {at['s1_kill']:.0f} s ({events['s1_progress']:.0%} of the pages "
        f"requested), started again {events['s1_start'] - events['s1_kill']:.0f} s later, answering "
        f"{events['s1_back'] - events['s1_start']:.0f} s after that; meanwhile {down_answers} answers 200 and "
        f"{down_written} records written; writes failed from the kill to scenario 2: {s1_failed}"
    )
    checks.append(("scenario 1: writes went on with node 2 down", down_written > 0))
    checks.append(("scenario 1: no write failed", s1_failed == 0))
    pools = [reconnected(w.log, "127.0.0.2", events["s1_back"] - 1) for w in workers]
    print("  the workers' connections to node 2 again: " + ", ".join(_after(t, events["s1_back"]) for t in pools))

    # scenario 2
    times = sorted(r["written"] / 1e6 for r in rows["QUORUM"].values() if r["written"])
    before = [t for t in times if t <= events["s2_stop"]]
    after = [t for t in times if t > events["s2_stop"]]
    resumed = after[0] if after else None
    signal_name = "SIGKILL" if args.outage_signal == "kill" else "SIGTERM"
    down = events["s2_down"]
    back = ", ".join(f"{events[k] - down:.0f}" for k in ("s2_first", "s2_quorum", "s2_all"))
    last = f"{before[-1] - events['s2_stop']:+.1f} s" if before else "none"
    print(
        f"scenario 2: all three nodes stopped by {signal_name} at {at['s2_stop']:.0f} s "
        f"({events['s2_progress']:.0%} of the pages requested), all down {events['s2_start'] - down:.0f} s before "
        f"the restart; they answered CQL again {back} s after they went down; the last write before the stop: {last}"
    )
    if resumed is not None:
        outage = [h for h in pages if events["s2_stop"] <= h.wall < resumed]
        print(
            f"  writes resumed {resumed - events['s2_all']:+.1f} s after all three nodes answered "
            f"({resumed - events['s2_first']:+.1f} s after the first, {resumed - events['s2_quorum']:+.1f} s after "
            f"the second); from the stop to that first write the site answered {len(outage)} requests "
            f"({len(outage) / max(resumed - events['s2_stop'], 1):.1f}/s)"
        )
    else:
        print("  writes never resumed")
    pools = [reconnected(w.log, "127.0.0.1", events["s2_node1"] - 1) for w in workers]
    print(f"  the workers' connections to node 1 again: {', '.join(_after(t, events['s2_node1']) for t in pools)}")
    resume_ok = resumed is not None and resumed - events["s2_all"] <= args.max_resume
    checks.append((f"scenario 2: writes resumed within {args.max_resume:g} s of the nodes' return", resume_ok))
    last_end = max(t for _, t in got["ends"].values())
    checks.append(("scenario 2: the crawl went on after the outage", last_end > events["s2_all"] and bool(after)))
    checks.append(("the faults came with pages still to fetch", events["s2_progress"] < 0.95))

    # the workers' warning lines
    lines = warning_lines([w.log for w in workers])
    by_window = ", ".join(f"{n} {sum(1 for t, _ in lines if a <= t < b)}" for n, a, b in windows)
    print(f"warning and error lines of the workers: {len(lines)} ({by_window}); by kind:")
    for kind, count in Counter(k for _, k in lines).most_common(10):
        print(f"  {count:6d}  {kind}")
    checks.append((f"at most {args.max_warnings} warning lines", len(lines) <= args.max_warnings))
    delays = [float(d) for w in workers for d in re.findall(r"scheduling retry in ([\d.]+) seconds", w.text())]
    if delays:
        print(f"  the driver's reconnection attempts: {len(delays)}, the longest wait scheduled {max(delays):.0f} s")

    # the end
    for n, (code, when) in sorted(got["ends"].items()):
        how = f"exited by itself, exit code {code}" if code is not None else f"killed after {args.timeout:.0f} s"
        print(f"worker {n}: {how} at {when - events['crawl']:.0f} s")
    checks.append(("the workers ended by themselves, exit code 0", all(c == 0 for c, _ in got["ends"].values())))
    print(f"crawl duration: {at['end']:.0f} s")
    frontier = got["frontier"]
    print(
        f"frontier at the end: {frontier['queued']} queued, {frontier['leased']} leased, "
        f"{frontier['retries_delayed']} retries waiting"
    )
    checks.append(("nothing left in the frontier", frontier["queued"] == 0 and frontier["leased"] == 0))

    # politeness
    arrivals = defaultdict(list)
    for h in hits:
        arrivals[h.host].append(h.start)
    smallest, close = [], 0
    for starts in arrivals.values():
        starts.sort()
        gaps = [b - a for a, b in pairwise(starts)]
        if gaps:
            smallest.append(min(gaps))
            close += sum(1 for g in gaps if g < args.interval - TOLERANCE)
    smallest.sort()
    print(
        f"politeness: {len(hits)} requests to {len(arrivals)} hosts; smallest gap per host: min {smallest[0]:.3f} s, "
        f"median {smallest[len(smallest) // 2]:.3f} s; {close} gaps below {args.interval - TOLERANCE:.2f} s"
    )
    checks.append(("politeness: no gap below the interval", close == 0))

    print()
    for name, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'}  {name}")
    failed = [name for name, ok in checks if not ok]
    print(f"{len(checks) - len(failed)} of {len(checks)} checks hold; logs in {got['work']}")
    return 1 if failed else 0


def _after(when: float | None, since: float) -> str:
    return "never" if when is None else f"{when - since:+.0f} s after it answered CQL (whole seconds)"


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
    parser.add_argument(
        "--s2-at", type=float, default=0.45, help="share of the pages requested at scenario 2, at least"
    )
    parser.add_argument("--outage", type=float, default=30.0, help="seconds all three nodes stay down")
    parser.add_argument("--outage-signal", choices=("kill", "term"), default="kill")
    parser.add_argument(
        "--max-resume", type=float, default=30.0, help="seconds from the nodes' return to the first write"
    )
    parser.add_argument("--max-warnings", type=int, default=100, help="warning and error lines of the workers, at most")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds the crawl may take; then it is killed")
    parser.add_argument("--keep", action="store_true", help="keep the nodes' data")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the cleanup runs on SIGTERM too
    try:
        return run(args)
    except RuntimeError as exc:  # a scenario that could not be run (everything is stopped)
        print(f"benchmark aborted: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
