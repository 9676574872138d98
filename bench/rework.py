"""What a worker's death costs against what its archive's objects cost: pages fetched
twice after one of three workers is SIGKILLed, and WARC objects (S3 PUTs) per 1,000 pages,
for several ARCHIVE_MAX_SECONDS (a lease is acknowledged once its WARC batch is stored).

    python -m bench.rework                         # 30, 10, 5 and 2 s; kill at 20 s
    python -m bench.rework --ages 30,5 --kill-at 15

Each run: the demo site, a throwaway redis-server, three workers (interval 0.25 s, the
local WARC directory for S3); worker 0 SIGKILLed at --kill-at s. By the site's log: pages
fetched twice; and the objects stored per 1,000 pages.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.results import Results
from crawler.demo.site import serve_site
from testing.docsites import wait_or_kill
from testing.servers import RedisServer
from testing.workers import clean_env, crawl_command, start_worker

WORKERS = 3
INTERVAL = 0.25


def run(age: float, args) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"rework-{age:g}-"))
    with serve_site(hosts=args.hosts, pages=args.pages, delay=args.delay) as site, RedisServer(str(work)) as redis:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        env = {**clean_env(), "REDIS_URL": redis.url}
        started = time.monotonic()
        procs = []
        for n in range(WORKERS):  # (every worker seeds: seeding is idempotent)
            settings = {
                "CRAWL_NAME": "rework",
                "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
                "FRONTIER_HOST_INTERVAL": INTERVAL,
            }
            settings |= {"ARCHIVE_MAX_SECONDS": age, "LOG_FILE": work / f"worker-{n}.log"}
            procs.append(
                start_worker(crawl_command(work / f"pages-{n}.jsonl", seeds, settings), env, work / f"{n}.out")
            )
        time.sleep(max(args.kill_at - (time.monotonic() - started), 0))
        os.kill(procs[0].pid, signal.SIGKILL)
        ended = wait_or_kill(procs[1:], started, args.timeout)
        answered = Counter((h.host, h.path) for h in site.page_hits() if h.status == 200)
    objects = sum(1 for _ in (work / "crawl" / "rework" / "warc").rglob("*.warc.gz"))
    shutil.rmtree(work, ignore_errors=True)
    return {
        "pages": len(answered),
        "twice": sum(n - 1 for n in answered.values()),
        "objects": objects,
        "ends": ", ".join(f"{t:.0f} s" + ("" if c is not None else " KILLED") for t, c in ended.values()),
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
    results = Results("rework")
    print(f"{WORKERS} workers, {args.hosts} hosts x {args.pages} pages; worker 0 SIGKILLed at {args.kill_at:g} s")
    print(
        f"{'ARCHIVE_MAX_SECONDS':>19} {'pages':>6} {'fetched twice':>13} {'objects':>7} {'per 1,000 pages':>15}  ends"
    )
    for age in (float(a) for a in args.ages.split(",")):
        r = run(age, args)
        per = 1000 * r["objects"] / max(r["pages"], 1)
        print(f"{age:19g} {r['pages']:6d} {r['twice']:13d} {r['objects']:7d} {per:15.2f}  {r['ends']}", flush=True)
        results.add(f"ARCHIVE_MAX_SECONDS {age:g}: pages fetched twice", r["twice"], "pages")
        results.add(f"ARCHIVE_MAX_SECONDS {age:g}: WARC objects per 1,000 pages", per, "objects")
    results.write()


if __name__ == "__main__":
    main()
