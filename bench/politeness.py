"""Benchmark: what politeness costs one worker: pages/s of one ``scrapy crawl broad``
worker over many hosts with the shared rate limiter and the robots.txt cache on against
off, and the Redis commands a page of each.

    python -m bench.politeness                 # 150 hosts x 10 pages: 2 runs of each + 2 monitored runs
    python -m bench.politeness --hosts 80 --pages 8 --runs 1 --no-monitor

The demo site (``--hosts`` x ``--pages``, a robots.txt a host that disallows nothing
crawled), crawled whole from its seed a run, FRONTIER_HOST_INTERVAL=0; "on" the defaults,
"off" RATE_LIMITER_ENABLED and ROBOTSTXT_OBEY false; ABBA order. Pages/s: page requests
the site saw / the time from the first to the last (target on / off >= 0.9); the worker's
CPU and EVALSHA a page. Then one more run of each with MONITOR read on a raw socket (not
timed): the commands the worker sent a page (those inside Lua scripts aside), between the
first and last page request and over the whole run.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from bench.results import Results
from crawler.demo.site import serve_site
from testing.servers import RedisServer
from testing.workers import clean_env, crawl_demo_site

TARGET = 0.9
ROBOTS_BODY = "User-agent: *\nDisallow: /nothing-here\n"
MODES = {"off": {"RATE_LIMITER_ENABLED": False, "ROBOTSTXT_OBEY": False}, "on": {}}


class Monitor:
    """MONITOR on a raw socket: a thread appends what it receives; parsed at the end."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while data := self.sock.recv(1 << 20):
                self.chunks.append(data)
        except OSError:
            return

    def stop(self) -> list[tuple[float, str]]:
        """(server time, command name) of every command a client sent."""
        time.sleep(0.2)  # the last lines in flight
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(timeout=10)
        self.sock.close()
        out = []  # lines: +1700000000.123456 [0 127.0.0.1:50000] "EVALSHA" "<sha>" ...
        for line in b"".join(self.chunks).split(b"\r\n"):
            stamp, _, rest = line[1:].partition(b" ")
            source, _, args = rest.partition(b"] ")
            if line.startswith(b"+") and args and not source.endswith(b"lua"):
                out.append((float(stamp), args.split(b'"', 2)[1].decode("ascii", "replace").upper()))
        return out


def run_crawl(mode: str, monitored: bool, args, server: RedisServer, site, tmp: Path, index: int) -> dict:
    """One worker crawls the whole site: its figures."""
    name = f"run{index + 1}-{mode}{'-monitored' if monitored else ''}"
    settings = {"CRAWL_NAME": f"bench-polite-{uuid.uuid4().hex[:10]}", "NETWORK_GUARD_ALLOW": "127.0.0.0/8"}
    settings |= {"FRONTIER_HOST_INTERVAL": 0, "FRONTIER_IDLE_SECONDS": 2, "CLOSESPIDER_TIMEOUT": args.run_timeout}
    evalsha0 = server.evalsha_stats()[0]
    monitor = Monitor(server.port) if monitored else None
    try:
        env = {**clean_env(), "REDIS_URL": server.url}
        r = crawl_demo_site(site, tmp, name, settings | MODES[mode], env, args.run_timeout + 30)
    finally:
        commands = monitor.stop() if monitor else []
    first, pages = r["first_wall"], max(r["pages"], 1)
    return r | {
        "mode": mode,
        "monitored": monitored,
        "evalsha": (server.evalsha_stats()[0] - evalsha0) / pages,
        "window": Counter(n for t, n in commands if first <= t <= first + r["span"]),
        "total": Counter(n for _, n in commands),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=150, help="site hosts, 2..200")
    ap.add_argument("--pages", type=int, default=10, help="pages per host, at least 5")
    ap.add_argument("--runs", type=int, default=2, help="timed runs of each mode")
    ap.add_argument("--no-monitor", action="store_true", help="no monitored runs: pages/s only")
    ap.add_argument("--run-timeout", type=int, default=90, help="CLOSESPIDER_TIMEOUT of a run")
    args = ap.parse_args(argv)
    if not 2 <= args.hosts <= 200 or args.pages < 5:
        ap.error("--hosts must be 2..200, --pages at least 5")
    results = Results("politeness", runs=args.runs)
    order = []
    for i in range(args.runs):  # ABBA: off on on off off on ...
        order += [("off", False), ("on", False)] if i % 2 == 0 else [("on", False), ("off", False)]
    order += [] if args.no_monitor else [("off", True), ("on", True)]
    robots = dict.fromkeys(range(args.hosts), ROBOTS_BODY)
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-polite-") as tmp,
        RedisServer(tmp) as server,
        serve_site(hosts=args.hosts, pages=args.pages, robots=robots) as site,
    ):
        print(
            f"one worker, {args.hosts} hosts x {args.pages} pages, runs "
            + " ".join(f"{m}{'(M)' if w else ''}" for m, w in order)
        )
        print(
            f"{'run':<10}{'pages':>7}{'robots':>7}{'span s':>8}{'pages/s':>9}{'cpu ms/pg':>10}{'evalsha/pg':>11}{'cmd/pg':>8}  missing / exit"
        )
        for i, (mode, monitored) in enumerate(order):
            r = run_crawl(mode, monitored, args, server, site, Path(tmp), i)
            runs.append(r)
            cmds = f"{sum(r['window'].values()) / max(r['pages'], 1):.2f}" if monitored else "-"
            label = f"{i + 1} {mode}{' M' if monitored else ''}"
            print(
                f"{label:<10}{r['pages']:>7}{r['robots']:>7}{r['span']:>8.2f}{r['rate']:>9.1f}{r['cpu']:>10.2f}"
                f"{r['evalsha']:>11.2f}{cmds:>8}  {r['missing']} / {r['exit']}",
                flush=True,
            )
    timed = [r for r in runs if not r["monitored"]]
    for a, b in zip(timed[::2], timed[1::2]):  # each round: one run of each mode
        on, off = (a, b) if a["mode"] == "on" else (b, a)
        for r in (off, on):
            results.add(f"{r['mode']}: pages/s", r["rate"], "pages/s")
            results.add(f"{r['mode']}: worker CPU a page", r["cpu"], "ms")
            results.add(f"{r['mode']}: EVALSHA a page", r["evalsha"], "")
        results.add("on / off, pages/s", on["rate"] / off["rate"] if off["rate"] else 0.0, "x", baseline="off: pages/s")
    median = {m: statistics.median(r["rate"] for r in timed if r["mode"] == m) for m in MODES}
    ratio = median["on"] / median["off"] if median["off"] else 0.0
    print(f"\npages/s on / off (medians): {ratio:.3f}, target >= {TARGET}: {'PASS' if ratio >= TARGET else 'FAIL'}")
    watched = {r["mode"]: r for r in runs if r["monitored"]}
    if watched:
        print("Redis commands the worker sent a page (monitored runs): on, off first..last page; on, off whole run")
        names = sorted(
            set(watched["on"]["total"]) | set(watched["off"]["total"]), key=lambda n: -watched["on"]["total"][n]
        )
        for name in [*names, None]:
            row = []
            for part in ("window", "total"):
                for m in ("on", "off"):
                    counter, pages = watched[m][part], max(watched[m]["pages"], 1)
                    row.append((counter[name] if name else sum(counter.values())) / pages)
            print(f"  {name or 'all':<18}" + "".join(f"{x:>9.3f}" for x in row))
        for m in ("on", "off"):
            pages = max(watched[m]["pages"], 1)
            results.add(f"{m}: Redis commands a page, first..last page", sum(watched[m]["window"].values()) / pages, "")
            results.add(f"{m}: Redis commands a page, whole run", sum(watched[m]["total"].values()) / pages, "")
    results.write()
    return 0


if __name__ == "__main__":
    main()
