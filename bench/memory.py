"""Resident memory of one worker over a long crawl of real HTML, every process of it.

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.memory                     # ten minutes, interval 0.05 s
    python -m bench.memory --seconds 150 --every 5 --set PAGE_PROCESSES=2

The documentation sites of testing/docsites.py and --mirrors copies of each (127.0.K.x,
every HTML page marked as copy K: near copies, read, archived and stored like any page),
crawled by one ``scrapy crawl broad`` worker with the project's defaults (``--set``
changes one) and a redis-server of its own, at FRONTIER_HOST_INTERVAL=--interval, ended by
CLOSESPIDER_TIMEOUT (--seconds). Every --every seconds psutil reads the resident set size
of the worker and of each of its children (page processes). Figures: a line a sample, then
for the worker, its children and all, the peak, the steady figure (median of the second
half's samples) and the growth (last quarter's median less the second quarter's), against
the target of 300 MB a worker with all its processes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import threading
import time

import psutil

from bench.results import Results
from testing.docsites import KILL_AFTER, mirrored_sites, wait_or_kill, worker_commands
from testing.sampling import children, rss_mb
from testing.servers import RedisServer
from testing.workers import clean_env

TARGET_MB = 300


def label(proc) -> str:
    """What a child process of the worker is: a page process or multiprocessing's
    resource tracker."""
    try:
        return "resource tracker" if "resource_tracker" in " ".join(proc.cmdline()) else "page process"
    except psutil.Error:
        return "gone"


def sample(proc: subprocess.Popen, every: float, started: float, sites, rows: list, stop: threading.Event) -> None:
    while not stop.wait(every) and proc.poll() is None:
        kids = children(proc.pid)
        main, others = rss_mb(proc.pid), [(label(k), rss_mb(k.pid)) for k in kids]
        pages = sum(site.answers.get(200, 0) for site in sites)
        last = rows[-1] if rows else (0.0, 0)
        rows.append((time.monotonic() - started, pages, main, others))
        rate = (pages - last[1]) / max(rows[-1][0] - last[0], 1e-9)
        print(
            f"{rows[-1][0]:6.0f} s {pages:7d} pages {rate:5.1f}/s   worker {main:6.0f} MB   children "
            + (" + ".join(f"{m:.0f} ({name})" for name, m in others) or "-")
            + f" MB   all {main + sum(m for _, m in others):6.0f} MB",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="CLOSESPIDER_TIMEOUT of the worker")
    parser.add_argument("--every", type=float, default=10, help="seconds between samples")
    parser.add_argument("--interval", type=float, default=0.05, help="FRONTIER_HOST_INTERVAL")
    parser.add_argument("--mirrors", type=int, default=12, help="copies of each site, on further addresses")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of the worker")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    with mirrored_sites(args.keep, args.mirrors) as (sites, work), RedisServer(str(work)) as redis_server:
        (work / "seeds.txt").write_text("".join(site.seed + "\n" for site in sites))
        settings = {"CRAWL_NAME": "memory", "FRONTIER_HOST_INTERVAL": args.interval}
        settings |= {"CLOSESPIDER_TIMEOUT": args.seconds} | dict(s.split("=", 1) for s in args.set)
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        [(cmd, cwd, env, output)] = worker_commands(sites, 1, work, env, settings, feed=False)
        print(
            f"one worker, {args.seconds:g} s, interval {args.interval:g} s, {len(sites)} sites, "
            f"a sample every {args.every:g} s" + (f"; {', '.join(args.set)}" if args.set else "")
        )
        rows: list = []
        stop = threading.Event()
        started = time.monotonic()
        with open(output, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        sampler = threading.Thread(target=sample, args=(proc, args.every, started, sites, rows, stop), daemon=True)
        sampler.start()
        (ended,) = wait_or_kill([proc], started, args.seconds + KILL_AFTER).values()
        stop.set()
        sampler.join()
    state = f"exit {ended[1]}" if ended[1] is not None else "KILLED"
    print(f"\nworker ended after {ended[0]:.0f} s ({state})")
    if not rows:
        return
    end = rows[-1][0]
    pages = rows[-1][1] / end if end else 0.0

    def quarter(n: int) -> list:
        """The samples of the n-th quarter of the run (1-4)."""
        return [r for r in rows if (n - 1) * end / 4 < r[0] <= n * end / 4] or rows

    def line(name: str, value) -> None:
        def median(part):
            return statistics.median(value(r) for r in part)

        print(
            f"{name:16} peak {max(value(r) for r in rows):6.0f} MB   steady {median(quarter(3) + quarter(4)):6.0f} MB"
            f"   growth {median(quarter(4)) - median(quarter(2)):+5.0f} MB"
        )

    def of(name: str):
        return lambda row: sum(m for n, m in row[3] if n == name)

    def total(row) -> float:
        return row[2] + sum(m for _, m in row[3])

    line("worker", lambda r: r[2])
    for name in sorted({n for r in rows for n, _ in r[3]} - {"gone"}):
        line(name, of(name))
    line("all", total)
    steady = statistics.median(total(r) for r in quarter(3) + quarter(4))
    total = [total(r) for r in rows]
    print(
        f"target: at most {TARGET_MB} MB per worker with all its processes: peak {max(total):.0f} MB, "
        f"steady {steady:.0f} MB ({'met' if max(total) <= TARGET_MB else 'not met'}); {pages:.1f} pages/s"
    )
    results = Results("memory")
    results.add("a worker with all its processes, steady", steady, "MB")
    results.add("a worker with all its processes, peak", max(total), "MB")
    results.add("pages/s meanwhile", pages, "pages/s")
    results.write()


if __name__ == "__main__":
    main()
