"""Real-time submission: the time from submitting a URL to its page's record (fetched, with
its title) being readable in the UrlStore, with workers running.

    python -m bench.realtime                          # 2 workers, 20 URLs/s for 60 s
    python -m bench.realtime --rate 40 --seconds 30 --workers 1

A loopback site (crawler/demo/site.py) of --hosts hosts whose pages answer after --delay s
(robots.txt at once); a throwaway redis-server; --workers ``scrapy crawl broad`` workers
waiting for work (FRONTIER_CLOSE_WHEN_IDLE off, links not followed, one SQLite UrlStore in
their shared crawl directory, the defaults otherwise). A submitter thread submits --rate
URLs a second for --seconds through ``scrapy submit``'s code path (crawler/frontier/submit.py,
in this process), each a page not fetched before, the hosts in turn (so politeness does not
bind: a host's first URL also waits for its robots.txt); a reader thread polls the SQLite
file every 10 ms, as any program reading the UrlStore would, and notes when each URL's
record is there. Bounded: the workers are stopped --drain s after the last submission.

Prints p50/p90/p99/max of submission -> readable against the targets (p50 <= 0.5 s,
p99 <= 2 s), and where the time goes, from the site's own log of each page's request:
submission -> the request reaching the site (frontier, worker wake-up, robots.txt,
downloader), the answer (--delay), and the answer's end -> readable (page process, item
pipelines, the UrlStore's group commit, the reader's poll).
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from scrapy.settings import Settings

from crawler.demo.site import serve_site
from crawler.frontier import submit
from crawler.frontier.connection import frontier_from_settings
from crawler.urls import url_options
from tests.harness import RedisServer, clean_env, launch_worker, loopback_settings, percentile, wait4

ROOT = Path(__file__).resolve().parents[1]

TARGET_P50, TARGET_P99 = 0.5, 2.0
POLL = 0.01  # seconds between the reader's looks at the UrlStore


class Reader(threading.Thread):
    """Polls the SQLite UrlStore for the URLs submitted and not yet readable."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path = path
        self.pending: dict[str, float] = {}  # url -> submitted at
        self.readable: dict[str, float] = {}  # url -> readable at
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def expect(self, url: str, at: float) -> None:
        with self.lock:
            self.pending[url] = at

    def run(self) -> None:
        db = None
        while not self.stop.is_set():
            time.sleep(POLL)
            if db is None:
                if not self.path.exists():
                    continue
                db = sqlite3.connect(self.path, timeout=30)
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
    parser.add_argument("--rate", type=float, default=20.0, help="URLs submitted a second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long URLs are submitted")
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds a page takes to answer")
    parser.add_argument("--drain", type=float, default=15.0, help="seconds to wait for the last records")
    args = parser.parse_args()

    count = int(args.rate * args.seconds)
    pages = max(5, -(-count // args.hosts))
    work = Path(tempfile.mkdtemp(prefix="realtime-"))
    name = "realtime"
    with (
        serve_site(hosts=args.hosts, pages=pages, delay=args.delay) as site,
        RedisServer(work / "redis") as redis_server,
    ):
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        overrides = {"FRONTIER_CLOSE_WHEN_IDLE": False, "CRAWL_FOLLOW_LINKS": False, "LOG_LEVEL": "INFO"}
        workers = [
            launch_worker(work, f"w{n}", None, loopback_settings(name, work / f"w{n}.log", **overrides), env)
            for n in range(args.workers)
        ]
        try:
            deadline = time.monotonic() + 60
            while not all("Spider opened" in w.text() for w in workers):
                if time.monotonic() > deadline or any(w.proc.poll() is not None for w in workers):
                    print("workers did not start:\n" + "\n".join(w.tail() for w in workers))
                    return 1
                time.sleep(0.1)
            settings = Settings()
            settings.setmodule("settings.local")
            settings.setdict({"CRAWL_NAME": name, "REDIS_URL": redis_server.url}, priority="cmdline")
            frontier = frontier_from_settings(settings)
            options = url_options(settings)
            reader = Reader(work / "crawl" / name / "urlstore.sqlite")
            reader.start()
            urls = [site.url(i % args.hosts, f"/p{i // args.hosts}.html") for i in range(count)]
            submitted: dict[str, float] = {}
            print(
                f"{args.workers} workers; submitting {count} URLs ({args.rate:g}/s for {args.seconds:g} s) "
                f"to {args.hosts} hosts answering in {args.delay * 1000:.0f} ms ..."
            )
            start = time.time()
            for i, url in enumerate(urls):
                wait = start + i / args.rate - time.time()
                if wait > 0:
                    time.sleep(wait)
                at = time.time()
                reader.expect(url, at)
                [(_, status)] = submit.submit(frontier, [submit.Submission(url)], options)
                if status != "added":
                    print(f"  {url}: {status}")
                submitted[url] = at
            deadline = time.monotonic() + args.drain
            while reader.pending and time.monotonic() < deadline:
                time.sleep(0.1)
            reader.stop.set()
            reader.join(5)
        finally:
            for w in workers:
                if w.proc.poll() is None:
                    w.proc.send_signal(signal.SIGINT)
            for w in workers:
                wait4(w.proc, 30)
        hits = {}
        for hit in site.page_hits():
            hits.setdefault((hit.host, hit.path), hit)

    latencies = [reader.readable[u] - submitted[u] for u in submitted if u in reader.readable]
    missing = len(submitted) - len(latencies)
    print(f"\nsubmission -> record readable in the UrlStore, {len(latencies)} of {len(submitted)} URLs:")
    p50, p90, p99 = (percentile(latencies, q) for q in (0.5, 0.9, 0.99))
    print(f"  p50 {p50:.3f} s   p90 {p90:.3f} s   p99 {p99:.3f} s   max {max(latencies):.3f} s")
    print(
        f"  targets: p50 <= {TARGET_P50} s {'met' if p50 <= TARGET_P50 else 'MISSED'}, "
        f"p99 <= {TARGET_P99} s {'met' if p99 <= TARGET_P99 else 'MISSED'}"
        + (f"; {missing} never readable" if missing else "")
    )
    # a host's first URL waits for its robots.txt too (fetched once, shared by the workers)
    first = set(urls[: args.hosts])
    for label, group in (("a host's first URL", True), ("later URLs", False)):
        values = [
            reader.readable[u] - submitted[u] for u in submitted if u in reader.readable and (u in first) == group
        ]
        if values:
            print(
                f"  {label + ':':20s} {len(values):5d} URLs, p50 {percentile(values, 0.5):.3f} s   "
                f"p99 {percentile(values, 0.99):.3f} s   max {max(values):.3f} s"
            )
    # where the time goes, from the site's log of each request (arrival on the wall clock)
    to_site, answer, after = [], [], []
    for url, at in submitted.items():
        host, path = url.split("://", 1)[1].split("/", 1)
        hit = hits.get((host.split(":")[0], "/" + path))
        if hit is None or hit.end is None or url not in reader.readable:
            continue
        to_site.append(hit.wall - at)
        answer.append(hit.end - hit.start)
        after.append(reader.readable[url] - (hit.wall + hit.end - hit.start))
    for label, values in (
        ("submission -> request at the site", to_site),
        ("the answer", answer),
        ("answer's end -> readable", after),
    ):
        if values:
            print(
                f"  {label:36s} p50 {percentile(values, 0.5) * 1000:6.0f} ms   p90 {percentile(values, 0.9) * 1000:6.0f} ms"
                f"   p99 {percentile(values, 0.99) * 1000:6.0f} ms   mean {statistics.mean(values) * 1000:6.0f} ms"
            )
    print(f"(work directory {work})")
    return 0 if p50 <= TARGET_P50 and p99 <= TARGET_P99 and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
