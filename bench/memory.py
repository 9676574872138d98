"""Resident memory of one worker over a long crawl of real HTML, every process of it.

Setup (the sites of bench/doc_crawl.py: Debian's documentation trees on 127.0.0.2..):

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.memory                     # ten minutes, interval 0.05 s
    python -m bench.memory --seconds 120 --every 5
    python -m bench.memory --seconds 150 --set PAGE_PROCESSES=2

The sites hold some 3,900 pages, a minute and a half of crawling, so each is also served
as --mirrors copies (12: enough pages for more than ten minutes), on 127.0.K.x for copy K
of the site on 127.0.0.x; each HTML page of copy K ends with a comment naming it, so no
page is an exact copy of another (an exact copy's links are not followed): the copies are
near copies, read, archived and stored like any page. One ``scrapy crawl broad`` worker
with the project's defaults (every pipeline, the local WARC archive, the SQLite UrlStore;
``--set NAME=VALUE`` changes one) on its own throwaway redis-server, at
FRONTIER_HOST_INTERVAL=--interval (0.05 s over a hundred hosts: the highest rate the
worker reaches here is set by its CPU, not by politeness), ended by CLOSESPIDER_TIMEOUT
(--seconds) and killed if it has not ended 60 s after that. Every --every seconds the
resident set size (VmRSS) of the worker's process and of each of its child processes
(the page processes) is read with psutil. Nothing is sent anywhere but 127.0.0.0/8.

Figures: a line per sample (seconds, pages answered so far and pages/s since the last
sample, MB of the worker, of its children, in all); then per process and in all the peak,
the steady figure (the median of the samples of the second half of the run) and the
growth (the median of the last quarter's samples less that of the second quarter's),
against the target of 300 MB per worker with all its processes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from bench.results import Results
from testing.docsites import KILL_AFTER, mirrored_sites, wait_or_kill
from testing.sampling import children, rss_mb
from testing.servers import RedisServer
from testing.workers import clean_env

ROOT = Path(__file__).resolve().parents[1]

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
        seeds = work / "seeds.txt"
        seeds.write_text("".join(site.seed + "\n" for site in sites))
        cmd = [sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"seeds={seeds}"]
        cmd += ["-a", "allowed_prefixes=" + ",".join(s.scope for s in sites)]
        for name, value in {
            "CRAWL_NAME": "memory",
            "CRAWL_DIR": work / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": args.interval,
            "CLOSESPIDER_TIMEOUT": args.seconds,
            "LOG_FILE": work / "worker.log",
        }.items():
            cmd += ["-s", f"{name}={value}"]
        for setting in args.set:
            cmd += ["-s", setting]
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        print(
            f"one worker, {args.seconds:g} s, interval {args.interval:g} s, {len(sites)} sites, "
            f"a sample every {args.every:g} s" + (f"; {', '.join(args.set)}" if args.set else "")
        )
        rows: list = []
        stop = threading.Event()
        started = time.monotonic()
        with open(work / "out.txt", "wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
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
