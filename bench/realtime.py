"""Real-time submission into a busy crawl: the time from submitting a URL to its page's record
(fetched, with its title) being readable in the UrlStore, for three kinds of submission.

    python -m bench.realtime                      # 2 workers, 100 busy hosts, 3 URLs/s for 60 s
    python -m bench.realtime --hosts 150 --interval 0.5 --rate 2

A loopback site (crawler/demo/site.py) whose pages answer after --delay s (robots.txt at
once); a throwaway redis-server; --workers ``scrapy crawl broad`` workers (links not
followed, one SQLite UrlStore in their shared crawl directory, FRONTIER_HOST_INTERVAL
--interval, the defaults otherwise). The first is given --pages pages of each of --hosts
hosts as seeds: a crawl that stays busy for the whole run, every worker as busy as it can
be and every host with a long queue. After --warmup s, a submitter submits --rate URLs a
second for --seconds, through ``scrapy submit``'s code path (crawler/frontier/submit.py,
the UrlStore read as the command reads it), the three kinds in turn:

- ``new host``: the first page of a host the crawl has not seen (its robots.txt is
  fetched first: two requests in turn);
- ``new URL, busy host``: a page of a seeded host that was not seeded (to the head of the
  host's queue: its next turn);
- ``queued deep``: a seeded page from the last quarter of its host's queue, not fetched
  yet (promoted: to the head of the host's queue; with ``--no-promotion``, put as before
  promotion, it waits its turn: drained at --drain s).

A reader thread polls the SQLite file every 10 ms, as any program reading the UrlStore
would. Bounded: the workers are stopped --drain s after the last submission, the crawl
unfinished.

Printed for each kind: the statuses ``submit`` answered; p50/p90/p99/max of submission ->
readable against the targets (p50 <= 0.5 s, p99 <= 2 s); submission -> the request at the
site (from the site's own log). Also the crawl's rate and the polite limit (hosts /
(interval + answer)), and politeness by the site's arrival log (the smallest gap between
two requests to one host).
"""

from __future__ import annotations

import argparse
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

from scrapy.settings import Settings

from crawler.demo.site import serve_site
from crawler.freshness.policy import FetchPolicy
from crawler.frontier import submit
from crawler.frontier.connection import frontier_from_settings
from crawler.urls import url_options
from testing.sampling import percentile
from testing.servers import RedisServer
from testing.workers import clean_env, launch_worker, loopback_settings, wait4

TARGET_P50, TARGET_P99 = 0.5, 2.0
POLL = 0.01  # seconds between the reader's looks at the UrlStore
KINDS = ("new host", "new URL, busy host", "queued deep")


class Reader(threading.Thread):
    """Polls the SQLite UrlStore for the URLs submitted and not yet readable, and counts
    the pages fetched."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path = path
        self.pending: dict[str, float] = {}  # url -> submitted at
        self.readable: dict[str, float] = {}  # url -> readable at
        self.fetched = 0  # pages recorded, at the last look
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def expect(self, url: str, at: float) -> None:
        with self.lock:
            self.pending[url] = at

    def is_fetched(self, urls: list[str]) -> set[str]:
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
        try:
            marks = ",".join("?" * len(urls))
            return {u for (u,) in db.execute(f"SELECT url FROM urls WHERE url IN ({marks})", urls)}
        finally:
            db.close()

    def fetched_at(self, urls: list[str]) -> dict[str, float]:
        if not urls:
            return {}
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
        try:
            marks = ",".join("?" * len(urls))
            return dict(db.execute(f"SELECT url, fetched_at FROM urls WHERE url IN ({marks})", urls))
        finally:
            db.close()

    def run(self) -> None:
        db = None
        looked = 0.0
        while not self.stop.is_set():
            time.sleep(POLL)
            if db is None:
                if not self.path.exists():
                    continue
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
            try:
                if time.monotonic() - looked > 1:
                    looked = time.monotonic()
                    self.fetched = db.execute("SELECT count(*) FROM urls WHERE fate = 'fetched'").fetchone()[0]
                with self.lock:
                    urls = list(self.pending)
                if not urls:
                    continue
                marks = ",".join("?" * len(urls))
                rows = db.execute(
                    f"SELECT url FROM urls WHERE url IN ({marks}) AND fate = 'fetched' "
                    "AND json_extract(metadata, '$.title') IS NOT NULL",
                    urls,
                ).fetchall()
            except sqlite3.OperationalError:  # (its tables not made yet)
                continue
            now = time.time()
            with self.lock:
                for (url,) in rows:
                    self.pending.pop(url, None)
                    self.readable[url] = now
        if db is not None:
            db.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=100, help="busy hosts (seeded)")
    parser.add_argument("--pages", type=int, default=300, help="pages seeded of each busy host")
    parser.add_argument("--interval", type=float, default=0.25, help="FRONTIER_HOST_INTERVAL (s)")
    parser.add_argument("--rate", type=float, default=3.0, help="URLs submitted a second (the kinds in turn)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long URLs are submitted")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds of crawling before the first submission")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds a page takes to answer")
    parser.add_argument("--drain", type=float, default=15.0, help="seconds to wait for the last records")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of the workers (repeatable)"
    )
    parser.add_argument(
        "--no-promotion", action="store_true", help="put URLs as before promotion: one queued already waits its turn"
    )
    args = parser.parse_args()

    count = int(args.rate * args.seconds)
    new_hosts = -(-count // len(KINDS))
    if args.hosts + new_hosts > 200:
        print(f"--hosts + the new hosts submitted ({new_hosts}) must be at most 200 (the site's)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="realtime-"))
    name = "realtime"
    extra = new_hosts + 10  # pages of a busy host that are not seeded
    with (
        serve_site(hosts=args.hosts + new_hosts, pages=args.pages + extra, delay=args.delay) as site,
        RedisServer(work / "redis") as redis_server,
    ):
        seeds = work / "seeds.txt"
        seeds.write_text(
            "".join(site.url(h, f"/p{p}.html") + "\n" for p in range(args.pages) for h in range(args.hosts))
        )
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        overrides = {
            "FRONTIER_CLOSE_WHEN_IDLE": False,
            "CRAWL_FOLLOW_LINKS": False,
            "FRONTIER_HOST_INTERVAL": args.interval,
            "LOG_LEVEL": "INFO",
        }
        for pair in args.set:
            setting, _, value = pair.partition("=")
            overrides[setting] = value
        workers = [
            launch_worker(
                work, f"w{n}", seeds if n == 0 else None, loopback_settings(name, work / f"w{n}.log", **overrides), env
            )
            for n in range(args.workers)
        ]
        reader = Reader(work / "crawl" / name / "urlstore.sqlite")
        submitted: dict[str, tuple[str, float, str]] = {}  # url -> kind, submitted at, status
        try:
            deadline = time.monotonic() + 120
            while not all("Spider opened" in w.text() for w in workers) or not reader.path.exists():
                if time.monotonic() > deadline or any(w.proc.poll() is not None for w in workers):
                    print("workers did not start:\n" + "\n".join(w.tail() for w in workers))
                    return 1
                time.sleep(0.1)
            reader.start()
            settings = Settings()
            settings.setmodule("settings.local")
            settings.setdict(
                {"CRAWL_NAME": name, "REDIS_URL": redis_server.url, "URLSTORE_SQLITE_PATH": str(reader.path)},
                priority="cmdline",
            )
            frontier = frontier_from_settings(settings)
            policy = FetchPolicy.reader(settings)
            options = url_options(settings)
            print(
                f"{args.workers} workers crawling {args.hosts} hosts x {args.pages} seeded pages "
                f"(interval {args.interval:g} s, pages answer in {args.delay * 1000:.0f} ms); "
                f"{args.warmup:g} s of crawling, then {count} URLs submitted ({args.rate:g}/s for {args.seconds:g} s) ..."
            )
            time.sleep(args.warmup)
            rate_from, fetched_from = time.monotonic(), reader.fetched
            start = time.time()
            for i in range(count):
                kind, n = KINDS[i % len(KINDS)], i // len(KINDS)
                if kind == "new host":
                    url = site.url(args.hosts + n, "/p0.html")
                elif kind == "new URL, busy host":
                    url = site.url(rng.randrange(args.hosts), f"/p{args.pages + n}.html")
                else:  # a seeded page of the last quarter of its host's queue, not fetched yet
                    candidates = [
                        site.url(rng.randrange(args.hosts), f"/p{rng.randrange(args.pages * 3 // 4, args.pages)}.html")
                        for _ in range(20)
                    ]
                    done = reader.is_fetched(candidates)
                    url = next((u for u in candidates if u not in done and u not in submitted), None)
                    if url is None:
                        print("  no seeded page left unfetched: a longer queue is needed (--pages)")
                        continue
                wait = start + i / args.rate - time.time()
                if wait > 0:
                    time.sleep(wait)
                at = time.time()
                reader.expect(url, at)
                if args.no_promotion:
                    [status] = frontier.put([submit.entry(submit.Submission(url), options)])
                    frontier.redis.incr(frontier.keys.submitted)
                else:
                    fetched = policy.recent if policy else None
                    [(_, status)] = submit.submit(frontier, [submit.Submission(url)], options, fetched)
                submitted[url] = (kind, at, status)
            deadline = time.monotonic() + args.drain
            while reader.pending and time.monotonic() < deadline:
                time.sleep(0.1)
            crawled = (reader.fetched - fetched_from) / (time.monotonic() - rate_from)
            reader.stop.set()
            reader.join(5)
            if policy is not None:
                policy.close()
        finally:
            for w in workers:
                if w.proc.poll() is None:
                    w.proc.send_signal(signal.SIGINT)
            for w in workers:
                wait4(w.proc, 30)
        hits = site.hits()

    first_hit = {}
    for hit in hits:
        first_hit.setdefault((hit.host, hit.path), hit)
    answer = statistics_of([h.end - h.start for h in hits if h.end is not None and not h.path.endswith("robots.txt")])
    limit = args.hosts / (args.interval + answer)
    print(
        f"\nthe crawl: {crawled:.1f} pages/s while URLs were submitted; polite limit of the busy hosts {limit:.0f} pages/s"
    )
    ok = True
    for kind in KINDS:
        urls = [u for u, (k, _, _) in submitted.items() if k == kind]
        statuses: dict[str, int] = {}
        for u in urls:
            statuses[submitted[u][2]] = statuses.get(submitted[u][2], 0) + 1
        latencies = [reader.readable[u] - submitted[u][1] for u in urls if u in reader.readable]
        to_site = []
        for u in urls:
            host, path = u.split("://", 1)[1].split("/", 1)
            hit = first_hit.get((host.split(":")[0], "/" + path))
            if hit is not None:
                to_site.append(hit.wall - submitted[u][1])
        print(f"{kind}: {len(urls)} URLs ({', '.join(f'{n} {s}' for s, n in statuses.items())})")
        if not latencies:
            print("  none readable")
            ok = False
            continue
        p50, p90, p99 = (percentile(latencies, q) for q in (0.5, 0.9, 0.99))
        met = p50 <= TARGET_P50 and p99 <= TARGET_P99 and len(latencies) == len(urls)
        ok = ok and met
        print(
            f"  submission -> readable: p50 {p50:.3f} s   p90 {p90:.3f} s   p99 {p99:.3f} s   max {max(latencies):.3f} s"
            f"   ({'met' if met else 'MISSED'}: p50 <= {TARGET_P50} s, p99 <= {TARGET_P99} s"
            + (f"; {len(urls) - len(latencies)} never readable" if len(latencies) < len(urls) else "")
            + ")"
        )
        if to_site:
            print(
                f"  submission -> request at the site: p50 {percentile(to_site, 0.5):.3f} s   "
                f"p99 {percentile(to_site, 0.99):.3f} s"
            )
        stages = stage_times(urls, submitted, first_hit, reader)
        if stages:
            print(
                "  where the time went (p50): "
                + "   ".join(f"{k} {percentile(v, 0.5):.3f} s" for k, v in stages.items())
            )
    gaps: dict[str, list[float]] = {}
    for hit in hits:
        gaps.setdefault(hit.host, []).append(hit.start)
    smallest = min((b - a for starts in gaps.values() for a, b in zip(starts, starts[1:], strict=False)), default=0.0)
    print(f"politeness (the site's arrival log): smallest gap between two requests to one host {smallest:.3f} s")
    print(f"(work directory {work})")
    return 0 if ok else 1


def stage_times(urls, submitted, first_hit, reader) -> dict[str, list[float]]:
    """Each readable URL's time split at its request's arrival at the site, the end of the
    site's answer and the page's callback in the worker (its record's fetched_at)."""
    fetched_at = reader.fetched_at([u for u in urls if u in reader.readable])
    stages: dict[str, list[float]] = {"to the site": [], "the answer": [], "to the callback": [], "to the record": []}
    for u in urls:
        host, path = u.split("://", 1)[1].split("/", 1)
        hit = first_hit.get((host.split(":")[0], "/" + path))
        if hit is None or hit.end is None or u not in fetched_at:
            continue
        answered = hit.wall + (hit.end - hit.start)
        robots = first_hit.get((host.split(":")[0], "/robots.txt"))
        if robots is not None and robots.end is not None and submitted[u][1] <= robots.wall <= hit.wall:
            stages.setdefault("to robots.txt", []).append(robots.wall - submitted[u][1])
            stages.setdefault("its end to the page", []).append(hit.start - robots.end)
        stages["to the site"].append(hit.wall - submitted[u][1])
        stages["the answer"].append(hit.end - hit.start)
        stages["to the callback"].append(fetched_at[u] - answered)
        stages["to the record"].append(reader.readable[u] - fetched_at[u])
    return stages if stages["to the site"] else {}


def statistics_of(values: list[float]) -> float:
    """The median of ``values`` (0 when there are none)."""
    return percentile(values, 0.5) if values else 0.0


if __name__ == "__main__":
    sys.exit(main())
