"""What a worker's death costs, against what its archive's objects cost: pages fetched
twice after one of three workers is SIGKILLed, and WARC objects (S3 PUTs) per 1,000
pages, for several ARCHIVE_MAX_SECONDS.

    python -m bench.rework                         # 30, 10, 5 and 2 s; kill at 20 s
    python -m bench.rework --ages 30,5 --kill-at 15

A page's lease is acknowledged once its WARC batch is stored (data before metadata), so a
worker that dies loses its downloads in flight and the pages of its open batch: the
younger a batch is stored, the fewer pages are fetched again, and the more objects
(PUTs) the archive takes. Each run: the demo site (crawler/demo/site.py, --hosts hosts of
--pages pages, --delay s per answer) on loopback, a throwaway redis-server, three
``scrapy crawl broad`` workers with the defaults but ARCHIVE_MAX_SECONDS and the interval
(0.25 s), the local WARC directory standing in for S3 (one object = one PUT). Worker 0 is
SIGKILLed --kill-at seconds in; the others end by themselves (killed at --timeout).

Figures per age, from the site's own request log: pages (distinct URLs answered),
pages fetched twice (answers past the first of each URL), the dead worker's batch that
was never stored (its spool file, left for the next worker to store), objects stored and
objects per 1,000 pages.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from crawler.demo.site import serve_site
from testing.docsites import wait_or_kill
from testing.servers import RedisServer
from testing.workers import clean_env, crawl_command

ROOT = Path(__file__).resolve().parents[1]

WORKERS = 3
INTERVAL = 0.25


def run(age: float, hosts: int, pages: int, delay: float, kill_at: float, timeout: float) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"rework-{age:g}-"))
    with serve_site(hosts=hosts, pages=pages, delay=delay) as site, RedisServer(str(work)) as redis_server:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        procs = []
        started = time.monotonic()
        for n in range(WORKERS):
            settings = {
                "CRAWL_NAME": "rework",
                "CRAWL_DIR": work / "crawl",
                "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
                "FRONTIER_HOST_INTERVAL": INTERVAL,
                "ARCHIVE_MAX_SECONDS": age,
                "LOG_FILE": work / f"worker-{n}.log",
            }
            cmd = crawl_command(work / f"pages-{n}.jsonl", seeds, settings)  # (seeding is idempotent)
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        time.sleep(max(kill_at - (time.monotonic() - started), 0))
        hits_at_kill = len(site.page_hits())
        os.kill(procs[0].pid, signal.SIGKILL)
        ended = wait_or_kill(procs[1:], started, timeout)
        answered = Counter((h.host, h.path) for h in site.page_hits() if h.status == 200)
    warc = work / "crawl" / "rework" / "warc"
    spool = work / "crawl" / "rework" / "archive-spool"
    return {
        "age": age,
        "pages": len(answered),
        "twice": sum(n - 1 for n in answered.values()),
        "at_kill": hits_at_kill,
        "objects": sum(1 for _ in warc.rglob("*.warc.gz")) if warc.exists() else 0,
        "left_spool": sum(1 for _ in spool.rglob("*.warc.gz")) if spool.exists() else 0,
        "ended": ended,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ages", default="30,10,5,2", help="ARCHIVE_MAX_SECONDS values, comma separated")
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=25)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds per page answer")
    parser.add_argument("--kill-at", type=float, default=20.0, help="seconds after the start worker 0 is killed")
    parser.add_argument("--timeout", type=float, default=180.0, help="the other workers are killed after this")
    args = parser.parse_args()
    print(
        f"{WORKERS} workers, {args.hosts} hosts x {args.pages} pages, interval {INTERVAL} s; "
        f"worker 0 SIGKILLed at {args.kill_at:g} s"
    )
    print(
        f"{'ARCHIVE_MAX_SECONDS':>19} {'pages':>6} {'fetched twice':>13} {'objects':>7} {'per 1,000 pages':>15}  ends"
    )
    for age in (float(a) for a in args.ages.split(",")):
        r = run(age, args.hosts, args.pages, args.delay, args.kill_at, args.timeout)
        ends = ", ".join(f"{t:.0f} s" + ("" if c is not None else " KILLED") for t, c in r["ended"].values())
        per = 1000 * r["objects"] / r["pages"] if r["pages"] else float("nan")
        print(
            f"{age:19g} {r['pages']:6d} {r['twice']:13d} {r['objects']:7d} {per:15.2f}  {ends}"
            f" (answers by the kill: {r['at_kill']}; the dead worker's unstored batch: {r['left_spool']} spool file)",
            flush=True,
        )


if __name__ == "__main__":
    main()
