"""Resident memory of one worker over a long crawl of real HTML, every process of it.

Setup (the sites of bench/doc_crawl.py: Debian's documentation trees on 127.0.0.2..):

    apt-get install -y python3-doc nodejs-doc rust-doc
    python bench/memory.py                     # ten minutes, interval 0.05 s
    python bench/memory.py --seconds 120 --every 5

One ``scrapy crawl broad`` worker with the project's defaults (every pipeline, the local
WARC archive, the SQLite UrlStore) on its own throwaway redis-server, at
FRONTIER_HOST_INTERVAL=--interval (0.05 s: the highest rate the worker reaches here is set
by its CPU, not by politeness), ended by CLOSESPIDER_TIMEOUT (--seconds) and killed if it
has not ended 60 s after that. Every --every seconds the resident set size (VmRSS) of the
worker's process and of each of its child processes (the page processes) is read from
/proc. Nothing is sent anywhere but 127.0.0.0/8.

Figures: a line per sample (seconds, pages answered so far, MB of the worker, of its
children, in all); then per process and in all the peak, and the steady figure (the
median of the samples of the second half of the run), against the target of 300 MB per
worker with all its processes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.doc_crawl import KILL_AFTER, served_sites, wait_or_kill  # noqa: E402
from tests.harness import RedisServer, clean_env  # noqa: E402

TARGET_MB = 300


def rss_mb(pid: int) -> float:
    """VmRSS of a process in MB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def label(pid: int) -> str:
    """What a child process of the worker is: a page process or multiprocessing's
    resource tracker."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return "gone"
    return "resource tracker" if b"resource_tracker" in cmdline else "page process"


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def sample(proc: subprocess.Popen, every: float, started: float, sites, rows: list, stop: threading.Event) -> None:
    while not stop.wait(every) and proc.poll() is None:
        kids = children(proc.pid)
        main, others = rss_mb(proc.pid), [(label(k), rss_mb(k)) for k in kids]
        pages = sum(site.answers.get(200, 0) for site in sites)
        rows.append((time.monotonic() - started, pages, main, others))
        print(
            f"{rows[-1][0]:6.0f} s {pages:7d} pages   worker {main:6.0f} MB   children "
            + (" + ".join(f"{m:.0f} ({name})" for name, m in others) or "-")
            + f" MB   all {main + sum(m for _, m in others):6.0f} MB",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="CLOSESPIDER_TIMEOUT of the worker")
    parser.add_argument("--every", type=float, default=10, help="seconds between samples")
    parser.add_argument("--interval", type=float, default=0.05, help="FRONTIER_HOST_INTERVAL")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    with served_sites(args.keep, "memory-") as (sites, work), RedisServer(str(work)) as redis_server:
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
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        print(f"one worker, {args.seconds:g} s, interval {args.interval:g} s, a sample every {args.every:g} s")
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
    second_half = [r for r in rows if r[0] >= rows[-1][0] / 2] or rows
    pages = rows[-1][1] / rows[-1][0] if rows[-1][0] else 0.0

    def line(name: str, values: list[float], steady_values: list[float]) -> None:
        print(f"{name:16} peak {max(values):6.0f} MB   steady {statistics.median(steady_values):6.0f} MB")

    def of(name: str, row) -> float:
        return sum(m for n, m in row[3] if n == name)

    line("worker", [r[2] for r in rows], [r[2] for r in second_half])
    for name in sorted({n for r in rows for n, _ in r[3]} - {"gone"}):
        line(name, [of(name, r) for r in rows], [of(name, r) for r in second_half])
    total = [r[2] + sum(m for _, m in r[3]) for r in rows]
    line("all", total, [r[2] + sum(m for _, m in r[3]) for r in second_half])
    steady = statistics.median(r[2] + sum(m for _, m in r[3]) for r in second_half)
    print(
        f"target: at most {TARGET_MB} MB per worker with all its processes: peak {max(total):.0f} MB, "
        f"steady {steady:.0f} MB ({'met' if max(total) <= TARGET_MB else 'not met'}); {pages:.1f} pages/s"
    )


if __name__ == "__main__":
    main()
